"""The field's most-cited works: the bibliography evaluation's ``popularity`` baseline, built
where the citations are.

For each eval survey S (primary category c, text date d, a reading list of N works), the
baseline bibliography is the N works most cited by corpus papers of primary category c
first posted strictly before d: ``candidate_prior_citations`` counted per field
(:func:`pipeline.rules.visible.field_prior_table`; the date rule is
:mod:`pipeline.rules.visible`'s), the field being the negatives' "cited by a corpus paper of
the category" (pool B of :mod:`pipeline.stages.negatives.rules`). S never counts itself and
is never one of its works; a work no paper of c cited before d is no work of the field, so a
survey whose field has fewer than N gets fewer. Equal counts are ordered by the
evaluation's tie rule (:mod:`pipeline.evaluate.scoring.ties`).

The release does not publish citation counts or categories for the corpus's works
(``schema.POPULARITY_COLUMNS``: shown, popularity ranks the head of every list), so the
bibliographies are computed at build time and published judgment-side
(:data:`pipeline.core.release_files.BIBLIOGRAPHY_BASELINES_FILE`), where the bibliography
evaluation reads them (:mod:`pipeline.evaluate.bibliography.baselines`).

Memory. The as-of counts of every work of a field at every survey's date would pair each
eval survey with the field's whole history. Counts only grow, so with K the longest list of
the field's eval surveys and d0 their earliest date, the (K+1)-th largest count at d0 (less
one: S's own citation is taken off) bounds from below the N-th largest count any of them
can see (N <= K, d >= d0; the (K+1)-th because S itself is left out); a work whose count
before the field's latest date is under that bound is in no survey's top N. One group-by
over the citations gives both counts; the as-of lookups then pair each survey with the
field's few most-cited works only.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import polars as pl

from pipeline.core import schema as S
from pipeline.core.config import Config
from pipeline.core.parquet import write_table
from pipeline.evaluate.columns import CANDIDATE_ID
from pipeline.evaluate.scoring.ties import tie_keys
from pipeline.evaluate.systems.baselines import POPULARITY
from pipeline.rules import visible as V

log = logging.getLogger(__name__)

FIELD_POPULARITY = POPULARITY  # the bibliography evaluation's name for it
_N = "_n"  # the survey's list size
_FIRST, _LAST, _LONGEST = "_first_date", "_last_date", "_longest"
_AT_FIRST, _AT_LAST = "_at_first", "_at_last"
_BOUND = "_bound"
_COUNT = "_count"
_OWN = "_own"
_TIE = "_tie"


def eval_surveys(candidates: pl.LazyFrame, surveys: pl.LazyFrame) -> pl.DataFrame:
    """``(survey_id, primary_category, first_version_date, survey_date, _n)`` of every eval
    survey with a list: ``_n`` is the size of its list.

    Args:
        candidates: the ``split`` stage's candidates.
        surveys: the ``split`` stage's ``split_surveys``.
    """
    sizes = (
        candidates.filter((pl.col(S.SPLIT) == S.SPLIT_NAMES[1]) & (pl.col(S.LABEL) >= 1))
        .group_by(S.SURVEY_ID)
        .agg(pl.len().cast(pl.Int64).alias(_N))
    )
    return (
        surveys.select(S.SURVEY_ID, S.PRIMARY_CATEGORY, S.FIRST_VERSION_DATE, S.SURVEY_DATE)
        .join(sizes, on=S.SURVEY_ID, how="inner")
        .sort(S.SURVEY_ID)
        .collect(engine="streaming")
    )


def field_popularity(
    papers: pl.LazyFrame, cites: pl.LazyFrame, works: pl.LazyFrame, surveys: pl.DataFrame
) -> pl.DataFrame:
    """Each survey's bibliography of its field's most-cited works (module docstring).

    Args:
        papers: the extract ``papers`` table, winning copies
            (:func:`pipeline.rules.tables.scan_extract`).
        cites: the ``works`` stage's ``cites`` table.
        works: the ``works`` stage's ``works`` table (which work is which corpus paper).
        surveys: :func:`eval_surveys`.

    Returns:
        ``schema.EVAL_BIBLIOGRAPHY_BASELINES`` rows, sorted by survey and rank.
    """
    surveys = surveys.filter(pl.col(S.SURVEY_DATE).is_not_null())
    fields = surveys.group_by(S.PRIMARY_CATEGORY).agg(
        pl.col(S.SURVEY_DATE).min().alias(_FIRST),
        pl.col(S.SURVEY_DATE).max().alias(_LAST),
        pl.col(_N).max().alias(_LONGEST),
    )
    # the citing papers of the fields first: the distinct citations of the rest of the corpus
    # are never counted, and making them distinct is the costly step
    citing = (
        papers.select(S.PAPER_ID, S.PRIMARY_CATEGORY, S.FIRST_VERSION_DATE)
        .join(fields.lazy(), on=S.PRIMARY_CATEGORY, how="inner")
        .filter(pl.col(S.FIRST_VERSION_DATE) < pl.col(_LAST))
    )
    cited = V.paper_citations(
        citing, cites.join(citing.select(S.PAPER_ID), on=S.PAPER_ID, how="semi")
    ).join(fields.lazy(), on=S.PRIMARY_CATEGORY, how="inner")
    counts = (
        cited.group_by(S.WORK_ID, S.PRIMARY_CATEGORY)
        .agg(
            (pl.col(S.FIRST_VERSION_DATE) < pl.col(_FIRST)).sum().cast(pl.Int64).alias(_AT_FIRST),
            pl.len().cast(pl.Int64).alias(_AT_LAST),
        )
        .collect(engine="streaming")
    )
    bounds = (
        counts.join(fields.select(S.PRIMARY_CATEGORY, _LONGEST), on=S.PRIMARY_CATEGORY)
        .group_by(S.PRIMARY_CATEGORY)
        .agg(
            # the (K+1)-th largest count at the field's first date (0 when it has fewer works)
            pl.col(_AT_FIRST)
            .sort(descending=True)
            .get(pl.col(_LONGEST).first(), null_on_oob=True)
            .fill_null(0)
            .alias(_BOUND)
        )
    )
    kept = (
        counts.join(bounds, on=S.PRIMARY_CATEGORY)
        .filter(pl.col(_AT_LAST) >= pl.max_horizontal(pl.col(_BOUND) - 1, 1))
        .select(S.WORK_ID, S.PRIMARY_CATEGORY)
    )
    del counts
    survey_ids = surveys[S.SURVEY_ID].implode()
    own = (
        cites.filter(pl.col(S.PAPER_ID).is_in(survey_ids) & pl.col(S.WORK_ID).is_not_null())
        .select(pl.col(S.PAPER_ID).alias(S.SURVEY_ID), S.WORK_ID, pl.lit(1).alias(_OWN))
        .unique()
    )
    itself = works.filter(pl.col(S.PAPER_ID).is_in(survey_ids)).select(
        pl.col(S.PAPER_ID).alias(S.SURVEY_ID), S.WORK_ID
    )
    cites_it = pl.col(_OWN).fill_null(0) == 1
    pairs = (
        surveys.lazy()
        .join(kept.lazy(), on=S.PRIMARY_CATEGORY, how="inner")
        .join(itself, on=[S.SURVEY_ID, S.WORK_ID], how="anti")
        .join(own, on=[S.SURVEY_ID, S.WORK_ID], how="left")
    )
    table = V.field_prior_table(
        cited.join(kept.lazy(), on=[S.WORK_ID, S.PRIMARY_CATEGORY], how="semi")
    )
    scored = (
        V.count_before(pairs.sort(S.SURVEY_DATE), table, [S.WORK_ID, S.PRIMARY_CATEGORY], _COUNT)
        .with_columns(pl.col(_COUNT) - V.counts_itself(cites_it))
        .filter(pl.col(_COUNT) >= 1)
        .select(S.SURVEY_ID, S.WORK_ID, _COUNT, _N)
        .collect(engine="streaming")
    )
    scored = scored.with_columns(tie_keys(scored.rename({S.WORK_ID: CANDIDATE_ID})).alias(_TIE))
    return (
        scored.sort([S.SURVEY_ID, _COUNT, _TIE, S.WORK_ID], descending=[False, True, False, False])
        .with_columns(
            pl.int_range(1, pl.len() + 1, dtype=pl.Int32).over(S.SURVEY_ID).alias(S.BASELINE_RANK)
        )
        .filter(pl.col(S.BASELINE_RANK) <= pl.col(_N))
        .select(
            S.SURVEY_ID,
            pl.lit(FIELD_POPULARITY).alias(S.BASELINE),
            S.BASELINE_RANK,
            S.WORK_ID,
        )
    )


def write_field_baselines(
    path: Path,
    cfg: Config,
    papers: pl.LazyFrame,
    cites: pl.LazyFrame,
    works: pl.LazyFrame,
    candidates: pl.LazyFrame,
    surveys: pl.LazyFrame,
) -> int:
    """Write the eval surveys' field baselines (:func:`field_popularity`) to ``path``; return
    the rows written. Arguments as :func:`field_popularity` and :func:`eval_surveys`."""
    start = time.perf_counter()
    wanted = eval_surveys(candidates, surveys)
    rows = field_popularity(papers, cites, works, wanted)
    n = write_table(rows, path, S.EVAL_BIBLIOGRAPHY_BASELINES, cfg, path.name)
    log.info(
        "release: the field's most-cited works for %d eval surveys in %.1f s",
        wanted.height,
        time.perf_counter() - start,
    )
    return n
