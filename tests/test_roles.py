"""Section roles: heading -> role table, normalisation, overrides, the survey core."""

from __future__ import annotations

import polars as pl
import pytest

from pipeline.core import schema as S
from pipeline.core.config import RolesConfig
from pipeline.rules.roles import (
    ROLE_TABLE,
    heading_roles,
    normalize_expr,
    role_distribution,
    section_roles,
    survey_heading_role_expr,
    survey_role_expr,
)


def heading_role(heading: str | None, cfg: RolesConfig | None = None) -> str:
    """Role of one heading (the expression the stages apply)."""
    return heading_roles([heading], cfg)[0]


def survey_heading_role(heading: str | None, cfg: RolesConfig | None = None) -> str:
    """Survey role of one heading (``survey_heading_role_expr``)."""
    frame = pl.DataFrame(pl.Series("h", [heading], dtype=pl.String))
    return frame.select(survey_heading_role_expr(pl.col("h"), cfg or RolesConfig())).item()


def normalize_heading(heading: str | None) -> str:
    """The normalised text the role patterns see."""
    frame = pl.DataFrame(pl.Series("h", [heading], dtype=pl.String))
    return frame.select(normalize_expr(pl.col("h")))["h"].item()


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
    # background variants missed on real surveys (issue 47)
    ("2 Preliminary", "background"),
    ("2 Preliminary: From LLM RL to Agentic RL", "background"),
    ("Background and Motivation", "background"),
    ("Basics", "background"),
    ("Basics of Reinforcement Learning", "background"),
    ("Reinforcement Learning Basics", "background"),
    ("Fundamentals", "background"),
    ("Backgrounds", "background"),
    ("Basic Knowledge", "background"),
    ("Graph Neural Network Fundamentals", "background"),
    ("Preliminary Results", "experiment"),
    ("Preliminary Experiments", "experiment"),
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
    ("Threats to Validity", "method"),  # a systematic review's own protocol
    ("Future Directions", "discussion"),
    ("Open Problems and Future Research Directions", "discussion"),
    ("Open Challenges", "discussion"),
    ("5 Conclusion", "conclusion"),
    ("Conclusions and Future Work", "conclusion"),
    ("Discussion and Conclusions", "discussion"),  # still ends the body (ENDS_BODY)
    ("Discussion and Conclusion", "discussion"),
    ("Conclusion and Discussion", "conclusion"),
    ("Concluding Remarks", "conclusion"),
    ("Summary", "conclusion"),
    ("Acknowledgment", "back_matter"),
    ("Acknowledgements", "back_matter"),
    ("Acknowledgments", "back_matter"),
    ("Appendix", "back_matter"),
    ("Appendix A: Related Work", "back_matter"),
    ("A. Proof of Lemma 1", "method"),  # the paper's own argument
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


def _sections(
    pid: str, rows: list[tuple[str, str, int]], tops: list[int] | None = None
) -> pl.DataFrame:
    """A ``sections`` table: (heading, sec_number, level) per occurrence; ``tops`` gives
    each row's top_index (default: every row is top-level). An empty heading with a
    number is an unnamed section."""
    tops = tops if tops is not None else list(range(len(rows)))
    return pl.DataFrame(
        {
            S.PAPER_ID: [pid] * len(rows),
            S.SECTION_INDEX: list(range(len(rows))),
            S.SECTION: [h for h, _, _ in rows],
            S.SEC_NUMBER: [n for _, n, _ in rows],
            S.LEVEL: [lv for _, _, lv in rows],
            S.TOP_INDEX: tops,
            S.UNNAMED: [h == "" and n != "" for h, n, _ in rows],
            S.APPENDIX: [
                n[:1].isalpha() and i == t
                for i, ((_, n, _), t) in enumerate(zip(rows, tops, strict=True))
            ],
        },
        schema=S.polars_schema(S.SECTIONS.remove(S.SECTIONS.get_field_index(S.SOURCE_FILE))),
    )


