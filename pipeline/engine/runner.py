"""The runner: executes the stages, writing their outputs, completion markers and manifests
at the paths :mod:`pipeline.engine.workdir` gives, with progress.

Stage code is a transform; the runner owns I/O and resumability; the work directory's
layout, and every read of it, is :mod:`pipeline.engine.workdir`'s.

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
(late visibility, no multi-writer support): ``docs/MOUNTS.md`` says what
is documented and what the markers' recorded sizes guard against.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import logging
import math
import multiprocessing as mp
import os
import pickle
import shutil
import signal
import sys
import threading
import time
import types
from collections.abc import Iterator, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.core.config import Config
from pipeline.core.errors import StageError, UsageError
from pipeline.core.files import (
    temp_tag,
)
from pipeline.core.progress import Progress
from pipeline.corpus.archive import (
    CHUNK,
    READ_ERRORS,
    ArchiveError,
    ArchiveReader,
    unit_identity,
    unit_key,
)
from pipeline.corpus.sources import (
    InputFile,
    InputReadError,
    display,
    resolve_inputs,
    shard,
    stream_lines,
)
from pipeline.engine import workdir as W
from pipeline.engine.context import ReduceContext
from pipeline.engine.locks import stage_lock
from pipeline.engine.progress import ProgressChannel
from pipeline.engine.stage import FAILED, Limits, Stage
from pipeline.engine.workdir import (
    failed_inputs,
    input_list,
    map_output_problem,
    reduce_problem,
    stage_key,
)

log = logging.getLogger("pipeline")

DEFAULT_MAX_FAILED = "1%"


# --------------------------------------------------------------------- failure limits
def max_failed_share(spec: str) -> float | None:
    """The share (0-1) that ``--max-failed-files`` names, or None when it names a count.

    Raises:
        UsageError: neither a count 0, 1, 2, ... nor a share 0%-100% (``nan%``, ``inf%``,
            ``-1``, ``150%``, ``1.5``).
    """
    text = str(spec).strip()
    try:
        if text.endswith("%"):
            share = float(text[:-1]) / 100
            if not (math.isfinite(share) and 0 <= share <= 1):
                raise ValueError(text)
            return share
        if int(text) < 0:
            raise ValueError(text)
    except ValueError:
        raise UsageError(
            "max_failed_files (--max-failed-files) takes a count (e.g. 3) or a share of the "
            f"input files from 0% to 100% (e.g. 1%); got {spec!r}"
        ) from None
    return None


def allowed_failures(spec: str, total: int) -> int:
    """How many of ``total`` input files may fail: ``spec`` is a count (``"3"``) or a share
    of the files (``"1%"``, rounded down).

    Raises:
        UsageError: ``spec`` is neither (:func:`max_failed_share`).
    """
    share = max_failed_share(spec)
    return int(share * total) if share is not None else int(str(spec).strip())


def check_failures(failed: list[dict[str, Any]], total: int, max_failed: str, reader: str) -> None:
    """Fail when more input files failed than ``--max-failed-files`` allows.

    Raises:
        RuntimeError: names every failed file with its reason.
    """
    allowed = allowed_failures(max_failed, total)
    if len(failed) > allowed:
        listed = "; ".join(f"{f['file']} ({f['reason']})" for f in failed[:10])
        raise StageError(
            f"{reader}: {len(failed)} of {total} input files failed, more than "
            f"--max-failed-files (max_failed_files) {max_failed} allows ({allowed}): {listed}"
            + (" ..." if len(failed) > 10 else "")
            + "; replace the damaged files and rerun (failed files are retried), or raise "
            "--max-failed-files (max_failed_files in Python)"
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
    # an archive is done when it was read to its end and every unit it holds is done
    for key, record in W.archive_records(out, stage, cfg).items():
        if set(record.get("units", [])) <= done:
            done.add(key)
    failed = [f for f in failed_inputs(out, stage, cfg) if f["source_key"] in want]
    missing = sorted(want - done - {f["source_key"] for f in failed})
    if missing:
        raise StageError(
            f"{reader}: {name} has {len(want) - len(missing)} of {len(want)} input files done "
            f"(missing e.g. {missing[0]}); run the remaining shards first"
        )
    check_failures(failed, len(want), max_failed, reader)


# --------------------------------------------------------------------- worker processes and signals
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


@contextlib.contextmanager
def _starting_workers() -> Iterator[None]:
    """While worker processes are started: SIGINT ignored (:func:`_sigint_ignored`), and
    the caller's main module hidden from them.

    A spawned process imports the parent's ``__main__`` before it runs anything, so a
    script calling ``api.run(...)`` at its top level, without an
    ``if __name__ == "__main__":`` guard, ran the whole run again in every worker and
    ended in "a worker process died". Workers run pipeline code only and need nothing
    from the caller's script, so they start with an empty ``__main__`` in its place.
    """
    main = sys.modules.get("__main__")
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        with _sigint_ignored():
            yield
    finally:
        if main is not None:
            sys.modules["__main__"] = main


def _exit_interrupted(signum: int, frame: Any) -> None:
    os._exit(128 + signum)


def _init_worker(parent: int, end_on_sigint: bool = True) -> None:
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


# --------------------------------------------------------------------- map execution
def _run_files(
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
    also be an archive's unit (:class:`_UnitSource`); one that fails leaves nothing
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
                        _record_failure(stage, source, key, counts[FAILED], cfg, out, temps)
                    )
                continue
            for t, final in finals.items():
                os.replace(temps[t], final)
            manifest = W.write_map_done(Path(out), stage, source, key, counts, cfg, finals)
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
    manifest = W.write_map_failure(Path(out), stage, source, key, failure, cfg)
    _log_done(manifest)
    return manifest


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


def check_map_failures(
    stage: Stage, out: Path, cfg: Config, inputs: list[InputFile], max_failed: str
) -> None:
    """Refuse a map run in which more of ``inputs`` failed than ``max_failed`` allows."""
    keys = {f.key for f in inputs}
    failed = [f for f in W.failed_inputs(out, stage, cfg) if f["source_key"] in keys]
    check_failures(failed, len(inputs), max_failed, stage.name)


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
    (and with ``verify`` the sha256) the marker records; otherwise it is redone, saying why.
    An archive is read by :func:`run_archive` (its units are this shard's ``shard_of``
    share, ``index % count``).
    """
    results: list[dict[str, Any]] = []
    for archive in (s for s in sources if s.is_archive):
        results += run_archive(stage, archive, out, cfg, workers, force, verify, shard_of)
    sources = [s for s in sources if not s.is_archive]
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
            results += _run_files(stage, todo, str(out), cfg, ProgressChannel(progress))
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
                with _starting_workers():
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
                                _log_done(manifest)  # workers have no log handler of their own
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
    _init_worker(parent, end_on_sigint)


