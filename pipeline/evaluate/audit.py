"""What the release stage takes from evaluation, from one place: the leak audit's
reading-free probe (here) and the field-popularity baseline the release ships
(:func:`write_field_baselines`, :mod:`pipeline.evaluate.systems.field_baselines`).

The reading-free probe: can a model that never reads rank as well as BM25?

``release`` trains LightGBM lambdarank (:mod:`pipeline.rank.model`, ``[train]`` config) on
the train split of the release it has just written, with the ``reading-free`` feature set
(:data:`pipeline.rank.features.READING_FREE_SET`: metadata and the ``format`` features,
which place a candidate within its survey's list by the shape, length, date and kind of its
text, reading no word), and scores the eval split with it and with BM25. A benchmark of
reading lists must reward reading: the probe is flagged when it beats BM25 on ``nDCG@10`` or
``hard_negative_auc`` (macro means over the eval surveys) beyond chance, and
``release.leak_audit = "error"`` then fails the build. Beyond chance: a paired sign-flip test
over the surveys (:func:`pipeline.evaluate.scoring.stats.paired_test`) gives p < ``PROBE_ALPHA``, as
the feature audit flags an AUC only outside its chance range; a lead within chance is listed
(``beats_within_chance``), never passed over. In a release of thousands of surveys a lead of
a hundredth is beyond chance; in a test release of 40 surveys a lead of 0.03 may not be. The evaluation reports the same
model as ``lgbm-reading-free``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from pipeline.core.config import TrainConfig
from pipeline.core.files import file_identity
from pipeline.core.release_files import READING_LISTS_FILE
from pipeline.evaluate.columns import CANDIDATE_ID, EVAL_FILENAME, SCORE, SURVEY_ID
from pipeline.evaluate.scoring.compute import per_survey_metrics
from pipeline.evaluate.scoring.stats import paired_test, rng_for
from pipeline.evaluate.systems.baselines import BM25
from pipeline.evaluate.systems.field_baselines import write_field_baselines
from pipeline.evaluate.systems.learned import (
    LEAK_METRICS,
    LGBM_READING_FREE,
    probe_verdict,
    train_available,
)
from pipeline.rank.features import READING_FREE_SET, compute_features
from pipeline.rank.model import score, train_ranker
from pipeline.rank.release import query_sizes, read_judgments, read_view, split_view_file
from pipeline.rules.audit_sample import sample_record, sample_surveys
from pipeline.rules.leak_audit import FULL_TEXT

__all__ = ["reading_free_probe", "write_field_baselines"]

PROBE = LGBM_READING_FREE
REFERENCE = BM25
PROBE_METRICS = LEAK_METRICS
# the paired test that tells a probe's lead from chance: resamples and seed, fixed so a
# release's verdict depends on its rows only
PROBE_RESAMPLES = 1000
PROBE_SEED = 7


def _per_survey(judged: pl.DataFrame, run: pl.DataFrame) -> pl.DataFrame:
    rows = judged.join(run.select(SURVEY_ID, CANDIDATE_ID, SCORE), on=[SURVEY_ID, CANDIDATE_ID],
                       how="left")  # fmt: skip
    return per_survey_metrics(rows, PROBE_METRICS).sort(SURVEY_ID)


def _means(per: pl.DataFrame) -> dict[str, float | None]:
    return {
        m: (round(float(per[m].mean()), 6) if per[m].drop_nulls().len() else None)
        for m in PROBE_METRICS
    }


def _p_values(probe: pl.DataFrame, reference: pl.DataFrame) -> dict[str, float | None]:
    """Two-sided p-value per metric of the paired sign-flip test of the probe against the
    reference over the same surveys (:func:`pipeline.evaluate.scoring.stats.paired_test`)."""
    both = probe.join(reference, on=SURVEY_ID, how="inner", suffix="_ref")
    matrix = lambda cols: both.select(cols).to_numpy().astype(np.float64)  # noqa: E731
    test = paired_test(
        matrix(list(PROBE_METRICS)),
        matrix([f"{m}_ref" for m in PROBE_METRICS]),
        PROBE_RESAMPLES,
        rng_for(PROBE_SEED, "reading-free probe"),
    )
    return {
        m: (None if np.isnan(p) else round(float(p), 6))
        for m, p in zip(PROBE_METRICS, test.p_value, strict=True)
    }


def _sampled(
    release: Path, split: str, max_rows: int | None
) -> tuple[pl.DataFrame, pl.DataFrame, dict[str, Any]]:
    """A split's view and judgments, of the surveys :mod:`pipeline.rules.audit_sample` picks
    (counted first, then read alone: the split is never held whole)."""
    per_survey = query_sizes(release, split)
    limit = max_rows if max_rows is not None else max(int(per_survey["len"].sum()), 1)
    chosen = sample_surveys(per_survey, limit)
    view, judged = read_view(release, split, chosen), read_judgments(release, split, chosen)
    return view, judged, sample_record(per_survey, chosen, limit)


def _availability(view: pl.DataFrame, with_text: pl.Series | None) -> pl.DataFrame | None:
    """The probe's :data:`FULL_TEXT` feature of each row of ``view`` (None: not audited)."""
    if with_text is None:
        return None
    flag = pl.col(CANDIDATE_ID).is_in(with_text.implode()).cast(pl.Float64)
    return view.select(SURVEY_ID, CANDIDATE_ID, flag.alias(FULL_TEXT))


