"""Which query or step of a reduce stage costs the time and the memory.

Runs one reduce stage in this process (with ``force``) and reports

* every Polars materialisation it makes (``LazyFrame.collect``, ``sink_parquet``,
  ``collect_all``): the stage source line that made it, wall seconds, CPU seconds (every
  thread of the process: under other jobs' load, the figure that does not move), and the
  peak RSS during it; and the same summed by source line, by CPU seconds;
* the Python steps of :data:`STEPS` (or ``--step module:function``, repeatable), where
  the time and memory outside Polars queries go (``DataFrame`` operations, numpy,
  LightGBM, loops): calls, total wall and CPU seconds, and the largest peak RSS of one
  call, nested materialisations included.

The peak is the process's ``VmHWM``, reset before each materialisation by writing ``5``
to ``/proc/self/clear_refs`` (Linux); the peak seen before a reset is carried to every
step still open, so each figure is that call's own peak, not the running maximum.

Usage: ``python bench/profile_stage.py release --out bench_out/scale/n300000``.
"""

from __future__ import annotations

import argparse
import functools
import importlib
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
from pipeline.engine.reduce import run_reduce  # noqa: E402
from pipeline.stages import GRAPH  # noqa: E402

CALLS: list[dict[str, Any]] = []
# steps of a stage outside its Polars queries, by stage (module:function)
STEPS = {
    "works": (
        "pipeline.stages.works.passes:alias_pass",
        "pipeline.stages.works.passes:identifier_pass",
        "pipeline.stages.works.passes:title_pass",
        "pipeline.stages.works.passes:paper_ranges",
        "pipeline.stages.works.identity:work_edges",
        "pipeline.stages.works.identity:connected_components",
        "pipeline.stages.works.identity:alias_works",
        "pipeline.stages.works.by_title:title_map",
        "pipeline.stages.works.stage:write_cites",
        "pipeline.stages.works.stage:write_works_table",
        "pipeline.stages.works.stage:works_counts",
    ),
    "negatives": (
        "pipeline.stages.negatives.stage:_indexed_tables",
        "pipeline.stages.negatives.stage:_write_pools",
        "pipeline.stages.negatives.stage:_prepare_draw",
        "pipeline.stages.negatives.stage:_draw_batches",
        "pipeline.stages.negatives.stage:_draw_batch",
        "pipeline.stages.negatives.stage:_per_survey",
        "pipeline.rules.visible:work_parts",
        "pipeline.rules.visible:corpus_prior_counts",
        "pipeline.rules.visible:prior_tables",
        "pipeline.stages.negatives.rules:survey_title_keys",
        "pipeline.stages.negatives.sampling:indexed_hashes",
        "pipeline.stages.negatives.sampling:pool_order",
        "pipeline.stages.negatives.sampling:windows",
        "pipeline.stages.negatives.sampling:window_rows",
        "pipeline.stages.negatives.sampling:slots",
        "pipeline.stages.negatives.sampling:match",
        "pipeline.stages.negatives.sampling:unindexed",
    ),
    "labels": (
        "pipeline.rules.roles:role_distribution",
        "pipeline.rules.roles:textless_top_sections",
    ),
    "release": (
        "pipeline.stages.release.tables:reading_lists",
        "pipeline.stages.release.tables:beir_views",
        "pipeline.stages.release.tables:aspect_rows",
        "pipeline.stages.release.counts:text_counts",
        "pipeline.stages.release.counts:split_counts",
        "pipeline.rules.leak_audit:feature_values",
        "pipeline.rules.leak_audit:audit_values",
        "pipeline.rules.leak_audit:relative_feature_values",
        "pipeline.rules.leak_audit:relative_audit",
        "pipeline.rules.leak_audit:aspect_feature_values",
        "pipeline.rules.leak_audit:aspect_audit",
        "pipeline.rules.leak_audit:aspect_relative_values",
        "pipeline.rules.leak_audit:aspect_relative_audit",
        "pipeline.rules.leak_audit:aspect_judgment_values",
        "pipeline.evaluate.audit:reading_free_probe",
        "pipeline.rank.release:train_from_release",
        "pipeline.rank.features:compute_features",
        "pipeline.rank.model:score",
        "pipeline.hub.card:render_release_card",
    ),
}
STEP_STATS: dict[str, dict[str, Any]] = {}
_OPEN: list[dict[str, float]] = []  # the steps being measured, outermost first


LIVE_MB: float | None = None  # --live: print calls and steps peaking above this as they end


def _live(line: str, peak: float) -> None:
    """Print a finished call or step at once when it peaked above ``--live`` MB, so a run
    killed for its memory still shows what it was doing."""
    if LIVE_MB is not None and peak >= LIVE_MB:
        print(f"[live] {line}, peak {peak:,.0f} MB", file=sys.stderr, flush=True)


def _status_mb(field: str) -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return 0.0


