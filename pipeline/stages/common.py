"""Readers shared by the reduce stages: extract tables with cross-file duplicates removed.

A paper that appears in two input files is kept once: the copy from the file whose
``source_file`` (path relative to its ``--input``) sorts first wins; two inputs with
the same relative path (rare: two ``--input`` folders holding the same names) are
told apart by their output key (within one file, the first line already won in
``extract``).
References and mentions follow their paper's winning copy.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline import schema as S
from pipeline.config import Config
from pipeline.runner import ReduceContext

ROW_GROUP_ROWS = 100_000


_KEY = "_extract_key"  # the extract output's file key (input name + path digest)


def _scan_keyed(ctx: ReduceContext, table: str, paper_ids: pl.Series | None = None) -> pl.LazyFrame:
    """An extract table plus the key of the input file each row came from."""
    paths = ctx.upstream("extract", table)
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


def papers_winner(ctx: ReduceContext, paper_ids: pl.Series | None = None) -> pl.LazyFrame:
    """``(paper_id, key)`` of the copy of each paper that is kept (of ``paper_ids`` only, if given).

    The copy whose ``source_file`` sorts first wins; files with the same
    ``source_file`` are told apart by their file key, so exactly one copy survives.
    """
    return (
        _scan_keyed(ctx, "papers", paper_ids)
        .select(S.PAPER_ID, S.SOURCE_FILE, _KEY)
        .sort(S.PAPER_ID, S.SOURCE_FILE, _KEY)
        .group_by(S.PAPER_ID)
        .agg(pl.col(_KEY).first())
    )


def scan_extract(
    ctx: ReduceContext, table: str, paper_ids: pl.Series | None = None
) -> pl.LazyFrame:
    """An extract table (``papers``, ``references``, ``mentions``) restricted to winning copies.

    Args:
        ctx: the reduce stage's context.
        table: extract table name.
        paper_ids: when given, only these papers' rows (e.g. the surveys'): filtered as
            the files are read, which bounds memory by their rows, not the table's.
    """
    return (
        _scan_keyed(ctx, table, paper_ids)
        .join(papers_winner(ctx, paper_ids), on=[S.PAPER_ID, _KEY], how="semi")
        .drop(_KEY)
    )


def duplicate_papers(ctx: ReduceContext) -> int:
    """Number of paper copies dropped because another input file holds the same paper."""
    lf = S.scan(ctx.upstream("extract", "papers"), S.PAPERS)
    total = lf.select(pl.len()).collect().item()
    unique = lf.select(pl.col(S.PAPER_ID).n_unique()).collect().item()
    return int(total - unique)


def write_table(df: pl.DataFrame, path: Path, schema: pa.Schema, cfg: Config, what: str) -> int:
    """Write ``df`` checked against ``schema`` with fixed Parquet options; return its row count.

    Only the schema's columns are written, in its order and types. The same rows always
    give the same bytes on any machine (with the same library versions): one chunk
    per column, pyarrow's writer with a fixed codec and row-group size
    (:data:`ROW_GROUP_ROWS`), no key-value metadata beyond the Arrow schema.
    """
    table = S.check(df.to_arrow(), schema, what).select(list(schema.names)).cast(schema)
    # One chunk per column: Polars splits its output by thread count, and chunk
    # boundaries change Parquet pages, so without this the bytes depend on the cores.
    table = table.combine_chunks().replace_schema_metadata(None)
    pq.write_table(
        table,
        path,
        compression=cfg.extract.compression,
        row_group_size=ROW_GROUP_ROWS,
        write_statistics=True,
        store_schema=True,
    )
    return table.num_rows


def sink_checked(lf: pl.LazyFrame, schema: pa.Schema, path: Path, cfg: Config) -> None:
    """Stream ``lf`` to Parquet with exactly the columns and types of ``schema``."""
    dtypes = S.polars_schema(schema)
    lf.select([pl.col(n).cast(t) for n, t in dtypes.items()]).sink_parquet(
        path, compression=cfg.extract.compression
    )
