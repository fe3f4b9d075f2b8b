"""Evaluation stage: metrics, baselines and bootstrap statistics (the ``evaluate`` command
is :mod:`pipeline.cli.evaluate`, over :func:`pipeline.api.evaluate`).

Public API:

* :func:`write_evaluation` - evaluate baselines and runs on an eval set, write
  ``<out>/eval/{eval_results.json, per_survey.parquet, report.md}``;
  :func:`run_evaluation` - the same for an :class:`EvaluationRequest`, with in-memory
  scores and models (:class:`ModelSpec`: ``--encoder``, ``--scorer``,
  ``--sentence-transformer``), writing nothing unless asked. The one public ``evaluate`` is
  :func:`pipeline.api.evaluate`.
* :func:`metric_registry`, :func:`metric_aliases` - the metric definitions
  (:mod:`pipeline.evaluate.scoring.measures`); :func:`per_survey_metrics` - the ranking engine
  that computes them (:mod:`pipeline.evaluate.scoring.compute`).
* :class:`RunError`, :class:`RunWarning`, :func:`read_run`, :func:`load_run`,
  :func:`missing_surveys` - runs.
* :func:`tie_key` - the tie-breaking key (:mod:`pipeline.evaluate.scoring.ties`).

Ties: equal scores are ordered by :func:`tie_key` of (survey_id, candidate_id)
ascending, a fixed pseudo-random key (splitmix64 of XORed BLAKE2b-64 digests of
the two ids) that carries no information from the form of the ids, then by
candidate_id; in re-ranking mode judged candidates missing from a run rank below every
scored one, ordered among themselves the same way (retrieval mode:
:mod:`pipeline.evaluate.retrieval.mode`). trec_eval orders ties by docid descending and reads
scores as 32-bit floats, so agreement with it holds for runs without such ties.
"""

from pipeline.evaluate.evalset import EvalSetError, load_eval_set, resolve_eval_file
from pipeline.evaluate.evaluation import EvaluationRequest, run_evaluation, write_evaluation
from pipeline.evaluate.scoring.compute import per_survey_metrics
from pipeline.evaluate.scoring.measures import (
    MAIN_METRICS,
    Metric,
    UnknownMetricError,
    metric_aliases,
    metric_registry,
    resolve_metrics,
)
from pipeline.evaluate.scoring.ties import TIE_BREAKING, tie_key
from pipeline.evaluate.systems.models import ModelError, ModelSpec
from pipeline.evaluate.systems.runs import (
    Run,
    RunError,
    RunWarning,
    load_run,
    missing_surveys,
    read_run,
)

__all__ = [
    "MAIN_METRICS",
    "TIE_BREAKING",
    "EvalSetError",
    "EvaluationRequest",
    "Metric",
    "ModelError",
    "ModelSpec",
    "Run",
    "RunError",
    "RunWarning",
    "UnknownMetricError",
    "load_eval_set",
    "load_run",
    "metric_aliases",
    "metric_registry",
    "missing_surveys",
    "per_survey_metrics",
    "read_run",
    "resolve_eval_file",
    "resolve_metrics",
    "run_evaluation",
    "tie_key",
    "write_evaluation",
]