def _pool_task(
    stage: Stage, todo: list[tuple[InputFile, dict[str, Any]]], out: str, cfg: Config
) -> list[dict[str, Any]]:
    """:func:`_run_files` in a pool worker, reporting through its channel."""
    return _run_files(stage, todo, out, cfg, _POOL_CHANNEL)


def _log_done(manifest: dict[str, Any]) -> None:
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


# --------------------------------------------------------------------- archive execution
# One reader streams an archive (decompression, tar parsing) in a thread of the parent
# and hands each unit to the least busy worker through a bounded queue, so workers
# never wait on a file and memory stays bounded however large a member is: at most
# ~1.5 units of data per worker are queued, and a unit is decided (skip or decode)
# at its last member's header, before that member's data is read.
UNIT_QUEUE_SHARE = 1.5  # units of data queued per worker
POLL_SECONDS = 0.5


class _Abort(Exception):
    """The archive is damaged mid-unit (the reader's message)."""


class _QueueInbox:
    """A worker thread's messages from the reader (workers = 1): tuples on a queue."""

    def __init__(self, q: Any):
        self.q = q

    def control(self) -> tuple[str, Any]:
        return self.q.get()

    def data(self) -> bytes:
        kind, item = self.q.get()
        if kind == "data":
            return item
        if kind == "end":
            return b""
        if kind == "abort":
            raise _Abort(item)
        raise RuntimeError(f"archive unit: unexpected message {kind!r}")


