"""Readers of extract outputs keep exactly one copy of a paper found in several files."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from pipeline.cli import main


def test_same_named_files_in_two_folders_keep_one_copy(
    tmp_path: Path, sample_lines: list[bytes]
) -> None:
    body = b"\n".join(sample_lines[:4]) + b"\n"
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "part.jsonl").write_bytes(body)
    out = tmp_path / "out"
    args = [
        "extract",
        "--input",
        str(tmp_path / "a"),
        "--input",
        str(tmp_path / "b"),
        "--out",
        str(out),
    ]
    assert main([*args, "--workers", "1"]) == 0
    assert main(["works", "--out", str(out)]) == 0
    counts = json.loads((out / "works" / "_SUCCESS.json").read_text())["counts"]
    assert counts["papers"] == 4
    assert counts["duplicate_papers_dropped"] == 4
    cites = pl.read_parquet(out / "works" / "cites.parquet")
    assert cites.select(pl.struct("paper_id", "ref_id").is_duplicated().any()).item() is False
    refs = sum(json.loads(line)["bib_entries"].__len__() for line in sample_lines[:4])
    assert cites.height == refs
