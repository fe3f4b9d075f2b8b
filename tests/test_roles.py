"""Section roles: heading -> role table, normalisation, overrides, the survey core."""

from __future__ import annotations

import polars as pl
import pytest

from pipeline import schema as S
from pipeline.config import RolesConfig
from pipeline.roles import (
    ROLE_TABLE,
    heading_role,
    heading_roles,
    normalize_heading,
    role_distribution,
    survey_role_expr,
)

EXPECTED = [
    # numbering, case, markers, LaTeX
    ("1 Introduction", "introduction"),
    ("I. INTRODUCTION", "introduction"),
    ("1. Introduction", "introduction"),
    ("Introduction {{cite:0123abcd}}", "introduction"),
    ("Abstract", "introduction"),
    ("Motivation", "introduction"),
    ("2.3 Related Works", "related_work"),
    ("II. RELATED WORK", "related_work"),
    ("\\emph{Related} Work", "related_work"),
    ("\\textbf{Prior Work}", "related_work"),
    ("Literature Review", "related_work"),
    ("State of the Art", "related_work"),
    ("Background and Related Work", "related_work"),
    ("Background", "background"),
    ("2 Preliminaries", "background"),
    ("Problem Formulation", "background"),
    ("Notation", "background"),
    ("3 Methodology", "method"),
    ("Research Methodology", "method"),
    ("Proposed Method", "method"),
    ("The Proposed $\\mathcal{M}$-Net", "method"),
    ("Our Approach", "method"),
    ("Approach", "method"),
    ("Implementation", "method"),
    ("Model Architecture", "method"),
    ("4 Experiments", "experiment"),
    ("IV. EXPERIMENTAL RESULTS", "experiment"),
    ("Experimental Setup", "experiment"),
    ("Evaluation", "experiment"),
    ("Results and Discussion", "experiment"),
    ("Ablation Study", "experiment"),
    ("Datasets and Benchmarks", "experiment"),
    ("Discussion", "discussion"),
    ("Limitations", "discussion"),
    ("Threats to Validity", "discussion"),
    ("Open Challenges", "discussion"),
    ("5 Conclusion", "conclusion"),
    ("Conclusions and Future Work", "conclusion"),
    ("Discussion and Conclusions", "conclusion"),
    ("Concluding Remarks", "conclusion"),
    ("Summary", "conclusion"),
    ("Acknowledgment", "back_matter"),
    ("Acknowledgements", "back_matter"),
    ("Acknowledgments", "back_matter"),
    ("Appendix", "back_matter"),
    ("Appendix A: Related Work", "back_matter"),
    ("A. Proof of Lemma 1", "other"),
    ("References", "back_matter"),
    ("Deep Learning Approaches for Bug Localization", "other"),
    ("BLUiR {{cite:e884e185c4edc54edbd1cac0ea9053e48c859b94}}", "other"),
    ("3D Reconstruction", "other"),
    ("", "other"),
    (None, "other"),
]


@pytest.mark.parametrize(("heading", "role"), EXPECTED)
def test_heading_role(heading: str | None, role: str) -> None:
    assert heading_role(heading) == role


def test_many_at_once_matches_one_by_one() -> None:
    headings = [h for h, _ in EXPECTED]
    assert heading_roles(headings) == [r for _, r in EXPECTED]


@pytest.mark.parametrize(
    ("heading", "normalized"),
    [
        ("2.3 Related Works", "related works"),
        ("IV. EXPERIMENTS", "experiments"),
        ("A.1 Proofs", "proofs"),
        ("A Survey of Methods", "a survey of methods"),
        ("BLUiR {{cite:abc}}", "bluir"),
        ("\\emph{Related} Work", "related work"),
        ("$k$-means Clustering", "means clustering"),
        ("Section 3: Results", "results"),
        ("3D Reconstruction", "3d reconstruction"),
        ("civil engineering", "civil engineering"),  # roman-numeral letters need a dot
    ],
)
def test_normalize(heading: str, normalized: str) -> None:
    assert normalize_heading(heading) == normalized


def test_every_role_in_table_is_known() -> None:
    assert {role for _, role in ROLE_TABLE} <= set(S.ROLES)


def test_overrides_come_first() -> None:
    cfg = RolesConfig(overrides={r"^bluir$": "method", r"^discussion$": "other"})
    assert heading_role("BLUiR {{cite:x}}", cfg) == "method"
    assert heading_role("4. Discussion", cfg) == "other"
    assert heading_role("Introduction", cfg) == "introduction"


def test_unknown_override_role_lists_available() -> None:
    with pytest.raises(ValueError, match="available: \\['introduction'"):
        heading_role("x", RolesConfig(overrides={"x": "methods"}))


def _survey_frame() -> pl.DataFrame:
    return pl.DataFrame(
        {
            S.PAPER_ID: ["s"] * 7,
            S.SECTION_INDEX: [0, 1, 2, 3, 4, 5, 6],
            S.ROLE: [
                "introduction",
                "method",  # the survey's own protocol, before the core
                "other",  # first topical section: the core starts
                "method",  # "Methodology" of a reviewed tool
                "experiment",
                "discussion",
                "conclusion",
            ],
        }
    )


def test_survey_core() -> None:
    df = _survey_frame()
    got = df.select(survey_role_expr(RolesConfig()))[S.ROLE].to_list()
    assert got == [
        "introduction",
        "method",
        "related_work",
        "related_work",
        "related_work",
        "related_work",
        "conclusion",
    ]
    only_topical = RolesConfig(survey_core_roles=("other",), survey_late_method_is_core=False)
    got = df.select(survey_role_expr(only_topical))[S.ROLE].to_list()
    assert got == [
        "introduction",
        "method",
        "related_work",
        "method",
        "experiment",
        "discussion",
        "conclusion",
    ]
    off = RolesConfig(survey_core_is_related_work=False)
    assert df.select(survey_role_expr(off))[S.ROLE].to_list() == df[S.ROLE].to_list()
    with pytest.raises(ValueError, match="unknown role"):
        survey_role_expr(RolesConfig(survey_core_roles=("topical",)))


def test_role_distribution() -> None:
    mentions = pl.LazyFrame(
        {
            S.TOP_SECTION: ["1 Introduction", "Related Work", "Related Work", "BLUiR", "Appendix"],
            S.N_MENTIONS: [3, 2, 1, 4, 1],
        },
        schema={S.TOP_SECTION: pl.String, S.N_MENTIONS: pl.Int32},
    )
    got = role_distribution(mentions, RolesConfig())
    assert list(got) == list(S.ROLES)
    assert got["introduction"] == 3 and got["related_work"] == 3 and got["other"] == 4
    assert got["back_matter"] == 1 and got["method"] == 0 and sum(got.values()) == 11
