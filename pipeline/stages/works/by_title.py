"""Resolution by title, for bib entries without an identifier (:mod:`pipeline.rules.titles`):
a normalised key of every corpus title and the title-like pieces of every raw reference;
a key naming two works links nothing."""

from __future__ import annotations

import polars as pl

from pipeline.core import schema as S
from pipeline.rules import titles as T
from pipeline.stages.works.identity import ENTRY
from pipeline.stages.works.partials import PARSED_COUNT

_FROM_CORPUS = "_from_corpus"  # internal column (never written)


def entry_title_keys(entry_keys: pl.LazyFrame, entry_work: pl.LazyFrame) -> pl.LazyFrame:
    """``(work_id, title_key, _parsed_count)``: the title key of every resolved entry
    (``entry_work``: ``(_entry, work_id)``), with the number of those entries that give it.

    Of the entries resolved by identifier (pass 2), these are the keys that title
    resolution links to; with those of the entries resolved by title (pass 3), every title
    key known for a work (``title_keys``) and the counts of the works' parsed titles
    (:func:`~pipeline.stages.works.partials.parsed_titles`)."""
    return (
        entry_keys.filter(pl.col(T.SEGMENT_RANK) == 0)
        .join(entry_work, on=ENTRY, how="inner")
        .group_by(S.WORK_ID, T.KEY)
        .agg(pl.len().cast(pl.Int64).alias(PARSED_COUNT))
    )


def title_map(corpus: pl.LazyFrame, known: pl.LazyFrame) -> pl.DataFrame:
    """``(title_key, work_id, _from_corpus)`` of the keys that name exactly one work.

    Args:
        corpus: ``(work_id, title, ...)`` of the works that are corpus papers.
        known: ``(work_id, title_key)`` of :func:`entry_title_keys` of every entry resolved
            by identifier.
    """
    return (  # a key naming two works links nothing
        pl.concat(
            [
                T.corpus_title_keys(corpus).with_columns(pl.lit(True).alias(_FROM_CORPUS)),
                known.with_columns(pl.lit(False).alias(_FROM_CORPUS)),
            ]
        )
        .unique()
        .group_by(T.KEY)
        .agg(
            pl.col(S.WORK_ID).first(),
            pl.col(S.WORK_ID).n_unique().alias("_n"),
            pl.col(_FROM_CORPUS).any(),
        )
        .filter(pl.col("_n") == 1)
        .drop("_n")
        .collect(engine="streaming")
    )


def resolve_by_title(
    entry_keys: pl.LazyFrame, entry_work: pl.LazyFrame, titles: pl.LazyFrame
) -> pl.LazyFrame:
    """Resolve entries without identifier by title (:mod:`pipeline.rules.titles`).

    Args:
        entry_keys: :func:`pipeline.rules.titles.segment_keys` of bib entries (by ``_entry``,
            their row in their reference file: :data:`~pipeline.stages.works.identity.ENTRY`).
        entry_work: ``(_entry, work_id)`` of those entries resolved by identifier.
        titles: :func:`title_map`.

    Returns:
        ``(_entry, work_id)`` of the entries resolved by title.
    """
    return (
        entry_keys.join(entry_work, on=ENTRY, how="anti")
        .join(titles, on=T.KEY, how="inner")
        # any segment may equal a corpus title; only the title key links to other entries
        .filter(pl.col(_FROM_CORPUS) | (pl.col(T.SEGMENT_RANK) == 0))
        .group_by(ENTRY)
        .agg(pl.col(S.WORK_ID).first(), pl.col(S.WORK_ID).n_unique().alias("_n"))
        .filter(pl.col("_n") == 1)
        .select(ENTRY, S.WORK_ID)
    )
