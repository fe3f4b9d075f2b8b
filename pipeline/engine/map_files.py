"""The map over plain files: which input files are not done, and each run in a task
(:func:`run_task`) that writes its tables to temp paths and, once the stage reports the file
complete, moves them into place and records it (:func:`pipeline.engine.workdir.write_map_done`),
or records its failure. Tasks run in this process or in a pool of worker processes; an
archive's units run through the same task (:mod:`pipeline.engine.archive_stream`)."""

from __future__ import annotations

import contextlib
import logging
import multiprocessing as mp
import os
import signal
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from pathlib import Path
from typing import Any

from pipeline.core.config import Config
from pipeline.core.files import temp_tag
from pipeline.core.progress import Progress
from pipeline.corpus.sources import InputFile, display
from pipeline.engine import workdir as W
from pipeline.engine.progress import ProgressChannel
from pipeline.engine.stage import FAILED, Stage
from pipeline.engine.workers import init_worker, starting_workers

log = logging.getLogger("pipeline")


def run_task(
    stage: Stage,
    todo: list[tuple[InputFile, dict[str, Any]]] | list[tuple[Any, dict[str, Any]]],
    out: str,
    cfg: Config,
    progress: ProgressChannel,
    record_failures: bool = True,
) -> list[dict[str, Any]]:
    """Process input files in a worker; each file's outputs and marker appear only on success.

    The stage reports what it reads through ``progress``. Outputs are written to temp paths; when the stage reports a file complete, its
    tables are moved into place, then its manifest, then (last) its marker. A source may
    also be an archive's unit (:class:`pipeline.engine.archive_stream.UnitSource`); one that fails leaves nothing
    (``record_failures`` off: the archive's failure is recorded once, by its reader).
    """
    jobs = []
    for source, key in todo:
        finals = {t: W.map_output(Path(out), stage.name, t, source.key) for t in stage.tables}
        for p in finals.values():
            p.parent.mkdir(parents=True, exist_ok=True)
        temps = {t: p.with_name(f"{p.name}.{temp_tag()}") for t, p in finals.items()}
        jobs.append((source, key, finals, temps))
    if stage.fn_many is not None:
        produced = stage.fn_many([(j[0], j[3]) for j in jobs], cfg, progress)
    else:
        produced = (stage.fn(j[0], j[3], cfg, progress) for j in jobs)
    results = []
    try:
        for (source, key, finals, temps), counts in zip(jobs, produced, strict=False):
            if FAILED in counts:
                if record_failures:
                    results.append(
                        record_failure(stage, source, key, counts[FAILED], cfg, out, temps)
                    )
                continue
            for t, final in finals.items():
                os.replace(temps[t], final)
            manifest = W.write_map_done(Path(out), stage, source, key, counts, cfg, finals)
            results.append(manifest)
            log_done(manifest)
    finally:
        close = getattr(produced, "close", None)
        if close is not None:
            close()
        for *_, temps in jobs:
            for p in temps.values():
                with contextlib.suppress(FileNotFoundError):
                    p.unlink()
    return results


def record_failure(
    stage: Stage,
    source: InputFile,
    key: dict[str, Any],
    failure: dict[str, Any],
    cfg: Config,
    out: str,
    temps: dict[str, Path],
) -> dict[str, Any]:
    """An input file that could not be read to its end: its partial tables are discarded,
    an older output of the same file (another identity) is removed, the failure is its
    manifest (no marker, so the next run retries it)."""
    W.marker_path(Path(out), stage.name, source.key).unlink(missing_ok=True)
    finals = [W.map_output(Path(out), stage.name, t, source.key) for t in stage.tables]
    for p in (*temps.values(), *finals):
        p.unlink(missing_ok=True)
    manifest = W.write_map_failure(Path(out), stage, source, key, failure, cfg)
    log_done(manifest)
    return manifest