def reading_free_probe(
    release: Path,
    config: TrainConfig,
    max_rows: int | None = None,
    full_text: dict[str, pl.Series] | None = None,
) -> dict[str, Any]:
    """Train the probe on ``release``'s train split; its and BM25's eval means, and the verdict.

    Args:
        release: a release folder (or its ``aspects`` folder).
        config: the ``[train]`` config of the model.
        max_rows: most rows of each split the probe reads (``release.audit_sample_rows``):
            above it, a sample of whole surveys (:mod:`pipeline.rules.audit_sample`); None
            reads every row.
        full_text: per split (``train``, ``eval``), the candidates with full text (the
            release's ``corpus_sections`` ids): the probe also learns from
            ``candidate_full_text`` (:data:`pipeline.rules.leak_audit.FULL_TEXT`), visible to
            any system that loads that config. None: the reading-free set alone.

    Returns:
        ``{"skipped": reason}`` when the release has no usable train split or no eval
        split; else the probe's features, the means per metric of both systems,
        ``beats`` per metric, ``flagged`` (the probe beats BM25 on either) and ``sample``
        (the rows each split read).
    """
    release = Path(release)
    reason = train_available(release / EVAL_FILENAME)
    if reason is None and not (release / EVAL_FILENAME).is_file():
        reason = "no eval split"
    if reason is not None:
        return {"skipped": reason}
    train_view, train_judged, train_sample = _sampled(release, "train", max_rows)
    inputs = {
        "candidates": file_identity(split_view_file(release, "train")),
        "judgments": file_identity(release / READING_LISTS_FILE.format(split="train")),
    }
    full_text = full_text or {}
    extra = _availability(train_view, full_text.get("train")) if full_text else None
    model = train_ranker(train_view, train_judged, READING_FREE_SET, config, inputs, extra)
    del train_view, train_judged
    view, judged, eval_sample = _sampled(release, "eval", max_rows)
    bm25 = compute_features(view, ["bm25"]).rename({"bm25": SCORE})
    extra = _availability(view, full_text.get("eval")) if full_text else None
    probe_per = _per_survey(judged, score(model, view, extra))
    reference_per = _per_survey(judged, bm25)
    probe, reference = _means(probe_per), _means(reference_per)
    verdict = probe_verdict(
        PROBE,
        REFERENCE,
        {m: (probe[m], reference[m]) for m in PROBE_METRICS},
        _p_values(probe_per, reference_per),
    )
    return {
        **verdict,
        "feature_set": READING_FREE_SET,
        "features": list(model.meta["features"]),
        "best_iteration": model.meta["best_iteration"],
        "sample": {"train": train_sample, "eval": eval_sample},
    }
