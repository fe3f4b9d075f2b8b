"""The ``negatives`` stage: reads the upstream tables once, builds the pools, draws each
batch of surveys with the configured strategy and writes both outputs.

Outputs: ``negatives.parquet`` (``schema.NEGATIVES``, sorted by survey then work) and
``negative_surveys.parquet`` (``schema.NEGATIVE_SURVEYS``): every survey, with
``has_negatives`` false when it got none (it stays in the benchmark, flagged).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from pipeline.core import schema as S
from pipeline.core.errors import StageError
from pipeline.core.progress import steps
from pipeline.engine.context import ReduceContext
from pipeline.engine.stage import Stage
from pipeline.rules import visible as V
from pipeline.rules.fields import fields_of
from pipeline.rules.tables import scan_extract
from pipeline.rules.visible import prior_tables, survey_citations, surveys_frame
from pipeline.stages.negatives.rules import (
    AFTER_SURVEY,
    POOL,
    cited_pairs,
    eligible_works,
    pool,
    positive_pairs,
    survey_title_keys,
    title_hits,
    with_strata,
    works_frame,
)
from pipeline.stages.negatives.sampling import (
    PAIR_HASH,
    ROUND_COLUMNS,
    ROUNDS,
    indexed,
    indexed_hashes,
    match,
    pool_order,
    slots,
    survey_batches,
    survey_hash_frame,
    unindexed,
    want_negatives,
    windows,
    with_pair_hash,
    work_index,
)
from pipeline.stages.negatives.strategies import STRATEGIES, Batch, Pools, Strategy


def build_negatives(ctx: ReduceContext) -> dict[str, Any]:
    """Draw the matched hard negatives; write both outputs; return the stage counts.

    Candidate pairs are those of each survey's windows
    (:func:`pipeline.stages.negatives.sampling.windows`), built and matched in batches of
    surveys (``negatives.survey_batch_size`` surveys, ``ctx.limits.negatives_batch_pairs`` window pairs; a
    survey's pairs only depend on itself), which bounds memory. A batch costs its pairs, not
    the corpus: works are integer keys (``sampling.work_index``), window pairs read their
    pool entry and work by position (``sampling.window_rows``), and batches run in
    survey-date order, each reading the prior-count rows of its own dates plus each work's
    last row before them (:func:`pipeline.rules.visible.prior_rows_between`,
    :func:`pipeline.rules.visible.last_prior_rows`).
    """
    scratch = ctx.scratch()
    fields = fields_of(ctx.cfg, ctx.read("works", "works"), ctx.read("openalex", "records"))
    if fields is not None:
        fields = fields.collect(engine="streaming").lazy()
    # what every survey cites: read once, used by the prior counts, the pools, the
    # exclusions and the co-citation hardness
    sc_by_id = survey_citations(
        surveys_frame(ctx.read("surveys", "surveys")), ctx.read("works", "cites")
    ).collect(engine="streaming")
    tables = _indexed_tables(ctx, sc_by_id, fields, scratch)
    eligible = _write_pools(ctx, tables, sc_by_id, fields, scratch / "eligible")
    # the exclusions by identifier, whole; the title hits per batch, within its window
    cited = indexed(cited_pairs(ctx, sc_by_id.lazy()), tables.index)
    cited = cited.collect(engine="streaming").lazy()
    del sc_by_id
    draw = _prepare_draw(ctx, tables, eligible, cited, scratch)
    chosen, n_candidates = _draw_batches(ctx, draw, scratch)
    negatives = (
        pl.read_parquet(chosen).sort(S.SURVEY_ID, S.WORK_ID)
        if chosen
        else pl.DataFrame(schema=S.polars_schema(S.NEGATIVES))
    )
    candidates_per_survey = (
        pl.read_parquet(n_candidates)
        if n_candidates
        else pl.DataFrame(schema={S.SURVEY_ID: pl.String, S.N_NEGATIVE_CANDIDATES: pl.Int64})
    )
    per_survey = _per_survey(tables.surveys, negatives, candidates_per_survey, draw.wanted)
    ctx.write("negatives", negatives)
    ctx.write("negative_surveys", per_survey)
    return _counts(per_survey, negatives, ctx.cfg.negatives.negative_sampling)


@dataclass(frozen=True)
class _Tables:
    """The upstream tables every pass shares, works keyed by their index
    (:func:`pipeline.stages.negatives.sampling.work_index`): the batches join millions of
    pairs on it, and what is written to scratch is indexed as it is written."""

    index: pl.DataFrame
    works: pl.LazyFrame  # visible work features (rules.works_frame)
    citations: pl.LazyFrame  # what every survey cites
    parts: list[V.WorkPart]  # the corpus's citations, cut by work
    corpus_prior: pl.LazyFrame  # running citation counts over the corpus, by date
    surveys: pl.DataFrame  # every survey, with its positive counts
    valid: pl.DataFrame  # the positives dated before their survey, with their strata


def _indexed_tables(
    ctx: ReduceContext, sc_by_id: pl.DataFrame, fields: pl.LazyFrame | None, scratch: Path
) -> _Tables:
    """Read works, surveys and positives, and key every work by its index."""
    works_by_id = works_frame(ctx, fields).collect(engine="streaming")
    surveys_all = (
        surveys_frame(ctx.read("surveys", "surveys")).sort(S.SURVEY_ID).collect(engine="streaming")
    )
    index = work_index(works_by_id)
    works = indexed(works_by_id.lazy(), index).collect().lazy()
    sc = indexed(sc_by_id.lazy(), index).collect().lazy()
    parts = V.work_parts(
        ctx.read("works", "cites"),
        ctx.files("works", "cites"),
        ctx.limits.work_part_rows,
        ctx.limits.split_rows,
        scratch / "cites",
    )
    corpus_prior = V.corpus_prior_counts(
        scan_extract(ctx.files_by_table("extract"), "papers"),
        parts,
        scratch / "prior",
        rekey=lambda lf: indexed(lf, index),
    )
    positives_by_id = positive_pairs(ctx, surveys_all.lazy(), works_by_id.lazy()).collect(
        engine="streaming"
    )
    del works_by_id
    surveys, valid = _positive_counts(
        surveys_all, _indexed_positives(positives_by_id, index), sc, corpus_prior
    )
    return _Tables(index, works, sc, parts, corpus_prior, surveys, valid)


def _indexed_positives(positives_by_id: pl.DataFrame, index: pl.DataFrame) -> pl.DataFrame:
    positives = indexed(positives_by_id.lazy(), index).collect()
    if positives.height != positives_by_id.height:
        raise StageError(
            f"labels: {positives_by_id.height - positives.height} positives name a work "
            "missing from works' table; rerun works and labels"
        )
    return positives


def _positive_counts(
    surveys_all: pl.DataFrame,
    positives: pl.DataFrame,
    sc: pl.LazyFrame,
    corpus_prior: pl.LazyFrame,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Every survey with its positive counts, and the positives dated before their survey."""
    # the running counts of the works it needs only: the positives' here, each batch's window's
    # later (a join_asof reads its whole right side, once per batch)
    positives_all = with_strata(
        positives.lazy(),
        prior_tables(sc, works=positives.lazy(), corpus=corpus_prior),
        cites_it=True,
    ).collect(engine="streaming")
    del positives
    per_survey_pos = positives_all.group_by(S.SURVEY_ID).agg(
        (~pl.col(AFTER_SURVEY)).sum().cast(pl.Int64).alias(S.N_POSITIVES),
        pl.col(AFTER_SURVEY).sum().cast(pl.Int64).alias(S.N_POSITIVES_AFTER_SURVEY),
    )
    surveys = surveys_all.join(per_survey_pos, on=S.SURVEY_ID, how="left").with_columns(
        pl.col(S.N_POSITIVES, S.N_POSITIVES_AFTER_SURVEY).fill_null(0)
    )
    return surveys, positives_all.filter(~pl.col(AFTER_SURVEY))


def _write_pools(
    ctx: ReduceContext,
    tables: _Tables,
    sc_by_id: pl.DataFrame,
    fields: pl.LazyFrame | None,
    directory: Path,
) -> pl.LazyFrame:
    """The pools, part by part, written to ``directory`` and read per batch."""
    # a group-by over every citation of the corpus at once costs 4 GB over the stage's
    # baseline at 1M papers
    for i, work_part in enumerate(tables.parts):
        part = directory / f"{i:05d}.parquet"
        part.parent.mkdir(parents=True, exist_ok=True)
        indexed(eligible_works(ctx, sc_by_id.lazy(), work_part, fields), tables.index).collect(
            engine="streaming"
        ).write_parquet(part)
    return pl.scan_parquet(sorted(directory.glob("*.parquet")))


@dataclass(frozen=True)
class _Draw:
    """What every batch draws with: the strategy, the pools, the exclusions and the hashes."""

    strategy: Strategy
    pools: Pools
    tables: _Tables
    cited: pl.LazyFrame  # the pairs excluded by identifier
    work_keys: pl.LazyFrame  # the works' title keys, for the title hits
    survey_keys: pl.DataFrame  # the surveys' title keys
    work_hashes: pl.LazyFrame
    survey_hashes: pl.LazyFrame
    survey_windows: pl.DataFrame
    wanted: pl.Expr  # negatives wanted per survey
    per_positive: float


def _prepare_draw(
    ctx: ReduceContext,
    tables: _Tables,
    eligible: pl.LazyFrame,
    cited: pl.LazyFrame,
    scratch: Path,
) -> _Draw:
    ncfg = ctx.cfg.negatives
    index = tables.index
    indexed(ctx.read("works", "title_keys"), index).sink_parquet(scratch / "title_keys.parquet")
    work_keys = pl.scan_parquet(scratch / "title_keys.parquet")
    survey_keys = survey_title_keys(ctx).collect(engine="streaming")
    work_hashes = indexed_hashes(
        index,
        pl.concat([eligible.select(S.WORK_ID), tables.valid.lazy().select(S.WORK_ID)]),
        ncfg.seed,
    )
    survey_hashes = survey_hash_frame(tables.surveys.lazy(), ncfg.seed)

    wanted = want_negatives(pl.col(S.N_POSITIVES), ncfg.negatives_per_positive)
    order = pool_order(eligible, tables.works, work_hashes)
    survey_windows = windows(tables.surveys, order, wanted, ncfg.candidates_per_negative, ncfg.seed)
    # one row per work index, in index order, with its hash: what window_rows reads by position
    work_rows = tables.works.join(work_hashes, on=S.WORK_ID, how="left").sort(S.WORK_ID).collect()
    if work_rows.height != index.height:
        raise AssertionError(f"{work_rows.height} work rows for {index.height} works")
    pools = Pools(
        order=order,
        eligible=eligible,
        works=tables.works,
        work_rows=work_rows,
        citations=tables.citations,
    )
    return _Draw(
        strategy=STRATEGIES[ncfg.negative_sampling],
        pools=pools,
        tables=tables,
        cited=cited,
        work_keys=work_keys,
        survey_keys=survey_keys,
        work_hashes=work_hashes,
        survey_hashes=survey_hashes,
        survey_windows=survey_windows,
        wanted=wanted,
        per_positive=ncfg.negatives_per_positive,
    )


def _draw_batches(ctx: ReduceContext, draw: _Draw, scratch: Path) -> tuple[list[Path], list[Path]]:
    """Draw every batch; return the scratch files of its negatives and of its candidate counts.

    Batches run in survey-date order (a survey's rows depend on itself only, so the order and
    cut do not change the output). Each batch reads the corpus count rows dated within its
    own dates, plus each of its works' last row before them, carried from batch to batch
    (:class:`~pipeline.rules.visible.CarriedPriorRows`): the whole table (60M rows at 2.3M
    papers) per batch would make the stage grow with the square of the corpus.
    """
    corpus_prior = draw.tables.corpus_prior
    by_date = draw.tables.surveys.sort(S.SURVEY_DATE, S.SURVEY_ID, nulls_last=True)
    batches = survey_batches(
        by_date,
        draw.survey_windows,
        ctx.cfg.negatives.survey_batch_size,
        ctx.limits.negatives_batch_pairs,
    )
    spans = [
        by_date.filter(pl.col(S.SURVEY_ID).is_in(b.implode()))
        .select(pl.col(S.SURVEY_DATE).min().alias("lo"), pl.col(S.SURVEY_DATE).max().alias("hi"))
        .row(0)
        for b in batches
    ]
    starts = [lo for lo, _ in spans if lo is not None]
    carried = V.CarriedPriorRows(draw.tables.index.height, corpus_prior.collect_schema())
    if starts:
        carried.update(V.prior_rows_between(corpus_prior, None, starts[0]).collect())
    # the survey running counts of every work, counted once: each batch cuts its works' rows
    # (counting them again per batch grew with the corpus, 2.4 CPU s a batch at 1M papers)
    survey_tables = V.survey_prior_tables(draw.tables.citations)
    survey_counts = dict(
        zip(survey_tables, pl.collect_all(list(survey_tables.values())), strict=True)
    )
    chosen: list[Path] = []
    n_candidates: list[Path] = []
    for k, batch_ids in enumerate(steps(batches, "negatives: survey batches")):
        lo, hi = spans[k]
        rows = (
            V.prior_rows_between(corpus_prior, lo, hi).collect()
            if lo is not None
            else None  # undated surveys: no corpus count
        )
        got, pairs_df = _draw_batch(draw, batch_ids, carried, rows, survey_counts)
        # each batch's rows go to scratch files: kept in memory, their strings (views into the
        # batch's buffers) would hold every batch's pairs alive, 0.6 GB a batch at 1M papers
        part = scratch / "chosen" / f"{len(chosen):05d}.parquet"
        part.parent.mkdir(parents=True, exist_ok=True)
        unindexed(got, draw.tables.index).with_columns(pl.lit(0, pl.Int8).alias(S.LABEL)).select(
            S.NEGATIVES.names
        ).write_parquet(part)
        chosen.append(part)
        part = scratch / "candidates" / f"{len(n_candidates):05d}.parquet"
        part.parent.mkdir(parents=True, exist_ok=True)
        pairs_df.group_by(S.SURVEY_ID).agg(
            pl.len().cast(pl.Int64).alias(S.N_NEGATIVE_CANDIDATES)
        ).write_parquet(part)
        n_candidates.append(part)
        del pairs_df, got
        later = [d for d, _ in spans[k + 1 :] if d is not None]
        if rows is not None and later:
            # each work's last row before the next batch's first date
            more = V.prior_rows_between(corpus_prior, hi, later[0]).collect()
            carried.update(pl.concat([rows, more]))
            del rows, more
    return chosen, n_candidates


# what a batch keeps of its candidates: the output's, the matching's and the pair hash
_PAIR_COLUMNS = (
    *(c for c in S.NEGATIVES.names if c not in (S.LABEL, S.MATCH_ROUND)),
    POOL,
    PAIR_HASH,
    *ROUND_COLUMNS,
)


def _draw_batch(
    draw: _Draw,
    batch_ids: pl.Series,
    carried: V.CarriedPriorRows,
    rows: pl.DataFrame | None,
    survey_counts: dict[str, pl.DataFrame],
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """One batch's matched negatives and its admissible candidate pairs.

    Args:
        carried: every work's last corpus count row before the batch's first date.
        rows: the corpus count rows of the batch's dates (None: its surveys are undated).
        survey_counts: :func:`pipeline.rules.visible.survey_prior_tables` of every survey
            citation, collected.
    """
    in_batch = pl.col(S.SURVEY_ID).is_in(batch_ids.implode())
    batch_surveys = draw.tables.surveys.filter(in_batch).lazy()
    pos = with_pair_hash(
        draw.tables.valid.lazy().join(
            batch_surveys.select(S.SURVEY_ID), on=S.SURVEY_ID, how="semi"
        ),
        draw.work_hashes,
        draw.survey_hashes,
    )
    batch = Batch(
        surveys=batch_surveys, positives=pos, windows=draw.survey_windows.filter(in_batch)
    )
    considered = draw.strategy.consider(draw.pools, batch)
    batch_keys = draw.survey_keys.filter(in_batch).lazy()
    excluded = pl.concat(
        [draw.cited.filter(in_batch), title_hits(batch_keys, considered.pairs, draw.work_keys)]
    )
    batch_prior = prior_tables(
        draw.tables.citations,
        works=considered.pairs,
        corpus=_batch_corpus_rows(considered.pairs, carried, rows),
        survey=survey_counts,
    )
    # the columns the output, the match and the counts read: the candidates carry every
    # feature of the pool entry and the work, which cost 2 GB a batch at 300k papers
    prefer = [name for e in draw.strategy.prefer for name in e.meta.root_names()]
    keep = [*dict.fromkeys([*_PAIR_COLUMNS, *prefer])]
    pairs = (
        with_pair_hash(
            considered.candidates(excluded, batch_prior), draw.work_hashes, draw.survey_hashes
        )
        .with_columns(pool())
        .select(keep)
    )
    pos_df, pairs_df = pl.collect_all([pos, pairs], engine="streaming")
    got = match(slots(pos_df, draw.per_positive), pairs_df, draw.strategy.prefer)
    return got, pairs_df


def _batch_corpus_rows(
    pairs: pl.LazyFrame, carried: V.CarriedPriorRows, rows: pl.DataFrame | None
) -> pl.LazyFrame:
    """The corpus count rows of the works of ``pairs``: each one's last row before the
    batch's dates, and its rows within them (none for undated surveys)."""
    if rows is None:
        return pl.DataFrame(schema=carried.schema).lazy()
    works = pairs.select(S.WORK_ID).unique().collect().get_column(S.WORK_ID)
    return pl.concat(
        [carried.rows(works), rows.join(works.to_frame(), on=S.WORK_ID, how="semi")]
    ).lazy()


def _per_survey(
    surveys: pl.DataFrame,
    negatives: pl.DataFrame,
    candidates_per_survey: pl.DataFrame,
    wanted: pl.Expr,
) -> pl.DataFrame:
    """``negative_surveys``: every survey with its candidate, negative and shortfall counts."""
    return (
        surveys.lazy()
        .join(candidates_per_survey.lazy(), on=S.SURVEY_ID, how="left")
        .join(
            negatives.lazy()
            .group_by(S.SURVEY_ID)
            .agg(
                pl.len().cast(pl.Int64).alias(S.N_NEGATIVES),
                (pl.col(S.MATCH_ROUND) == 0).sum().cast(pl.Int64).alias(S.N_MATCHED_EXACT),
            ),
            on=S.SURVEY_ID,
            how="left",
        )
        .with_columns(
            pl.col(S.N_NEGATIVE_CANDIDATES, S.N_NEGATIVES, S.N_MATCHED_EXACT).fill_null(0)
        )
        .with_columns(
            (pl.col(S.N_NEGATIVES) > 0).alias(S.HAS_NEGATIVES),
            (wanted - pl.col(S.N_NEGATIVES)).alias(S.N_SHORTFALL),
        )
        .select(S.NEGATIVE_SURVEYS.names)
        .sort(S.SURVEY_ID)
        .collect()
    )


def _counts(per_survey: pl.DataFrame, negatives: pl.DataFrame, sampling: str) -> dict[str, Any]:
    """The stage's counts, as its run record reports them."""

    def by(column: str, names: tuple[Any, ...]) -> dict[str, int]:
        got = negatives.group_by(column).len()
        return {str(k): 0 for k in names} | {str(k): int(n) for k, n in got.iter_rows()}

    return {
        "surveys": per_survey.height,
        "surveys_with_negatives": int(per_survey[S.HAS_NEGATIVES].sum()),
        "surveys_without_negatives": int((~per_survey[S.HAS_NEGATIVES]).sum()),
        "surveys_short_of_negatives": int((per_survey[S.N_SHORTFALL] > 0).sum()),
        "surveys_without_date": int(per_survey[S.SURVEY_DATE].null_count()),
        "positives": int(per_survey[S.N_POSITIVES].sum()),
        "positives_dated_after_survey_dropped": int(per_survey[S.N_POSITIVES_AFTER_SURVEY].sum()),
        "negative_candidates": int(per_survey[S.N_NEGATIVE_CANDIDATES].sum()),
        "negatives": negatives.height,
        "negatives_wanted": int(per_survey[S.N_NEGATIVES].sum() + per_survey[S.N_SHORTFALL].sum()),
        "shortfall": int(per_survey[S.N_SHORTFALL].sum()),
        "negatives_by_source": by(S.NEGATIVE_SOURCE, S.NEGATIVE_SOURCES),
        "negatives_by_match_round": by(S.MATCH_ROUND, tuple(range(len(ROUNDS)))),
        "match_rounds": {str(k): list(keys) or ["survey only"] for k, keys in enumerate(ROUNDS)},
        "negative_sampling": sampling,
    }


STAGE = Stage(
    name="negatives",
    kind="reduce",
    reads=("extract", "works", "openalex", "surveys", "labels"),
    config_sections=("negatives", "extract"),
    fn=build_negatives,
    outputs=(("negatives", S.NEGATIVES), ("negative_surveys", S.NEGATIVE_SURVEYS)),
    help="hard negatives per survey, matched to its positives on everything visible",
)
