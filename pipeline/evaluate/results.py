"""The evaluation's results as written to ``eval_results.json``."""

from __future__ import annotations

import math
from typing import Any

import msgspec
import numpy as np

FLOAT_DIGITS = 12


def clean(value: Any) -> Any:
    """JSON-ready copy: floats rounded to 12 digits, NaN/inf -> null, numpy scalars -> Python."""
    if isinstance(value, dict):
        return {str(k): clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        number = float(value)
        return None if not math.isfinite(number) else round(number, FLOAT_DIGITS) + 0.0
    return value


class Stat(msgspec.Struct, kw_only=True):
    """A system's mean of one metric over the surveys, with its 95% bootstrap interval."""

    mean: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    n: int = 0


class PairedTest(msgspec.Struct, kw_only=True):
    """A paired randomisation test of ``system`` against ``baseline`` (a test against a
    baseline) or ``other`` (two submitted systems), Holm-adjusted in its family."""

    system: str
    metric: str
    subset: str
    diff: float | None
    p_value: float | None
    ci_low: float | None
    ci_high: float | None
    n: int
    p_holm: float | None = None
    significant: bool = False
    baseline: str | None = None
    other: str | None = None


class Tier(msgspec.Struct, kw_only=True):
    """The eval set's candidates of one label."""

    name: str
    count: int
    in_domain: int
    share: float | None


class RunFacts(msgspec.Struct, kw_only=True):
    """What a submitted system gave: its file (None in memory), rows and what it missed."""

    file: dict[str, Any] | None
    format: str
    rows: int
    dropped_unknown_ids: int
    scored_judged: int
    missing_judged: int
    missing_surveys: int


Summary = dict[str, dict[str, Stat]]  # system -> metric -> its mean with an interval


class EvaluationResults(msgspec.Struct, kw_only=True):
    """``eval_results.json`` read by attribute (the report, the figures and the card read
    it so). Fields with a default are absent from results of older format versions; the
    ``aspects`` task's fields only from results of that task."""

    format_version: int
    eval_file: dict[str, Any]
    n_surveys: int
    n_candidates: int
    config: dict[str, Any]
    ci_method: str
    test_method: str
    metrics: dict[str, str]
    main_metrics: list[str]
    selection_metric: str
    baselines: list[str]
    upper_bounds: list[str]
    best_baseline: str | None
    submitted: list[str]
    runs: dict[str, RunFacts]
    subset_surveys: dict[str, int]
    systems: Summary
    subsets: dict[str, Summary]
    tests: list[PairedTest]
    tier_distribution: dict[str, Tier]
    ks: list[int] = []
    tie_breaking: Any = None
    alpha: float = 0.05
    metric_aliases: dict[str, Any] = {}
    saturated_metrics: list[str] = []
    longest_list: int | None = None
    mode: str = "rerank"
    kinds: dict[str, str] = {}
    same_as_baseline: dict[str, str] = {}
    learned_baselines: dict[str, Any] = {}
    models: dict[str, Any] = {}
    leak_probe: dict[str, Any] | None = None
    pairwise: list[PairedTest] = []
    task: str | None = None
    query_groups: list[str] = []
    whole_survey: dict[str, dict[str, Any]] = {}
    whole_survey_skipped: dict[str, str] = {}
    full_text: dict[str, Any] | None = None
    judged_coverage: dict[str, dict[str, float]] = {}
    judged_coverage_doc: str | None = None

    @property
    def cutoffs(self) -> list[int]:
        """The metric cutoffs (``ks``; the config's in results that predate it)."""
        return self.ks or list(self.config["ks"])

    @property
    def ranked_over(self) -> list[str]:
        """Every system of the results: the baselines, then the submitted ones."""
        return self.baselines + self.submitted

    def kind(self, system: str) -> str:
        return self.kinds.get(system, "submitted")


def as_results(results: dict[str, Any] | EvaluationResults) -> EvaluationResults:
    """The results typed: ``eval_results.json``'s content (as written or read back)."""
    if isinstance(results, EvaluationResults):
        return results
    return msgspec.convert(results, EvaluationResults)
