"""The release's rule for works whose text cannot stand as a document
(:mod:`pipeline.rules.document_text`, applied by :func:`pipeline.stages.release.tables.
kept_candidates`): a constructed release with empty and duplicate texts fails MTEB's checks,
passes them once the rule is applied, and every row left out is counted."""

from __future__ import annotations

import polars as pl

from pipeline.core import schema as S
from pipeline.rules.document_text import (
    DUPLICATE_TEXT,
    NO_TEXT,
    REASON,
    excluded_works,
    mteb_checks,
)
from pipeline.stages.release.tables import beir_views, kept_candidates

# (work, title, abstract): w1 and w2 read the same (MTEB strips the text), w3 has no
# text, w4 only "ab"; w5 reads as w1 but only in the train split (no rival there)
WORKS = {
    "w1": ("Deep Nets for Graphs", ""),
    "w2": ("Deep Nets for Graphs ", ""),
    "w3": ("", ""),
    "w4": ("ab", ""),
    "w5": ("Deep Nets for Graphs", ""),
    "w6": ("A study of retrieval", "An abstract."),
    "w7": ("Sparse models", ""),
    "w8": ("Dense models", "Vectors."),
}
# (survey, work, label, split): s2's only positive is w3, so s2 goes
CANDIDATES = [
    ("s1", "w1", 2, "eval"),
    ("s1", "w6", 3, "eval"),
    ("s1", "w2", 0, "eval"),
    ("s1", "w7", 0, "eval"),
    ("s2", "w3", 1, "eval"),
    ("s2", "w4", 0, "eval"),
    ("s2", "w8", 0, "eval"),
    ("s3", "w5", 1, "train"),
    ("s3", "w8", 0, "train"),
]


def _cands() -> pl.DataFrame:
    return pl.DataFrame(
        CANDIDATES, schema=[S.SURVEY_ID, S.WORK_ID, S.LABEL, S.SPLIT], orient="row"
    ).with_columns(pl.col(S.LABEL).cast(pl.Int8))


def _shown(cands: pl.DataFrame) -> pl.DataFrame:
    works = pl.DataFrame(
        [(k, *v) for k, v in WORKS.items()], schema=[S.WORK_ID, S.TITLE, S.ABSTRACT], orient="row"
    )
    return cands.select(S.SPLIT, S.WORK_ID).unique().join(works, on=S.WORK_ID)


def _rows(cands: pl.DataFrame) -> pl.DataFrame:
    """The reading-list rows the BEIR views are cut from (the columns they read)."""
    works = pl.DataFrame(
        [(k, *v) for k, v in WORKS.items()],
        schema=[S.CANDIDATE_ID, S.CANDIDATE_TITLE, S.CANDIDATE_ABSTRACT],
        orient="row",
    )
    return (
        cands.filter(pl.col(S.SPLIT) == "eval")
        .rename({S.WORK_ID: S.CANDIDATE_ID})
        .join(works, on=S.CANDIDATE_ID)
        .with_columns(
            pl.col(S.SURVEY_ID).alias(S.SURVEY_TITLE),
            pl.lit("a survey about graphs and retrieval").alias(S.SURVEY_ABSTRACT),
            pl.lit("cs.LG").alias(S.SURVEY_PRIMARY_CATEGORY),
        )
    )


def _checks(rows: pl.DataFrame) -> dict:
    views = beir_views(rows)
    return mteb_checks(views["queries"].lazy(), views["corpus"].lazy(), views["qrels"].lazy())


def test_the_rule_leaves_out_empty_and_duplicate_texts_per_split() -> None:
    # case and inner whitespace do not tell two texts apart either
    shown = _shown(_cands()).with_columns(
        pl.when(pl.col(S.WORK_ID) == "w2")
        .then(pl.lit("deep  NETS for graphs"))
        .otherwise(pl.col(S.TITLE))
        .alias(S.TITLE)
    )
    got = excluded_works(shown.lazy()).collect()
    assert got.rows() == [
        ("eval", "w1", DUPLICATE_TEXT),
        ("eval", "w2", DUPLICATE_TEXT),
        ("eval", "w3", NO_TEXT),
        ("eval", "w4", NO_TEXT),
    ]
    assert got.columns == [S.SPLIT, S.WORK_ID, REASON]


def test_a_constructed_release_fails_mtebs_checks_and_passes_them_after_the_rule() -> None:
    cands = _cands()
    before = _checks(_rows(cands))
    assert not before["passed"]
    assert before["documents"]["short_texts"] == 2  # w3 and w4
    assert before["documents"]["duplicates"] == 1  # w2 repeats w1
    assert before["qrels"]["queries_without_relevant"] == 0

    excluded = excluded_works(_shown(cands).lazy()).collect()
    kept, counts = kept_candidates(cands.lazy(), excluded)
    kept = kept.collect().sort(S.SURVEY_ID, S.WORK_ID)
    assert kept.select(S.SURVEY_ID, S.WORK_ID).rows() == [
        ("s1", "w6"),
        ("s1", "w7"),
        ("s3", "w5"),
        ("s3", "w8"),
    ]
    after = _checks(_rows(kept))
    assert after["passed"], after["problems"]
    assert counts == {
        "works": {NO_TEXT: 2, DUPLICATE_TEXT: 2},
        "splits": {
            "train": {
                NO_TEXT: {"positives": 0, "negatives": 0},
                DUPLICATE_TEXT: {"positives": 0, "negatives": 0},
                "surveys_without_positive": 0,
                "their_other_rows": 0,
            },
            "eval": {
                NO_TEXT: {"positives": 1, "negatives": 1},
                DUPLICATE_TEXT: {"positives": 1, "negatives": 1},
                "surveys_without_positive": 1,
                "their_other_rows": 1,  # s2's w8
            },
        },
    }
