"""The executor: the work directory's layout and reads (:mod:`~pipeline.engine.workdir`) and
the runner (:mod:`~pipeline.engine.runner`), over the stage contract of
:mod:`pipeline.stages.base` and :mod:`pipeline.stages.context` (same layer)."""
