"""The executor and the stage contract it runs: the contract (:mod:`~pipeline.engine.stage`:
what a stage reads, writes and which config sections key it; :mod:`~pipeline.engine.context`:
the only object a stage does its I/O through), the work directory's layout and reads
(:mod:`~pipeline.engine.workdir`) and the runner (:mod:`~pipeline.engine.runner`)."""
