"""Labels from the 2024 layout agree with labels from the 2022 layout of the same papers.

The 2024 layout drops ``sec_type``/``sec_number``: every subsection becomes its own
top-level key and repeated headings are merged. Roles come from ``top_section``, so a
mention can change role: "Program spectrum" under "Background" is ``background`` in
2022 but a topical (survey core) section in 2024. Every disagreement must be of that
kind: the 2022 mention sits in a subsection whose own heading has another role than
its top-level section.

Real sample: its only survey (2212.11774) puts two cited subsections under
"Background"; the five works cited there (and only there, or there plus once in the
core) change tier, which caps the agreement at 26/31 = 0.84 (the 0.90 target is not
reached on this sample; every disagreement is checked to be a hierarchy loss).
Synthetic corpora agree fully.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from pipeline import schema as S
from pipeline.config import RolesConfig
from pipeline.layout import to_2024_layout
from pipeline.roles import heading_roles_frame
from tests.test_works import run_cli, run_stages

STAGES = ("works", "surveys", "labels")
KEY = [S.SURVEY_ID, S.WORK_ID]
REAL_MIN_AGREEMENT = 0.80
SYNTH_MIN_AGREEMENT = 0.90


def _labels(source: Path, out: Path) -> pl.DataFrame:
    run_cli("extract", "--input", str(source), "--out", str(out), "--workers", "1")
    run_stages(out, *STAGES)
    return pl.read_parquet(out / "labels" / "labels.parquet")


def _hierarchy_changes(out_2022: Path) -> pl.DataFrame:
    """(survey, work) pairs with a 2022 mention whose subsection heading has another role
    than its top-level section (what the 2024 layout would use instead)."""
    mentions = pl.scan_parquet(sorted((out_2022 / "extract" / "mentions").glob("*.parquet")))
    cites = pl.scan_parquet(out_2022 / "works" / "cites.parquet")
    roles = heading_roles_frame(
        mentions.select(pl.concat_list(S.SECTION, S.TOP_SECTION).alias("h")).explode("h"),
        "h",
        RolesConfig(),
    )
    return (
        mentions.filter(pl.col(S.SECTION) != pl.col(S.TOP_SECTION))
        .join(roles.rename({"h": S.SECTION, S.ROLE: "own"}), on=S.SECTION)
        .join(roles.rename({"h": S.TOP_SECTION, S.ROLE: "top"}), on=S.TOP_SECTION)
        .filter(pl.col("own") != pl.col("top"))
        .join(cites, on=[S.PAPER_ID, S.REF_ID])
        .select(pl.col(S.PAPER_ID).alias(S.SURVEY_ID), S.WORK_ID)
        .unique()
        .collect()
    )


def _compare(out_2022: Path, a: pl.DataFrame, b: pl.DataFrame, what: str) -> tuple[float, str]:
    both = a.join(b, on=KEY, how="full", suffix="_2024", coalesce=True)
    same = both.filter(pl.col(S.LABEL) == pl.col(f"{S.LABEL}_2024"))
    agreement = same.height / max(both.height, 1)
    differ = both.filter(pl.col(S.LABEL).ne_missing(pl.col(f"{S.LABEL}_2024")))
    unexplained = differ.join(_hierarchy_changes(out_2022), on=KEY, how="anti")
    transitions = (
        differ.group_by(S.LABEL, f"{S.LABEL}_2024").len().sort(S.LABEL, f"{S.LABEL}_2024").rows()
    )
    report = (
        f"{what}: {a[S.SURVEY_ID].n_unique()} surveys, {both.height} (survey, work) pairs, "
        f"agreement {agreement:.3f} ({same.height}/{both.height}); "
        f"disagreements (2022 tier, 2024 tier, n): {transitions}; "
        f"not explained by lost hierarchy: {unexplained.height}"
    )
    print(report)
    assert unexplained.height == 0, report + "\n" + str(unexplained)
    return agreement, report


def test_real_sample_both_layouts(tmp_path: Path, sample_records: list[dict]) -> None:
    src_2022 = tmp_path / "in2022" / "sample.jsonl"
    src_2024 = tmp_path / "in2024" / "sample.jsonl"
    for path, records in (
        (src_2022, sample_records),
        (src_2024, map(to_2024_layout, sample_records)),
    ):
        path.parent.mkdir()
        path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    a = _labels(src_2022, tmp_path / "o2022")
    b = _labels(src_2024, tmp_path / "o2024")
    assert a.select(KEY).equals(b.select(KEY)), "same surveys and resolved works"
    assert a.select(S.N_MENTIONS).equals(b.select(S.N_MENTIONS)), "same mention totals"
    agreement, report = _compare(tmp_path / "o2022", a, b, "real 2022 sample")
    assert agreement >= REAL_MIN_AGREEMENT, report


@pytest.mark.parametrize(("papers", "small"), [(300, True), (80, False)])
def test_synthetic_both_layouts(tmp_path: Path, papers: int, small: bool) -> None:
    from pipeline.synth import generate

    out = {}
    for layout in ("2022", "2024"):
        generate(tmp_path / f"in{layout}", papers, layout=layout, seed=11, small=small)
        out[layout] = _labels(tmp_path / f"in{layout}", tmp_path / f"o{layout}")
    a, b = out["2022"], out["2024"]
    assert a.height > 100 and a[S.SURVEY_ID].n_unique() >= 3
    agreement, report = _compare(
        tmp_path / "o2022", a, b, f"synthetic {papers} papers small={small}"
    )
    assert agreement >= SYNTH_MIN_AGREEMENT, report
