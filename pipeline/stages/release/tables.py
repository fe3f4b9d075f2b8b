"""The release's tables: every (survey, candidate) row with the columns the reading lists
show, their BEIR/MTEB views, the aspect rows of a batch of surveys, and the works table.
The column rules are the package's (:mod:`pipeline.stages.release`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
import pyarrow.parquet as pq

from pipeline.core import schema as S
from pipeline.core.errors import StageError
from pipeline.core.parquet import RowGroupWriter
from pipeline.core.release_files import WORKS_TABLE_FILE
from pipeline.engine.context import ReduceContext
from pipeline.rules import visible as V
from pipeline.rules.described import TEXT_SOURCE, described_works
from pipeline.rules.document_text import EXCLUSION_REASONS, REASON, excluded_works
from pipeline.rules.fields import FIELD_CATEGORIES, fields_of, with_field_categories
from pipeline.rules.tables import scan_extract
from pipeline.rules.text_match import survey_text
from pipeline.rules.titles import work_title_keys

_W_PAPER = V.WORK_PAPER  # the candidate's corpus paper id, as in_domain_expr reads it


def text_exclusions(ctx: ReduceContext, cands: pl.LazyFrame) -> pl.DataFrame:
    """``(split, work_id, _text_exclusion)``: the candidate works of each split of ``cands``
    (``split``'s candidates) that the release leaves out of it for their shown text
    (:func:`pipeline.rules.document_text.excluded_works`)."""
    works = described_works(ctx.read("works", "works"), ctx.read("openalex", "records"))
    shown = (
        cands.select(S.SPLIT, S.WORK_ID)
        .unique()
        .join(
            works.select(S.WORK_ID, V.shown_title().alias(S.TITLE), pl.col(S.ABSTRACT)),
            on=S.WORK_ID,
            how="left",
        )
    )
    return excluded_works(shown).collect(engine="streaming")


def kept_candidates(
    cands: pl.LazyFrame, excluded: pl.DataFrame
) -> tuple[pl.LazyFrame, dict[str, Any]]:
    """``cands`` without the ``excluded`` works (:func:`text_exclusions`) and without the
    surveys they leave with no positive; and the counts of what went, per split: rows by
    reason and label side, the surveys left without a positive and their other rows."""
    reason = pl.col(REASON)
    positive = pl.col(S.LABEL) >= 1
    flagged = cands.select(S.SURVEY_ID, S.WORK_ID, S.LABEL, S.SPLIT).join(
        excluded.lazy(), on=[S.SPLIT, S.WORK_ID], how="left"
    )
    lost = (
        flagged.group_by(S.SURVEY_ID)
        .agg(
            pl.col(S.SPLIT).first(),
            positive.any().alias("_had"),
            (positive & reason.is_null()).any().alias("_has"),
            reason.is_null().sum().alias("_rows_left"),
        )
        .filter(pl.col("_had") & ~pl.col("_has"))
        .collect(engine="streaming")
    )
    by_reason = (
        flagged.drop_nulls(REASON)
        .group_by(S.SPLIT, REASON, positive.alias("_positive"))
        .len()
        .collect(engine="streaming")
    )
    splits: dict[str, Any] = {}
    for split in S.SPLIT_NAMES:
        rows = by_reason.filter(pl.col(S.SPLIT) == split)
        lost_here = lost.filter(pl.col(S.SPLIT) == split)
        splits[split] = {
            **{
                r: {
                    side: int(rows.filter((reason == r) & (pl.col("_positive") == p))["len"].sum())
                    for side, p in (("positives", True), ("negatives", False))
                }
                for r in EXCLUSION_REASONS
            },
            "surveys_without_positive": lost_here.height,
            "their_other_rows": int(lost_here["_rows_left"].sum()),
        }
    counts = {
        "works": {r: excluded.filter(reason == r)[S.WORK_ID].n_unique() for r in EXCLUSION_REASONS},
        "splits": splits,
    }
    kept = cands.join(
        excluded.lazy().select(S.SPLIT, S.WORK_ID), on=[S.SPLIT, S.WORK_ID], how="anti"
    ).join(lost.lazy().select(S.SURVEY_ID), on=S.SURVEY_ID, how="anti")
    return kept, counts


def candidate_works(ctx: ReduceContext, cands: pl.LazyFrame, path: Path) -> pl.LazyFrame:
    """Write to ``path`` the candidate columns the reading lists show of every work of
    ``cands`` (:func:`kept_candidates`), with what :func:`reading_lists` derives from them
    (``in_domain``'s inputs, the text source and the licence of the work's corpus paper), and
    scan it back.

    Each survey batch reads its works from this file: the shown texts, the field categories
    and the licences are derived once per release, not once per batch from the whole
    ``works``, ``openalex`` and ``papers`` tables (a cost that grows with the batches times
    the corpus).
    """
    fields = fields_of(ctx.cfg, ctx.read("works", "works"), ctx.read("openalex", "records"))
    works = with_field_categories(
        described_works(ctx.read("works", "works"), ctx.read("openalex", "records")), fields
    )
    licenses = scan_extract(ctx.files_by_table("extract"), "papers").select(
        pl.col(S.PAPER_ID).alias(_W_PAPER), pl.col(S.LICENSE).alias(S.CANDIDATE_LICENSE)
    )
    (
        works.join(cands.select(S.WORK_ID).unique(), on=S.WORK_ID, how="semi")
        .select(
            pl.col(S.WORK_ID),
            pl.col(S.ALIASES).alias(S.CANDIDATE_ALIASES),
            V.shown_title().alias(S.CANDIDATE_TITLE),
            pl.col(S.ABSTRACT).alias(S.CANDIDATE_ABSTRACT),
            pl.col(S.CATEGORIES).alias(S.CANDIDATE_CATEGORIES),
            pl.col(S.RAW).alias(S.CANDIDATE_RAW),
            pl.col(S.PAPER_ID).alias(_W_PAPER),
            pl.col(S.OA_ANSWERED_ID).alias(S.CANDIDATE_OPENALEX_ID),
            pl.col(S.OA_VENUE).alias(S.CANDIDATE_VENUE),
            pl.col(S.OA_YEAR).alias(S.CANDIDATE_YEAR),
            pl.col(S.OA_SUBFIELD).alias(S.CANDIDATE_SUBFIELD),
            pl.col(S.OA_RETRACTED).alias(S.CANDIDATE_RETRACTED),
            FIELD_CATEGORIES,
            TEXT_SOURCE,
        )
        .join(licenses, on=_W_PAPER, how="left")
        .sink_parquet(path, compression=ctx.cfg.common.compression)
    )
    return pl.scan_parquet(path)


def reading_lists(
    ctx: ReduceContext, survey_ids: pl.Series, cands: pl.LazyFrame, works: pl.LazyFrame
) -> pl.LazyFrame:
    """The (survey, candidate) rows of the release of the surveys ``survey_ids``, with a
    ``split`` column: their candidates in ``cands`` (:func:`kept_candidates`), their papers
    read from the extract, their works from ``works`` (:func:`candidate_works`), each
    filtered to the batch as the files are read."""
    cands = cands.filter(pl.col(S.SURVEY_ID).is_in(survey_ids.implode()))
    work_ids = cands.select(S.WORK_ID).unique().collect(engine="streaming")[S.WORK_ID]
    works = works.filter(pl.col(S.WORK_ID).is_in(work_ids.implode()))
    surveys = scan_extract(ctx.files_by_table("extract"), "papers", survey_ids).select(
        pl.col(S.PAPER_ID).alias(S.SURVEY_ID),
        pl.col(S.TITLE).alias(S.SURVEY_TITLE),
        pl.col(S.ABSTRACT).alias(S.SURVEY_ABSTRACT),
        pl.col(S.CATEGORIES).alias(S.SURVEY_CATEGORIES),
        pl.col(S.PRIMARY_CATEGORY).alias(S.SURVEY_PRIMARY_CATEGORY),
        pl.col(S.LICENSE).alias(S.SURVEY_LICENSE),
    )
    in_domain = V.in_domain_expr(S.SURVEY_PRIMARY_CATEGORY)
    names = {int(k): v for k, v in S.LABEL_NAMES.items()}
    return (
        cands.join(surveys, on=S.SURVEY_ID, how="left")
        .join(works, on=S.WORK_ID, how="left")
        .with_columns(
            pl.col(S.WORK_ID).alias(S.CANDIDATE_ID),
            pl.col(S.LABEL).replace_strict(names, return_dtype=pl.String).alias(S.LABEL_NAME),
            in_domain.alias(S.IN_DOMAIN),
            pl.col(S.CANDIDATE_RETRACTED).fill_null(False),
            # one representation for missing text: '' (schema.TEXT_COLUMNS)
            *[pl.col(c).fill_null("") for c in S.READING_LISTS.names if c in S.TEXT_COLUMNS],
        )
        .select(*S.READING_LISTS.names, S.SPLIT, TEXT_SOURCE)
        .sort(S.SURVEY_ID, S.CANDIDATE_ID)
    )


def beir_views(rows: pl.DataFrame) -> dict[str, pl.DataFrame]:
    """Queries, corpus, qrels and top_ranked of one split's reading-list rows (whole
    surveys; their texts are never null: ``schema.TEXT_COLUMNS``)."""
    queries = (
        rows.unique(S.SURVEY_ID)
        .select(
            pl.col(S.SURVEY_ID).alias(S.BEIR_ID),
            pl.col(S.SURVEY_TITLE).alias(S.BEIR_TITLE),
            # BEIR and MTEB read a query's text alone: the string the evaluation reads
            survey_text().alias(S.BEIR_TEXT),
            pl.col(S.SURVEY_PRIMARY_CATEGORY).alias(S.PRIMARY_CATEGORY),
        )
        .sort(S.BEIR_ID)
    )
    corpus = (
        rows.unique(S.CANDIDATE_ID)
        .select(
            pl.col(S.CANDIDATE_ID).alias(S.BEIR_ID),
            pl.col(S.CANDIDATE_TITLE).alias(S.BEIR_TITLE),
            # BEIR and MTEB read (title + " " + text).strip(): the abstract, '' when there
            # is none, makes that the string the evaluation reads (paper_text)
            pl.col(S.CANDIDATE_ABSTRACT).alias(S.BEIR_TEXT),
        )
        .sort(S.BEIR_ID)
    )
    qrels = rows.select(
        pl.col(S.SURVEY_ID).alias(S.BEIR_QUERY_ID),
        pl.col(S.CANDIDATE_ID).alias(S.BEIR_CORPUS_ID),
        pl.col(S.LABEL).cast(pl.Int32).alias(S.BEIR_SCORE),
    ).sort(S.BEIR_QUERY_ID, S.BEIR_CORPUS_ID)
    top_ranked = (
        qrels.group_by(S.BEIR_QUERY_ID)
        .agg(pl.col(S.BEIR_CORPUS_ID).sort().alias(S.BEIR_CORPUS_IDS))
        .sort(S.BEIR_QUERY_ID)
    )
    return {"queries": queries, "corpus": corpus, "qrels": qrels, "top_ranked": top_ranked}


# the name of label 0 for another positive of the survey (``negative_kind`` in_survey)
IN_SURVEY_NEGATIVE_NAME = "in_survey_negative"

# what an aspect row shows of its aspect
_ASPECT_QUERY_COLUMNS = (
    S.ASPECT_ID,
    S.ASPECT_HEADING,
    S.ASPECT_PARENT_HEADING,
    S.ASPECT_KIND,
    S.ASPECT_LEVEL,
    S.ASPECT_RANK,
    S.N_ASPECTS,
)


def aspect_rows(aspects: pl.LazyFrame, cands: pl.LazyFrame, rows: pl.DataFrame) -> pl.DataFrame:
    """The ``aspects`` rows (``schema.ASPECT_READING_LISTS``) of the surveys of ``rows`` (their
    reading-list rows): each aspect's candidates with the survey's and the candidate's columns
    as the reading lists show them, sorted by (aspect_id, candidate_id).

    Raises:
        RuntimeError: an aspect candidate is not a candidate of its survey's reading list.
    """
    ids = rows[S.SURVEY_ID].unique().implode()
    query = aspects.filter(pl.col(S.SURVEY_ID).is_in(ids)).select(*_ASPECT_QUERY_COLUMNS)
    judged = (S.ASPECT_ID, S.LABEL, S.LABEL_REASON, S.NEGATIVE_KIND, S.N_MENTIONS)
    own = [c for c in S.ASPECT_READING_LISTS.names if c in rows.columns and c not in judged]
    names = {int(k): v for k, v in S.LABEL_NAMES.items()}
    picked = (
        cands.filter(pl.col(S.SURVEY_ID).is_in(ids))
        .select(S.SURVEY_ID, pl.col(S.WORK_ID).alias(S.CANDIDATE_ID), *judged)
        .collect(engine="streaming")
    )
    out = (
        picked.join(query.collect(engine="streaming"), on=S.ASPECT_ID, how="inner")
        .join(rows.select(own), on=[S.SURVEY_ID, S.CANDIDATE_ID], how="inner")
        .with_columns(
            pl.when(pl.col(S.NEGATIVE_KIND) == S.NEGATIVE_KINDS[0])
            .then(pl.lit(IN_SURVEY_NEGATIVE_NAME))
            .otherwise(pl.col(S.LABEL).replace_strict(names, return_dtype=pl.String))
            .alias(S.LABEL_NAME)
        )
        .select(S.ASPECT_READING_LISTS.names)
        .sort(S.ASPECT_ID, S.CANDIDATE_ID)
    )
    if out.height != picked.height:
        raise RuntimeError(
            f"release: {picked.height - out.height} aspect candidate(s) are not candidates of "
            "their survey's reading list; rerun the aspects stage after split"
        )
    return out


def write_works_table(ctx: ReduceContext) -> int:
    """Write the works table (:data:`WORKS_TABLE_FILE`, ``schema.WORKS_TABLE``): every work of
    ``works`` (corpus papers and the works they cite), sorted by work id, with its aliases and
    the two title keys bibliography resolution looks a reference up by
    (:func:`pipeline.rules.titles.work_title_keys` of the title the release shows and of
    ``works.raw``, as the reading lists key a candidate); return its row count.

    The works are read from a scratch copy of their id, aliases, shown title and bib string,
    ``ctx.limits.release_works_batch_rows`` at a time: a raw string's segment keys are about
    twenty rows each, too many to hold for six million works at once.

    Raises:
        StageError: the works do not come in work-id order (the file's bytes would depend on
            how Polars ordered them).
    """
    scratch = ctx.scratch() / "works_table_input.parquet"
    shown = described_works(ctx.read("works", "works"), ctx.read("openalex", "records"))
    # works.parquet is sorted by work id, and described_works keeps its order
    shown.select(S.WORK_ID, S.ALIASES, V.shown_title().alias(S.TITLE), S.RAW).sink_parquet(
        scratch, compression=ctx.cfg.common.compression
    )
    writer = RowGroupWriter(ctx.output(WORKS_TABLE_FILE), S.WORKS_TABLE, ctx.cfg, "works table")
    last: str | None = None
    try:
        source = pq.ParquetFile(scratch)
        for batch in source.iter_batches(batch_size=ctx.limits.release_works_batch_rows):
            works: pl.DataFrame = pl.from_arrow(batch)  # type: ignore[assignment]
            ids = works[S.WORK_ID]
            if not ids.is_sorted() or (last is not None and ids.len() and ids[0] <= last):
                raise StageError(
                    "release: the works table's rows are not in work-id order; rerun the "
                    "works stage"
                )
            last = ids[-1] if ids.len() else last
            keys = work_title_keys(works, S.TITLE, S.RAW)
            writer.write(
                works.select(S.WORK_ID, S.ALIASES).join(
                    keys, on=S.WORK_ID, how="left", maintain_order="left"
                )
            )
        return writer.close()
    finally:
        # the release's files are listed (and hashed) before the runner removes the scratch
        scratch.unlink(missing_ok=True)


def check_unique_pairs(rows: pl.DataFrame) -> None:
    """Fail when a (survey_id, candidate_id) pair appears more than once.

    Raises:
        RuntimeError: names the first duplicated pair (in sorted order), how many times
            it appears, and how many pairs are duplicated.
    """
    dup = (
        rows.group_by(S.SURVEY_ID, S.CANDIDATE_ID)
        .len()
        .filter(pl.col("len") > 1)
        .sort(S.SURVEY_ID, S.CANDIDATE_ID)
    )
    if dup.height:
        survey, candidate, n = dup.row(0)
        raise StageError(
            f"release: (survey_id, candidate_id) = ({survey!r}, {candidate!r}) appears {n} "
            f"times; {dup.height} pair(s) are duplicated, {int(dup['len'].sum()) - dup.height} "
            "extra row(s) in all. Every (survey, candidate) pair must appear once: check the "
            "split stage's candidates table"
        )
