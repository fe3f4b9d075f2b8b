"""The runner: executes the stages, writing their outputs, completion markers and manifests
at the paths :mod:`pipeline.workdir` gives, with progress.

Stage code is a transform; the runner owns I/O and resumability; the work directory's
layout, and every read of it, is :mod:`pipeline.workdir`'s.

* A **map** stage runs once per input file. Its outputs go to
  ``<out>/<stage>/<table>/<file key>.parquet`` and a marker
  ``<out>/<stage>/_markers/<file key>.json`` is written last. The marker is keyed by
  the file's identity (path + size + mtime, or Hub etag), the hash of the config
  sections the stage depends on, and the schema version; never by worker rank,
  so a rerun with another ``--workers`` still resumes.
* A **reduce** stage runs once over all upstream outputs. It writes into a fresh
  temporary directory that replaces ``<out>/<stage>/`` only when complete, with
  ``_SUCCESS.json`` inside. Its key hashes its config sections, the schema version
  and the keys of the stages it reads, so changing a survey rule reruns
  ``surveys`` and everything downstream of it, and nothing upstream.

On a Hugging Face Jobs bucket mount these writes are weaker than on a local disk
(late visibility, no multi-writer support): ``MOUNTS.md`` beside this file says what
is documented and what the markers' recorded sizes guard against.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import logging
import multiprocessing as mp
import os
import shutil
import signal
import threading
import time
from collections.abc import Iterator, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline import __version__
from pipeline import workdir as W
from pipeline.config import Config
from pipeline.files import (  # noqa: F401 - also re-exported for older callers
    atomic_path,
    file_record,
    sha256_file,
    sha256_text,
    temp_tag,
    write_json,
)
from pipeline.graph import Stage, stage_graph  # noqa: F401 - re-exported for the stages
from pipeline.progress import Progress
from pipeline.schema import SCHEMA_VERSION
from pipeline.sources import InputFile, display, source_name

# The work directory's layout and its reads are pipeline.workdir's; re-exported for the
# stage modules and older callers that import them from here.
from pipeline.workdir import (  # noqa: F401
    FAILED,
    INPUTS,
    MANIFESTS,
    MARKERS,
    SHARD_INPUTS,
    SUCCESS,
    check_files,
    clean_stale_temps,
    disagreement,
    failed_inputs,
    input_list,
    map_output_problem,
    reduce_done,
    reduce_problem,
    shard_record_path,
    shard_records,
    stage_key,
    write_shard_record,
)

log = logging.getLogger("pipeline")

DEFAULT_MAX_FAILED = "1%"


# --------------------------------------------------------------------- stages
@dataclass
class ReduceContext:
    """What a reduce stage sees: the work dir, the config, its own temp output dir and the
    stage graph (:func:`stage_graph`) it runs in."""

    out: Path
    cfg: Config
    stage: Stage
    tmp_dir: Path
    stages: Mapping[str, Stage]
    extra: dict[str, Any] = field(default_factory=dict)

    def upstream(self, stage: str, table: str) -> list[Path]:
        """Parquet files of an upstream table (map: one per input file; reduce: one)."""
        return W.upstream_files(self.out, self.stages, stage, table)

    def output(self, name: str) -> Path:
        """Path for an output file of this stage (inside the temp dir until success)."""
        p = self.tmp_dir / name
        p.parent.mkdir(parents=True, exist_ok=True)
        return p


# --------------------------------------------------------------------- keys and markers
def map_marker_key(stage: Stage, source: InputFile, cfg: Config) -> dict[str, Any]:
    return {
        "stage": stage.name,
        "identity": source.identity,
        "config_hash": cfg.section_hash(*stage.config_sections),
        "schema_version": SCHEMA_VERSION,
    }


def allowed_failures(spec: str, total: int) -> int:
    """How many of ``total`` input files may fail: ``spec`` is a count (``"3"``) or a share
    of the files (``"1%"``, rounded down)."""
    if spec.endswith("%"):
        return int(float(spec[:-1]) / 100 * total)
    return int(spec)


def check_failures(failed: list[dict[str, Any]], total: int, max_failed: str, reader: str) -> None:
    """Fail when more input files failed than ``--max-failed-files`` allows.

    Raises:
        RuntimeError: names every failed file with its reason.
    """
    allowed = allowed_failures(max_failed, total)
    if len(failed) > allowed:
        listed = "; ".join(f"{f['file']} ({f['reason']})" for f in failed[:10])
        raise RuntimeError(
            f"{reader}: {len(failed)} of {total} input files failed, more than "
            f"--max-failed-files {max_failed} allows ({allowed}): {listed}"
            + (" ..." if len(failed) > 10 else "")
            + "; replace the damaged files and rerun (failed files are retried), or raise "
            "--max-failed-files"
        )


def _check_map_complete(
    out: Path, stage: Stage, cfg: Config, reader: str, max_failed: str = DEFAULT_MAX_FAILED
) -> None:
    """Refuse to reduce over part of a corpus: every file of the map stage's input list
    (written by each shard) must be done with the current config, or have failed (at most
    ``max_failed`` of them: later stages then run on the files that succeeded)."""
    name = stage.name
    listed = input_list(out, name, reader)
    if listed is None:
        return
    want = set(listed)
    done = set(W.current_markers(out, stage, cfg))
    failed = [f for f in failed_inputs(out, stage, cfg) if f["source_key"] in want]
    missing = sorted(want - done - {f["source_key"] for f in failed})
    if missing:
        raise RuntimeError(
            f"{reader}: {name} has {len(want) - len(missing)} of {len(want)} input files done "
            f"(missing e.g. {missing[0]}); run the remaining shards first"
        )
    check_failures(failed, len(want), max_failed, reader)


# --------------------------------------------------------------------- progress
_QUEUE: Any = None


PR_SET_PDEATHSIG = 1  # linux/prctl.h
PARENT_POLL_SECONDS = 1.0


def _die_with_parent(parent: int) -> None:
    """End this worker as soon as the process that started it is gone, however it died.

    Linux delivers SIGKILL to the worker when its parent exits (``prctl(PR_SET_PDEATHSIG)``);
    a watchdog thread that polls ``getppid()`` covers other systems. Without this, workers
    of a killed run kept extracting for up to a minute and wrote markers after it died.
    """
    with contextlib.suppress(OSError, AttributeError):  # not Linux: the watchdog alone
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_SECONDS)
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, name="parent-watchdog", daemon=True).start()


# SIGTERM (what `kill`, `timeout`, systemd and job schedulers send) stops a run the way
# Ctrl-C does: a one-line message, a work directory a rerun resumes.
class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread so it takes Ctrl-C's path (workers killed,
    temps left for the next run to clean, markers only for finished work)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _raise_terminated(signum: int, frame: Any) -> None:
    raise Terminated(signum)


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """While the block runs, SIGTERM raises :class:`Terminated` (a ``KeyboardInterrupt``)
    in the main thread, as SIGINT does. A SIGTERM that is ignored (inherited SIG_IGN) stays
    ignored; outside the main thread nothing changes (handlers can only be set there)."""
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
    ):
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def _sigint_ignored() -> Iterator[None]:
    """Ignore SIGINT while worker processes are started (they inherit the disposition).

    SIGTERM is not ignored here: a scheduler sends it once, and a worker that gets it
    while starting ends silently (its default action) anyway.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _exit_interrupted(signum: int, frame: Any) -> None:
    os._exit(128 + signum)


