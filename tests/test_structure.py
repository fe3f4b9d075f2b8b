"""Section structure and roles on the real sample (49 papers, 2022 layout; 1 paper, 2024 layout).

The role table is checked against ``fixtures/real_headings.tsv``: every heading the
pre-issue-11 reader treated as top-level (341 instances, each with its paper id), plus
the unnamed top-level sections the structure rules add, with the role its citations
get now and the role they got before.
"""

from __future__ import annotations

import csv
from pathlib import Path

import polars as pl
import pytest

from pipeline import api
from pipeline.core import schema as S
from pipeline.core.config import RolesConfig
from pipeline.rules.roles import section_roles
from pipeline.stages.extract.structure import Occurrence, structure
from tests.conftest import FIXTURES, PREVIEW_2024, SAMPLE_2022

HEADINGS = FIXTURES / "real_headings.tsv"


@pytest.fixture(scope="module")
def real_sections(tmp_path_factory: pytest.TempPathFactory) -> pl.DataFrame:
    out = tmp_path_factory.mktemp("structure")
    api.extract([SAMPLE_2022, PREVIEW_2024], out, workers=1)
    sections = pl.read_parquet(sorted((out / "extract" / "sections").glob("*.parquet")))
    roles = section_roles(sections.lazy(), RolesConfig()).collect()
    return sections.join(roles, on=[S.PAPER_ID, S.SECTION_INDEX]).sort(S.PAPER_ID, S.SECTION_INDEX)


def _table() -> list[dict[str, str]]:
    with HEADINGS.open(encoding="utf-8", newline="") as f:
        lines = (line for line in f if not line.startswith("#"))
        return list(csv.DictReader(lines, delimiter="\t", quoting=csv.QUOTE_NONE, escapechar="\\"))


def test_real_heading_table(real_sections: pl.DataFrame) -> None:
    """Every listed heading gets its expected role, in its paper's structure."""
    table = _table()
    wrong = []
    for pid in dict.fromkeys(r["paper_id"] for r in table):
        rows = [r for r in table if r["paper_id"] == pid]
        occs = real_sections.filter(pl.col(S.PAPER_ID) == pid).iter_rows(named=True)
        k = 0
        for occ in occs:
            if k == len(rows):
                break
            want = rows[k]
            unnamed = want["sec_type"] == "(unnamed)"
            if occ[S.UNNAMED] != unnamed or occ[S.SECTION] != want["heading"]:
                continue  # a heading that is not in the table (a subsection)
            if want["layout"] == "2022" and occ[S.SEC_NUMBER] != want["sec_number"]:
                continue
            k += 1
            if occ[S.ROLE] != want["expected_role"]:
                wrong.append((pid, want["sec_number"], want["heading"], occ[S.ROLE], want))
        assert k == len(rows), f"{pid}: only {k} of {len(rows)} listed headings found"
    assert not wrong, wrong
    instances = [r for r in table if r["sec_type"] != "(unnamed)"]
    changed = [r for r in instances if r["role_before"] != r["expected_role"]]
    print(
        f"real heading instances: {len(instances)}, role changed: {len(changed)} "
        f"({len(changed) / len(instances):.3f}); unnamed sections: {len(table) - len(instances)}"
    )
    assert len(instances) == 341 and len(changed) == 86


def test_dotted_subsections_stay_in_their_section(real_sections: pl.DataFrame) -> None:
    """A "2.1" occurrence is inside top-level section 2 (23 papers open a section with one)."""
    tops = real_sections.select(
        S.PAPER_ID, pl.col(S.SECTION_INDEX).alias(S.TOP_INDEX), pl.col(S.SEC_NUMBER).alias("top")
    )
    dotted = (
        real_sections.filter(pl.col(S.SEC_NUMBER).str.contains(r"^[0-9A-Z]+\."))
        .join(tops, on=[S.PAPER_ID, S.TOP_INDEX])
        .with_columns(pl.col(S.SEC_NUMBER).str.extract(r"^([0-9A-Z]+)\.", 1).alias("head"))
    )
    assert dotted.height > 100
    assert dotted.filter(pl.col("head") != pl.col("top")).height == 0


def test_no_paragraph_heading_is_top_level(real_sections: pl.DataFrame) -> None:
    """Paragraph-level headings (empty sec_type) stay inside a section; only a paper whose
    whole text has one blank heading keeps it as its only section."""
    tops = real_sections.filter(pl.col(S.SECTION_INDEX) == pl.col(S.TOP_INDEX))
    para_tops = tops.filter((pl.col(S.LEVEL) == 4) & (pl.col(S.SECTION) != ""))
    assert para_tops.height == 0, para_tops


