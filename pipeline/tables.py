"""Readers shared by the reduce stages: extract tables with cross-file duplicates removed.

A paper that appears in two input files is kept once: the copy from the file whose
``source_file`` (path relative to its ``--input``) sorts first wins; two inputs with
the same relative path (rare: two ``--input`` folders holding the same names) are
told apart by their output key (within one file, the first line already won in
``extract``).
References and mentions follow their paper's winning copy.
"""

from __future__ import annotations

import re
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


def scan_extract_files(ctx: ReduceContext, table: str) -> list[pl.LazyFrame]:
    """:func:`scan_extract` cut by input file: one frame per extract output file, in file order.

    A paper's rows are all in the file of its winning copy, so work that is per paper
    (or per bib entry) gives the same rows file by file as on the whole table, with
    memory bounded by one file.
    """
    winners = papers_winner(ctx).collect(engine="streaming")
    dtypes = S.polars_schema(S.EXTRACT_TABLES[table])
    frames = []
    for path in ctx.upstream("extract", table):
        key = re.search(r"([^/\\]+)\.parquet$", str(path))
        own = winners.filter(pl.col(_KEY) == (key.group(1) if key else "")).select(S.PAPER_ID)
        frames.append(
            pl.scan_parquet(str(path))
            .with_columns([pl.col(n).cast(t) for n, t in dtypes.items()])
            .join(own.lazy(), on=S.PAPER_ID, how="semi")
        )
    return frames


class RowGroupWriter:
    """Parquet written in batches with the bytes :func:`write_table` gives the whole table.

    Rows are buffered and written in row groups of exactly :data:`ROW_GROUP_ROWS` rows
    (one chunk per column), so the file does not depend on how the rows were batched.
    Writes to ``path`` directly: use it on a stage's temp output path.
    """

    def __init__(self, path: Path, schema: pa.Schema, cfg: Config, what: str) -> None:
        self.schema, self.what = schema, what
        self.writer = pq.ParquetWriter(
            path, schema, compression=cfg.extract.compression, write_statistics=True,
            store_schema=True,
        )  # fmt: skip
        self.pending: list[pa.Table] = []
        self.n_pending = 0
        self.rows = 0

    def write(self, df: pl.DataFrame) -> None:
        """Append ``df`` (checked against the schema)."""
        table = S.check(df.to_arrow(), self.schema, self.what).select(list(self.schema.names))
        self.pending.append(table.cast(self.schema).replace_schema_metadata(None))
        self.n_pending += table.num_rows
        while self.n_pending >= ROW_GROUP_ROWS:
            self._flush(ROW_GROUP_ROWS)

    def _flush(self, n: int) -> None:
        table = pa.concat_tables(self.pending) if self.pending else self.schema.empty_table()
        head, rest = table.slice(0, n), table.slice(n)
        self.writer.write_table(head.combine_chunks(), row_group_size=ROW_GROUP_ROWS)
        self.pending, self.n_pending, self.rows = [rest], rest.num_rows, self.rows + n

    def close(self) -> int:
        """Write the last rows and the footer; return the row count."""
        if self.n_pending or self.rows == 0:  # an empty table is one empty row group
            self._flush(self.n_pending)
        self.writer.close()
        return self.rows


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
    """Stream ``lf`` to Parquet with exactly the columns and types of ``schema``.

    Polars' streaming sink cuts row groups where its threads happen to, differently on
    every run (three runs of ``works`` at 100k papers, three files), so the rows go to a
    scratch file first and are copied, a row group at a time, into row groups of exactly
    :data:`ROW_GROUP_ROWS` with pyarrow's writer and the options of :func:`write_table`:
    the same rows give the same bytes, and no more than two row groups are held.
    """
    dtypes = S.polars_schema(schema)
    scratch = path.with_name(f"_{path.name}.sink")
    lf.select([pl.col(n).cast(t) for n, t in dtypes.items()]).sink_parquet(
        scratch, compression=cfg.extract.compression
    )
    try:
        target = schema.remove_metadata()
        pending: list[pa.Table] = []
        held = 0
        with pq.ParquetWriter(
            path,
            target,
            compression=cfg.extract.compression,
            write_statistics=True,
            store_schema=True,
        ) as writer:
            source = pq.ParquetFile(scratch)
            for i in range(source.num_row_groups):
                pending.append(source.read_row_group(i).cast(target))
                held += pending[-1].num_rows
                while held >= ROW_GROUP_ROWS:
                    rows = pa.concat_tables(pending).combine_chunks()
                    writer.write_table(rows.slice(0, ROW_GROUP_ROWS), row_group_size=ROW_GROUP_ROWS)
                    pending, held = [rows.slice(ROW_GROUP_ROWS)], rows.num_rows - ROW_GROUP_ROWS
            if held or source.metadata.num_rows == 0:
                rows = pa.concat_tables(pending) if pending else target.empty_table()
                writer.write_table(rows.combine_chunks(), row_group_size=ROW_GROUP_ROWS)
    finally:
        scratch.unlink(missing_ok=True)
