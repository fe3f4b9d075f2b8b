"""The progress channel: how a map stage's ``fn`` reports what it has read to the run's
progress bar (:class:`pipeline.core.progress.Progress`), from the process that shows the bar
or from a worker process."""

from __future__ import annotations

import queue as q
from typing import Any

from pipeline.core.progress import Progress


class ProgressChannel:
    """``channel(papers, nbytes, rejects)``: what a map stage's ``fn`` (or ``fn_many``) is
    handed as its ``progress`` argument.

    Made around the run's bar (``ProgressChannel(bar)``), a call updates the bar. For worker
    processes the parent also gives it a queue (``ProgressChannel(bar, queue)``) and hands
    each worker :meth:`to_parent`, the same channel without the bar: there a call puts the
    figures on the queue, and the parent moves them into the bar with :meth:`drain`.
    """

    def __init__(self, bar: Progress | None, queue: Any = None) -> None:
        self.bar = bar
        self.queue = queue

    def __call__(self, papers: int, nbytes: int, rejects: int) -> None:
        if self.bar is not None:
            self.bar.update(papers, nbytes, rejects)
        elif self.queue is not None:
            self.queue.put((papers, nbytes, rejects))

    def to_parent(self) -> ProgressChannel:
        """The channel a worker process reports through: the queue, not the bar."""
        return ProgressChannel(None, self.queue)

    def drain(self) -> None:
        """Move what the workers have put on the queue so far into the bar."""
        if self.bar is None or self.queue is None:
            return
        while True:
            try:
                self.bar.update(*self.queue.get_nowait())
            except q.Empty:
                return