def _init_worker(queue: Any, parent: int, end_on_sigint: bool = True) -> None:
    global _QUEUE
    _QUEUE = queue
    _die_with_parent(parent)
    # Ctrl-C (and a SIGTERM to the process group) reaches every process: the parent reports
    # it (one line, how to resume); a worker just ends, as if killed, instead of printing
    # its own traceback. A parent that ignores SIGINT (nohup, a background job) has
    # workers that ignore it; an ignored SIGTERM is inherited as ignored and stays so.
    if end_on_sigint:
        signal.signal(signal.SIGINT, _exit_interrupted)
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_IGN:
        signal.signal(signal.SIGTERM, _exit_interrupted)
    # the parent logs what workers return; without a handler here, warnings would also
    # reach stderr through logging's last-resort handler
    log.addHandler(logging.NullHandler())


def _report(papers: int, nbytes: int, rejects: int) -> None:
    if _QUEUE is not None:
        _QUEUE.put((papers, nbytes, rejects))


# --------------------------------------------------------------------- map execution
def _run_files(
    stage: Stage, todo: list[tuple[InputFile, dict[str, Any]]], out: str, cfg: Config
) -> list[dict[str, Any]]:
    """Process input files in a worker; each file's outputs and marker appear only on success.

    Outputs are written to temp paths; when the stage reports a file complete, its
    tables are moved into place, then its manifest, then (last) its marker.
    """
    base = Path(out) / stage.name
    jobs = []
    for source, key in todo:
        finals = {t: W.map_output(Path(out), stage.name, t, source.key) for t in stage.tables}
        for p in finals.values():
            p.parent.mkdir(parents=True, exist_ok=True)
        temps = {t: p.with_name(f"{p.name}.{temp_tag()}") for t, p in finals.items()}
        jobs.append((source, key, finals, temps))
    if stage.fn_many is not None:
        produced = stage.fn_many([(j[0], j[3]) for j in jobs], cfg, _report)
    else:
        produced = (stage.fn(j[0], j[3], cfg, _report) for j in jobs)
    results = []
    try:
        for (source, key, finals, temps), counts in zip(jobs, produced, strict=False):
            if FAILED in counts:
                results.append(_record_failure(stage, source, key, counts[FAILED], cfg, out, temps))
                continue
            for t, final in finals.items():
                os.replace(temps[t], final)
            manifest = {
                "stage": stage.name,
                "source": display(source.path),
                "source_key": source.key,
                "revision": source.revision,
                "key": key,
                "counts": counts,
                "config": cfg.to_dict(),
                "config_hash": cfg.hash,
                "code_version": __version__,
                "outputs": {t: str(p.relative_to(Path(out))) for t, p in finals.items()},
            }
            write_json(W.manifest_path(Path(out), stage.name, source.key), manifest)
            outputs = {p.relative_to(base).as_posix(): file_record(p) for p in finals.values()}
            marker = {"key": key, "source": display(source.path), "outputs": outputs}
            write_json(W.marker_path(Path(out), stage.name, source.key), marker)
            results.append(manifest)
            _log_done(manifest)
    finally:
        close = getattr(produced, "close", None)
        if close is not None:
            close()
        for *_, temps in jobs:
            for p in temps.values():
                with contextlib.suppress(FileNotFoundError):
                    p.unlink()
    return results


