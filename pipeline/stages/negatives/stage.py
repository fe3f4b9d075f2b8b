"""The ``negatives`` stage: reads the upstream tables once, builds the pools, draws each
batch of surveys with the configured strategy and writes both outputs.

Outputs: ``negatives.parquet`` (``schema.NEGATIVES``, sorted by survey then work) and
``negative_surveys.parquet`` (``schema.NEGATIVE_SURVEYS``): every survey, with
``has_negatives`` false when it got none (it stays in the benchmark, flagged).
"""

from __future__ import annotations

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
from pipeline.stages.negatives.strategies import STRATEGIES, Batch, Pools


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
    ncfg = ctx.cfg.negatives
    strategy = STRATEGIES[ncfg.negative_sampling]

    fields = fields_of(ctx.cfg, ctx.read("works", "works"), ctx.read("openalex", "records"))
    if fields is not None:
        fields = fields.collect(engine="streaming").lazy()
    works_by_id = works_frame(ctx, fields).collect(engine="streaming")
    surveys_all = (
        surveys_frame(ctx.read("surveys", "surveys")).sort(S.SURVEY_ID).collect(engine="streaming")
    )
    # what every survey cites: read once, used by the prior counts, the pools, the
    # exclusions and the co-citation hardness
    sc_by_id = survey_citations(
        surveys_frame(ctx.read("surveys", "surveys")), ctx.read("works", "cites")
    ).collect(engine="streaming")
    # From here on a work is its integer index (work_index): the batches join millions of
    # pairs on it. What is written to scratch is indexed as it is written.
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
    positives = indexed(positives_by_id.lazy(), index).collect()
    if positives.height != positives_by_id.height:
        raise StageError(
            f"labels: {positives_by_id.height - positives.height} positives name a work "
            "missing from works' table; rerun works and labels"
        )
    del positives_by_id
    # the running counts of the works it needs only: the positives' here, each batch's window's
    # below (a join_asof reads its whole right side, once per batch)
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
    valid = positives_all.filter(~pl.col(AFTER_SURVEY))
    del positives_all
    # the pools, part by part (a group-by over every citation of the corpus at once costs
    # 4 GB over the stage's baseline at 1M papers), written to scratch and read per batch
    for i, work_part in enumerate(parts):
        part = scratch / "eligible" / f"{i:05d}.parquet"
        part.parent.mkdir(parents=True, exist_ok=True)
        indexed(eligible_works(ctx, sc_by_id.lazy(), work_part, fields), index).collect(
            engine="streaming"
        ).write_parquet(part)
    eligible = pl.scan_parquet(sorted((scratch / "eligible").glob("*.parquet")))
    # the exclusions by identifier, whole; the title hits per batch, within its window
    cited = indexed(cited_pairs(ctx, sc_by_id.lazy()), index).collect(engine="streaming").lazy()
    del sc_by_id
    indexed(ctx.read("works", "title_keys"), index).sink_parquet(scratch / "title_keys.parquet")
    work_keys = pl.scan_parquet(scratch / "title_keys.parquet")
    survey_keys = survey_title_keys(ctx).collect(engine="streaming")
    work_hashes = indexed_hashes(
        index, pl.concat([eligible.select(S.WORK_ID), valid.lazy().select(S.WORK_ID)]), ncfg.seed
    )
    survey_hashes = survey_hash_frame(surveys.lazy(), ncfg.seed)

    wanted = want_negatives(pl.col(S.N_POSITIVES), ncfg.negatives_per_positive)
    order = pool_order(eligible, works, work_hashes)
    survey_windows = windows(surveys, order, wanted, ncfg.candidates_per_negative, ncfg.seed)
    # one row per work index, in index order, with its hash: what window_rows reads by position
    work_rows = works.join(work_hashes, on=S.WORK_ID, how="left").sort(S.WORK_ID).collect()
    if work_rows.height != index.height:
        raise AssertionError(f"{work_rows.height} work rows for {index.height} works")
    pools = Pools(order=order, eligible=eligible, works=works, work_rows=work_rows, citations=sc)

    chosen: list[Path] = []
    n_candidates: list[Path] = []
    # Batches in survey-date order (a survey's rows depend on itself only, so the order and
    # cut do not change the output). Each batch reads the corpus count rows dated within its
    # own dates, plus each work's last row before them (`base`, carried from batch to batch):
    # the whole table (60M rows at 2.3M papers) per batch would make the stage grow with the
    # square of the corpus.
    by_date = surveys.sort(S.SURVEY_DATE, S.SURVEY_ID, nulls_last=True)
    batches = survey_batches(
        by_date, survey_windows, ncfg.survey_batch_size, ctx.limits.negatives_batch_pairs
    )
    spans = [
        by_date.filter(pl.col(S.SURVEY_ID).is_in(b.implode()))
        .select(pl.col(S.SURVEY_DATE).min().alias("lo"), pl.col(S.SURVEY_DATE).max().alias("hi"))
        .row(0)
        for b in batches
    ]
    starts = [lo for lo, _ in spans if lo is not None]
    base = V.last_prior_rows(
        V.prior_rows_between(corpus_prior, None, starts[0]) if starts else corpus_prior.head(0)
    ).collect()
    for k, batch_ids in enumerate(steps(batches, "negatives: survey batches")):
        lo, hi = spans[k]
        if lo is not None:
            rows = V.prior_rows_between(corpus_prior, lo, hi).collect()
            table = pl.concat([base, rows])
        in_batch = pl.col(S.SURVEY_ID).is_in(batch_ids.implode())
        batch_surveys = surveys.filter(in_batch).lazy()
        pos = with_pair_hash(
            valid.lazy().join(batch_surveys.select(S.SURVEY_ID), on=S.SURVEY_ID, how="semi"),
            work_hashes,
            survey_hashes,
        )
        batch = Batch(surveys=batch_surveys, positives=pos, windows=survey_windows.filter(in_batch))
        considered = strategy.consider(pools, batch)
        batch_keys = survey_keys.filter(in_batch).lazy()
        excluded = pl.concat(
            [cited.filter(in_batch), title_hits(batch_keys, considered.pairs, work_keys)]
        )
        batch_prior = prior_tables(
            sc,
            works=considered.pairs,
            corpus=(table if lo is not None else base.head(0)).lazy(),
        )
        pairs = with_pair_hash(
            considered.candidates(excluded, batch_prior), work_hashes, survey_hashes
        ).with_columns(pool())
        pos_df, pairs_df = pl.collect_all([pos, pairs], engine="streaming")
        got = match(slots(pos_df, ncfg.negatives_per_positive), pairs_df, strategy.prefer)
        # each batch's rows go to scratch files: kept in memory, their strings (views into the
        # batch's buffers) would hold every batch's pairs alive, 0.6 GB a batch at 1M papers
        part = scratch / "chosen" / f"{len(chosen):05d}.parquet"
        part.parent.mkdir(parents=True, exist_ok=True)
        unindexed(got, index).with_columns(pl.lit(0, pl.Int8).alias(S.LABEL)).select(
            S.NEGATIVES.names
        ).write_parquet(part)
        chosen.append(part)
        part = scratch / "candidates" / f"{len(n_candidates):05d}.parquet"
        part.parent.mkdir(parents=True, exist_ok=True)
        pairs_df.group_by(S.SURVEY_ID).agg(
            pl.len().cast(pl.Int64).alias(S.N_NEGATIVE_CANDIDATES)
        ).write_parquet(part)
        n_candidates.append(part)
        del pos_df, pairs_df, got
        later = [d for d, _ in spans[k + 1 :] if d is not None]
        if lo is not None and later:
            # each work's last row before the next batch's first date
            more = V.prior_rows_between(corpus_prior, hi, later[0]).collect()
            base = V.last_prior_rows(pl.concat([table, more]).lazy()).collect()
            del table, rows, more
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
    per_survey = (
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
    ctx.write("negatives", negatives)
    ctx.write("negative_surveys", per_survey)

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
        "negative_sampling": ncfg.negative_sampling,
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
