"""Parquet written with fixed bytes: the same rows give the same file on any machine.

Every table a stage writes goes through here (``ReduceContext.write``, ``.writer``,
``.sink``; the extract writer keeps the same options): one chunk per column, pyarrow's
writer with a fixed codec and row-group size (:data:`ROW_GROUP_ROWS`), no key-value
metadata beyond the Arrow schema.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.core import schema as S
from pipeline.core.config import Config

ROW_GROUP_ROWS = 100_000


class _WriteAhead:
    """A ParquetWriter fed by one helper thread, so a row group is encoded and compressed
    while the caller computes the next one.

    pyarrow releases the GIL while it joins chunks, encodes and compresses, and on two
    cores the stages leave the second one idle for much of that. The helper is one
    thread, so the groups reach the file in the order they were given and the bytes are
    those of writing them in turn; the caller waits for a group's write before handing
    over the next, so one group at most is held beyond what the caller holds. A write's
    error is raised by the next :meth:`put` or by :meth:`close`.
    """

    def __init__(self, writer: pq.ParquetWriter, group_rows: int) -> None:
        self.writer, self.group_rows = writer, group_rows
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="parquet-write")
        self.inflight: Future[None] | None = None

    def _write(self, table: pa.Table) -> None:
        self.writer.write_table(table.combine_chunks(), row_group_size=self.group_rows)

    def _wait(self) -> None:
        inflight, self.inflight = self.inflight, None
        if inflight is not None:
            inflight.result()

    def put(self, table: pa.Table) -> None:
        """Write ``table`` (at most ``group_rows`` rows) as the file's next row group."""
        self._wait()
        self.inflight = self.pool.submit(self._write, table)

    def close(self) -> None:
        """Wait for the last write and write the footer; the helper thread ends either way."""
        try:
            self._wait()
            self.writer.close()
        finally:
            self.pool.shutdown(wait=True)


def _parquet_writer(path: Path, schema: pa.Schema, cfg: Config) -> pq.ParquetWriter:
    """pyarrow's writer with the fixed options every table of a stage is written with."""
    return pq.ParquetWriter(
        path, schema, compression=cfg.common.compression, write_statistics=True,
        store_schema=True,
    )  # fmt: skip


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
        self.writer = _WriteAhead(_parquet_writer(path, schema, cfg), group_rows)
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
        self.writer.put(head)
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
    with _parquet_writer(path, table.schema, cfg) as writer:
        writer.write_table(table, row_group_size=ROW_GROUP_ROWS)
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
        # the next row group is read while the last one is written
        writer = _WriteAhead(_parquet_writer(path, target, cfg), ROW_GROUP_ROWS)
        try:
            source = pq.ParquetFile(scratch)
            for i in range(source.num_row_groups):
                pending.append(source.read_row_group(i).cast(target))
                held += pending[-1].num_rows
                while held >= ROW_GROUP_ROWS:
                    rows = pa.concat_tables(pending)
                    writer.put(rows.slice(0, ROW_GROUP_ROWS))
                    pending, held = [rows.slice(ROW_GROUP_ROWS)], rows.num_rows - ROW_GROUP_ROWS
            if held or source.metadata.num_rows == 0:
                writer.put(pa.concat_tables(pending) if pending else target.empty_table())
        finally:
            writer.close()
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
