"""The release's reading-free probe: can a model that never reads rank as well as BM25?

``release`` trains LightGBM lambdarank (:mod:`pipeline.rank.model`, ``[train]`` config) on
the train split of the release it has just written, with the ``reading-free`` feature set
(:data:`pipeline.rank.features.READING_FREE_SET`: metadata, prior citations and the
``format`` features, which place a candidate within its survey's list by the shape, length,
date and kind of its text, reading no word), and scores the eval split with it and with
BM25. A benchmark of reading lists must reward reading: the probe is flagged when it beats
BM25 on ``nDCG@10`` or ``hard_negative_auc`` (macro means over the eval surveys), and
``release.leak_audit = "error"`` then fails the build. The evaluation reports the same
model as ``lgbm-reading-free``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from pipeline.core.config import TrainConfig
from pipeline.evaluate.baselines import BM25
from pipeline.evaluate.columns import CANDIDATE_ID, EVAL_FILENAME, SCORE, SURVEY_ID
from pipeline.evaluate.learned import (
    LEAK_METRICS,
    LGBM_READING_FREE,
    probe_verdict,
    train_available,
)
from pipeline.evaluate.metrics import per_survey_metrics
from pipeline.rank.features import READING_FREE_SET, compute_features
from pipeline.rank.model import score
from pipeline.rank.release import read_judgments, read_view, train_from_release

PROBE = LGBM_READING_FREE
REFERENCE = BM25
PROBE_METRICS = LEAK_METRICS


def _means(judged: pl.DataFrame, run: pl.DataFrame) -> dict[str, float | None]:
    rows = judged.join(run.select(SURVEY_ID, CANDIDATE_ID, SCORE), on=[SURVEY_ID, CANDIDATE_ID],
                       how="left")  # fmt: skip
    per = per_survey_metrics(rows, PROBE_METRICS)
    return {
        m: (round(float(per[m].mean()), 6) if per[m].drop_nulls().len() else None)
        for m in PROBE_METRICS
    }


def reading_free_probe(release: Path, config: TrainConfig) -> dict[str, Any]:
    """Train the probe on ``release``'s train split; its and BM25's eval means, and the verdict.

    Returns:
        ``{"skipped": reason}`` when the release has no usable train split or no eval
        split; else the probe's features, the means per metric of both systems,
        ``beats`` per metric and ``flagged`` (the probe beats BM25 on either).
    """
    release = Path(release)
    reason = train_available(release / EVAL_FILENAME)
    if reason is None and not (release / EVAL_FILENAME).is_file():
        reason = "no eval split"
    if reason is not None:
        return {"skipped": reason}
    view = read_view(release, "eval")
    judged = read_judgments(release, "eval")
    model = train_from_release(release, READING_FREE_SET, config)
    bm25 = compute_features(view, ["bm25"]).rename({"bm25": SCORE})
    probe, reference = _means(judged, score(model, view)), _means(judged, bm25)
    verdict = probe_verdict(PROBE, REFERENCE, {m: (probe[m], reference[m]) for m in PROBE_METRICS})
    return {
        **verdict,
        "feature_set": READING_FREE_SET,
        "features": list(model.meta["features"]),
        "best_iteration": model.meta["best_iteration"],
    }
