"""Progress: a tqdm bar on a terminal, a plain log line every so often otherwise.

Stage code reports progress through :func:`steps` (batches, files) and the runner
through :class:`Progress` (a map stage's bytes); neither prints directly. While a
command runs, :func:`redirect_logging` sends the pipeline's log lines through
``tqdm.write`` so a line never tears a bar.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import time
from collections.abc import Iterator, Sequence
from typing import TypeVar

log = logging.getLogger("pipeline")
T = TypeVar("T")
# Seconds between plain progress lines when stderr is not a terminal (a log file, a Job's
# output): often enough to see a long stage move, rare enough not to drown the rest.
PLAIN_EVERY = 30.0


def on_terminal() -> bool:
    """Whether progress is drawn as bars (stderr is a terminal)."""
    return sys.stderr.isatty()


def steps(
    items: Sequence[T], desc: str, unit: str = "batch", every: float | None = None
) -> Iterator[T]:
    """Yield ``items`` in order while showing how far the loop is.

    On a terminal a tqdm bar (removed when the loop ends); otherwise a log line
    ``<desc>: <i> of <n> done, <s> s`` at most every ``every`` seconds (default
    :data:`PLAIN_EVERY`), so a quick loop prints nothing.
    """
    total = len(items)
    if on_terminal():
        from tqdm import tqdm

        yield from tqdm(items, desc=desc, unit=unit, total=total, leave=False, dynamic_ncols=True)
        return
    every = PLAIN_EVERY if every is None else every
    start = last = time.monotonic()
    for i, item in enumerate(items, 1):
        yield item
        now = time.monotonic()
        if now - last >= every:
            last = now
            log.info("%s: %d of %d done, %.0f s", desc, i, total, now - start)


class Progress:
    """A map stage's progress over its input bytes: tqdm on a terminal; a plain log line
    every ``every`` seconds otherwise."""

    def __init__(self, total_bytes: int, desc: str, every: float | None = None):
        self.papers = self.bytes = self.rejects = 0
        self.start = time.monotonic()
        self.last = self.start
        self.every = PLAIN_EVERY if every is None else every
        self.desc = desc
        self.bar = None
        if on_terminal():
            from tqdm import tqdm

            self.bar = tqdm(total=total_bytes, unit="B", unit_scale=True, desc=desc, smoothing=0.1)

    def update(self, papers: int, nbytes: int, rejects: int) -> None:
        """Count ``papers`` papers, ``nbytes`` input bytes and ``rejects`` rejected lines more."""
        self.papers += papers
        self.bytes += nbytes
        self.rejects += rejects
        elapsed = max(time.monotonic() - self.start, 1e-9)
        rate = f"{self.papers / elapsed:,.0f} papers/s, {self.bytes / elapsed / 1e6:,.1f} MB/s, {self.rejects} rejects"
        if self.bar is not None:
            self.bar.update(nbytes)
            self.bar.set_postfix_str(rate, refresh=False)
        elif time.monotonic() - self.last >= self.every:
            self.last = time.monotonic()
            log.info(
                "%s: %s papers, %.1f MB (%s)", self.desc, f"{self.papers:,}", self.bytes / 1e6, rate
            )

    def close(self) -> None:
        """Remove the bar, if any."""
        if self.bar is not None:
            self.bar.close()


@contextlib.contextmanager
def redirect_logging(logger: logging.Logger) -> Iterator[None]:
    """On a terminal, ``logger``'s console lines go through ``tqdm.write`` (above any bar)
    while the block runs; elsewhere nothing changes.

    The handler that stands in for the console one keeps its marks (attributes), so code
    that looks for its own handler still finds it.
    """
    if not on_terminal():
        yield
        return
    from tqdm.contrib.logging import logging_redirect_tqdm

    console = [h for h in logger.handlers if isinstance(h, logging.StreamHandler)]
    with logging_redirect_tqdm(loggers=[logger]):
        for handler in logger.handlers:
            if handler not in console and console:
                handler.__dict__.update(
                    {k: v for k, v in vars(console[0]).items() if k.startswith("pipeline")}
                )
        yield
