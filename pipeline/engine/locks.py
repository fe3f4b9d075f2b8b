"""The work directory's locks: one config at a time uses a work directory
(:func:`run_lock`), and one run at a time writes a reduce stage while the stages it reads
stay in place (:func:`stage_lock`). Both are ``flock``s on files under
``<out>/_locks/`` (:data:`pipeline.engine.workdir.LOCKS`), which the kernel drops however
the process ends; a file system without locks (a Jobs bucket mount, ``docs/MOUNTS.md``)
runs unlocked, with a warning."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

from pipeline.core.config import Config
from pipeline.core.errors import PipelineError
from pipeline.engine.workdir import LOCKS

log = logging.getLogger("pipeline")


class WorkDirBusyError(PipelineError, RuntimeError):
    """A run with another config is using the work directory."""


# what flock raises on a file system without locks (NFS without a lock manager, FUSE)
_NO_LOCKS = {errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOTSUP, errno.ENOSYS, errno.EINVAL}


@contextlib.contextmanager
def run_lock(out: Path, cfg: Config) -> Iterator[None]:
    """Hold ``out`` for a run with ``cfg`` while the block runs.

    Runs with the same config share the work directory (shards, or one command started
    twice, cooperate as before: markers, owner-tagged temps, atomic replaces). A run with
    another config would replace files the first one is reading, so it is refused at once.
    Each config's lock file is held with a shared ``flock`` and the check is made under an
    exclusive gate, so of two runs started together exactly one is refused. The kernel
    drops the locks of a process however it ends (kill -9 included). On a file system
    without locks (a Jobs bucket mount, see ``MOUNTS.md``) the run goes ahead unlocked,
    with a warning.

    Raises:
        WorkDirBusyError: a run with another config holds ``out``.
    """
    folder = out / LOCKS
    folder.mkdir(parents=True, exist_ok=True)
    mine = None
    gate = os.open(folder / "gate", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if _lock_or_warn(gate, out):
            try:
                busy = _other_configs(folder, cfg.hash)
                if busy:
                    raise WorkDirBusyError(
                        f"{out} is in use by a run with another config (config hash "
                        f"{busy[0]}); wait for it to finish, or use another --out"
                    )
                mine = os.open(folder / f"{cfg.hash}.lock", os.O_RDWR | os.O_CREAT, 0o644)
                fcntl.flock(mine, fcntl.LOCK_SH)
            finally:
                fcntl.flock(gate, fcntl.LOCK_UN)
        yield
    finally:
        if mine is not None:
            os.close(mine)  # releases its lock
        os.close(gate)


def _lock_or_warn(gate: int, out: Path) -> bool:
    """Take the gate (waiting for another run's check); False where there are no locks."""
    try:
        fcntl.flock(gate, fcntl.LOCK_EX)
    except OSError as e:
        if e.errno not in _NO_LOCKS:
            raise
        log.warning(
            "%s: the file system has no file locks (%s): a run with another config on this "
            "--out is not detected (see docs/MOUNTS.md)",
            out,
            os.strerror(e.errno or 0),
        )
        return False
    return True


def _other_configs(folder: Path, config_hash: str) -> list[str]:
    """Config hashes of other runs holding their lock in ``folder`` (the gate is held).

    The lock file of a config no run holds is removed: nobody can be between opening it
    and locking it, since both happen under the gate.
    """
    busy = []
    for path in sorted(folder.glob("*.lock")):
        if path.stem == config_hash:
            continue
        try:
            fd = os.open(path, os.O_RDWR)
        except FileNotFoundError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            busy.append(path.stem)
        else:
            path.unlink(missing_ok=True)
        finally:
            os.close(fd)
    return busy


STAGE_LOCKS = "stages"  # under LOCKS: one lock file per reduce stage


@contextlib.contextmanager
def stage_lock(out: Path, stage: str, reads: Sequence[str] = ()) -> Iterator[None]:
    """Hold reduce stage ``stage`` exclusively and the reduce stages it ``reads`` shared
    while the block runs.

    Two runs of one config on one ``out`` may both find a stage not done: without this,
    both wrote it and both swapped their folder in (``os.replace(final, old)`` then
    ``os.replace(tmp, final)``), and the loser's second rename met the winner's folder:
    ``ENOTEMPTY``. Held, the second run waits here, then finds the stage done
    and skips it; a stage is never swapped while another run reads it.

    ``reads`` must be in pipeline order and ``stage`` after them: every run takes the locks
    in that one order, so two runs never wait on each other in a cycle. The kernel drops
    the locks of a process however it ends. Where the file system has no locks (a Jobs
    bucket mount, ``docs/MOUNTS.md``) the block runs unlocked: :func:`run_lock` has
    already warned.
    """
    if not out.is_dir():  # nothing to guard: the stage refuses (its upstream is not done)
        yield
        return
    folder = out / LOCKS / STAGE_LOCKS
    folder.mkdir(parents=True, exist_ok=True)
    held: list[int] = []
    try:
        for name, mode in [*((r, fcntl.LOCK_SH) for r in reads), (stage, fcntl.LOCK_EX)]:
            fd = os.open(folder / f"{name}.lock", os.O_RDWR | os.O_CREAT, 0o644)
            held.append(fd)
            if not _flock_waiting(fd, mode, stage, name):
                break  # no locks on this file system
        yield
    finally:
        for fd in reversed(held):
            os.close(fd)  # releases its lock


def _flock_waiting(fd: int, mode: int, stage: str, name: str) -> bool:
    """Take ``mode`` on ``fd``, saying so when another run makes this one wait; False
    where the file system has no locks."""
    try:
        fcntl.flock(fd, mode | fcntl.LOCK_NB)
    except BlockingIOError:
        what = "writing" if mode == fcntl.LOCK_SH else "writing or reading"
        log.info("%s: another run on this --out is %s %s; waiting for it", stage, what, name)
        fcntl.flock(fd, mode)
    except OSError as e:
        if e.errno not in _NO_LOCKS:
            raise
        return False
    return True
