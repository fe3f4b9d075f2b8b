"""A reduce stage's run: it runs once over all upstream outputs, after checking them
(upstream reduce stages done and intact, every file of an upstream map stage done or
failed within the limit, and its outputs matching their markers). It writes into a fresh
temporary directory that replaces ``<out>/<stage>/`` only when complete, with
``_SUCCESS.json`` inside (:func:`pipeline.engine.workdir.write_success`). Its key hashes its
config sections, the schema version and the keys of the stages it reads, so changing a
survey rule reruns ``surveys`` and everything downstream of it, and nothing upstream.

On a Hugging Face Jobs bucket mount these writes are weaker than on a local disk (late
visibility, no multi-writer support): ``docs/MOUNTS.md`` says what is documented and what
the markers' recorded sizes guard against."""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import shutil
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pipeline.core.config import Config
from pipeline.core.errors import StageError
from pipeline.engine import workdir as W
from pipeline.engine.context import ReduceContext
from pipeline.engine.failures import DEFAULT_MAX_FAILED, check_map_complete
from pipeline.engine.locks import stage_lock
from pipeline.engine.stage import Limits, Stage
from pipeline.engine.workdir import map_output_problem, reduce_problem, stage_key

log = logging.getLogger("pipeline")


def _check_map_outputs(out: Path, name: str, reader: str) -> None:
    """Every output of a map stage must match its marker (size and sha256) before a reduce
    stage reads it; a file that does not loses its marker, so extract redoes it.

    Raises:
        RuntimeError: names the file and says how to redo it.
    """
    for path in W.marker_paths(out, name):
        marker = W.read_record(path)
        if marker is None:
            problem = "its marker is damaged"
        elif W.is_damaged(W.manifest_path(out, name, path.stem)):
            problem = "its manifest is damaged"
        else:
            problem = map_output_problem(out, name, marker, checksum=True)
        if problem is not None:
            path.unlink()
            raise StageError(
                f"{reader}: {name} output of {path.stem} cannot be trusted: {problem}. Its "
                f"marker is removed: rerun {name} (or run) with the same --input to redo it"
            )


def run_reduce(
    stage: Stage,
    out: Path,
    cfg: Config,
    force: bool,
    max_failed: str = DEFAULT_MAX_FAILED,
    verify: bool = False,
    *,
    stages: Mapping[str, Stage],
    limits: Limits | None = None,
) -> dict[str, Any] | None:
    """Run a reduce stage unless it is done and intact; return its manifest.

    ``stages``: the stage graph (:func:`stage_graph`) ``stage`` belongs to, for its upstream
    stages.
    ``max_failed`` (``--max-failed-files``): how many input files of an upstream map stage
    may have failed (a count, or a share such as ``"1%"``). ``verify``: also compare this
    stage's own files with the sha256 its ``_SUCCESS.json`` records (sizes always are).
    ``limits``: the stage's batch sizes (default :class:`Limits`); they never change output.
    """
    # an upstream reduce stage whose files do not match its record is redone first, before
    # this stage's locks are taken (redoing it takes its own lock, exclusive)
    ups = [name for name in stages if name in stage.reads and stages[name].kind == "reduce"]
    for up in ups:
        problem = reduce_problem(out, up, cfg, stages, checksum=True)
        if problem not in (None, "not done", "stale"):
            log.warning("%s: upstream %s: %s; redoing %s", stage.name, up, problem, up)
            run_reduce(stages[up], out, cfg, True, max_failed, stages=stages, limits=limits)
    # Another run on this --out may be writing this stage: the lock makes this run wait
    # for it, then find the stage done; and no run swaps an upstream stage in while this
    # one reads it (locks.stage_lock).
    with stage_lock(out, stage.name, ups):
        return _reduce_locked(stage, out, cfg, force, max_failed, verify, stages, limits)


