"""Stage ``surveys`` (reduce): computer-science literature surveys with enough resolved references.

A paper is a survey when

* its primary category starts with ``surveys.category_prefix`` ("cs."),
* :func:`pipeline.rules.survey_rules.survey_reason` finds a cue in its title or abstract
  (the rules run only on rows that pass the cheap Polars prefilter), and
* it cites at least ``surveys.min_resolved_refs`` distinct resolved works.

``n_refs`` is its number of bib entries, ``n_resolved`` the number of distinct
works they resolve to, ``resolved_frac`` the fraction of its bib entries that carry
an identifier or resolve by title; surveys whose ``resolved_frac`` is below
``surveys.min_resolved_frac`` (default 0.5) are left out and counted: too much of
their reading list is unknown, and an unknown cited work could be drawn as their
hard negative. ``surveys.max_surveys`` (> 0) keeps the first surveys in
(first_version_date, paper_id) order.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from pipeline.core import schema as S
from pipeline.engine.context import ReduceContext
from pipeline.engine.stage import Stage
from pipeline.rules.survey_rules import prefilter_pattern, survey_reason
from pipeline.rules.tables import scan_extract

RESOLVED_ENTRIES = "resolved_entries"


def _counts_by(df: pl.DataFrame, column: str) -> dict[str, int]:
    got = df.group_by(column).len().sort(column)
    return {str(k): int(v) for k, v in zip(got[column], got["len"], strict=True)}


def find_surveys(ctx: ReduceContext) -> dict[str, Any]:
    """Detect surveys; write ``surveys.parquet``."""
    scfg = ctx.cfg.surveys
    papers = scan_extract(ctx.files_by_table("extract"), "papers")
    cs = papers.filter(pl.col(S.PRIMARY_CATEGORY).str.starts_with(scfg.category_prefix))
    prefilter = prefilter_pattern(scfg)
    if prefilter is not None:
        cs = cs.filter(
            pl.col(S.TITLE).fill_null("").str.contains(prefilter)
            | pl.col(S.ABSTRACT).fill_null("").str.contains(prefilter)
        )
    cued = (
        cs.with_columns(
            pl.struct(S.TITLE, S.ABSTRACT)
            .map_elements(
                lambda r: survey_reason(r[S.TITLE], r[S.ABSTRACT], scfg), return_dtype=pl.String
            )
            .alias(S.REASON)
        )
        .drop_nulls(S.REASON)
        .collect(engine="streaming")
    )
    # bib entries counted for the cued papers only: a group-by over every paper's
    # entries held 1.5 GB at 300k papers (measured) for the few hundred rows kept
    refs = (
        ctx.read("works", "cites")
        .filter(pl.col(S.PAPER_ID).is_in(cued[S.PAPER_ID].implode()))
        .group_by(S.PAPER_ID)
        .agg(
            pl.len().cast(pl.Int64).alias(S.N_REFS),
            pl.col(S.WORK_ID).drop_nulls().n_unique().cast(pl.Int64).alias(S.N_RESOLVED),
            pl.col(S.WORK_ID).is_not_null().sum().cast(pl.Int64).alias(RESOLVED_ENTRIES),
        )
    )
    candidates = (
        cued.lazy()
        .join(refs, on=S.PAPER_ID, how="left")
        .with_columns(pl.col(S.N_REFS, S.N_RESOLVED, RESOLVED_ENTRIES).fill_null(0))
        .with_columns(
            pl.when(pl.col(S.N_REFS) > 0)
            .then(pl.col(RESOLVED_ENTRIES) / pl.col(S.N_REFS))
            .otherwise(0.0)
            .alias(S.RESOLVED_FRAC)
        )
        .select(*S.SURVEYS.names)
        .sort(S.FIRST_VERSION_DATE, S.PAPER_ID, nulls_last=True)
        .collect(engine="streaming")
    )
    enough_refs = candidates.filter(pl.col(S.N_RESOLVED) >= scfg.min_resolved_refs)
    enough = enough_refs.filter(pl.col(S.RESOLVED_FRAC) >= scfg.min_resolved_frac - 1e-12)
    kept = enough.head(scfg.max_surveys) if scfg.max_surveys > 0 else enough
    ctx.write("surveys", kept)
    return {
        "cs_papers": int(
            papers.filter(pl.col(S.PRIMARY_CATEGORY).str.starts_with(scfg.category_prefix))
            .select(pl.len())
            .collect()
            .item()
        ),
        "candidates": candidates.height,
        "candidates_by_cue": _counts_by(candidates, S.REASON),
        "rejected_too_few_resolved_refs": candidates.height - enough_refs.height,
        "rejected_resolved_frac_below_floor": enough_refs.height - enough.height,
        "dropped_by_max_surveys": enough.height - kept.height,
        "kept": kept.height,
        "kept_by_cue": _counts_by(kept, S.REASON),
    }


STAGE = Stage(
    name="surveys",
    kind="reduce",
    reads=("extract", "works"),
    config_sections=("works", "surveys"),
    fn=find_surveys,
    outputs=(("surveys", S.SURVEYS),),
    help="computer-science literature surveys (title/abstract cues, enough resolved references)",
)