def run_files(
    stage: Stage,
    sources: list[InputFile],
    out: Path,
    cfg: Config,
    workers: int,
    force: bool,
    verify: bool = False,
) -> list[dict[str, Any]]:
    """Run a map stage over plain input files (no archive), skipping files whose marker
    matches: in this process, or over a pool of ``workers`` processes, a few files per task.

    A file is skipped only when its marker's key matches and its outputs have the sizes
    (and with ``verify`` the sha256) the marker records; otherwise it is redone, saying why.
    """
    results: list[dict[str, Any]] = []
    todo: list[tuple[InputFile, dict[str, Any]]] = []
    done = 0
    for s in sources:
        problem = "not done" if force else W.input_problem(stage, s, out, cfg, verify)
        if problem is None:
            log.info(
                "%s: skip %s (done: marker matches input identity and config)",
                stage.name,
                display(s.path),
            )
            done += 1
            continue
        if problem not in ("not done", "stale"):
            log.warning("%s: redo %s: %s", stage.name, display(s.path), problem)
        todo.append((s, W.map_marker_key(stage, s, cfg)))
    if not sources:
        return results
    log.info(
        "%s: %d file(s) to do, %d already done, %d worker(s)", stage.name, len(todo), done, workers
    )
    if not todo:
        return results
    progress = Progress(sum(s.size for s, _ in todo), stage.name)
    try:
        if workers <= 1 or len(todo) == 1:
            results += run_task(stage, todo, str(out), cfg, ProgressChannel(progress))
        else:
            # a few files per task: a worker overlaps the end of one file with the next,
            # while tasks stay small enough to balance the load and resume cheaply
            n = min(workers, len(todo))
            size = max(1, min(4, len(todo) // (n * 2)))
            chunks = [todo[i : i + size] for i in range(0, len(todo), size)]
            ctx = mp.get_context("spawn")
            channel = ProgressChannel(progress, ctx.Queue())
            end_on_sigint = signal.getsignal(signal.SIGINT) is not signal.SIG_IGN
            init_args = (channel.to_parent(), os.getpid(), end_on_sigint)
            with ProcessPoolExecutor(n, ctx, _init_pool_worker, init_args) as pool:
                # workers start with Ctrl-C ignored (a worker still importing would print a
                # traceback), then _init_worker makes it end them quietly
                with starting_workers():
                    pending: set[Future[list[dict[str, Any]]]] = {
                        pool.submit(_pool_task, stage, chunk, str(out), cfg) for chunk in chunks
                    }
                try:
                    while pending:
                        finished, pending = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
                        channel.drain()
                        for fut in finished:
                            for manifest in fut.result():
                                results.append(manifest)
                                log_done(manifest)  # workers have no log handler of their own
                except KeyboardInterrupt:  # Ctrl-C, or SIGTERM (Terminated)
                    # a worker that missed the Ctrl-C (still starting) is stopped here, so
                    # leaving the pool does not wait for its files; a rerun redoes them
                    for child in mp.active_children():
                        child.kill()
                    raise
                channel.drain()
    finally:
        progress.close()
    return results


# A pool's task cannot carry a queue (multiprocessing hands one to a process only as it
# starts), so each pool worker keeps the channel its initializer was given, set once here.
_POOL_CHANNEL = ProgressChannel(None)  # silent until _init_pool_worker sets it


def _init_pool_worker(channel: ProgressChannel, parent: int, end_on_sigint: bool) -> None:
    global _POOL_CHANNEL
    _POOL_CHANNEL = channel
    init_worker(parent, end_on_sigint)


def _pool_task(
    stage: Stage, todo: list[tuple[InputFile, dict[str, Any]]], out: str, cfg: Config
) -> list[dict[str, Any]]:
    """:func:`run_task` in a pool worker, reporting through its channel."""
    return run_task(stage, todo, out, cfg, _POOL_CHANNEL)


def log_done(manifest: dict[str, Any]) -> None:
    if manifest.get("status") == FAILED:
        f = manifest[FAILED]
        log.warning(
            "%s: FAILED %s after %s lines (%s bytes): %s (partial output discarded; a rerun "
            "retries it)",
            manifest["stage"],
            manifest["source_file"],
            f["lines_read"],
            f"{f.get('bytes_read', 0):,}",
            f["reason"],
        )
        return
    c = manifest["counts"]
    log.info(
        "%s: done %s: %s lines, %s papers, %s rejects, %.1f s",
        manifest["stage"],
        manifest["source"],
        c.get("lines_read"),
        c.get("papers_written"),
        c.get("rejects_total"),
        c.get("seconds", 0.0),
    )
