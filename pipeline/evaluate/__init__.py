"""Evaluation stage: metrics, baselines and bootstrap statistics (the ``evaluate`` command
is :mod:`pipeline.evaluate.command`, over :func:`pipeline.api.evaluate`).

Public API:

* :func:`evaluate` - evaluate baselines and runs on an eval set, write
  ``<out>/eval/{eval_results.json, per_survey.parquet, report.md}``.
* :func:`metric_registry`, :func:`metric_aliases` - the metric definitions
  (:mod:`pipeline.evaluate.measures`); :func:`per_survey_metrics` - the ranking engine
  that computes them (:mod:`pipeline.evaluate.metrics`).
* :class:`RunError`, :class:`RunWarning`, :func:`read_run`, :func:`load_run`,
  :func:`missing_surveys` - runs.
* :func:`tie_key` - the tie-breaking key (:mod:`pipeline.evaluate.ties`).

Ties: equal scores are ordered by :func:`tie_key` of (survey_id, candidate_id)
ascending, a fixed pseudo-random key (splitmix64 of XORed BLAKE2b-64 digests of
the two ids) that carries no information from the form of the ids, then by
candidate_id; judged candidates missing from a run rank below every scored one,
ordered among themselves the same way. trec_eval orders ties by docid
descending, so agreement with pytrec_eval holds for runs without ties.
"""

from pipeline.evaluate.evalset import EvalSetError, load_eval_set, resolve_eval_file
from pipeline.evaluate.evaluation import evaluate
from pipeline.evaluate.measures import (
    MAIN_METRICS,
    Metric,
    UnknownMetricError,
    metric_aliases,
    metric_registry,
    resolve_metrics,
)
from pipeline.evaluate.metrics import per_survey_metrics
from pipeline.evaluate.runs import Run, RunError, RunWarning, load_run, missing_surveys, read_run
from pipeline.evaluate.ties import TIE_BREAKING, tie_key

__all__ = [
    "MAIN_METRICS",
    "TIE_BREAKING",
    "EvalSetError",
    "Metric",
    "Run",
    "RunError",
    "RunWarning",
    "UnknownMetricError",
    "evaluate",
    "load_eval_set",
    "load_run",
    "metric_aliases",
    "metric_registry",
    "missing_surveys",
    "per_survey_metrics",
    "read_run",
    "resolve_eval_file",
    "resolve_metrics",
    "tie_key",
]
