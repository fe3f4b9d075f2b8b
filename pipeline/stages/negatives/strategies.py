"""The two ways to draw negatives (``negatives.negative_sampling``), chosen once per run.

* ``hash``: a batch considers its surveys' windows
  (:func:`pipeline.stages.negatives.sampling.windows`), each pair's pool entry and work
  read by position (:func:`~pipeline.stages.negatives.sampling.window_rows`); candidates
  of a group are taken in pair-hash order.
* ``hardest``: a batch considers its windows and every work co-cited with one of the
  survey's positives (:func:`co_citation`), in or out of the window; candidates of a
  group are taken most co-cited first, then in pair-hash order.

Both apply the same rules (:mod:`pipeline.stages.negatives.rules`); the stage builds the
batches, the exclusions and the prior counts, and matches what a strategy returns
(:func:`pipeline.stages.negatives.sampling.match` with the strategy's ``prefer``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import polars as pl

from pipeline.core import schema as S
from pipeline.stages.negatives.rules import admissible, candidate_pairs
from pipeline.stages.negatives.sampling import window_pairs, window_rows

HARDNESS = "_hardness"
_OTHER = "_other_survey"
_OTHER_DATE = "_other_date"


@dataclass(frozen=True)
class Pools:
    """The whole-corpus tables a strategy draws from, works keyed by their index
    (:func:`pipeline.stages.negatives.sampling.work_index`)."""

    order: pl.DataFrame  # every pool in hash order (sampling.pool_order)
    eligible: pl.LazyFrame  # rules.eligible_works
    works: pl.LazyFrame  # visible work features (rules.works_frame)
    work_rows: pl.DataFrame  # the work features with their id hash, one row per index
    citations: pl.LazyFrame  # what every survey cites (visible.survey_citations)


@dataclass(frozen=True)
class Batch:
    """One batch of surveys."""

    surveys: pl.LazyFrame  # their rows of the stage's surveys table (with n_positives)
    positives: pl.LazyFrame  # their positives dated before them, with pair hashes
    windows: pl.DataFrame  # their windows (sampling.windows)


@dataclass(frozen=True)
class Considered:
    """What a batch considers: ``pairs`` (``(survey_id, work_id)``, for the title hits and
    the prior counts) and ``candidates(excluded, prior)``, the admissible ones with their
    features, strata and whatever the strategy's ``prefer`` orders by."""

    pairs: pl.LazyFrame
    candidates: Callable[[pl.LazyFrame, dict[str, pl.LazyFrame]], pl.LazyFrame]


@dataclass(frozen=True)
class Strategy:
    """One value of ``negatives.negative_sampling``: what a batch considers, and the order
    (after the pool, before the pair hash) in which a group's candidates are taken."""

    consider: Callable[[Pools, Batch], Considered]
    prefer: tuple[pl.Expr, ...] = ()


def _consider_windows(pools: Pools, batch: Batch) -> Considered:
    rows = window_rows(batch.windows, pools.order, pools.work_rows).lazy()

    def candidates(excluded: pl.LazyFrame, prior: dict[str, pl.LazyFrame]) -> pl.LazyFrame:
        pooled = batch.surveys.filter(pl.col(S.SURVEY_DATE).is_not_null()).join(
            rows, on=S.SURVEY_ID, how="inner"
        )
        return admissible(pooled, excluded, prior)

    return Considered(rows.select(S.SURVEY_ID, S.WORK_ID), candidates)


def _consider_co_cited(pools: Pools, batch: Batch) -> Considered:
    hardness = co_citation(batch.surveys, batch.positives, pools.citations)
    hardness = hardness.collect(engine="streaming").lazy()
    window = pl.concat(
        [window_pairs(batch.windows, pools.order), hardness.select(S.SURVEY_ID, S.WORK_ID)]
    ).unique()
    window = window.collect(engine="streaming").lazy()

    def candidates(excluded: pl.LazyFrame, prior: dict[str, pl.LazyFrame]) -> pl.LazyFrame:
        pairs = candidate_pairs(batch.surveys, pools.eligible, excluded, pools.works, prior, window)
        return pairs.join(hardness, on=[S.SURVEY_ID, S.WORK_ID], how="left").with_columns(
            pl.col(HARDNESS).fill_null(0)
        )

    return Considered(window, candidates)


def co_citation(batch: pl.LazyFrame, positives: pl.LazyFrame, sc: pl.LazyFrame) -> pl.LazyFrame:
    """``(survey_id, work_id, _hardness)``: how many surveys first posted before the survey
    cite the work *and* at least one of the survey's positives (co-citation as seen before
    the survey; what ``hardest`` orders by within a stratum). ``sc``: what every survey
    cites (:func:`pipeline.rules.visible.survey_citations`)."""
    earlier = sc.select(
        pl.col(S.SURVEY_ID).alias(_OTHER),
        S.WORK_ID,
        pl.col(S.FIRST_VERSION_DATE).alias(_OTHER_DATE),
    )
    neighbours = (
        positives.select(S.SURVEY_ID, S.WORK_ID)
        .join(earlier, on=S.WORK_ID, how="inner")
        .join(batch.select(S.SURVEY_ID, S.SURVEY_DATE), on=S.SURVEY_ID, how="inner")
        .filter(
            (pl.col(_OTHER_DATE) < pl.col(S.SURVEY_DATE)) & (pl.col(_OTHER) != pl.col(S.SURVEY_ID))
        )
        .select(S.SURVEY_ID, _OTHER)
        .unique()
    )
    return (
        neighbours.join(earlier.select(_OTHER, S.WORK_ID), on=_OTHER, how="inner")
        .group_by(S.SURVEY_ID, S.WORK_ID)
        .agg(pl.len().cast(pl.Int64).alias(HARDNESS))
    )


# by config name: the config's choices (config.NEGATIVE_SAMPLINGS), in its order
STRATEGIES: dict[str, Strategy] = {
    "hash": Strategy(_consider_windows),
    "hardest": Strategy(_consider_co_cited, prefer=(-pl.col(HARDNESS),)),
}
