"""The 2024-layout version of the real 2022 sample gives the same references and mention totals."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from pipeline import api
from pipeline.corpus.layout import to_2024_layout


def _extract(path: Path, out: Path) -> dict[str, pl.DataFrame]:
    api.extract(path, out, workers=1)
    return {
        t: pl.read_parquet(sorted((out / "extract" / t).glob("*.parquet"))).drop("source_file")
        for t in ("papers", "references", "mentions")
    }


def test_both_layouts_same_references_and_mention_totals(
    tmp_path: Path, sample_records: list[dict]
) -> None:
    src_2024 = tmp_path / "in2024" / "sample_2024.jsonl"
    src_2024.parent.mkdir()
    src_2024.write_text("\n".join(json.dumps(to_2024_layout(r)) for r in sample_records) + "\n")
    src_2022 = tmp_path / "in2022" / "sample_2022.jsonl"
    src_2022.parent.mkdir()
    src_2022.write_text("\n".join(json.dumps(r) for r in sample_records) + "\n")

    a = _extract(src_2022, tmp_path / "a")
    b = _extract(src_2024, tmp_path / "b")
    assert set(a["papers"]["layout"]) == {"2022"} and set(b["papers"]["layout"]) == {"2024"}
    assert a["papers"].drop("layout").equals(b["papers"].drop("layout"))
    key = ["paper_id", "ref_id"]
    assert a["references"].sort(key).equals(b["references"].sort(key))

    def totals(m: pl.DataFrame) -> pl.DataFrame:
        return m.group_by(key).agg(pl.col("n_mentions").sum()).sort(key)

    assert totals(a["mentions"]).equals(totals(b["mentions"]))
    # the 2024 layout merges repeated headings and loses the hierarchy
    assert b["mentions"].filter(pl.col("section") != pl.col("top_section")).height == 0
    assert a["mentions"].filter(pl.col("section") != pl.col("top_section")).height > 0
