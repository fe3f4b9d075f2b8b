"""Readers of extract outputs keep exactly one copy of a paper found in several files."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from pipeline import api


def test_same_named_files_in_two_folders_keep_one_copy(
    tmp_path: Path, sample_lines: list[bytes]
) -> None:
    body = b"\n".join(sample_lines[:4]) + b"\n"
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "part.jsonl").write_bytes(body)
    out = tmp_path / "out"
    api.extract([tmp_path / "a", tmp_path / "b"], out, workers=1)
    api.reduce("works", out)
    counts = json.loads((out / "works" / "_SUCCESS.json").read_text())["counts"]
    assert counts["papers"] == 4
    assert counts["duplicate_papers_dropped"] == 4
    cites = pl.read_parquet(out / "works" / "cites.parquet")
    assert cites.select(pl.struct("paper_id", "ref_id").is_duplicated().any()).item() is False
    refs = sum(json.loads(line)["bib_entries"].__len__() for line in sample_lines[:4])
    assert cites.height == refs


def test_write_table_bytes_do_not_depend_on_chunking(tmp_path: Path) -> None:
    """Polars splits frames by thread count; the written bytes must not follow the split."""
    from pipeline.core import schema as S
    from pipeline.core.config import Config
    from pipeline.core.parquet import write_table

    n = 40_000  # several Parquet data pages per column: page boundaries are what chunks moved
    rows = {
        "paper_id": [f"paper {i} " + "lorem ipsum dolor " * (i % 7) for i in range(n)],
        "ref_id": [f"{i * 7919 % 100_003:040x}" for i in range(n)],
        "work_id": [None if i % 3 else f"arxiv:{i}" for i in range(n)],
        "resolved_by": [None if i % 3 else "identifier" for i in range(n)],
    }
    schema = {
        "paper_id": pl.String,
        "ref_id": pl.String,
        "work_id": pl.String,
        "resolved_by": pl.String,
    }
    one = pl.DataFrame(rows, schema=schema)
    many = pl.concat([one.slice(i, 1_357) for i in range(0, n, 1_357)], rechunk=False)
    assert many.n_chunks() > 1
    write_table(one, tmp_path / "one.parquet", S.CITES, Config(), "one")
    write_table(many, tmp_path / "many.parquet", S.CITES, Config(), "many")
    assert (tmp_path / "one.parquet").read_bytes() == (tmp_path / "many.parquet").read_bytes()
