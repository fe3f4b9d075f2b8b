"""The executor and the stage contract it runs, one job per module:

* the contract: :mod:`~pipeline.engine.stage` (what a stage reads, writes and which config
  sections key it) and :mod:`~pipeline.engine.context` (the only object a reduce stage does
  its I/O through);
* the work directory: :mod:`~pipeline.engine.workdir` (its layout, and every marker,
  manifest and record written and read, beside the checks a rerun resumes by),
  :mod:`~pipeline.engine.locks` (one config at a time, one writer per reduce stage) and
  :mod:`~pipeline.engine.status` (what it says about each stage);
* running a map stage: :mod:`~pipeline.engine.map_stage` (the entry: inputs, shards,
  archives and plain files), :mod:`~pipeline.engine.map_files` (plain files, a task per few
  files), :mod:`~pipeline.engine.archive_stream` (an archive, unit by unit),
  :mod:`~pipeline.engine.workers` (worker processes and signals),
  :mod:`~pipeline.engine.progress` (the progress channel) and
  :mod:`~pipeline.engine.failures` (how many input files may fail);
* running a reduce stage: :mod:`~pipeline.engine.reduce`.
"""
