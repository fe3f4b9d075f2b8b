"""Time of the openalex stage's records table at scale: ``_rows`` over N works and their
cached answers (nine in ten works have a lookup key, one answer in seven is "not found").

``python bench/openalex_rows.py --works 1000000`` prints the seconds; ``--works-table
OUT/works/works.parquet`` takes the works and lookup keys of a finished run instead (read
only), every key answered. The cache's load and the API are not in it: this is the part
that grows with the works table on every run, the lookups happen once.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import polars as pl

from pipeline.core import schema as S
from pipeline.corpus import openalex as OA
from pipeline.stages import openalex as stage


def inputs(n: int, works: Path | None = None) -> tuple[pl.DataFrame, dict[str, OA.Answer]]:
    """``(keys, answers)`` of ``n`` synthetic works (or of the works table ``works``), as
    ``build_openalex`` holds them."""
    if works is None:
        keys = pl.DataFrame(
            {
                S.WORK_ID: [f"w{i:09d}" for i in range(n)],
                S.LOOKUP_KEY: [f"openalex:W{i}" if i % 10 else None for i in range(n)],
            }
        )
    else:
        keys = (
            pl.scan_parquet(works)
            .select(S.WORK_ID, stage.lookup_key(pl.col(S.ALIASES)).alias(S.LOOKUP_KEY))
            .sort(S.WORK_ID)
            .collect(engine="streaming")
        )
    answers: dict[str, OA.Answer] = {}
    for i, key in enumerate(keys[S.LOOKUP_KEY]):
        if key is None:
            continue
        if i % 7 == 0:
            answers[key] = OA.Answer(key=key, found=False, source="api")
            continue
        record = OA.Described(
            openalex_id=f"W{i}", title=f"Title {i}", publication_date="2020-01-02",
            publication_year=2020, venue="Venue", subfield="Software", abstract="a b c",
            license="cc-by", updated_date="2025-01-01",
        )  # fmt: skip
        answers[key] = OA.Answer(key=key, found=True, source="api", record=record)
    return keys, answers


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--works", type=int, default=1_000_000, help="synthetic works")
    parser.add_argument("--works-table", type=Path, default=None, help="a works.parquet")
    args = parser.parse_args(argv)
    keys, answers = inputs(args.works, args.works_table)
    start = time.perf_counter()
    rows = stage._rows(keys, answers)
    seconds = time.perf_counter() - start
    print(f"_rows: {keys.height:,} works, {len(answers):,} answers -> {rows.height:,} rows "
          f"in {seconds:.2f} s")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