def test_lettered_appendices(real_sections: pl.DataFrame) -> None:
    tops = real_sections.filter(pl.col(S.SECTION_INDEX) == pl.col(S.TOP_INDEX))
    lettered = tops.filter(pl.col(S.SEC_NUMBER).str.contains(r"^[A-Z]"))
    assert lettered.height == 18  # 16 headed ("A Convex analysis") + unnamed "D", "S1"
    assert lettered[S.APPENDIX].all()
    assert (lettered[S.ROLE] == "back_matter").all()
    # and their subsections
    inside = real_sections.join(
        lettered.select(S.PAPER_ID, pl.col(S.SECTION_INDEX).alias(S.TOP_INDEX)),
        on=[S.PAPER_ID, S.TOP_INDEX],
    )
    assert (inside[S.ROLE] == "back_matter").all()


def _occ(number: str, level: int, heading: str = "h") -> Occurrence:
    return Occurrence(heading, number, level, {})


def _tops(occs: list[Occurrence]) -> list[tuple[str, str]]:
    """(number, number of its top-level section) per occurrence; unnamed ones as 'u<number>'."""
    out = structure(occs)
    return [
        (("u" if o.unnamed else "") + o.number, out[o.top].number) for o in out
    ]  # fmt: skip


def test_structure_dotted_and_letters() -> None:
    occs = [_occ("1", 1), _occ("2.1", 2), _occ("2.2", 2), _occ("2.0.0.1", 4), _occ("3", 1)]
    occs += [_occ("A", 1), _occ("D.1", 2), _occ("-1", 2)]
    assert _tops(occs) == [
        ("1", "1"),
        ("u2", "2"),
        ("2.1", "2"),
        ("2.2", "2"),
        ("2.0.0.1", "2"),
        ("3", "3"),
        ("A", "A"),
        ("uD", "D"),
        ("D.1", "D"),
        ("-1", "D"),
    ]
    out = structure(
        [_occ("1", 1), _occ("2.1", 2), _occ("A", 1), _occ("D.1", 2)]
    )  # fmt: skip
    assert [o.appendix for o in out] == [False, False, False, True, True, False]


def test_structure_gaps_in_restarted_numbering() -> None:
    # 2212.11863: Introduction, subsections 1-4, subsections 1-3, 4 Conclusion
    occs = [_occ("1", 1)] + [_occ(str(i), 2) for i in (1, 2, 3, 4, 1, 2, 3)] + [_occ("4", 1)]
    got = _tops(occs)
    assert [t for _, t in got] == ["1", "2", "2", "2", "2", "2", "3", "3", "3", "3", "4"]
    # 2212.11817: section 2 with subsections 1, 2, then 1, 2 again before 4: the first
    # group stays in 2, the second is the missing 3
    occs = [_occ("2", 1), _occ("1", 2), _occ("2", 2), _occ("1", 2), _occ("2", 2), _occ("4", 1)]
    assert [t for _, t in _tops(occs)] == ["2", "2", "2", "3", "3", "3", "4"]
    # 2212.11850: paragraph-level headings between 1 and 3 form the missing section 2
    occs = [_occ("1", 1), _occ("-1", 4), _occ("-1", 4), _occ("3", 1)]
    assert [t for _, t in _tops(occs)] == ["1", "2", "2", "2", "3"]
    # no gap: restarted subsections stay where they are
    occs = [_occ("1", 1), _occ("1", 2), _occ("2", 2), _occ("2", 1)]
    assert [t for _, t in _tops(occs)] == ["1", "1", "1", "2"]
    # before any section: an occurrence is its own top-level section
    assert _tops([_occ("-1", 4, "")]) == [("-1", "-1")]


def test_real_unnamed_sections(real_sections: pl.DataFrame) -> None:
    """2212.11772 goes from "1 Introduction" to "2.1 Multimodal Sentiment Analysis": its
    section 2 is unnamed and topical, not part of the introduction."""
    p = real_sections.filter(pl.col(S.PAPER_ID) == "2212.11772")
    sub = p.filter(pl.col(S.SECTION) == "Multimodal Sentiment Analysis").row(0, named=True)
    top = p.filter(pl.col(S.SECTION_INDEX) == sub[S.TOP_INDEX]).row(0, named=True)
    assert (top[S.UNNAMED], top[S.SEC_NUMBER], top[S.ROLE]) == (True, "2", "other")
    assert sub[S.ROLE] == "other"
    # 2212.11790: "Contrastive representation learning" (2.0.0.1) is inside unnamed section 2
    p = real_sections.filter(pl.col(S.PAPER_ID) == "2212.11790")
    para = p.filter(pl.col(S.SECTION) == "Contrastive representation learning").row(0, named=True)
    assert para[S.TOP_INDEX] != para[S.SECTION_INDEX]
    # "Implementation Details for SSB" is appendix C, not an experiment section
    c = p.filter(pl.col(S.SECTION) == "Implementation Details for SSB").row(0, named=True)
    assert (c[S.APPENDIX], c[S.ROLE]) == (True, "back_matter")


def test_headings_table_file_is_documented() -> None:
    text = Path(HEADINGS).read_text(encoding="utf-8")
    assert text.startswith("# Real section headings")
