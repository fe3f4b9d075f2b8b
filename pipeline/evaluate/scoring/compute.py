"""The ranking engine: vectorised per-survey metric computation.

What each metric measures is declared in :mod:`pipeline.evaluate.scoring.measures` (names,
aliases, formulas, the registry); ties are broken by :mod:`pipeline.evaluate.scoring.ties`.
This module ranks each survey's candidates by that rule and computes the per-survey
aggregates the metric expressions read.

Two rankings (``ranked``): ``all`` (re-ranking mode) ranks every judged candidate,
the ones a run did not score after all scored ones; ``scored`` (retrieval mode) ranks
only what the run scored (retrieved), as trec_eval does: a judged candidate the run
did not retrieve has no rank, so it adds nothing to DCG, hits, AP's sum or RR, and
counts only in the survey's label counts (R of recall, AP and Rprec, the ideal DCG
of nDCG) and, at the lowest score, in ``hard_negative_auc``.

Computation is one Polars query per call: group by survey, sort each group by the
tie rule, explode back to one row per (survey, rank), derive rank-level columns
with window-free cumulative sums, then one ``group_by(survey).agg`` of filtered
sums from which each metric is a column expression. No Python loop over surveys.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import polars as pl

from pipeline.core.errors import UsageError
from pipeline.evaluate.columns import CANDIDATE_ID, LABEL, SCORE, SURVEY_ID
from pipeline.evaluate.scoring.measures import (
    ESSENTIAL_LABEL,
    FIXED_CUTOFF,
    NEGATIVE_LABEL,
    RELEVANT_LABEL,
    TIER3_LABEL,
    TIERS,
    default_ks,
    n_label_eq,
    n_label_ge,
    resolve_metrics,
)
from pipeline.evaluate.scoring.ties import (
    TIE_KEY,
    with_tie_keys,
)

# Rank-level and aggregate helper columns; the leading underscore keeps them
# apart from any metric or input column.
_GROUP = "_survey_index"
_RANK = "_rank"
_DISC = "_discount"
_CUM_REL = "_relevant_so_far"
_AUC_WINS = "_negatives_beaten"
_RANKED = "_ranked"  # the row holds a rank: every row (ranked="all"), scored rows ("scored")
RANK_ALL, RANK_SCORED = "all", "scored"
RANKINGS = (RANK_ALL, RANK_SCORED)


# ----------------------------------------------------------------- aggregates
def _aggregates(cutoffs: Sequence[int]) -> dict[str, pl.Expr]:
    """Per-survey aggregates over rank-ordered rows (evaluated inside ``group_by.agg``)."""
    label = pl.col(LABEL)
    # a row without a rank (a judged candidate a retrieval run did not retrieve) is past
    # every cutoff: only the label counts and the ideal DCG see it
    rank = pl.when(pl.col(_RANKED)).then(pl.col(_RANK))
    position = pl.col(_RANK)  # the row's place in the ideal ranking too
    disc = pl.col(_DISC)
    gain = label.clip(lower_bound=NEGATIVE_LABEL).cast(pl.Float64)  # unjudged: gain 0
    aggs: dict[str, pl.Expr] = {}
    for t in TIERS:
        aggs[n_label_ge(t)] = (label >= t).sum()
    for t in (NEGATIVE_LABEL, *TIERS):
        aggs[n_label_eq(t)] = (label == t).sum()
    # ideal gain at rank r = number of tiers t whose count of labels >= t reaches r,
    # i.e. the label at rank r of the judgments sorted by label. Summing it in the
    # same order as the DCG makes a perfect ranking score exactly 1.0.
    ideal_gain = pl.sum_horizontal(
        [(position <= (label >= t).sum()).cast(pl.Float64) for t in TIERS]
    )
    for k in cutoffs:
        top = (rank <= k).fill_null(False)
        aggs[f"_dcg@{k}"] = (gain * disc).filter(top).sum()
        aggs[f"_idcg@{k}"] = (ideal_gain * disc).filter(position <= k).sum()
        aggs[f"_hits_ge{RELEVANT_LABEL}@{k}"] = ((label >= RELEVANT_LABEL) & top).sum()
        aggs[f"_hits_ge{TIER3_LABEL}@{k}"] = ((label >= TIER3_LABEL) & top).sum()
        for t in TIERS:
            aggs[f"_hits_eq{t}@{k}"] = ((label == t) & top).sum()
    relevant = label >= RELEVANT_LABEL
    ranked = pl.col(_RANKED)
    aggs["_ap_sum"] = (pl.col(_CUM_REL) / pl.col(_RANK)).filter(relevant & ranked).sum()
    aggs["_rprec_hits"] = (relevant & (rank <= relevant.sum()).fill_null(False)).sum()
    aggs["_first_rank_ge3"] = rank.filter(label >= TIER3_LABEL).min()
    aggs["_auc_wins_ge1"] = pl.col(_AUC_WINS).filter(relevant).sum()
    for t in TIERS:
        aggs[f"_auc_wins_eq{t}"] = pl.col(_AUC_WINS).filter(label == t).sum()
    k = FIXED_CUTOFF
    essential = label == ESSENTIAL_LABEL
    tier3 = label >= TIER3_LABEL
    top = (rank <= k).fill_null(False)
    aggs[f"_essential_dcg@{k}"] = disc.filter(essential & top).sum()
    aggs[f"_essential_idcg@{k}"] = disc.filter(
        (position <= essential.sum()) & (position <= k)
    ).sum()
    aggs[f"_tier3_dcg@{k}"] = disc.filter(tier3 & top).sum()
    aggs[f"_tier3_idcg@{k}"] = disc.filter((position <= tier3.sum()) & (position <= k)).sum()
    return aggs


# ----------------------------------------------------------------- computation
def _rank_rows(judged: pl.DataFrame, ranked: str = RANK_ALL) -> pl.LazyFrame:
    """One row per (survey, rank) in ranking order with rank-level helper columns."""
    survey = pl.col(_GROUP)
    score = pl.col(SCORE)
    label = pl.col(LABEL)
    first = survey.ne_missing(survey.shift(1))
    last = survey.ne_missing(survey.shift(-1))
    row = pl.int_range(pl.len(), dtype=pl.Int64)
    relevant = (label >= RELEVANT_LABEL).cast(pl.Int64)
    negative = (label == NEGATIVE_LABEL).cast(pl.Int64)
    frame = judged.select(
        pl.col(SURVEY_ID),
        pl.col(CANDIDATE_ID),
        label.cast(pl.Int8),
        # Missing candidates get -inf: below every (finite) score and tied among themselves.
        score.cast(pl.Float64).fill_null(float("-inf")),
        (score.is_not_null() if ranked == RANK_SCORED else pl.lit(True)).alias(_RANKED),
    )
    if ranked == RANK_SCORED:
        # Rows without a rank are not ordered among themselves for any metric (the ideal
        # DCG reads positions, not rows; the AUC compares scores): their ties need no key.
        scored, has_ties = with_tie_keys(frame.filter(pl.col(_RANKED)))
        rest = frame.filter(~pl.col(_RANKED)).with_columns(
            pl.lit(0, dtype=pl.UInt64).alias(TIE_KEY)
        )
        frame, has_ties = pl.concat([scored, rest]), has_ties or rest.height > 0
    else:
        frame, has_ties = with_tie_keys(frame)
    # Without ties the score alone fixes the order; skipping the other keys saves a
    # multi-key (string) sort in the common case of distinct scores.
    order = (
        pl.col(LABEL, SCORE, _RANKED).sort_by(
            [SCORE, TIE_KEY, CANDIDATE_ID], descending=[True, False, False]
        )
        if has_ties
        else pl.col(LABEL, SCORE, _RANKED).sort_by(SCORE, descending=True)
    )
    ordered = (
        frame.lazy()
        .group_by(SURVEY_ID)
        .agg(order)
        .sort(SURVEY_ID)
        .with_row_index(_GROUP)
        .explode([LABEL, SCORE, _RANKED])
    )
    # Cumulative sums run over the whole frame; subtracting the value carried from
    # the survey's first row turns them into within-survey counts without a window.
    with_counts = ordered.with_columns(
        _first=first,
        _last=last,
        _tie_first=first | score.ne_missing(score.shift(1)),
        _tie_last=last | score.ne_missing(score.shift(-1)),
        _row=row,
        _rel_cum=relevant.cum_sum(),
        _neg_cum=negative.cum_sum(),
    )
    rel_cum, neg_cum = pl.col("_rel_cum"), pl.col("_neg_cum")
    negatives_through_tie = pl.when(pl.col("_tie_last")).then(neg_cum).backward_fill()
    negatives_before_tie = pl.when(pl.col("_tie_first")).then(neg_cum - negative).forward_fill()
    negatives_in_survey = pl.when(pl.col("_last")).then(neg_cum).backward_fill()
    return with_counts.with_columns(
        (pl.col("_row") - pl.when(pl.col("_first")).then(pl.col("_row")).forward_fill() + 1).alias(
            _RANK
        ),
        (rel_cum - pl.when(pl.col("_first")).then(rel_cum - relevant).forward_fill()).alias(
            _CUM_REL
        ),
        # hard negatives scored strictly lower, plus half of those tied
        (
            (negatives_in_survey - negatives_through_tie).cast(pl.Float64)
            + 0.5 * (negatives_through_tie - negatives_before_tie).cast(pl.Float64)
        ).alias(_AUC_WINS),
    ).with_columns((1.0 / (pl.col(_RANK) + 1).cast(pl.Float64).log(2)).alias(_DISC))


def per_survey_metrics(
    judged: pl.DataFrame | pl.LazyFrame,
    metrics: Iterable[str] | None = None,
    ks: Sequence[int] | None = None,
    ranked: str = RANK_ALL,
) -> pl.DataFrame:
    """Every requested metric for every survey of ``judged``.

    Candidates are ranked by the module's tie rule: score descending, then
    :func:`tie_key` of (survey_id, candidate_id) ascending, then candidate_id
    ascending; unscored candidates last, ordered among themselves the same way
    (``ranked="all"``), or not ranked at all (``ranked="scored"``, see the module doc).

    Args:
        judged: one row per (survey, candidate) with ``survey_id``, ``candidate_id``,
            ``label`` (0-4, or -1 for a retrieved document without a judgment) and
            ``score`` (finite float, null = candidate missing from the run);
            (survey_id, candidate_id) unique.
        metrics: canonical metric names or aliases (see :func:`metric_registry`); all
            when None.
        ks: cutoffs for the K-indexed metrics; ``EvaluateConfig().ks`` when None.
        ranked: ``all`` (re-ranking mode) or ``scored`` (retrieval mode).

    Returns:
        One row per survey, sorted by ``survey_id``: ``survey_id`` then one Float64
        column per metric, in registry order; null where the survey is excluded
        from that metric for lack of the labels it needs.

    Raises:
        UnknownMetricError: a metric name is not in the registry.
        ValueError: ``ranked`` is neither ``all`` nor ``scored``.
    """
    if ranked not in RANKINGS:
        raise UsageError(f"ranked={ranked!r}; available: {', '.join(RANKINGS)}")
    chosen = resolve_metrics(metrics, ks)
    cutoffs = sorted({*(default_ks() if ks is None else ks), FIXED_CUTOFF})
    aggregates = _aggregates(cutoffs)
    needed = dict.fromkeys(name for m in chosen for name in m.needs)
    frame = judged.collect() if isinstance(judged, pl.LazyFrame) else judged
    return (
        _rank_rows(frame, ranked)
        .group_by(_GROUP)
        .agg(pl.col(SURVEY_ID).first(), *[aggregates[name].alias(name) for name in needed])
        .select(pl.col(SURVEY_ID), *[m.value.cast(pl.Float64).alias(m.name) for m in chosen])
        .sort(SURVEY_ID)
        # Sorting within surveys needs all rows at once; the in-memory engine ran this
        # query faster than the streaming one in bench/bench_eval.py.
        .collect(engine="in-memory")
    )