class _PipeInbox:
    """A worker process's messages from the reader: member data as raw byte messages (no
    pickling: each chunk is copied once less on either side), ``b""`` ending a member;
    everything else pickled (see :func:`_pump`)."""

    def __init__(self, conn: Any):
        self.conn = conn

    def control(self) -> tuple[str, Any]:
        while True:
            raw = self.conn.recv_bytes()
            if raw:  # an empty message ends a member a damaged archive cut short
                return pickle.loads(raw)

    def data(self) -> bytes:
        return self.conn.recv_bytes()


class _UnitSource:
    """An archive's unit as a worker receives it: ``("member", name)``, that member's
    data chunks and its end, for each member; then ``("unit_end", key fields)``; or
    ``("abort", reason)`` when the archive is damaged mid-unit."""

    def __init__(self, inbox: _QueueInbox | _PipeInbox, meta: dict[str, Any]):
        self.path = meta["path"]
        self.key = meta["key"]
        self.revision = meta["revision"]
        self.name = meta["name"]
        self.size = 0
        self.marker_key: dict[str, Any] = meta["marker_key"]  # completed by "unit_end"
        self._inbox = inbox
        self._lines = [0, 0]

    def _abort(self, reason: str) -> InputReadError:
        return InputReadError(self.path, reason, self._lines[0], self._lines[1])

    def read(self, n: int = 0) -> bytes:
        """The current member's next data chunk; ``b""`` at its end."""
        try:
            return self._inbox.data()
        except _Abort as e:
            raise self._abort(str(e)) from None

    def documents(self, max_line_bytes: int) -> Iterator[tuple[str, Iterator[Any]]]:
        """``(member path, lines)`` per member, as ``extract`` reads a file."""
        while True:
            kind, item = self._inbox.control()
            if kind == "member":
                self._lines = [0, 0]
                yield item, stream_lines(self, max_line_bytes, self._lines)
            elif kind == "unit_end":
                self.marker_key.update(item)
                return
            elif kind == "abort":
                raise self._abort(item)
            else:
                raise RuntimeError(f"archive unit {self.key}: unexpected message {kind!r}")


def _serve_units(
    inbox: _QueueInbox | _PipeInbox,
    results: Any,
    stage: Stage,
    out: str,
    cfg: Config,
    worker: int,
    progress: ProgressChannel,
) -> None:
    """A worker's loop: extract each unit it is sent, until told to stop."""
    while True:
        kind, meta = inbox.control()
        if kind == "stop":
            return
        source = _UnitSource(inbox, meta)
        try:
            todo = [(source, source.marker_key)]
            done = _run_files(stage, todo, out, cfg, progress, record_failures=False)
        except BaseException as e:  # reported to the parent, which stops the run
            results.put(("error", worker, meta["key"], f"{type(e).__name__}: {e}"))
            raise
        results.put(("done", worker, meta["key"], done[0] if done else None))


def _unit_process(
    conn: Any,
    results: Any,
    stage: Stage,
    out: str,
    cfg: Config,
    worker: int,
    progress: ProgressChannel,
    parent: int,
    end_on_sigint: bool,
) -> None:
    _init_worker(parent, end_on_sigint)
    _serve_units(_PipeInbox(conn), results, stage, out, cfg, worker, progress)


class _Feed:
    """The reader's side of the workers: bounded queues, and who is busy with what."""

    def __init__(self, n: int, capacity: int):
        import queue as q

        self.queues = [q.Queue(maxsize=capacity) for _ in range(n)]
        self.busy = [0] * n  # units sent and not yet reported
        self.lock = threading.Lock()
        self.stop = threading.Event()

    def pick(self) -> int:
        with self.lock:
            w = min(range(len(self.busy)), key=lambda i: (self.busy[i], i))
            self.busy[w] += 1
            return w

    def finished(self, w: int) -> None:
        with self.lock:
            self.busy[w] -= 1

    def put(self, w: int, item: tuple[str, Any]) -> None:
        import queue as q

        while True:
            if self.stop.is_set():
                raise _Stopped
            try:
                self.queues[w].put(item, timeout=POLL_SECONDS)
                return
            except q.Full:
                continue


