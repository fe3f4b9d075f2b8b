"""Learned systems of the evaluation: the ``lgbm`` baselines and ``--model-file`` models.

* ``lgbm``: LightGBM lambdarank on every feature of :mod:`pipeline.rank.features`,
  trained on the release's own train split (``[train]`` config), when the eval file
  sits in a release folder with a train split of at least two surveys.
* ``lgbm-reading-free``: metadata plus the ``format`` features (a candidate's shape,
  length, date and text kind against its survey's other candidates): the probe of the
  release's relative audit, which the release itself trains and checks.
* ``lgbm-metadata``: the same without any text feature. It is the **leak probe**:
  the hard negatives are matched to the positives on everything visible without
  reading, so a model that never reads should not beat BM25. :func:`leak_probe`
  flags it when it beats ``bm25`` on nDCG@10 or hard_negative_auc.
* ``--model-file FILE.txt``: any model written by ``python -m pipeline train``
  (its JSON names the feature set, checked), scored on the eval candidates view;
  system name = file stem.

Every learned system reads the eval set's candidates-view columns only.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl

from pipeline.core.config import TrainConfig
from pipeline.core.files import file_identity
from pipeline.core.release_files import CANDIDATES_FILE, READING_LISTS_FILE
from pipeline.core.schema import CANDIDATES_VIEW
from pipeline.evaluate.columns import CANDIDATE_ID, SCORE, SURVEY_ID
from pipeline.evaluate.scoring.measures import HARD_NEGATIVE_AUC, ndcg_name
from pipeline.evaluate.systems.baselines import BM25
from pipeline.rank.features import candidates_view
from pipeline.rank.model import load_model, meta_path, score
from pipeline.rank.release import train_from_release
from pipeline.rules.aspect_queries import as_queries, present_query_columns

LGBM = "lgbm"
LGBM_METADATA = "lgbm-metadata"
LGBM_READING_FREE = "lgbm-reading-free"
# name -> feature set
LEARNED_BASELINES = {LGBM: "full", LGBM_METADATA: "metadata", LGBM_READING_FREE: "reading-free"}
LEAK_PROBE = LGBM_METADATA
LEAK_REFERENCE = BM25
LEAK_METRICS = (ndcg_name(10), HARD_NEGATIVE_AUC)


def eval_view(eval_path: Path) -> pl.DataFrame:
    """The candidates-view columns of the eval file, in canonical order."""
    schema = pl.read_parquet_schema(eval_path)
    present = [c for c in CANDIDATES_VIEW.names if c in schema]
    frame = pl.read_parquet(eval_path, columns=[*present, *present_query_columns(schema)])
    return candidates_view(as_queries(frame), where=str(eval_path))


def _aligned(eval_set: pl.DataFrame, scores: pl.DataFrame, name: str) -> pl.Series:
    return (
        eval_set.select(SURVEY_ID, CANDIDATE_ID)
        .join(scores, on=[SURVEY_ID, CANDIDATE_ID], how="left", maintain_order="left")[SCORE]
        .rename(name)
    )


def train_available(eval_path: Path) -> str | None:
    """Why the learned baselines cannot be trained next to this eval file (None when they can)."""
    release = eval_path.parent
    for name in (CANDIDATES_FILE, READING_LISTS_FILE):
        path = release / name.format(split="train")
        if not path.is_file():
            return f"no train split next to the eval file ({path.name} missing)"
    surveys = pl.scan_parquet(release / CANDIDATES_FILE.format(split="train")).select(
        pl.col(SURVEY_ID).n_unique()
    )
    if surveys.collect().item() < 2:
        return "the train split has fewer than 2 surveys"
    return None


def learned_baseline_scores(
    eval_set: pl.DataFrame, eval_path: Path, config: TrainConfig
) -> tuple[dict[str, pl.Series], dict[str, Any]]:
    """Scores of ``lgbm`` and ``lgbm-metadata`` on the eval set, and what was trained.

    Returns:
        (name -> scores aligned with ``eval_set``, name -> model facts); both empty
        with a ``skipped`` reason when the release has no usable train split.
    """
    reason = train_available(eval_path)
    if reason is not None:
        return {}, {"skipped": reason}
    view = eval_view(eval_path)
    scores: dict[str, pl.Series] = {}
    facts: dict[str, Any] = {}
    for name, set_name in LEARNED_BASELINES.items():
        model = train_from_release(eval_path.parent, set_name, config)
        scores[name] = _aligned(eval_set, score(model, view), name)
        facts[name] = {
            "feature_set": set_name,
            "features": model.meta["features"],
            "best_iteration": model.meta["best_iteration"],
            "validation": {k: model.meta["validation"][k] for k in ("metric", "value")},
            "validation_surveys": len(model.meta["validation"]["surveys"]),
            "train_surveys": model.meta["train_surveys"],
        }
    return scores, facts


def model_file_scores(
    eval_set: pl.DataFrame, eval_path: Path, model_file: Path
) -> tuple[str, pl.Series, dict[str, Any]]:
    """(system name, scores aligned with ``eval_set``, facts) of a ``--model-file``.

    Raises:
        ModelError: the model or its JSON is missing, unreadable or of another feature set.
    """
    model = load_model(model_file)
    name = Path(model_file).stem
    facts = {
        "file": file_identity(Path(model_file)),
        "json": file_identity(meta_path(Path(model_file))),
        "feature_set": model.meta.get("feature_set"),
        "feature_set_version": model.meta["feature_set_version"],
        "features": model.meta["features"],
    }
    return name, _aligned(eval_set, score(model, eval_view(eval_path)), name), facts


def leak_probe(
    overall: dict[str, dict[str, dict[str, Any]]], tests: Sequence[dict[str, Any]] = ()
) -> dict[str, Any] | None:
    """Whether ``lgbm-metadata`` beats ``bm25`` on nDCG@10 or hard_negative_auc (ALL subset).

    ``tests``: the evaluation's paired tests of each system against each baseline (entries
    with ``system``, ``baseline``, ``metric``, ``p_value``). A lead counts only when the
    test of ``lgbm-metadata`` against ``bm25`` puts it beyond chance (:data:`PROBE_ALPHA`, the
    rule of the release's own probe); a metric without a test flags any lead.

    Returns:
        None when either system was not evaluated; else the means, differences and
        ``flagged`` (True = a model that never reads beats reading: a leak).
    """
    if LEAK_PROBE not in overall or LEAK_REFERENCE not in overall:
        return None
    means = {
        metric: (
            overall[LEAK_PROBE].get(metric, {}).get("mean"),
            overall[LEAK_REFERENCE].get(metric, {}).get("mean"),
        )
        for metric in LEAK_METRICS
    }
    p_values = {
        t["metric"]: (None if t["p_value"] is None or math.isnan(t["p_value"]) else t["p_value"])
        for t in tests
        if t.get("system") == LEAK_PROBE
        and t.get("baseline") == LEAK_REFERENCE
        and t.get("metric") in LEAK_METRICS
    }
    return probe_verdict(LEAK_PROBE, LEAK_REFERENCE, means, p_values or None)


# a probe's lead over the reading system counts when a paired test puts it beyond chance
PROBE_ALPHA = 0.05


def probe_verdict(
    probe: str,
    reference: str,
    means: dict[str, tuple[float | None, float | None]],
    p_values: dict[str, float | None] | None = None,
) -> dict[str, Any]:
    """A reading-free probe against a system that reads: per metric both means and whether
    the probe beats it; ``flagged`` when it does on any (a leak). With ``p_values`` (a paired
    test's, per metric), a lead counts only below :data:`PROBE_ALPHA`; one within chance is
    ``beats_within_chance``."""
    rows = {}
    for metric, (p, r) in means.items():
        lead = p is not None and r is not None and p > r
        p_value = (p_values or {}).get(metric)
        chance = lead and p_value is not None and p_value >= PROBE_ALPHA
        rows[metric] = {probe: p, reference: r, "beats": lead and not chance}
        if p_values is not None:
            rows[metric] |= {"p_value": p_value, "beats_within_chance": chance}
    return {
        "probe": probe,
        "reference": reference,
        "metrics": rows,
        "flagged": any(row["beats"] for row in rows.values()),
    }
