"""Readers shared by the reduce stages: extract tables with cross-file duplicates removed.

A paper that appears in two input files is kept once: the copy from the file whose
``source_file`` name sorts first wins (within one file, the first line already won
in ``extract``). References and mentions follow their paper's winning copy.
"""

from __future__ import annotations

import polars as pl

from pipeline import schema as S
from pipeline.runner import ReduceContext


def papers_winner(ctx: ReduceContext) -> pl.LazyFrame:
    """``(paper_id, source_file)`` of the copy of each paper that is kept."""
    return (
        S.scan(ctx.upstream("extract", "papers"), S.PAPERS)
        .group_by(S.PAPER_ID)
        .agg(pl.col(S.SOURCE_FILE).min())
    )


def scan_extract(ctx: ReduceContext, table: str) -> pl.LazyFrame:
    """An extract table (``papers``, ``references``, ``mentions``) restricted to winning copies."""
    lf = S.scan(ctx.upstream("extract", table), S.EXTRACT_TABLES[table])
    return lf.join(papers_winner(ctx), on=[S.PAPER_ID, S.SOURCE_FILE], how="semi")


def duplicate_papers(ctx: ReduceContext) -> int:
    """Number of paper copies dropped because another input file holds the same paper."""
    lf = S.scan(ctx.upstream("extract", "papers"), S.PAPERS)
    total = lf.select(pl.len()).collect().item()
    unique = lf.select(pl.col(S.PAPER_ID).n_unique()).collect().item()
    return int(total - unique)
