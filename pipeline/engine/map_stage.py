"""A map stage's run: its input specs resolved, this shard's whole input list recorded,
outputs of files that are no longer inputs refused (or pruned), stale temps cleaned; then
every archive to :mod:`~pipeline.engine.archive_stream` and the plain files to
:mod:`~pipeline.engine.map_files`.

A map stage runs once per input file. Its outputs go to
``<out>/<stage>/<table>/<file key>.parquet`` and a marker
``<out>/<stage>/_markers/<file key>.json`` is written last, keyed by the file's identity
(path + size + mtime, or Hub etag), the hash of the config sections the stage depends on,
and the schema version; never by worker rank, so a rerun with another ``--workers`` still
resumes (:mod:`pipeline.engine.workdir` writes and reads them)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipeline.core.config import Config
from pipeline.corpus.sources import InputFile, resolve_inputs, shard
from pipeline.engine import workdir as W
from pipeline.engine.archive_stream import run_archive
from pipeline.engine.map_files import run_files
from pipeline.engine.stage import Stage


def run_map_stage(
    stage: Stage,
    specs: list[str],
    out: Path,
    cfg: Config,
    workers: int,
    *,
    exclude: list[Path],
    force: bool = False,
    verify: bool = False,
    shard_of: tuple[int, int] = (0, 1),
    prune: bool = False,
) -> list[InputFile]:
    """A map stage from its input specs: resolve them (``exclude``: folders discovery must
    not read), record this shard's whole input list, refuse (or, ``prune``, delete) finished
    outputs of files that are no longer inputs, clean stale temporary files, then
    :func:`run_map` over this shard's files. Returns every input file (all shards').

    Raises:
        InputError: an input list that differs from the one in ``out``, or finished outputs
            of files that are not inputs (without ``prune``).
    """
    every = resolve_inputs(specs, exclude=exclude)
    # every shard records the whole input list under its own name: later stages check that
    # all shards agree on it and wait until every file of it is done
    W.record_shard_inputs(out, stage.name, shard_of, specs, every, prune)
    W.check_foreign_outputs(out, stage, every, prune)
    W.clean_stale_temps(W.stage_dir(out, stage.name))
    run_map(stage, shard(every, *shard_of), out, cfg, workers, force, verify, shard_of)
    return every


def run_map(
    stage: Stage,
    sources: list[InputFile],
    out: Path,
    cfg: Config,
    workers: int,
    force: bool,
    verify: bool = False,
    shard_of: tuple[int, int] = (0, 1),
) -> list[dict[str, Any]]:
    """Run a map stage over ``sources``, skipping files whose marker matches.

    A file is skipped only when its marker's key matches and its outputs have the sizes
    (and with ``verify`` the sha256) the marker records; otherwise it is redone, saying why
    (:func:`pipeline.engine.map_files.run_files`). An archive is read by
    :func:`pipeline.engine.archive_stream.run_archive` (its units are this shard's
    ``shard_of`` share, ``index % count``).
    """
    results: list[dict[str, Any]] = []
    for archive in (s for s in sources if s.is_archive):
        results += run_archive(stage, archive, out, cfg, workers, force, verify, shard_of)
    results += run_files(
        stage, [s for s in sources if not s.is_archive], out, cfg, workers, force, verify
    )
    return results
