"""The systems an evaluation scores: submitted runs (:mod:`.runs`), models given as code
(:mod:`.models`), the baselines (:mod:`.baselines`, :mod:`.field_baselines`,
:mod:`.dense`) and the learned LightGBM systems (:mod:`.learned`)."""
