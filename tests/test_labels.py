"""Stage ``labels``: tiers from where a survey cites each work."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from pipeline.core import schema as S
from pipeline.rules.roles import TEXTLESS_MEASURED
from pipeline.stages.labels import LISTED_OUTSIDE_TEXT, reason_expr, tier_expr
from tests.conftest import SURVEY_ID
from tests.test_works import (
    HAND_PAPERS,
    HAND_REFS,
    X,
    counts,
    extract_sample,
    mention,
    ref,
    run_stages,
    write_extract,
)

STAGES = ("works", "surveys", "labels")
A, B = "2301.00001", "2301.00002"
ROLE_SUM = pl.sum_horizontal(list(S.ROLE_COUNT_COLUMNS))


def test_real_survey_labels(tmp_path: Path) -> None:
    out = tmp_path / "work"
    extract_sample(out)
    run_stages(out, *STAGES)
    labels = pl.read_parquet(out / "labels" / "labels.parquet")
    assert labels.schema == S.polars_schema(S.LABELS)
    assert labels[S.SURVEY_ID].to_list() == [SURVEY_ID] * 31  # its 31 resolved works
    assert labels[S.WORK_ID].is_unique().all()
    assert labels.equals(labels.sort(S.SURVEY_ID, S.WORK_ID))
    assert (labels[S.LABEL] >= 1).all() and (labels[S.LABEL] <= 4).all()
    assert (labels.filter(pl.col(S.N_MENTIONS) >= 3)[S.LABEL] == 4).all()
    assert labels.select((ROLE_SUM == pl.col(S.N_MENTIONS)).all()).item()
    assert (labels["n_other"] == 0).all()  # the survey core is counted as related work
    tiers = dict(labels[S.LABEL].value_counts().iter_rows())
    assert tiers == {4: 14, 3: 13, 1: 4}
    c = counts(out, "labels")
    assert c["pairs"] == 31 and c["labels"]["essential"] == 14
    assert c["label_reasons"] == {
        "3+ mentions": 12,
        "2+ in related work": 2,
        "related work": 13,
        "introduction/background only": 4,
    }
    _check_reasons(labels)
    assert (
        c["survey_mentions_total"]
        == c["survey_mentions_labelled"] + c["survey_mentions_unresolved"]
    )
    for key in (
        "role_distribution_surveys",
        "role_distribution_all",
        "role_distribution_surveys_labelled",
    ):
        assert sorted(c[key]) == sorted(S.ROLES)
    assert sum(c["role_distribution_surveys"].values()) == c["survey_mentions_total"]
    # textless top-level sections (heading unrecorded, rebuilt from subsections' numbers),
    # measured on the real 2022 sample: none in the survey, 31 of 288 in all 49 papers
    assert c["textless_top_sections_surveys"] == {"top_sections": 5, "textless": 0}
    assert c["textless_top_sections_all"] == {"top_sections": 288, "textless": 31}
    # the figure every card states (a 2024-layout release cannot count its own)
    sample = TEXTLESS_MEASURED[0]
    assert "2022 sample" in str(sample["source"])
    assert c["textless_top_sections_all"] == {k: sample[k] for k in ("top_sections", "textless")}
    # the whole review of 2212.11774 sits under its top-level "Discussion"
    assert c["role_distribution_surveys"]["discussion"] > 0.9 * c["survey_mentions_total"]


REASON_TIER = {
    "3+ mentions": 4,
    "2+ in related work": 4,
    "related work": 3,
    "method/experiment": 2,
    "introduction/background only": 1,
    LISTED_OUTSIDE_TEXT: 3,
}


def _check_reasons(labels: pl.DataFrame) -> None:
    """Every label_reason is one of the six and names the rule of the row's tier; a work
    without an in-text mention is never tier 1 (background)."""
    assert set(labels[S.LABEL_REASON]) <= set(REASON_TIER)
    for tier, reason, n in labels.select(S.LABEL, S.LABEL_REASON, S.N_MENTIONS).iter_rows():
        assert REASON_TIER[reason] == tier
        assert (reason == LISTED_OUTSIDE_TEXT) == (n == 0)
        assert not (tier == 1 and n == 0)


def test_reason_expr_by_hand() -> None:
    rows = pl.DataFrame(
        {
            S.N_MENTIONS: [3, 2, 1, 1, 1, 0],
            "n_related_work": [0, 2, 1, 0, 0, 0],
            "n_method": [0, 0, 0, 1, 0, 0],
            "n_experiment": [0, 0, 0, 0, 0, 0],
        }
    )
    got = rows.select(reason_expr(3, 2).alias("r"), tier_expr(3, 2).alias("t"))
    assert got["r"].to_list() == [
        "3+ mentions",
        "2+ in related work",
        "related work",
        "method/experiment",
        "introduction/background only",
        LISTED_OUTSIDE_TEXT,
    ]
    assert got["t"].to_list() == [4, 4, 3, 2, 1, 3]
    assert rows.select(reason_expr(5, 4))[0, 0] == "introduction/background only"


# Hand-made: survey A cites work X through two entries (a1 by DOI, a2 by OpenAlex id);
# survey B cites X by arXiv id (b1) and by its DataCite DOI (b3).
LABEL_REFS = [*HAND_REFS, ref(A, "a6", arxiv="2105.00006")]
LABEL_MENTIONS = [
    mention(A, "a2", "Introduction", 1, 0),
    mention(A, "a1", "Related Work", 2, 1),
    mention(A, "a1", "Sparse Retrievers", 1, 3),  # topical: the survey core starts here
    mention(A, "a6", "Methodology", 1, 4),  # after the core: a reviewed work's method
    mention(A, "a3", "Conclusion", 1, 5),
    mention(A, "a5", "Introduction", 4, 0),  # unresolved entry: no label
    mention(B, "b1", "Introduction", 1, 0),
    mention(B, "b3", "2 Evaluation", 1, 1),  # before the core: the survey's own evaluation
    mention(B, "b4", "Dense Retrievers", 1, 2),
]


def _hand_labels(tmp_path: Path, config: str = "") -> tuple[Path, dict[tuple[str, str], dict]]:
    out = tmp_path / "work"
    write_extract(out, HAND_PAPERS, LABEL_REFS, LABEL_MENTIONS)
    cfg = tmp_path / "c.toml"
    cfg.write_text("[surveys]\nmin_resolved_refs = 1\n" + config)
    run_stages(out, *STAGES, config=cfg)
    labels = pl.read_parquet(out / "labels" / "labels.parquet")
    assert labels.select((ROLE_SUM == pl.col(S.N_MENTIONS)).all()).item()
    return out, {(r[S.SURVEY_ID], r[S.WORK_ID]): r for r in labels.iter_rows(named=True)}


def test_hand_made_tiers(tmp_path: Path) -> None:
    out, got = _hand_labels(tmp_path)
    assert sorted(got) == [
        (A, "arxiv:2001.00001"),
        (A, "arxiv:2002.00002"),
        (A, "arxiv:2105.00006"),
        (A, "arxiv:hep-th/9901001"),
        (B, "arxiv:2001.00001"),
        (B, "arxiv:2002.00002"),
    ]
    # X in A: a1 + a2 summed; related work 2 + core 1
    x_a = got[(A, X)]
    assert (x_a[S.LABEL], x_a[S.N_MENTIONS], x_a["n_related_work"], x_a["n_introduction"]) == (
        4,
        4,
        3,
        1,
    )
    assert got[(A, "arxiv:2105.00006")][S.LABEL] == 3  # late "Methodology" is core
    assert got[(A, "arxiv:2002.00002")][S.LABEL] == 1  # conclusion only
    never = got[(A, "arxiv:hep-th/9901001")]
    # in the bibliography, never cited in the text (a table or a caption): the core's tier
    assert (never[S.LABEL], never[S.N_MENTIONS], never[S.LABEL_REASON]) == (
        3,
        0,
        LISTED_OUTSIDE_TEXT,
    )
    x_b = got[(B, X)]
    assert (x_b[S.LABEL], x_b[S.N_MENTIONS], x_b["n_experiment"]) == (2, 2, 1)
    assert got[(B, "arxiv:2002.00002")][S.LABEL] == 3  # cited once in the core
    c = counts(out, "labels")
    assert c["surveys"] == 2 and c["pairs"] == 6 and c["pairs_without_mentions"] == 1
    assert c["survey_mentions_unresolved"] == 4
    assert c["labels"] == {"background": 1, "tool_method": 1, "related_work": 3, "essential": 1}
    assert c["label_reasons"][LISTED_OUTSIDE_TEXT] == 1


def test_hand_made_config_variants(tmp_path: Path) -> None:
    _, got = _hand_labels(tmp_path / "a", "[roles]\nsurvey_late_method_is_core = false\n")
    assert got[(A, "arxiv:2105.00006")][S.LABEL] == 2
    _, got = _hand_labels(tmp_path / "b", "[roles]\nsurvey_core_is_related_work = false\n")
    assert got[(A, X)]["n_other"] == 1 and got[(A, X)]["n_related_work"] == 2
    assert got[(B, "arxiv:2002.00002")][S.LABEL] == 1
    _, got = _hand_labels(tmp_path / "c", "[labels]\nessential_total_mentions = 2\n")
    assert got[(B, X)][S.LABEL] == 4


@pytest.mark.parametrize(
    ("n", "related", "method", "experiment", "tier"),
    [
        (3, 0, 0, 0, 4),
        (2, 2, 0, 0, 4),
        (2, 1, 1, 0, 3),
        (1, 0, 1, 0, 2),
        (2, 0, 0, 2, 2),
        (2, 0, 0, 0, 1),
        (0, 0, 0, 0, 3),
    ],
)
def test_tier_rule(n: int, related: int, method: int, experiment: int, tier: int) -> None:
    df = pl.DataFrame(
        {
            S.N_MENTIONS: [n],
            "n_related_work": [related],
            "n_method": [method],
            "n_experiment": [experiment],
        }
    )
    assert df.select(tier_expr(3, 2)).item() == tier