def _roles(df: pl.DataFrame, survey: bool = False, cfg: RolesConfig | None = None) -> list[str]:
    got = section_roles(df.lazy(), cfg or RolesConfig(), survey=survey).collect()
    return got.sort(S.PAPER_ID, S.SECTION_INDEX)[S.ROLE].to_list()


def test_structure_rules() -> None:
    """Appendices, unnamed sections, related-work subsections (hand-made, 2022 layout)."""
    rows = [
        ("Introduction", "1", 1),  # 0
        ("Related work", "-1", 2),  # 1: related work inside the introduction
        ("", "2", 1),  # 2: unnamed; subsections mostly experiment
        ("Experimental Setup", "2.1", 2),
        ("Results", "2.2", 2),
        ("", "3", 1),  # 5: unnamed, topical subsections: other, not the previous role
        ("Retrieval", "3.1", 2),
        ("Conclusion", "4", 1),  # 7
        ("Proof details", "5", 1),  # 8: after the conclusion: an appendix
        ("Convex analysis", "A", 1),  # 9: lettered appendix
    ]
    tops = [0, 0, 2, 2, 2, 5, 5, 7, 8, 9]
    got = _roles(_sections("p", rows, tops))
    assert got == [
        "introduction",
        "related_work",
        "experiment",
        "experiment",
        "experiment",
        "other",
        "other",
        "conclusion",
        "back_matter",
        "back_matter",
    ]


def test_survey_protocol_is_method_everywhere() -> None:
    rows = [
        ("Introduction", "1", 1),
        ("Research Questions", "2", 1),  # protocol before the core: method (tier 2)
        ("Deep Learning Approaches", "3", 1),  # core
        ("Methodology", "3.1", 2),
        ("Evaluation", "4", 1),  # after the core: a reviewed work's evaluation -> core
        ("Open Challenges", "5", 1),  # core
        ("Threats to Validity", "6", 1),  # protocol after the core: still method
        ("Conclusion", "7", 1),
    ]
    tops = [0, 1, 2, 2, 4, 5, 6, 7]
    got = _roles(_sections("s", rows, tops), survey=True)
    assert got == [
        "introduction",
        "method",
        "related_work",
        "related_work",
        "related_work",
        "related_work",
        "method",
        "conclusion",
    ]


def test_survey_method_heading_is_core_wherever_it_stands() -> None:
    """A survey has no method of its own outside its protocol: "2 Architecture" before the
    first topical section describes the reviewed models (issue 47); a heading that can name
    the survey's own method ("Methodology") keeps the positional rule."""
    rows = [
        ("Introduction", "1", 1),
        ("Architecture", "2", 1),  # the first body section of a multimodal-LLM survey
        ("Vision Encoder", "2.1", 2),
        ("Methodology", "3", 1),  # before the core: possibly the survey's own method
        ("Search Strategy", "4", 1),  # protocol
        ("Training Recipes", "5", 1),  # core
        ("Framework", "6", 1),
        ("Conclusion", "7", 1),
    ]
    tops = [0, 1, 1, 3, 4, 5, 6, 7]
    df = _sections("s", rows, tops)
    assert _roles(df, survey=True) == [
        "introduction",
        "related_work",
        "related_work",
        "method",
        "method",
        "related_work",
        "related_work",
        "conclusion",
    ]
    off = RolesConfig(survey_method_is_core=False)
    assert _roles(df, survey=True, cfg=off)[1:3] == ["method", "method"]
    assert _roles(df)[1] == "method"  # not a survey: its own architecture


def test_mid_survey_summary_does_not_end_the_body() -> None:
    rows = [
        ("Introduction", "1", 1),
        ("Multimodal Models", "2", 1),
        ("Summary", "3", 1),  # mid-survey: a discussion section follows
        ("Grand Challenges", "4", 1),
        ("Summary and Discussion", "5", 1),  # mid-survey: a topical section follows
        ("Multimodal Agents", "6", 1),
        ("Summary", "7", 1),  # the last section: the survey's conclusion
        ("Acknowledgments", "8", 1),
        ("Proof details", "9", 1),
    ]
    df = _sections("s", rows)
    assert _roles(df, survey=True) == [
        "introduction",
        "related_work",
        "related_work",
        "related_work",
        "related_work",
        "related_work",
        "conclusion",
        "back_matter",
        "back_matter",
    ]
    # not a survey: a "Summary" ends the body (what follows is an appendix)
    assert _roles(df)[2:4] == ["conclusion", "back_matter"]


