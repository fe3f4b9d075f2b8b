"""``parquet.sink_checked`` and ``parquet.RowGroupWriter``: a table streamed or written in
batches has the bytes of the same rows written at once."""

from __future__ import annotations

import threading
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.core import parquet
from pipeline.core.config import load_config

SCHEMA = pa.schema([("id", pa.string()), ("n", pa.int64())])


def _rows(n: int) -> pl.DataFrame:
    return pl.DataFrame({"id": [f"w{i:05d}" for i in range(n)], "n": list(range(n))})


@pytest.mark.parametrize("n", [0, 5, 7, 100])
def test_sink_has_fixed_row_groups_and_the_bytes_of_write_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, n: int
) -> None:
    monkeypatch.setattr(parquet, "ROW_GROUP_ROWS", 7)
    cfg = load_config(None)
    # several input files: the sink sees several morsels, as on a real corpus
    for i, part in enumerate(_rows(n).iter_slices(13) if n else [_rows(0)]):
        part.write_parquet(tmp_path / f"in-{i:03d}.parquet")
    lf = pl.scan_parquet(sorted(tmp_path.glob("in-*.parquet")))
    parquet.sink_checked(lf, SCHEMA, tmp_path / "sunk.parquet", cfg)
    parquet.write_table(_rows(n), tmp_path / "written.parquet", SCHEMA, cfg, "t")

    meta = pq.ParquetFile(tmp_path / "sunk.parquet").metadata
    sizes = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
    assert sum(sizes) == n
    assert all(s == 7 for s in sizes[:-1]) and (not sizes or 0 < sizes[-1] <= 7 or n == 0)
    assert (tmp_path / "sunk.parquet").read_bytes() == (tmp_path / "written.parquet").read_bytes()
    assert not list(tmp_path.glob("_*"))  # the scratch file is gone


@pytest.mark.parametrize("batches", [[0], [3], [7], [3, 4, 9, 0, 1, 20], [6, 8, 7]])
def test_batched_writer_has_the_bytes_of_write_table(tmp_path: Path, batches: list[int]) -> None:
    # row groups are written by a helper thread while the next batch comes in; the file
    # must not depend on how the rows were batched nor on when the thread ran
    cfg = load_config(None)
    rows = _rows(sum(batches))
    writer = parquet.RowGroupWriter(tmp_path / "batched.parquet", SCHEMA, cfg, "t", group_rows=7)
    start = 0
    for size in batches:
        writer.write(rows.slice(start, size))
        start += size
    assert writer.close() == rows.height
    # write_table cuts groups of ROW_GROUP_ROWS: compare with a writer of one batch
    whole = parquet.RowGroupWriter(tmp_path / "whole.parquet", SCHEMA, cfg, "t", group_rows=7)
    whole.write(rows)
    whole.close()
    meta = pq.ParquetFile(tmp_path / "batched.parquet").metadata
    sizes = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
    assert all(s == 7 for s in sizes[:-1]) and sum(sizes) == rows.height
    assert (tmp_path / "batched.parquet").read_bytes() == (tmp_path / "whole.parquet").read_bytes()
    if rows.height <= 7:
        parquet.write_table(rows, tmp_path / "written.parquet", SCHEMA, cfg, "t")
        assert (tmp_path / "batched.parquet").read_bytes() == (
            tmp_path / "written.parquet"
        ).read_bytes()
    assert not [t for t in threading.enumerate() if t.name.startswith("parquet-write")]


def test_a_failed_row_group_write_is_raised_and_ends_the_helper(tmp_path: Path) -> None:
    cfg = load_config(None)
    ahead = parquet._WriteAhead(parquet._parquet_writer(tmp_path / "t.parquet", SCHEMA, cfg), 7)
    ahead.put(pa.table({"id": ["a"], "n": [1]}, schema=SCHEMA))
    ahead.put(pa.table({"other": [1.5]}))  # not the file's schema: pyarrow refuses it
    with pytest.raises(ValueError, match="schema"):
        ahead.close()
    assert not [t for t in threading.enumerate() if t.name.startswith("parquet-write")]
