"""Stage ``split`` (reduce): train/eval by survey text date, candidates table, leakage audit.

A survey whose text date (:mod:`pipeline.rules.visible`: the date of the version whose
text the corpus holds) is before ``split.eval_from`` is in ``train``, on or after
it in ``eval``; a survey without any version date cannot be placed and is dropped
(counted). A survey first posted in 2021 and revised in 2023 is read as of 2023.
Its candidates are its positives (``labels``, tiers 1-4) and its hard negatives
(``negatives``, label 0); every candidate inherits its survey's split. A positive
whose work is dated on or after the survey's text date is an identifier or date
error: it is dropped and counted (``positives_dated_after_survey_dropped``).

Candidate columns filled here for positives and negatives alike: ``candidate_date``
(the work's ``known_date``) and the prior-only popularity counts of
:func:`pipeline.rules.visible.with_prior_counts`. Negatives get zero mention counts.

Leakage audit (stage counts, then ``eval_metadata.json``):

* ``surveys_in_both_splits``: must be 0 (a survey has one date), else the stage fails.
* ``candidates_dated_after_survey``: candidates of any label dated on or after their
  survey's text date; must be 0, else the stage fails.
* ``works_in_both_splits``: distinct works that are candidates in both splits,
  reported (a popular work is legitimately read by surveys of both periods).
* ``eval_surveys_as_train_candidates``: eval surveys that are candidates of a train
  survey, reported (non-zero only with inconsistent dates).
"""

from __future__ import annotations

from datetime import date
from typing import Any

import polars as pl

from pipeline.core import schema as S
from pipeline.core.errors import StageError
from pipeline.engine.context import ReduceContext
from pipeline.engine.stage import Stage
from pipeline.rules import visible as V
from pipeline.rules.tables import scan_extract

TRAIN, EVAL = S.SPLIT_NAMES


def eval_from(ctx: ReduceContext) -> date:
    """``split.eval_from`` as a date (an ISO date: config.validate checked it)."""
    return date.fromisoformat(ctx.cfg.split.eval_from)


def split_surveys(ctx: ReduceContext) -> pl.LazyFrame:
    """Every detected survey with a text date, its split and its positive / negative counts."""
    negative_surveys = ctx.read("negatives", "negative_surveys").select(
        S.SURVEY_ID, S.N_POSITIVES, S.N_NEGATIVES, S.HAS_NEGATIVES
    )
    return (
        V.surveys_frame(ctx.read("surveys", "surveys"))
        .filter(pl.col(S.SURVEY_DATE).is_not_null())
        .with_columns(
            pl.when(pl.col(S.SURVEY_DATE) < eval_from(ctx))
            .then(pl.lit(TRAIN))
            .otherwise(pl.lit(EVAL))
            .alias(S.SPLIT)
        )
        .join(negative_surveys, on=S.SURVEY_ID, how="left")
        .with_columns(
            pl.col(S.N_POSITIVES, S.N_NEGATIVES).fill_null(0),
            pl.col(S.HAS_NEGATIVES).fill_null(False),
        )
        .select(S.SPLIT_SURVEYS.names)
    )


def candidates(ctx: ReduceContext, surveys: pl.LazyFrame) -> tuple[pl.LazyFrame, pl.LazyFrame]:
    """Positives and negatives of every placed survey, with dates and prior-only counts; and the
    positives dropped because their work is dated on or after the survey's text date."""
    counts = [S.N_MENTIONS, *S.ROLE_COUNT_COLUMNS]
    known = ctx.read("works", "works").select(
        S.WORK_ID, pl.col(S.KNOWN_DATE).alias(S.CANDIDATE_DATE)
    )
    placed_surveys = surveys.select(
        S.SURVEY_ID, S.SPLIT, S.PRIMARY_CATEGORY, S.FIRST_VERSION_DATE, S.SURVEY_DATE
    )
    positives = (
        ctx.read("labels", "labels")
        .filter(pl.col(S.LABEL) >= 1)
        .select(S.SURVEY_ID, S.WORK_ID, S.LABEL, S.LABEL_REASON, *counts)
        .with_columns(pl.lit(None, pl.String).alias(S.NEGATIVE_SOURCE))
        .join(placed_surveys, on=S.SURVEY_ID, how="inner")
        .join(known, on=S.WORK_ID, how="left")
    )
    after = (pl.col(S.CANDIDATE_DATE) >= pl.col(S.SURVEY_DATE)).fill_null(False)
    negatives = (
        ctx.read("negatives", "negatives")
        .select(S.SURVEY_ID, S.WORK_ID, S.LABEL, S.NEGATIVE_SOURCE)
        .with_columns([pl.lit(0, pl.Int64).alias(c) for c in counts])
        .with_columns(pl.lit(S.HARD_NEGATIVE_REASON).alias(S.LABEL_REASON))
        .join(placed_surveys, on=S.SURVEY_ID, how="inner")
        .join(known, on=S.WORK_ID, how="left")
    )
    columns = [S.SURVEY_ID, S.WORK_ID, S.LABEL, S.LABEL_REASON, *counts, S.NEGATIVE_SOURCE, S.SPLIT,
               S.PRIMARY_CATEGORY, S.FIRST_VERSION_DATE, S.SURVEY_DATE, S.CANDIDATE_DATE]  # fmt: skip
    placed = pl.concat([positives.filter(~after).select(columns), negatives.select(columns)])
    cites = ctx.read("works", "cites")
    # the counts of the placed works only (prior_tables says why)
    prior = V.prior_tables(
        V.survey_citations(V.surveys_frame(ctx.read("surveys", "surveys")), cites),
        works=placed,
        corpus_citations=V.paper_citations(
            scan_extract(ctx.files_by_table("extract"), "papers"), cites, placed
        ),
    )
    kept = (
        V.with_prior_counts(placed, prior, pl.col(S.LABEL) >= 1)
        .select(S.CANDIDATES.names)
        .sort(S.SURVEY_ID, S.WORK_ID)
    )
    return kept, positives.filter(after).select(S.SURVEY_ID, S.WORK_ID, S.SPLIT)


