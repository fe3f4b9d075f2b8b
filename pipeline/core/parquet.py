"""Parquet written with fixed bytes: the same rows give the same file on any machine.

Every table a stage writes goes through here (``ReduceContext.write``, ``.writer``,
``.sink``; the extract writer keeps the same options): one chunk per column, pyarrow's
writer with a fixed codec and row-group size (:data:`ROW_GROUP_ROWS`), no key-value
metadata beyond the Arrow schema.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.core import schema as S
from pipeline.core.config import Config

ROW_GROUP_ROWS = 100_000


class RowGroupWriter:
    """Parquet written in batches with the bytes :func:`write_table` gives the whole table.

    Rows are buffered and written in row groups of exactly :data:`ROW_GROUP_ROWS` rows
    (one chunk per column), so the file does not depend on how the rows were batched.
    Writes to ``path`` directly: use it on a stage's temp output path.
    """

    def __init__(
        self,
        path: Path,
        schema: pa.Schema,
        cfg: Config,
        what: str,
        group_rows: int = ROW_GROUP_ROWS,
    ) -> None:
        # group_rows: a table of long texts takes smaller groups, so one group stays small
        self.schema, self.what, self.group_rows = schema, what, group_rows
        self.writer = pq.ParquetWriter(
            path, schema, compression=cfg.common.compression, write_statistics=True,
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
        while self.n_pending >= self.group_rows:
            self._flush(self.group_rows)

    def _flush(self, n: int) -> None:
        table = pa.concat_tables(self.pending) if self.pending else self.schema.empty_table()
        head, rest = table.slice(0, n), table.slice(n)
        self.writer.write_table(head.combine_chunks(), row_group_size=self.group_rows)
        self.pending, self.n_pending, self.rows = [rest], rest.num_rows, self.rows + n

    def close(self) -> int:
        """Write the last rows and the footer; return the row count."""
        if self.n_pending or self.rows == 0:  # an empty table is one empty row group
            self._flush(self.n_pending)
        self.writer.close()
        return self.rows


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
        compression=cfg.common.compression,
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
        scratch, compression=cfg.common.compression
    )
    try:
        target = schema.remove_metadata()
        pending: list[pa.Table] = []
        held = 0
        with pq.ParquetWriter(
            path,
            target,
            compression=cfg.common.compression,
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


def readable_schema(path: Path, error: type[Exception]) -> pl.Schema:
    """The schema of the Parquet file ``path``, read from its footer.

    Raises:
        error: the file cannot be read as Parquet (truncated, binary, empty): one line
            naming it, raised with the caller's own error type.
    """
    try:
        return pl.read_parquet_schema(path)
    except (OSError, pl.exceptions.PolarsError) as e:
        raise error(f"{path}: not a readable Parquet file ({e})") from e
