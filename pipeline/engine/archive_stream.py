"""The archive stream: a map stage over an archive (a split ``tar.gz``), read once, in
order, by a reader thread that hands each unit (consecutive members of at least
``[archive] unit_mb``) to the least busy worker; finished units are skipped without being
decoded, and a damaged archive keeps the units finished before the damage
(``docs/internals.md``, "Reading the published corpus")."""

from __future__ import annotations

import contextlib
import logging
import multiprocessing as mp
import os
import pickle
import queue as q
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.core.config import Config
from pipeline.core.progress import Progress
from pipeline.corpus.archive import (
    CHUNK,
    READ_ERRORS,
    ArchiveError,
    ArchiveReader,
    unit_identity,
    unit_key,
)
from pipeline.corpus.sources import InputFile, InputReadError, display, stream_lines
from pipeline.engine import workdir as W
from pipeline.engine.map_files import log_done, record_failure, run_task
from pipeline.engine.progress import ProgressChannel
from pipeline.engine.stage import Stage
from pipeline.engine.workers import init_worker, starting_workers

log = logging.getLogger("pipeline")


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


class UnitSource:
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
        source = UnitSource(inbox, meta)
        try:
            todo = [(source, source.marker_key)]
            done = run_task(stage, todo, out, cfg, progress, record_failures=False)
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
    init_worker(parent, end_on_sigint)
    _serve_units(_PipeInbox(conn), results, stage, out, cfg, worker, progress)


class _Feed:
    """The reader's side of the workers: bounded queues, and who is busy with what."""

    def __init__(self, n: int, capacity: int):
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
    reader = threading.Thread(
        target=_read_archive,
        args=(stage, archive, out, cfg, force, verify, shard_of, feed, state),
        name="archive-reader",
        daemon=True,
    )
    pool = _start_workers(stage, out, cfg, workers, feed, progress)
    try:
        for t in pool.threads:
            t.start()
        reader.start()
        results, failure = _collect(stage, feed, reader, pool)
    except BaseException:
        feed.stop.set()
        for p in pool.procs:
            p.kill()
        raise
    finally:
        feed.stop.set()
        for p in pool.procs:
            p.join(timeout=5)
            if p.is_alive():
                p.kill()
        reader.join(timeout=5)
        for t in pool.threads:
            t.join(timeout=1)
        progress.close()
    if failure is not None:
        raise RuntimeError(failure)
    if state.crash is not None:
        raise state.crash
    _log_read(stage, archive, state, time.monotonic() - t0)
    if state.error is not None or not state.ended:
        return _record_damage(stage, archive, out, cfg, state, record_path, results)
    _close_archive(stage, archive, out, cfg, state, record_path)
    return results


@dataclass
class _Workers:
    """The workers of one archive: threads (the worker, or each process's feeder) and
    processes, the queue they report finished units on, and the progress channel."""

    done: Any
    channel: ProgressChannel
    threads: list[threading.Thread] = field(default_factory=list)
    procs: list[Any] = field(default_factory=list)


def _start_workers(
    stage: Stage, out: Path, cfg: Config, workers: int, feed: _Feed, progress: Progress
) -> _Workers:
    """One worker thread (``workers`` <= 1), else ``workers`` processes, started, each with a
    feeder thread (not started) that moves its queue into its pipe."""
    if workers <= 1:
        pool = _Workers(q.Queue(), ProgressChannel(progress))
        pool.threads.append(
            threading.Thread(
                target=_serve_units,
                args=(
                    _QueueInbox(feed.queues[0]),
                    pool.done,
                    stage,
                    str(out),
                    cfg,
                    0,
                    pool.channel,
                ),
                name="archive-worker",
                daemon=True,
            )
        )
        return pool
    ctx = mp.get_context("spawn")
    pool = _Workers(ctx.Queue(), ProgressChannel(progress, ctx.Queue()))
    end_on_sigint = signal.getsignal(signal.SIGINT) is not signal.SIG_IGN
    with starting_workers():
        for w in range(len(feed.queues)):
            recv, send = ctx.Pipe(duplex=False)
            p = ctx.Process(
                target=_unit_process,
                args=(
                    recv,
                    pool.done,
                    stage,
                    str(out),
                    cfg,
                    w,
                    pool.channel.to_parent(),
                    os.getpid(),
                    end_on_sigint,
                ),
                daemon=True,
            )
            p.start()
            pool.procs.append(p)
            pool.threads.append(
                threading.Thread(
                    target=_pump,
                    args=(feed.queues[w], send, feed),
                    name=f"feed-{w}",
                    daemon=True,
                )
            )
    return pool


def _collect(
    stage: Stage, feed: _Feed, reader: threading.Thread, pool: _Workers
) -> tuple[list[dict[str, Any]], str | None]:
    """The manifests of the units the workers finish, until the reader has ended and every
    unit sent is done; and why the run stops, when a worker failed or died (else None)."""
    results: list[dict[str, Any]] = []
    stopping = False
    while True:
        try:
            kind, w, key, item = pool.done.get(timeout=POLL_SECONDS)
        except q.Empty:
            kind = ""
        pool.channel.drain()
        if kind == "done":
            feed.finished(w)
            if item is not None:
                results.append(item)
                log_done(item)
        elif kind == "error":
            return results, f"{stage.name}: a worker failed on {key}: {item}"
        if not reader.is_alive() and not stopping:
            stopping = True
            for w in range(len(feed.queues)):
                feed.put(w, ("stop", None))
        if stopping and all(b == 0 for b in feed.busy):
            return results, None
        procs = pool.procs
        dead = [p for p in procs if not p.is_alive() and p.exitcode not in (0, None)]
        if dead and not stopping:
            return results, f"{stage.name}: a worker process died (exit code {dead[0].exitcode})"
        if stopping and procs and all(not p.is_alive() for p in procs) and any(feed.busy):
            return results, f"{stage.name}: a worker process ended with units unfinished"


def _log_read(stage: Stage, archive: InputFile, state: _ReadState, seconds: float) -> None:
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


def _record_damage(
    stage: Stage,
    archive: InputFile,
    out: Path,
    cfg: Config,
    state: _ReadState,
    record_path: Path,
    results: list[dict[str, Any]],
) -> list[dict[str, Any]]:
    """The archive was not read to its end: its record goes, the units a checksum rejects
    go, and it is recorded as a failed input (the units finished before stay)."""
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
    return [*results, record_failure(stage, archive, key, failed, cfg, str(out), {})]


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
