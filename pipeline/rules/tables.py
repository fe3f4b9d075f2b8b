"""Readers shared by the reduce stages: extract tables with cross-file duplicates removed.

A paper that appears in two input files is kept once: the copy from the file whose
``source_file`` (path relative to its ``--input``) sorts first wins; two inputs with
the same relative path (rare: two ``--input`` folders holding the same names) are
told apart by their output key (within one file, the first line already won in
``extract``).
References and mentions follow their paper's winning copy.

The readers take the extract stage's files (:data:`ExtractFiles`: a stage gets them from
its context, ``ctx.files_by_table("extract")``), never the context itself: rules sit below
the engine that runs stages.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import polars as pl

from pipeline.core import schema as S

# the extract stage's Parquet files, table by table (``papers`` decides which copy wins)
ExtractFiles = Mapping[str, Sequence[Path]]

_KEY = "_extract_key"  # the extract output's file key (input name + path digest)


def _scan_keyed(
    extract: ExtractFiles, table: str, paper_ids: pl.Series | None = None
) -> pl.LazyFrame:
    """An extract table plus the key of the input file each row came from."""
    paths = extract[table]
    schema = S.EXTRACT_TABLES[table]
    if not paths:
        return S.scan([], schema).with_columns(pl.lit(None, pl.String).alias(_KEY))
    lf = pl.scan_parquet([str(p) for p in paths], include_file_paths=_KEY)
    if paper_ids is not None:
        # before the casts, so the Parquet reader applies it as it reads: a semi-join
        # would read (and, measured, hold) every row first
        lf = lf.filter(pl.col(S.PAPER_ID).is_in(paper_ids.implode()))
    return lf.with_columns(
        [pl.col(n).cast(t) for n, t in S.polars_schema(schema).items()]
    ).with_columns(pl.col(_KEY).str.extract(r"([^/\\]+)\.parquet$", 1))


def papers_winner(extract: ExtractFiles, paper_ids: pl.Series | None = None) -> pl.LazyFrame:
    """``(paper_id, key)`` of the copy of each paper that is kept (of ``paper_ids`` only, if given).

    The copy whose ``source_file`` sorts first wins; files with the same
    ``source_file`` are told apart by their file key, so exactly one copy survives.
    """
    return (
        _scan_keyed(extract, "papers", paper_ids)
        .select(S.PAPER_ID, S.SOURCE_FILE, _KEY)
        .sort(S.PAPER_ID, S.SOURCE_FILE, _KEY)
        .group_by(S.PAPER_ID)
        .agg(pl.col(_KEY).first())
    )


def scan_extract(
    extract: ExtractFiles, table: str, paper_ids: pl.Series | None = None
) -> pl.LazyFrame:
    """An extract table (``papers``, ``references``, ``mentions``) restricted to winning copies.

    Args:
        extract: the extract stage's files, table by table.
        table: extract table name.
        paper_ids: when given, only these papers' rows (e.g. the surveys'): filtered as
            the files are read, which bounds memory by their rows, not the table's.
    """
    return (
        _scan_keyed(extract, table, paper_ids)
        .join(papers_winner(extract, paper_ids), on=[S.PAPER_ID, _KEY], how="semi")
        .drop(_KEY)
    )


def scan_extract_files(
    extract: ExtractFiles, table: str, row_index: str | None = None
) -> list[pl.LazyFrame]:
    """:func:`scan_extract` cut by input file: one frame per extract output file, in file order.

    A paper's rows are all in the file of its winning copy, so work that is per paper
    (or per bib entry) gives the same rows file by file as on the whole table, with
    memory bounded by one file.

    Args:
        extract: the extract stage's files, table by table.
        table: extract table name.
        row_index: when given, a column of this name holding each row's number in its
            file (``UInt32``), the same in every query of the frame: a row's key in one
            integer.
    """
    winners = papers_winner(extract).collect(engine="streaming")
    dtypes = S.polars_schema(S.EXTRACT_TABLES[table])
    frames = []
    for path in extract[table]:
        key = re.search(r"([^/\\]+)\.parquet$", str(path))
        own = winners.filter(pl.col(_KEY) == (key.group(1) if key else ""))[S.PAPER_ID]
        frames.append(
            pl.scan_parquet(str(path), row_index_name=row_index)
            # before the casts, so the Parquet reader applies it as it reads (as _scan_keyed)
            .filter(pl.col(S.PAPER_ID).is_in(own.implode()))
            .with_columns([pl.col(n).cast(t) for n, t in dtypes.items()])
        )
    return frames


def id_batches(
    sizes: pl.DataFrame, max_total: int, max_items: int | None = None
) -> list[pl.Series]:
    """``(id, size)`` rows cut, in order, into consecutive batches of at most ``max_total``
    summed size and at most ``max_items`` ids; an id whose size alone is larger gets a batch
    of its own. The ids keep their column name and dtype."""
    name = sizes.columns[0]
    batches: list[list[str]] = []
    current: list[str] = []
    total = 0
    for item, n in sizes.iter_rows():
        full = max_items is not None and len(current) >= max_items
        if current and (full or total + n > max_total):
            batches.append(current)
            current, total = [], 0
        current.append(item)
        total += n
    if current:
        batches.append(current)
    return [pl.Series(name, b, dtype=sizes.schema[name]) for b in batches]


def duplicate_papers(papers: pl.LazyFrame) -> int:
    """Number of paper copies dropped because another input file holds the same paper
    (``papers``: the extract stage's ``papers`` table, every copy)."""
    lf = papers
    total = lf.select(pl.len()).collect().item()
    unique = lf.select(pl.col(S.PAPER_ID).n_unique()).collect().item()
    return int(total - unique)
