"""``parquet.sink_checked``: a streamed table has the bytes of the same rows written at once."""

from __future__ import annotations

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
