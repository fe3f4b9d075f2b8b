"""Comparing systems: bootstrap summaries per subset, paired tests of every system against
every baseline and between submitted systems, Holm-adjusted within their families, the
best baseline, and systems that repeat a baseline."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Any

import numpy as np
import polars as pl

from pipeline.core.config import EvaluateConfig
from pipeline.evaluate.columns import SUBSET, SURVEY_ID, SYSTEM
from pipeline.evaluate.scoring.stats import bootstrap_means, holm, paired_test, rng_for
from pipeline.evaluate.scoring.subsets import SUBSET_ALL

ALPHA = 0.05  # significance level of the report's marks (Holm-adjusted p below it)
TEST_METHOD = (
    "Paired two-sided randomisation (sign-flip) test over surveys where both systems are "
    "defined, {n} resamples; diff = mean(system - baseline) with a 95% paired bootstrap "
    "interval. p_holm: Holm-Bonferroni adjusted over the family (a system's tests against "
    "every baseline, per metric; or every pair of submitted systems, per metric)."
)


def system_matrix(
    per_survey: pl.DataFrame, system: str, subset: str, surveys: pl.Series, metrics: list[str]
) -> np.ndarray:
    """surveys x metrics values of one system on one subset (NaN = excluded or no candidates)."""
    rows = per_survey.filter((pl.col(SYSTEM) == system) & (pl.col(SUBSET) == subset))
    return (
        surveys.to_frame(SURVEY_ID)
        .join(rows, on=SURVEY_ID, how="left", maintain_order="left")
        .select([pl.col(m).cast(pl.Float64) for m in metrics])
        .to_numpy()
        .reshape(surveys.len(), len(metrics))
    )


def summaries(
    per_survey: pl.DataFrame,
    systems: list[str],
    metrics: list[str],
    subsets: dict[str, tuple[str, pl.Series]],
    config: EvaluateConfig,
) -> dict[str, dict[str, dict[str, dict[str, Any]]]]:
    """subset -> system -> metric -> {mean, ci_low, ci_high, n}."""
    out: dict[str, dict[str, dict[str, dict[str, Any]]]] = {}
    for subset, (source, surveys) in subsets.items():
        values = np.hstack(
            [system_matrix(per_survey, s, source, surveys, metrics) for s in systems]
        )
        summary = bootstrap_means(
            values, config.bootstrap_samples, rng_for(config.seed, "bootstrap", subset)
        )
        out[subset] = {
            system: {
                metric: {
                    "mean": summary.mean[i * len(metrics) + j],
                    "ci_low": summary.ci_low[i * len(metrics) + j],
                    "ci_high": summary.ci_high[i * len(metrics) + j],
                    "n": int(summary.n[i * len(metrics) + j]),
                }
                for j, metric in enumerate(metrics)
            }
            for i, system in enumerate(systems)
        }
    return out


def best_baseline(
    overall: dict[str, dict[str, dict[str, Any]]],
    selection: str,
    baselines: Sequence[str],
    upper_bounds: Collection[str],
) -> str | None:
    """The non-upper-bound baseline with the highest mean ``selection`` metric on ALL."""
    scored = [(b, overall[b][selection]["mean"]) for b in baselines if b not in upper_bounds]
    scored = [(b, m) for b, m in scored if m is not None and np.isfinite(m)]
    # max() keeps the first of equal means, i.e. the baselines' order decides ties.
    return max(scored, key=lambda bm: bm[1])[0] if scored else None


def _test_entries(
    result: Any, system: str, other: str, metrics: list[str], key: str
) -> list[dict[str, Any]]:
    return [
        {
            "system": system,
            key: other,
            "metric": metric,
            "subset": SUBSET_ALL,
            "diff": result.diff[j],
            "p_value": result.p_value[j],
            "ci_low": result.ci_low[j],
            "ci_high": result.ci_high[j],
            "n": int(result.n[j]),
        }
        for j, metric in enumerate(metrics)
    ]


def _with_holm(tests: list[dict[str, Any]], family: Callable[[dict[str, Any]], Any]) -> None:
    """Add ``p_holm`` and ``significant`` to every test, Holm-adjusted within its family."""
    groups: dict[Any, list[dict[str, Any]]] = {}
    for test in tests:
        groups.setdefault(family(test), []).append(test)
    for members in groups.values():
        raw = np.array([np.nan if t["p_value"] is None else t["p_value"] for t in members])
        for test, adjusted in zip(members, holm(raw), strict=True):
            test["p_holm"] = adjusted
            test["significant"] = bool(np.isfinite(adjusted) and adjusted < ALPHA)


def baseline_tests(
    per_survey: pl.DataFrame,
    systems: list[str],
    baselines: list[str],
    metrics: list[str],
    surveys: pl.Series,
    config: EvaluateConfig,
    upper_bounds: Collection[str],
) -> list[dict[str, Any]]:
    """Every system (upper bounds aside) against every other baseline, per metric, on ALL;
    Holm-adjusted per (system, metric) over the baselines."""
    compared = [b for b in baselines if b not in upper_bounds]
    matrices = {s: system_matrix(per_survey, s, SUBSET_ALL, surveys, metrics) for s in systems}
    tests: list[dict[str, Any]] = []
    for system in systems:
        if system in upper_bounds:
            continue
        for baseline in compared:
            if baseline == system:
                continue
            # Every system meets the same sign flips and resamples against a baseline (the
            # generator is keyed by the baseline only), so equal systems get equal results
            # whatever else is evaluated.
            result = paired_test(
                matrices[system],
                matrices[baseline],
                config.bootstrap_samples,
                rng_for(config.seed, "paired", baseline),
            )
            tests += _test_entries(result, system, baseline, metrics, "baseline")
    _with_holm(tests, lambda t: (t["system"], t["metric"]))
    return tests


def pairwise_tests(
    per_survey: pl.DataFrame,
    submitted: list[str],
    metrics: list[str],
    surveys: pl.Series,
    config: EvaluateConfig,
) -> list[dict[str, Any]]:
    """Every two submitted systems (in submission order), per metric, on ALL; Holm-adjusted
    per metric over the pairs."""
    tests: list[dict[str, Any]] = []
    for i, system in enumerate(submitted):
        for other in submitted[i + 1 :]:
            result = paired_test(
                system_matrix(per_survey, system, SUBSET_ALL, surveys, metrics),
                system_matrix(per_survey, other, SUBSET_ALL, surveys, metrics),
                config.bootstrap_samples,
                rng_for(config.seed, "pairwise", system, other),
            )
            tests += _test_entries(result, system, other, metrics, "other")
    _with_holm(tests, lambda t: t["metric"])
    return tests


def same_as_baseline(
    per_survey: pl.DataFrame, submitted: list[str], baselines: list[str], metrics: list[str]
) -> dict[str, str]:
    """Submitted systems whose every per-survey value equals a baseline's (the same system
    evaluated twice, e.g. a ``--model-file`` of the ``lgbm`` baseline's own model)."""
    rows = per_survey.filter(pl.col(SUBSET) == SUBSET_ALL).sort(SYSTEM, SURVEY_ID)

    def values(system: str) -> list[tuple]:
        return rows.filter(pl.col(SYSTEM) == system).select(SURVEY_ID, *metrics).rows()

    known = {b: values(b) for b in baselines}
    same: dict[str, str] = {}
    for system in submitted:
        mine = values(system)
        match = next((b for b, theirs in known.items() if theirs == mine), None)
        if match is not None:
            same[system] = match
    return same
