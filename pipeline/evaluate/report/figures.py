"""Figures of an evaluation: PNG files next to ``report.md``, which links them.

Drawn from what ``eval_results.json`` and ``per_survey.parquet`` hold, nothing else,
the way :mod:`pipeline.evaluate.report.plots` draws every figure (Agg backend, pinned look, PNGs without
metadata), so the same results give the same bytes. The report's tables carry every number; a figure only shows them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl

from pipeline.evaluate.columns import SUBSET, SURVEY_ID, SYSTEM
from pipeline.evaluate.report.plots import pyplot, save_png
from pipeline.evaluate.results import EvaluationResults, as_results
from pipeline.evaluate.scoring.measures import (
    TIER3_LABEL,
    TIERS,
    recall_rel3_name,
    recall_tier_name,
)

FIGURES_DIR = "figures"  # beside report.md
# (panel title, metric name at cutoff K)
RECALL_PANELS = [(f"tier={t}", lambda k, t=t: recall_tier_name(k, t)) for t in TIERS] + [
    (f"tier>={TIER3_LABEL}", recall_rel3_name)
]
# file name -> what the report says under the image link (its alt text)
CAPTIONS = {
    "main_metrics.png": "Main metrics per system, mean over surveys with its 95% interval",
    "paired_difference.png": "Per-survey difference against the best baseline",
    "recall_by_tier.png": "Recall@K per tier",
    "in_out.png": "IN and OUT candidates per system",
    "tier_distribution.png": "Tier distribution of the eval set",
}


def _main_metrics(results: EvaluationResults, plt: Any) -> Any:
    systems, main = results.ranked_over, results.main_metrics
    overall = results.subsets["ALL"]
    cols = min(4, len(main))
    rows = -(-len(main) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 0.35 * len(systems) * rows + 1.2))
    axes = list(getattr(axes, "flat", [axes]))
    for ax, metric in zip(axes, main, strict=False):
        means, low, high = [], [], []
        for s in systems:
            stat = overall[s][metric]
            m = stat.mean
            means.append(0.0 if m is None else m)
            low.append(0.0 if m is None or stat.ci_low is None else m - stat.ci_low)
            high.append(0.0 if m is None or stat.ci_high is None else stat.ci_high - m)
        y = range(len(systems))
        ax.barh(y, means, xerr=[low, high], color="#4c72b0", ecolor="#333333", capsize=2)
        ax.set_yticks(list(y), systems if ax in axes[::cols] else [""] * len(systems))
        ax.invert_yaxis()
        ax.set_title(metric)
        ax.set_xlim(0, 1)
    for ax in axes[len(main) :]:
        ax.set_visible(False)
    return fig


def _paired_difference(results: EvaluationResults, per_survey: pl.DataFrame, plt: Any) -> Any:
    """None without a best baseline (nothing to compare against)."""
    best, metric = results.best_baseline, results.selection_metric
    if best is None:
        return None
    others = results.submitted or [
        s for s in results.baselines if s != best and s not in results.upper_bounds
    ]
    frame = per_survey.filter(pl.col(SUBSET) == "ALL").select(SYSTEM, SURVEY_ID, metric)
    base = frame.filter(pl.col(SYSTEM) == best).select(SURVEY_ID, pl.col(metric).alias("_best"))
    fig, axes = plt.subplots(
        len(others) or 1, 1, figsize=(7, 1.6 * max(1, len(others)) + 0.6), squeeze=False
    )
    for ax, system in zip(axes[:, 0], others, strict=False):
        diff = (
            frame.filter(pl.col(SYSTEM) == system)
            .join(base, on=SURVEY_ID, how="inner")
            .select((pl.col(metric) - pl.col("_best")).alias("d"), SURVEY_ID)
            .drop_nulls("d")
            .sort("d", SURVEY_ID)
        )["d"].to_list()
        colors = ["#55a868" if d > 0 else "#c44e52" for d in diff]
        ax.bar(range(len(diff)), diff, color=colors, width=1.0)
        ax.axhline(0, color="#333333", linewidth=0.8)
        ax.set_xticks([])
        ax.set_ylabel("difference")
        wins = sum(d > 0 for d in diff)
        ax.set_title(
            f"{system} - {best} ({metric}), surveys sorted: {wins} of {len(diff)} better",
            loc="left",
        )
    if not others:
        axes[0, 0].set_visible(False)
    return fig


def _recall_by_tier(results: EvaluationResults, plt: Any) -> Any:
    ks, overall = results.cutoffs, results.subsets["ALL"]
    n = len(RECALL_PANELS)
    fig, axes = plt.subplots(1, n, figsize=(3.0 * n, 2.8), sharey=True)
    for ax, (title, name) in zip(axes, RECALL_PANELS, strict=True):
        for s in results.ranked_over:
            stats = [overall[s].get(name(k)) for k in ks]
            values = [None if stat is None else stat.mean for stat in stats]
            ax.plot(ks, [float("nan") if v is None else v for v in values], marker="o", label=s)
        ax.set_xscale("log")
        ax.set_xticks(ks, [str(k) for k in ks])
        ax.minorticks_off()
        ax.set_title(title)
        ax.set_xlabel("K")
        ax.set_ylim(0, 1)
    axes[0].set_ylabel("recall at K")
    axes[-1].legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=7)
    return fig


def _in_out(results: EvaluationResults, plt: Any) -> Any:
    systems, metric = results.ranked_over, results.selection_metric
    fig, ax = plt.subplots(figsize=(max(4.0, 0.9 * len(systems) + 1), 3.0))
    width = 0.4
    for offset, subset, color in ((-width / 2, "IN", "#4c72b0"), (width / 2, "OUT", "#dd8452")):
        stats = [results.subsets[subset][s][metric] for s in systems]
        means = [0.0 if st.mean is None else st.mean for st in stats]
        err = [
            [0.0 if st.mean is None else st.mean - st.ci_low for st in stats],
            [0.0 if st.mean is None else st.ci_high - st.mean for st in stats],
        ]
        x = [i + offset for i in range(len(systems))]
        ax.bar(x, means, width, yerr=err, label=subset, color=color, ecolor="#333333", capsize=2)
    ax.set_xticks(range(len(systems)), systems, rotation=20, ha="right")
    ax.set_ylabel(metric)
    ax.set_ylim(0, 1)
    ax.legend()
    return fig


def _tier_distribution(results: EvaluationResults, plt: Any) -> Any:
    tiers = sorted(results.tier_distribution.items(), key=lambda kv: int(kv[0]))
    names = [f"{label}: {t.name}" for label, t in tiers]
    inside = [t.in_domain for _, t in tiers]
    outside = [t.count - t.in_domain for _, t in tiers]
    fig, ax = plt.subplots(figsize=(5.5, 2.6))
    ax.barh(names, inside, color="#4c72b0", label="in-domain")
    ax.barh(names, outside, left=inside, color="#dd8452", label="other")
    ax.invert_yaxis()
    ax.set_xlabel("judged candidates")
    ax.legend(loc="lower right")
    return fig


def write_figures(
    results: dict[str, Any] | EvaluationResults, per_survey: pl.DataFrame, eval_dir: Path
) -> list[str]:
    """Write the figures into ``<eval_dir>/figures/``; return their paths relative to
    ``eval_dir`` (as ``report.md`` links them), in :data:`CAPTIONS` order. A figure with
    nothing to show (no best baseline to compare against) is left out."""
    results = as_results(results)
    written = []
    with pyplot() as plt:
        draw: dict[str, Callable[[], Any]] = {
            "main_metrics.png": lambda: _main_metrics(results, plt),
            "paired_difference.png": lambda: _paired_difference(results, per_survey, plt),
            "recall_by_tier.png": lambda: _recall_by_tier(results, plt),
            "in_out.png": lambda: _in_out(results, plt),
            "tier_distribution.png": lambda: _tier_distribution(results, plt),
        }
        for name in CAPTIONS:
            fig = draw[name]()
            if fig is None:
                continue
            save_png(fig, eval_dir / FIGURES_DIR / name, plt)
            written.append(f"{FIGURES_DIR}/{name}")
    return written
