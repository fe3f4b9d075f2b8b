"""Which query of a reduce stage costs the time and the memory.

Runs one reduce stage in this process (with ``force``) and reports every Polars
materialisation it makes (``LazyFrame.collect``, ``sink_parquet``, ``collect_all``,
``DataFrame`` operations are not wrapped): the stage source line that made it, wall
seconds, and the peak RSS during it. The peak is the process's ``VmHWM``, reset
before each call by writing ``5`` to ``/proc/self/clear_refs`` (Linux), so each
figure is that call's own peak, not the running maximum.

Usage: ``python bench/profile_stage.py negatives --out bench_out/scale/n300000``.
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import polars as pl

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from pipeline.core.config import load_config  # noqa: E402
from pipeline.engine.runner import run_reduce  # noqa: E402
from pipeline.stages import GRAPH  # noqa: E402

CALLS: list[dict[str, Any]] = []


def _status_mb(field: str) -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return 0.0


def _reset_peak() -> None:
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def _site() -> str:
    """The innermost stack frame inside ``pipeline/`` (the stage line that asked)."""
    for frame in reversed(traceback.extract_stack()[:-2]):
        if "/pipeline/" in frame.filename:
            return f"{Path(frame.filename).name}:{frame.lineno} {frame.line or ''}"[:110]
    return "?"


def _wrap(owner: Any, name: str) -> None:
    original = getattr(owner, name)

    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if getattr(_wrap, "depth", 0):
            return original(*args, **kwargs)
        site = _site()
        before = _status_mb("VmRSS")
        _reset_peak()
        _wrap.depth = 1  # type: ignore[attr-defined]
        t0 = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            _wrap.depth = 0  # type: ignore[attr-defined]
            CALLS.append(
                {
                    "site": site,
                    "call": name,
                    "seconds": time.perf_counter() - t0,
                    "rss_before_mb": before,
                    "peak_mb": _status_mb("VmHWM"),
                    "rss_after_mb": _status_mb("VmRSS"),
                }
            )

    setattr(owner, name, wrapper)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("stage")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--config", type=Path, default=None)
    ap.add_argument("--top", type=int, default=15, help="calls to show, by peak")
    args = ap.parse_args()
    for name in ("collect", "sink_parquet"):
        _wrap(pl.LazyFrame, name)
    _wrap(pl, "collect_all")
    stage = GRAPH[args.stage]
    t0 = time.perf_counter()
    run_reduce(stage, args.out, load_config(args.config), force=True, stages=GRAPH)
    total = time.perf_counter() - t0
    print(f"{args.stage}: {total:.1f} s, {len(CALLS)} materialisations")
    print(f"{'seconds':>8} {'peak MB':>8} {'before':>8} {'after':>8}  site")
    for c in sorted(CALLS, key=lambda c: -c["peak_mb"])[: args.top]:
        print(
            f"{c['seconds']:8.1f} {c['peak_mb']:8,.0f} {c['rss_before_mb']:8,.0f} "
            f"{c['rss_after_mb']:8,.0f}  {c['call']}: {c['site']}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
