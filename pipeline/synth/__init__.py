"""The synthetic unarXive generator (:mod:`~pipeline.synth.generator`: it proves mechanics,
never validity) and the bundled demo corpus (:mod:`~pipeline.synth.demo_corpus`)."""