def test_discussion_and_conclusions_is_discussion_and_ends_the_body() -> None:
    rows = [
        ("Introduction", "1", 1),
        ("Graph Retrieval", "2", 1),
        ("Discussion and Conclusions", "3", 1),
        ("Proof details", "4", 1),  # after the body's end: an appendix
    ]
    df = _sections("s", rows)
    assert _roles(df, survey=True) == [
        "introduction",
        "related_work",
        "related_work",
        "back_matter",
    ]
    assert _roles(df) == ["introduction", "other", "discussion", "back_matter"]


@pytest.mark.parametrize(
    ("first_child", "role"),
    [
        ("Definitions", "background"),
        ("Terminology", "background"),
        ("Notation", "background"),
        ("Problem Formulation", "background"),
        ("A Brief History of Retrieval", "background"),
        ("Sparse Retrieval", "other"),  # no evidence: topical
    ],
)
def test_unnamed_section_after_the_introduction(first_child: str, role: str) -> None:
    """A textless section right after the introduction (2022 layout: known only from its
    subsections' numbers) that opens with definitions or a history is background."""
    rows = [
        ("Introduction", "1", 1),
        ("", "2", 1),  # unnamed
        (first_child, "2.1", 2),
        ("Dense Retrieval", "2.2", 2),
        ("Evaluation Metrics", "2.3", 2),
        ("", "3", 1),  # unnamed, not after the introduction: no rule
        ("Definitions", "3.1", 2),
        ("Sparse Models", "3.2", 2),
        ("Dense Models", "3.3", 2),
    ]
    tops = [0, 1, 1, 1, 1, 5, 5, 5, 5]
    got = _roles(_sections("p", rows, tops))
    assert got[1:5] == [role] * 4
    assert got[5:] == ["other"] * 4


def test_2024_background_run_option() -> None:
    rows = [
        ("Introduction", "", 0),
        ("Background", "", 0),
        ("Program spectrum", "", 0),  # a background subsection in the 2022 structure
        ("Overview of tools and techniques", "", 0),  # opens the core
        ("BLUiR", "", 0),
        ("Conclusion", "", 0),
        ("Training details", "", 0),  # after the conclusion: appendix
    ]
    df = _sections("s", rows)
    assert _roles(df, survey=True) == [
        "introduction",
        "background",
        "related_work",
        "related_work",
        "related_work",
        "conclusion",
        "back_matter",
    ]
    on = RolesConfig(background_run_2024=True)
    assert _roles(df, survey=True, cfg=on)[2] == "background"
    assert _roles(df, survey=True, cfg=on)[3:5] == ["related_work", "related_work"]


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
    own = pl.col(S.SECTION_INDEX) == 1  # the survey's own protocol heading
    got = df.select(survey_role_expr(RolesConfig(), protocol=own))[S.ROLE].to_list()
    assert got == [
        "introduction",
        "method",
        "related_work",
        "related_work",
        "related_work",
        "related_work",
        "conclusion",
    ]
    only_topical = RolesConfig(
        survey_core_roles=("other",), survey_late_method_is_core=False, survey_method_is_core=False
    )
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
    headings = ["1 Introduction", "Related Work", "BLUiR", "Appendix"]
    sections = _sections("p", [(h, "", 1) for h in headings])
    mentions = pl.LazyFrame(
        {
            S.PAPER_ID: ["p"] * 5,
            S.SECTION_INDEX: [0, 1, 1, 2, 3],
            S.N_MENTIONS: [3, 2, 1, 4, 1],
        },
        schema={S.PAPER_ID: pl.String, S.SECTION_INDEX: pl.Int32, S.N_MENTIONS: pl.Int32},
    )
    got = role_distribution(mentions, sections.lazy(), RolesConfig())
    assert list(got) == list(S.ROLES)
    assert got["introduction"] == 3 and got["related_work"] == 3 and got["other"] == 4
    assert got["back_matter"] == 1 and got["method"] == 0 and sum(got.values()) == 11