class _Stopped(Exception):
    """The run is stopping (a worker failed, or Ctrl-C): the reader ends."""


@dataclass
class _ReadState:
    units: list[str] = field(default_factory=list)  # every unit's key, in order
    sent: int = 0
    skipped: int = 0
    skipped_members: int = 0
    others: int = 0
    members: dict[str, int] = field(default_factory=dict)
    decompressed: int = 0
    error: ArchiveError | None = None
    crash: BaseException | None = None
    ended: bool = False


def _read_archive(
    stage: Stage,
    archive: InputFile,
    out: Path,
    cfg: Config,
    force: bool,
    verify: bool,
    shard_of: tuple[int, int],
    feed: _Feed,
    state: _ReadState,
) -> None:
    """The reader thread: every unit of ``archive`` in order, to a worker or skipped."""
    reader = ArchiveReader(archive, cfg.archive.unit_mb << 20)
    index, count = shard_of
    current: int | None = None
    try:
        for unit in reader.units():
            key = unit_key(archive, unit.index)
            state.units.append(key)
            if unit.index % count != index:
                unit.drain()
                state.others += 1
                continue
            why = "forced" if force else W.unit_problem(stage, archive, unit, out, cfg, verify)
            if why is None:
                unit.drain()
                state.skipped += 1
                state.skipped_members += len(unit.members)
                continue
            if why not in ("not done", "forced"):
                log.warning("%s: redo %s: %s", stage.name, key, why)
            w = current = feed.pick()
            first, last = unit.members[0].name, unit.members[-1].name
            meta = {
                "key": key,
                "path": f"{archive.path}#{first}" + (f"..{last}" if last != first else ""),
                "revision": archive.revision,
                "name": first,
                "marker_key": W.unit_marker_key(stage, cfg),
            }
            feed.put(w, ("unit", meta))
            for member, stream in unit.members_data():
                feed.put(w, ("member", member.name))
                while True:
                    chunk = stream.read(CHUNK)
                    if not chunk:
                        break
                    feed.put(w, ("data", chunk))
                feed.put(w, ("end", None))
            end = unit.parts_end
            feed.put(
                w, ("unit_end", {"identity": unit_identity(archive, unit, end), "parts_end": end})
            )
            state.sent += 1
            current = None
        state.ended = True
    except _Stopped:
        pass
    except READ_ERRORS + (ArchiveError,) as e:
        state.error = reader.damage(e)
        if current is not None:
            with contextlib.suppress(_Stopped):
                feed.put(current, ("abort", str(state.error)))
    except BaseException as e:  # the parent reports it and stops the run
        state.crash = e
        if current is not None:
            with contextlib.suppress(_Stopped):
                feed.put(current, ("abort", f"{type(e).__name__}: {e}"))
    finally:
        state.members = dict(sorted(reader.members.items()))
        state.decompressed = reader.decompressed