def _reset_peak() -> None:
    hwm = _status_mb("VmHWM")
    for frame in _OPEN:  # an open step keeps the peak it saw before this reset
        frame["peak"] = max(frame["peak"], hwm)
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def _wrap_step(target: str) -> None:
    """Measure every call of ``module:function``, patched where it is defined and in
    every loaded ``pipeline`` module that imported it by name."""
    module_name, name = target.split(":")
    module = importlib.import_module(module_name)
    original = getattr(module, name)
    stats = STEP_STATS.setdefault(
        target, {"calls": 0, "seconds": 0.0, "cpu_seconds": 0.0, "peak_mb": 0.0}
    )

    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        frame = {"peak": 0.0}
        _OPEN.append(frame)
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            return original(*args, **kwargs)
        finally:
            _OPEN.pop()
            frame["peak"] = max(frame["peak"], _status_mb("VmHWM"))
            for outer in _OPEN:
                outer["peak"] = max(outer["peak"], frame["peak"])
            stats["calls"] += 1
            stats["seconds"] += time.perf_counter() - t0
            stats["cpu_seconds"] += time.process_time() - c0
            stats["peak_mb"] = max(stats["peak_mb"], frame["peak"])
            _live(f"step {target}: {time.perf_counter() - t0:.1f} s", frame["peak"])

    for loaded in list(sys.modules.values()):
        if getattr(loaded, "__name__", "").startswith("pipeline") and (
            getattr(loaded, name, None) is original
        ):
            setattr(loaded, name, wrapper)


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
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            return original(*args, **kwargs)
        finally:
            _wrap.depth = 0  # type: ignore[attr-defined]
            _live(f"{name} {site}: {time.perf_counter() - t0:.1f} s", _status_mb("VmHWM"))
            CALLS.append(
                {
                    "site": site,
                    "call": name,
                    "seconds": time.perf_counter() - t0,
                    "cpu_seconds": time.process_time() - c0,
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
    ap.add_argument(
        "--step", action="append", default=None,
        help="module:function to measure (repeatable; default: the stage's STEPS)",
    )  # fmt: skip
    ap.add_argument(
        "--live", type=float, default=None, metavar="MB",
        help="print each call and step peaking above MB as it ends (for runs that may be killed)",
    )  # fmt: skip
    ap.add_argument(
        "--chrono", type=Path, default=None, metavar="FILE",
        help="also write every materialisation, in the order made, to FILE (TSV)",
    )  # fmt: skip
    args = ap.parse_args()
    global LIVE_MB
    LIVE_MB = args.live
    for name in ("collect", "sink_parquet"):
        _wrap(pl.LazyFrame, name)
    _wrap(pl, "collect_all")
    for target in args.step or STEPS.get(args.stage, ()):
        _wrap_step(target)
    stage = GRAPH[args.stage]
    t0, c0 = time.perf_counter(), time.process_time()
    run_reduce(stage, args.out, load_config(args.config), force=True, stages=GRAPH)
    total, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(f"{args.stage}: {total:.1f} s, {cpu:.1f} CPU s, {len(CALLS)} materialisations")
    print(f"{'seconds':>8} {'CPU s':>8} {'peak MB':>8} {'before':>8} {'after':>8}  site")
    for c in sorted(CALLS, key=lambda c: -c["peak_mb"])[: args.top]:
        print(
            f"{c['seconds']:8.1f} {c['cpu_seconds']:8.1f} {c['peak_mb']:8,.0f} "
            f"{c['rss_before_mb']:8,.0f} {c['rss_after_mb']:8,.0f}  {c['call']}: {c['site']}"
        )
    by_site: dict[str, list[float]] = {}
    for c in CALLS:
        site = by_site.setdefault(f"{c['call']}: {c['site']}", [0, 0.0, 0.0])
        site[0] += 1
        site[1] += c["seconds"]
        site[2] += c["cpu_seconds"]
    print(f"\n{'calls':>6} {'seconds':>8} {'CPU s':>8}  site (summed, by CPU seconds)")
    for site_name, (n, secs, cpu_secs) in sorted(by_site.items(), key=lambda kv: -kv[1][2])[
        : args.top
    ]:
        print(f"{n:6} {secs:8.1f} {cpu_secs:8.1f}  {site_name}")
    if args.chrono:
        fields = ("seconds", "cpu_seconds", "peak_mb", "rss_before_mb", "rss_after_mb", "call",
                  "site")  # fmt: skip
        lines = ["\t".join(fields)]
        lines += ["\t".join(f"{c[k]:.1f}" if isinstance(c[k], float) else c[k] for k in fields)
                  for c in CALLS]  # fmt: skip
        args.chrono.write_text("\n".join(lines) + "\n", encoding="utf-8")
    if STEP_STATS:
        print(
            f"\n{'calls':>6} {'seconds':>8} {'CPU s':>8} {'peak MB':>8}  "
            "step (nested steps included)"
        )
        for target, st in sorted(STEP_STATS.items(), key=lambda kv: -kv[1]["peak_mb"]):
            if st["calls"]:
                print(
                    f"{st['calls']:6} {st['seconds']:8.1f} {st['cpu_seconds']:8.1f} "
                    f"{st['peak_mb']:8,.0f}  {target}"
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