def _record_failure(
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
    manifest = {
        "stage": stage.name,
        "status": FAILED,
        "source": display(source.path),
        "source_file": source_name(source),
        "source_key": source.key,
        "revision": source.revision,
        "key": key,
        FAILED: failure,
        "counts": {"lines_read": failure["lines_read"]},
        "config": cfg.to_dict(),
        "config_hash": cfg.hash,
        "code_version": __version__,
    }
    write_json(W.manifest_path(Path(out), stage.name, source.key), manifest)
    _log_done(manifest)
    return manifest


def run_map(
    stage: Stage,
    sources: list[InputFile],
    out: Path,
    cfg: Config,
    workers: int,
    force: bool,
    verify: bool = False,
) -> list[dict[str, Any]]:
    """Run a map stage over ``sources``, skipping files whose marker matches.

    A file is skipped only when its marker's key matches and its outputs have the sizes
    (and with ``verify`` the sha256) the marker records; otherwise it is redone, saying why.
    """
    todo: list[tuple[InputFile, dict[str, Any]]] = []
    done = 0
    for s in sources:
        key = map_marker_key(stage, s, cfg)
        path = W.marker_path(out, stage.name, s.key)
        marker = json.loads(path.read_text()) if path.exists() else {}
        if not force and marker.get("key") == key:
            problem = map_output_problem(out, stage.name, marker, verify)
            if problem is None:
                log.info(
                    "%s: skip %s (done: marker matches input identity and config)",
                    stage.name,
                    display(s.path),
                )
                done += 1
                continue
            log.warning("%s: redo %s: %s", stage.name, display(s.path), problem)
        todo.append((s, key))
    log.info(
        "%s: %d file(s) to do, %d already done, %d worker(s)", stage.name, len(todo), done, workers
    )
    if not todo:
        return []
    progress = Progress(sum(s.size for s, _ in todo), stage.name)
    results: list[dict[str, Any]] = []
    try:
        if workers <= 1 or len(todo) == 1:
            global _QUEUE
            _QUEUE = _LocalQueue(progress)
            try:
                results = _run_files(stage, todo, str(out), cfg)
            finally:
                _QUEUE = None
        else:
            # a few files per task: a worker overlaps the end of one file with the next,
            # while tasks stay small enough to balance the load and resume cheaply
            n = min(workers, len(todo))
            size = max(1, min(4, len(todo) // (n * 2)))
            chunks = [todo[i : i + size] for i in range(0, len(todo), size)]
            ctx = mp.get_context("spawn")
            queue = ctx.Queue()
            end_on_sigint = signal.getsignal(signal.SIGINT) is not signal.SIG_IGN
            init_args = (queue, os.getpid(), end_on_sigint)
            with ProcessPoolExecutor(n, ctx, _init_worker, init_args) as pool:
                # workers start with Ctrl-C ignored (a worker still importing would print a
                # traceback), then _init_worker makes it end them quietly
                with _sigint_ignored():
                    pending: set[Future[list[dict[str, Any]]]] = {
                        pool.submit(_run_files, stage, chunk, str(out), cfg) for chunk in chunks
                    }
                try:
                    while pending:
                        finished, pending = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
                        _drain(queue, progress)
                        for fut in finished:
                            for manifest in fut.result():
                                results.append(manifest)
                                _log_done(manifest)  # workers have no log handler of their own
                except KeyboardInterrupt:  # Ctrl-C, or SIGTERM (Terminated)
                    # a worker that missed the Ctrl-C (still starting) is stopped here, so
                    # leaving the pool does not wait for its files; a rerun redoes them
                    for child in mp.active_children():
                        child.kill()
                    raise
                _drain(queue, progress)
    finally:
        progress.close()
    return results


class _LocalQueue:
    def __init__(self, progress: Progress):
        self.progress = progress

    def put(self, item: tuple[int, int, int]) -> None:
        self.progress.update(*item)


def _drain(queue: Any, progress: Progress) -> None:
    import queue as q

    while True:
        try:
            progress.update(*queue.get_nowait())
        except q.Empty:
            return


def _log_done(manifest: dict[str, Any]) -> None:
    if manifest.get("status") == FAILED:
        f = manifest[FAILED]
        log.warning(
            "%s: FAILED %s after %s lines: %s (partial output discarded; a rerun retries it)",
            manifest["stage"],
            manifest["source_file"],
            f["lines_read"],
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


# --------------------------------------------------------------------- reduce execution
def _check_map_outputs(out: Path, name: str, reader: str) -> None:
    """Every output of a map stage must match its marker (size and sha256) before a reduce
    stage reads it; a file that does not loses its marker, so extract redoes it.

    Raises:
        RuntimeError: names the file and says how to redo it.
    """
    for path in W.marker_paths(out, name):
        problem = map_output_problem(out, name, json.loads(path.read_text()), checksum=True)
        if problem is not None:
            path.unlink()
            raise RuntimeError(
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
    **extra: Any,
) -> dict[str, Any] | None:
    """Run a reduce stage unless it is done and intact; return its manifest.

    ``stages``: the stage graph (:func:`stage_graph`) ``stage`` belongs to, for its upstream
    stages.
    ``max_failed`` (``--max-failed-files``): how many input files of an upstream map stage
    may have failed (a count, or a share such as ``"1%"``). ``verify``: also compare this
    stage's own files with the sha256 its ``_SUCCESS.json`` records (sizes always are).
    """
    # every upstream file is checked (size and sha256) before this stage reads it; a file
    # is hashed once per process, so a run hashes each upstream file once
    for up in stage.reads:
        if stages[up].kind == "reduce":
            problem = reduce_problem(out, up, cfg, stages, checksum=True)
            if problem in ("not done", "stale"):
                raise RuntimeError(f"{stage.name}: upstream stage {up!r} is not done; run it first")
            if problem is not None:
                log.warning("%s: upstream %s: %s; redoing %s", stage.name, up, problem, up)
                run_reduce(stages[up], out, cfg, True, max_failed, stages=stages, **extra)
        if stages[up].kind == "map":
            if stage_key(out, up, cfg, stages) is None:
                raise RuntimeError(
                    f"{stage.name}: upstream stage {up!r} has no finished outputs in {out / up}"
                )
            _check_map_complete(out, stages[up], cfg, stage.name, max_failed)
            _check_map_outputs(out, up, stage.name)
    problem = None if force else reduce_problem(out, stage.name, cfg, stages, checksum=verify)
    if not force and problem is None:
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
        ctx = ReduceContext(out=out, cfg=cfg, stage=stage, tmp_dir=tmp, stages=stages, extra=extra)
        counts = stage.fn(ctx)
        files = {
            p.relative_to(tmp).as_posix(): file_record(p)
            for p in sorted(tmp.rglob("*"))
            if p.is_file()
        }
        manifest = {
            "stage": stage.name,
            "key": stage_key(out, stage.name, cfg, stages),
            "files": files,
            "counts": counts,
            "seconds": round(time.monotonic() - t0, 3),
            "config": cfg.to_dict(),
            "config_hash": cfg.hash,
            "code_version": __version__,
        }
        write_json(tmp / SUCCESS, manifest)
        old = W.reduce_old_dir(out, stage.name)
        if final.exists():
            os.replace(final, old)
        os.replace(tmp, final)
        shutil.rmtree(old, ignore_errors=True)
        log.info("%s: done in %.1f s: %s", stage.name, manifest["seconds"], _short(counts))
        return manifest
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _short(counts: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in counts.items() if isinstance(v, (int, float, str)))[
        :400
    ]