def run_archive(
    stage: Stage,
    archive: InputFile,
    out: Path,
    cfg: Config,
    workers: int,
    force: bool,
    verify: bool = False,
    shard_of: tuple[int, int] = (0, 1),
) -> list[dict[str, Any]]:
    """Run a map stage over the units of one archive (this shard's share of them).

    Finished units are skipped without being decoded (the stream still passes through
    them). When the archive is read to its end, its record lists every unit; units of
    an older composition beyond them are removed. A damaged archive keeps every unit
    finished before the damage and is recorded as a failed input, named by its part.
    """
    record_path = W.archive_record_path(out, stage.name, archive.key)
    _forget_changed_parts(stage, archive, out, record_path)
    n = max(1, workers)
    capacity = max(2, int(UNIT_QUEUE_SHARE * (cfg.archive.unit_mb << 20) / CHUNK))
    feed = _Feed(n, capacity)
    state = _ReadState()
    progress = Progress(archive.size, f"{stage.name} {display(archive.name)}")
    log.info(
        "%s: reading archive %s (%d part(s), %s bytes), %d worker(s)%s",
        stage.name,
        display(archive.name),
        len(archive.parts),
        f"{archive.size:,}",
        n,
        f", shard {shard_of[0]}/{shard_of[1]}" if shard_of[1] > 1 else "",
    )
    t0 = time.monotonic()
    results: list[dict[str, Any]] = []
    reader = threading.Thread(
        target=_read_archive,
        args=(stage, archive, out, cfg, force, verify, shard_of, feed, state),
        name="archive-reader",
        daemon=True,
    )
    threads: list[threading.Thread] = []
    procs: list[Any] = []
    import queue as q

    if workers <= 1:
        done_q: Any = q.Queue()
        channel = ProgressChannel(progress)
        t = threading.Thread(
            target=_serve_units,
            args=(_QueueInbox(feed.queues[0]), done_q, stage, str(out), cfg, 0, channel),
            name="archive-worker",
            daemon=True,
        )
        threads.append(t)
    else:
        ctx = mp.get_context("spawn")
        done_q = ctx.Queue()
        channel = ProgressChannel(progress, ctx.Queue())
        end_on_sigint = signal.getsignal(signal.SIGINT) is not signal.SIG_IGN
        with _starting_workers():
            for w in range(n):
                recv, send = ctx.Pipe(duplex=False)
                p = ctx.Process(
                    target=_unit_process,
                    args=(
                        recv,
                        done_q,
                        stage,
                        str(out),
                        cfg,
                        w,
                        channel.to_parent(),
                        os.getpid(),
                        end_on_sigint,
                    ),
                    daemon=True,
                )
                p.start()
                procs.append(p)
                threads.append(
                    threading.Thread(
                        target=_pump,
                        args=(feed.queues[w], send, feed),
                        name=f"feed-{w}",
                        daemon=True,
                    )
                )
    failure: str | None = None
    try:
        for t in threads:
            t.start()
        reader.start()
        stopping = False
        while True:
            try:
                kind, w, key, item = done_q.get(timeout=POLL_SECONDS)
            except q.Empty:
                kind = ""
            channel.drain()
            if kind == "done":
                feed.finished(w)
                if item is not None:
                    results.append(item)
                    _log_done(item)
            elif kind == "error":
                failure = f"{stage.name}: a worker failed on {key}: {item}"
                break
            if not reader.is_alive() and not stopping:
                stopping = True
                for w in range(n):
                    feed.put(w, ("stop", None))
            if stopping and all(b == 0 for b in feed.busy):
                break
            dead = [p for p in procs if not p.is_alive() and p.exitcode not in (0, None)]
            if dead and not stopping:
                failure = f"{stage.name}: a worker process died (exit code {dead[0].exitcode})"
                break
            if stopping and procs and all(not p.is_alive() for p in procs) and any(feed.busy):
                failure = f"{stage.name}: a worker process ended with units unfinished"
                break
    except BaseException:
        feed.stop.set()
        for p in procs:
            p.kill()
        raise
    finally:
        feed.stop.set()
        for p in procs:
            p.join(timeout=5)
            if p.is_alive():
                p.kill()
        reader.join(timeout=5)
        for t in threads:
            t.join(timeout=1)
        progress.close()
    if failure is not None:
        raise RuntimeError(failure)
    if state.crash is not None:
        raise state.crash
    seconds = time.monotonic() - t0
    log.info(
        "%s: archive %s: %d unit(s) extracted, %d skipped as done (%d members not decoded "
        "again), %d of other shards; %s bytes decompressed in %.1f s; members %s",
        stage.name,
        display(archive.name),
        state.sent,
        state.skipped,
        state.skipped_members,
        state.others,
        f"{state.decompressed:,}",
        seconds,
        state.members,
    )
    if state.error is not None or not state.ended:
        reason = str(state.error) if state.error is not None else "the reader stopped early"
        record_path.unlink(missing_ok=True)
        if state.error is not None and state.error.checksum:
            results = _discard_units_from(stage, out, results, state.error.index)
        failed = {
            "reason": reason,
            "lines_read": sum(m["counts"].get("lines_read", 0) for m in results),
            "bytes_read": state.decompressed,
            "units_kept_this_run": len(results),
            "part": state.error.part if state.error is not None else "",
        }
        key = {**W.map_marker_key(stage, archive, cfg)}
        results.append(_record_failure(stage, archive, key, failed, cfg, str(out), {}))
        return results
    _close_archive(stage, archive, out, cfg, state, record_path)
    return results