def _reduce_locked(
    stage: Stage,
    out: Path,
    cfg: Config,
    force: bool,
    max_failed: str,
    verify: bool,
    stages: Mapping[str, Stage],
    limits: Limits | None,
) -> dict[str, Any] | None:
    """:func:`run_reduce` with the stage's locks held: check its upstream stages, skip it
    when done, else write it into a temporary folder and swap that in."""
    # every upstream file is checked (size and sha256) before this stage reads it; a file
    # is hashed once per process, so a run hashes each upstream file once
    for up in stage.reads:
        if stages[up].kind == "reduce":
            problem = reduce_problem(out, up, cfg, stages, checksum=True)
            if problem in ("not done", "stale"):
                raise StageError(f"{stage.name}: upstream stage {up!r} is not done; run it first")
            if problem is not None:
                raise StageError(
                    f"{stage.name}: upstream stage {up!r} changed while this run waited for "
                    f"it: {problem}; rerun the same command to redo it"
                )
        if stages[up].kind == "map":
            if stage_key(out, up, cfg, stages) is None:
                raise StageError(
                    f"{stage.name}: upstream stage {up!r} has no finished outputs in {out / up}"
                )
            check_map_complete(out, stages[up], cfg, stage.name, max_failed)
            _check_map_outputs(out, up, stage.name)
    # its own files: sha256 with --verify, else when cheap (the release), else sizes
    checksum = True if verify else None
    redo = force or stage.always_run
    problem = None if redo else reduce_problem(out, stage.name, cfg, stages, checksum=checksum)
    if not redo and problem is None:
        log.info("%s: skip (done: key matches config and upstream)", stage.name)
        return None
    if problem not in (None, "not done", "stale"):
        log.warning("%s: redo: %s", stage.name, problem)
    log.info("%s: running (reads %s)", stage.name, ", ".join(stage.reads))
    final = W.stage_dir(out, stage.name)
    tmp = W.reduce_temp_dir(out, stage.name)
    tmp.mkdir(parents=True)
    try:
        t0 = time.monotonic()
        ctx = ReduceContext(
            out=out, cfg=cfg, stage=stage, tmp_dir=tmp, stages=stages, limits=limits or Limits()
        )
        try:
            counts = stage.fn(ctx)
        finally:
            shutil.rmtree(W.reduce_scratch_dir(tmp), ignore_errors=True)
        key = stage_key(out, stage.name, cfg, stages, own_dir=tmp)
        manifest = W.write_success(tmp, stage.name, key, counts, cfg, t0)
        if not _swap_in(tmp, final, W.reduce_old_dir(out, stage.name)):
            # only where the file system has no locks: an identical run swapped its folder
            # in between this run's two renames
            problem = reduce_problem(out, stage.name, cfg, stages)
            if problem is not None:
                raise StageError(
                    f"{stage.name}: another run on {out} replaced {final} while this run "
                    f"replaced it too, and its folder is not done ({problem}); the file "
                    "system has no locks (docs/MOUNTS.md): run one at a time there"
                )
            log.info("%s: another run put the same stage in place first; kept", stage.name)
            return None
        log.info("%s: done in %.1f s: %s", stage.name, manifest["seconds"], _short(counts))
        return manifest
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _swap_in(tmp: Path, final: Path, old: Path) -> bool:
    """Replace folder ``final`` with ``tmp`` (its previous folder goes to ``old``, then
    away); False when another folder took ``final``'s place between the two renames.

    A folder cannot be renamed over a non-empty one, so the previous one is moved aside
    first. Under :func:`pipeline.engine.locks.stage_lock` nothing else renames ``final``;
    without locks (a bucket mount) another run may, and its folder is then left in place.
    """
    with contextlib.suppress(FileNotFoundError):  # no previous folder, or moved already
        os.replace(final, old)
    try:
        os.replace(tmp, final)
    except OSError as e:
        if e.errno not in (errno.ENOTEMPTY, errno.EEXIST):
            raise
        return False
    finally:
        shutil.rmtree(old, ignore_errors=True)
    return True


def _short(counts: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in counts.items() if isinstance(v, (int, float, str)))[
        :400
    ]