def test_survey_heading_role() -> None:
    assert survey_heading_role("3 Deep Learning Approaches") == "related_work"
    assert survey_heading_role("Search Strategy") == "method"
    assert survey_heading_role("Inclusion and Exclusion Criteria") == "method"
    assert survey_heading_role("Methodology") == "method|related_work"
    assert survey_heading_role("2 Architecture") == "related_work"
    assert survey_heading_role("Future Directions") == "related_work"
    assert survey_heading_role("Introduction") == "introduction"


def test_roles_command_stdin() -> None:
    import subprocess
    import sys

    got = subprocess.run(
        [sys.executable, "-m", "pipeline", "roles"],
        input="Search Strategy\n3 Deep Learning Approaches\n\nImplementation Details for SSB\n",
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert got[0] == "heading\tnormalized\trole\tsurvey_role"
    assert got[1:] == [
        "Search Strategy\tsearch strategy\tmethod\tmethod",
        "3 Deep Learning Approaches\tdeep learning approaches\tother\trelated_work",
        "Implementation Details for SSB\timplementation details for ssb\texperiment"
        "\texperiment|related_work",
    ]


def test_roles_command_from_out(tmp_path, capsys) -> None:
    from pipeline import api
    from pipeline.cli import main
    from tests.conftest import SAMPLE_2022

    out = tmp_path / "w"
    api.extract(SAMPLE_2022, out, workers=1)
    capsys.readouterr()
    cfg = tmp_path / "c.toml"
    cfg.write_text('[roles]\noverrides = {"^advantages and disadvantages$" = "discussion"}\n')
    assert main(["roles", "--from-out", str(out), "--config", str(cfg)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split("\t") == [
        "heading", "normalized", "role", "survey_role", "occurrences", "papers", "mentions"
    ]  # fmt: skip
    rows = {line.split("\t")[0]: line.split("\t") for line in lines[1:]}
    assert rows["Introduction"][2:] == ["introduction", "introduction", "40", "40", "980"]
    assert rows["Advantages and Disadvantages"][2:4] == ["discussion", "related_work"]
    assert main(["roles", "--from-out", str(tmp_path / "none")]) == 2


def test_the_one_pass_steps_along_a_paper_equal_its_windows() -> None:
    """The sorted-pass helpers of ``section_roles`` give what a window per paper gives,
    nulls included (a null stays null and adds nothing to the running sum)."""
    from pipeline.rules.roles import _cum_sum_in_paper, _next_in_paper, _previous_in_paper

    rows = pl.DataFrame(
        {
            S.PAPER_ID: ["a", "a", "a", "b", "b", "c", "d", "d"],
            S.SECTION_INDEX: [0, 1, 2, 0, 1, 0, 0, 3],
            "x": [1, None, 1, None, 1, 1, 0, 1],
        },
        schema_overrides={S.SECTION_INDEX: pl.Int32, "x": pl.Int32},
    )
    window = {"order_by": S.SECTION_INDEX}
    got = rows.select(
        _previous_in_paper(pl.col("x")).alias("prev"),
        _next_in_paper(pl.col("x")).alias("next"),
        _cum_sum_in_paper(pl.col("x")).alias("cum"),
    )
    want = rows.select(
        pl.col("x").shift(1).over(S.PAPER_ID, **window).alias("prev"),
        pl.col("x").shift(-1).over(S.PAPER_ID, **window).alias("next"),
        pl.col("x").cum_sum().over(S.PAPER_ID, **window).alias("cum"),
    )
    assert got.equals(want)
    assert got["cum"].to_list() == [1, None, 2, None, 1, 1, 0, 1]
