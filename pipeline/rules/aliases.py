"""Aliases: the identifiers a cited work is known by, and the links between them.

An alias is a prefixed identifier (``arxiv:2104.06921``, ``doi:10.1/x``,
``openalex:W123``). Two aliases are linked when one bib entry, or one corpus paper,
carries both; ``works`` joins linked aliases into one work, and ``negatives`` uses the
same links to keep a survey's near-citations out of its negatives.
"""

from __future__ import annotations

import polars as pl

from pipeline.core import schema as S

ALIAS = S.LINK_ALIAS
OTHER = S.LINK_OTHER_ALIAS
ARXIV_PREFIX = "arxiv:"
DOI_PREFIX = "doi:"
OPENALEX_PREFIX = "openalex:"
# DataCite DOIs that arXiv mints for every new-style id.
ARXIV_DOI = r"^10\.48550/arxiv\.(\d{4}\.\d{4,5})$"
# An alias's kind is its prefix: the lower-case letters before the first colon.
ID_KIND = r"^([a-z]+):"


def id_kind(ids: pl.Expr) -> pl.Expr:
    """The kind of each alias of ``ids`` (``"arxiv"`` for ``arxiv:2104.06921``; null for an
    id without a prefix)."""
    return ids.str.extract(ID_KIND, 1)


def entry_aliases(
    refs: pl.LazyFrame, keys: tuple[str, ...] = (S.PAPER_ID, S.REF_ID)
) -> pl.LazyFrame:
    """``(*keys, alias)``: every identifier of every bib entry (named by ``keys``), deduplicated."""
    return (
        pl.concat(
            [
                refs.select(*keys, (pl.lit(ARXIV_PREFIX) + pl.col(S.ARXIV_ID)).alias(ALIAS)),
                refs.select(
                    *keys,
                    (pl.lit(ARXIV_PREFIX) + pl.col(S.DOI).str.extract(ARXIV_DOI, 1)).alias(ALIAS),
                ),
                refs.select(*keys, (pl.lit(DOI_PREFIX) + pl.col(S.DOI)).alias(ALIAS)),
                refs.select(*keys, (pl.lit(OPENALEX_PREFIX) + pl.col(S.OPENALEX_ID)).alias(ALIAS)),
            ]
        )
        .drop_nulls(ALIAS)
        .unique()
    )


def paper_aliases(papers: pl.LazyFrame) -> pl.LazyFrame:
    """``(paper_id, alias)``: a corpus paper's own arXiv id and its metadata DOI."""
    return (
        pl.concat(
            [
                papers.select(S.PAPER_ID, (pl.lit(ARXIV_PREFIX) + pl.col(S.PAPER_ID)).alias(ALIAS)),
                papers.select(
                    S.PAPER_ID,
                    (pl.lit(ARXIV_PREFIX) + pl.col(S.DOI).str.extract(ARXIV_DOI, 1)).alias(ALIAS),
                ),
                papers.select(S.PAPER_ID, (pl.lit(DOI_PREFIX) + pl.col(S.DOI)).alias(ALIAS)),
            ]
        )
        .drop_nulls(ALIAS)
        .unique()
    )


def entry_links(
    entry_aliases: pl.LazyFrame, keys: tuple[str, ...] = (S.PAPER_ID, S.REF_ID)
) -> pl.LazyFrame:
    """Distinct links ``(alias, other_alias)``, ``alias < other_alias``, of aliases of one entry
    (named by ``keys``).

    Every pair of aliases of one entry is linked (not a star), so dropping a junk
    alias never disconnects the others.
    """
    return (
        entry_aliases.join(entry_aliases.rename({ALIAS: OTHER}), on=list(keys), how="inner")
        .filter(pl.col(ALIAS) < pl.col(OTHER))
        .select(ALIAS, OTHER)
        .unique()
    )


def paper_links(paper_aliases: pl.LazyFrame) -> pl.LazyFrame:
    """Distinct links ``(alias, other_alias)`` between the aliases of one corpus paper."""
    return (
        paper_aliases.join(paper_aliases.rename({ALIAS: OTHER}), on=S.PAPER_ID, how="inner")
        .filter(pl.col(ALIAS) < pl.col(OTHER))
        .select(ALIAS, OTHER)
        .unique()
    )