def leakage_audit(cands: pl.DataFrame, survey_works: pl.DataFrame) -> dict[str, int]:
    """The audit counts described in the module docstring (no check here, just counts).

    Args:
        cands: the candidates table.
        survey_works: ``(paper_id, work_id)`` of the works that are corpus papers.
    """
    after = pl.col(S.CANDIDATE_DATE) >= pl.col(S.SURVEY_DATE)
    splits_per_survey = cands.group_by(S.SURVEY_ID).agg(pl.col(S.SPLIT).n_unique())
    splits_per_work = cands.group_by(S.WORK_ID).agg(pl.col(S.SPLIT).n_unique())
    train_candidates = cands.filter(pl.col(S.SPLIT) == TRAIN).select(S.WORK_ID).unique()
    eval_surveys = (
        cands.filter(pl.col(S.SPLIT) == EVAL).select(pl.col(S.SURVEY_ID).alias(S.PAPER_ID)).unique()
    )
    eval_work_ids = survey_works.join(eval_surveys, on=S.PAPER_ID, how="semi").select(S.WORK_ID)
    return {
        "surveys_in_both_splits": splits_per_survey.filter(pl.col(S.SPLIT) > 1).height,
        "candidates_dated_after_survey": cands.filter(after).height,
        "candidates_without_date": cands.filter(pl.col(S.CANDIDATE_DATE).is_null()).height,
        "works_in_both_splits": splits_per_work.filter(pl.col(S.SPLIT) > 1).height,
        "eval_surveys_as_train_candidates": train_candidates.join(
            eval_work_ids, on=S.WORK_ID, how="semi"
        ).height,
    }


def build_split(ctx: ReduceContext) -> dict[str, Any]:
    """Write ``candidates.parquet`` and ``split_surveys.parquet``; return counts and the audit.

    Raises:
        RuntimeError: the audit finds a survey in both splits or a negative dated after its survey.
    """
    surveys = split_surveys(ctx).sort(S.SURVEY_ID).collect(engine="streaming")
    kept, dropped = candidates(ctx, surveys.lazy())
    cands, dropped = pl.collect_all([kept, dropped], engine="streaming")
    survey_works = (
        ctx.read("works", "works")
        .filter(pl.col(S.PAPER_ID).is_not_null())
        .select(S.PAPER_ID, S.WORK_ID)
        .join(
            surveys.lazy().select(pl.col(S.SURVEY_ID).alias(S.PAPER_ID)), on=S.PAPER_ID, how="semi"
        )
        .collect(engine="streaming")
    )
    audit = leakage_audit(cands, survey_works)
    audit["positives_dated_after_survey_dropped"] = dropped.height
    if audit["surveys_in_both_splits"] or audit["candidates_dated_after_survey"]:
        raise StageError(f"split: leakage audit failed (must be 0): {audit}")
    ctx.write("candidates", cands)
    ctx.write("split_surveys", surveys)
    n_all = ctx.read("surveys", "surveys").select(pl.len()).collect().item()
    counts: dict[str, Any] = {
        "eval_from": eval_from(ctx).isoformat(),
        "surveys_without_date": n_all - surveys.height,
        "positives_dated_after_survey_dropped": dropped.height,
    }
    for name in S.SPLIT_NAMES:
        part = cands.filter(pl.col(S.SPLIT) == name)
        sv = surveys.filter(pl.col(S.SPLIT) == name)
        counts[name] = {
            "surveys": sv.height,
            "surveys_with_candidates": part[S.SURVEY_ID].n_unique(),
            "surveys_without_negatives": sv.filter(~pl.col(S.HAS_NEGATIVES)).height,
            "candidates": part.height,
            "positives": part.filter(pl.col(S.LABEL) > 0).height,
            "negatives": part.filter(pl.col(S.LABEL) == 0).height,
            "works": part[S.WORK_ID].n_unique(),
        }
    counts["leakage"] = audit
    return counts


STAGE = Stage(
    name="split",
    kind="reduce",
    reads=("extract", "works", "surveys", "labels", "negatives"),
    config_sections=("split", "extract"),
    fn=build_split,
    outputs=(("candidates", S.CANDIDATES), ("split_surveys", S.SPLIT_SURVEYS)),
    help="train/eval split by survey date; candidates table; leakage audit",
)
