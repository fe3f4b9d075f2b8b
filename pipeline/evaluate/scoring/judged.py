"""Judged coverage in retrieval mode: how much of a system's top K has a judgment.

A retrieval run ranks the whole corpus, and a document without a judgment for the survey
counts as not relevant (:mod:`pipeline.evaluate.retrieval.mode`). A score resting on many
unjudged documents may be low only because nobody judged what the system found, so TREC
reports print, beside each score, the share of the top K that is judged. Here, as
ir_measures' ``Judged@k`` computes it (tested against it):

``Judged@k`` of a survey = (judged documents among the run's first k, in the ranking of the
evaluation: score descending, the tie rule of :mod:`pipeline.evaluate.scoring.ties`) / (the
number of documents among those first k), a judged document being a listed candidate or a
hard negative of that survey. A run that retrieved fewer than k documents for a survey is
judged on what it retrieved (5 documents, all judged: 1.0), and a survey it has no row for
is 0. A system's value is the mean over the eval surveys, at :data:`JUDGED_KS` (10, 100).
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from pipeline.evaluate.columns import CANDIDATE_ID, LABEL, SCORE, SURVEY_ID
from pipeline.evaluate.scoring.measures import UNJUDGED_LABEL
from pipeline.evaluate.scoring.ties import TIE_KEY, with_tie_keys

JUDGED_KS = (10, 100)
JUDGED_DOC = (
    "Judged@k = the share of a system's first k documents (score order, the tie rule; fewer "
    "when it retrieved fewer) that the survey's judgments cover (a listed candidate or a hard "
    "negative), 0 for a survey without rows; the mean over the eval surveys (ir_measures' "
    "Judged@k). The rest of the top k counts as not relevant: a low score with a low "
    "Judged@k may be unjudged finds, not misses."
)


def judged_name(k: int) -> str:
    """``Judged@k``, as ir_measures writes it."""
    return f"Judged@{k}"


def judged_per_survey(frame: pl.DataFrame, ks: Sequence[int] = JUDGED_KS) -> pl.DataFrame:
    """``Judged@k`` per survey of a retrieval frame.

    Args:
        frame: :func:`pipeline.evaluate.retrieval.mode.retrieval_frame`'s rows: every judged
            candidate (``score`` null when not retrieved) and every retrieved unjudged
            document (``label`` :data:`UNJUDGED_LABEL`).
        ks: the cutoffs.

    Returns:
        ``survey_id`` then one Float64 column per cutoff, one row per survey of ``frame``,
        sorted by ``survey_id``.
    """
    surveys = frame.select(SURVEY_ID).unique().sort(SURVEY_ID)
    retrieved, _ = with_tie_keys(
        frame.filter(pl.col(SCORE).is_not_null()).select(
            SURVEY_ID, CANDIDATE_ID, LABEL, pl.col(SCORE).cast(pl.Float64)
        )
    )
    ranked = retrieved.sort(
        [SURVEY_ID, SCORE, TIE_KEY, CANDIDATE_ID], descending=[False, True, False, False]
    ).with_columns(pl.int_range(1, pl.len() + 1).over(SURVEY_ID).alias("_rank"))
    judged = pl.col(LABEL) != UNJUDGED_LABEL
    counts = ranked.group_by(SURVEY_ID).agg(
        (
            (judged & (pl.col("_rank") <= k)).sum().cast(pl.Float64) / (pl.col("_rank") <= k).sum()
        ).alias(judged_name(k))
        for k in ks
    )
    return surveys.join(counts, on=SURVEY_ID, how="left", maintain_order="left").select(
        SURVEY_ID, *[pl.col(judged_name(k)).fill_null(0.0) for k in ks]
    )


def judged_means(frame: pl.DataFrame, ks: Sequence[int] = JUDGED_KS) -> dict[str, float]:
    """``{"Judged@10": mean, "Judged@100": mean}`` of a retrieval frame over its surveys."""
    per_survey = judged_per_survey(frame, ks)
    return {judged_name(k): float(per_survey[judged_name(k)].mean() or 0.0) for k in ks}
