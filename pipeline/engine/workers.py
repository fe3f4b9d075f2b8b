"""Worker processes and signals: a worker dies with the process that started it
(:func:`die_with_parent`), starts with Ctrl-C ignored and the caller's ``__main__`` hidden
(:func:`starting_workers`), then ends quietly on Ctrl-C or SIGTERM (:func:`init_worker`);
in the parent, SIGTERM stops a run the way Ctrl-C does (:func:`sigterm_as_interrupt`,
:class:`Terminated`)."""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import sys
import threading
import time
import types
from collections.abc import Iterator
from typing import Any

log = logging.getLogger("pipeline")


PR_SET_PDEATHSIG = 1  # linux/prctl.h
PARENT_POLL_SECONDS = 1.0


def die_with_parent(parent: int) -> None:
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
def starting_workers() -> Iterator[None]:
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


def init_worker(parent: int, end_on_sigint: bool = True) -> None:
    die_with_parent(parent)
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