def _discard_units_from(
    stage: Stage, out: Path, results: list[dict[str, Any]], part: int
) -> list[dict[str, Any]]:
    """Remove the units of this run read from part ``part`` on: a checksum found that the
    part (with ``part`` 0: some part) is wrong, after their data was decoded."""
    kept = []
    for manifest in results:
        if manifest["key"].get("parts_end", -1) < part:
            kept.append(manifest)
            continue
        W.remove_map_input(out, stage, manifest["source_key"])
    if len(kept) < len(results):
        log.warning(
            "%s: %d unit(s) of this run were read from a part a checksum rejects: discarded",
            stage.name,
            len(results) - len(kept),
        )
    return kept


def _pump(source: Any, send: Any, feed: _Feed) -> None:
    """A feeder thread: one worker's queue into its pipe (the format :class:`_PipeInbox`
    reads: member data raw, ``b""`` for a member's end, the rest pickled)."""
    import queue as q

    while not feed.stop.is_set():
        try:
            item = source.get(timeout=POLL_SECONDS)
        except q.Empty:
            continue
        kind = item[0]
        try:
            if kind == "data":
                send.send_bytes(item[1])
            elif kind == "end":
                send.send_bytes(b"")
            else:
                if kind == "abort":
                    send.send_bytes(b"")  # ends a member it cuts short
                send.send_bytes(pickle.dumps(item, protocol=pickle.HIGHEST_PROTOCOL))
        except (OSError, ValueError):  # the worker is gone; the parent notices
            return
        if kind == "stop":
            return


def _forget_changed_parts(stage: Stage, archive: InputFile, out: Path, record_path: Path) -> None:
    """Say which parts changed since the archive was last read to its end; its record
    goes (it is written again at the next end), its units are checked one by one."""
    before = W.archived_parts(record_path)
    if before is None:  # none, or damaged
        record_path.unlink(missing_ok=True)
        return
    now = [p.identity for p in archive.parts]
    if before == now:
        return
    changed = [
        display(p.name)
        for i, p in enumerate(archive.parts)
        if i >= len(before) or before[i] != now[i]
    ]
    log.warning(
        "%s: %s changed since it was last read (%s); units read from it on are redone",
        stage.name,
        display(archive.name),
        ", ".join(changed) or "fewer parts",
    )
    record_path.unlink(missing_ok=True)


def _close_archive(
    stage: Stage, archive: InputFile, out: Path, cfg: Config, state: _ReadState, record_path: Path
) -> None:
    """The archive was read to its end: record its units; drop older units beyond them and
    its failure, if any."""
    keep = set(state.units)
    for marker in W.marker_paths(out, stage.name):
        key = marker.stem
        if W.unit_archive(key) == archive.key and key not in keep:
            W.remove_map_input(out, stage, key)
    W.manifest_path(out, stage.name, archive.key).unlink(missing_ok=True)
    W.write_archive_record(
        record_path, stage, archive, cfg, state.units, state.members, state.decompressed
    )


# --------------------------------------------------------------------- reduce execution
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
            _check_map_complete(out, stages[up], cfg, stage.name, max_failed)
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
    first. Under :func:`pipeline.engine.workdir.stage_lock` nothing else renames ``final``;
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
