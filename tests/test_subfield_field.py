"""``[negatives] subfield_as_field``: OpenAlex's subfield as the field of works without arXiv
categories (:mod:`pipeline.rules.fields`), on the hand-made work directory of
``tests/test_negatives.py`` with OpenAlex records written by hand."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pyarrow.parquet as pq

from pipeline.core import schema as S
from pipeline.rules import visible as V
from pipeline.rules.fields import FIELD_CATEGORIES, category_subfields, subfield_categories
from tests.test_negatives import (
    EXPECTED_CANDIDATES,
    P2,
    S3,
    S4,
    A,
    B,
    C,
    D,
    E,
    F,
    G,
    H,
    K,
    M,
    _cfg,
    _negatives,
    build_handmade,
    run_stage,
)

AI, CV, IS = "Artificial Intelligence", "Computer Vision", "Information Systems"
# the OpenAlex subfield of each work with a record (P1 has none)
SUBFIELDS = {A: AI, D: AI, E: IS, F: AI, H: CV, K: AI, B: AI, C: CV, G: AI, M: AI, P2: IS}

# By hand, with subfield_min_share 0.5 and subfield_min_papers 1. Corpus papers listing each
# category and their subfields: cs.CL: A, D, F (AI), E (IS), H (CV): AI holds 3 of 5 -> {AI};
# cs.CV: H (CV) -> {CV}; cs.LG: K (AI) -> {AI}.
CATEGORY_SUBFIELDS = {("cs.CL", AI), ("cs.CV", CV), ("cs.LG", AI)}
# works without a corpus paper: B, G, M (AI) -> cs.CL, cs.LG; C (CV) -> cs.CV; P2 (IS): none
FIELD_CATEGORIES_BY_HAND = {B: ["cs.CL", "cs.LG"], C: ["cs.CV"], G: ["cs.CL", "cs.LG"],
                            M: ["cs.CL", "cs.LG"]}  # fmt: skip
# The candidates the rules admit with the rule on, by hand: as EXPECTED_CANDIDATES, and
# S3 (cs.CV): C, cited by S2 (2021-03-01, before S3), is cs.CV by its subfield: own_category.
# S4 (cs.CL): G, cited by S1 and S2, is cs.CL by its subfield: own_category, no longer
#   citing_survey_category; B, cited by S3 (cs.CV, 2022-01-10, before S4), is cs.CL by its
#   subfield: a new own_category candidate. M is cited by S4; P1 has no record, P2's subfield
#   is no category's: both stay citing_survey_category.
# S1, S2: unchanged (B is first cited by S3, after both; C is CV).
EXPECTED_ON = {
    **EXPECTED_CANDIDATES,
    S3: {C: "own_category"},
    S4: {**EXPECTED_CANDIDATES[S4], B: "own_category", G: "own_category"},
}
RULE = {"subfield_min_share": 0.5, "subfield_min_papers": 1}


def _records(out: Path, subfields: dict[str, str]) -> None:
    works = pl.read_parquet(out / "works" / "works.parquet", columns=[S.WORK_ID])
    rows = [
        {
            S.WORK_ID: w,
            S.LOOKUP_KEY: w,
            S.OA_FOUND: True,
            S.OA_SOURCE: "snapshot",
            S.OA_ANSWERED_ID: f"W{i}",
            S.OA_SUBFIELD: subfields[w],
            S.OA_HAS_ABSTRACT: False,
        }
        for i, w in enumerate(works[S.WORK_ID].to_list())
        if w in subfields
    ]
    frame = pl.DataFrame(rows, schema=S.polars_schema(S.OPENALEX_RECORDS))
    pq.write_table(S.check(frame.to_arrow(), S.OPENALEX_RECORDS, "records"),
                   out / "openalex" / "records.parquet")  # fmt: skip


def _candidates(out: Path, **negatives: object) -> dict[str, dict[str, str]]:
    run_stage(out, "negatives", _cfg(negatives_per_positive=1000.0, candidates_per_negative=0,
                                     **negatives))  # fmt: skip
    found: dict[str, dict[str, str]] = {s: {} for s in EXPECTED_CANDIDATES}
    for s, w, src in _negatives(out).select(S.SURVEY_ID, S.WORK_ID, S.NEGATIVE_SOURCE).iter_rows():
        found[s][w] = src
    return found


def test_the_subfields_of_a_category_and_of_a_work_by_hand(tmp_path: Path) -> None:
    build_handmade(tmp_path)
    _records(tmp_path, SUBFIELDS)
    works = pl.scan_parquet(tmp_path / "works" / "works.parquet")
    records = pl.scan_parquet(tmp_path / "openalex" / "records.parquet")
    got = category_subfields(works, records, 0.5, 1).collect()
    assert set(got.iter_rows()) == CATEGORY_SUBFIELDS
    fields = subfield_categories(works, records, 0.5, 1).collect()
    assert dict(fields.iter_rows()) == FIELD_CATEGORIES_BY_HAND
    # a category needs min_papers corpus papers with a record: cs.CV and cs.LG have one each
    assert set(category_subfields(works, records, 0.5, 2).collect().iter_rows()) == {("cs.CL", AI)}
    # a share of 0.7: AI holds 0.6 of cs.CL, so cs.CL has no subfield
    assert ("cs.CL", AI) not in set(
        category_subfields(works, records, 0.7, 1).collect().iter_rows()
    )


def test_in_domain_reads_the_subfield_only_for_works_without_a_corpus_paper() -> None:
    frame = pl.DataFrame(
        {
            S.PRIMARY_CATEGORY: ["cs.CL", "cs.CL", "cs.CL", "cs.CV", "cs.CL"],
            V.WORK_PAPER: ["1901.00001", "1902.00002", None, None, None],
            S.CANDIDATE_CATEGORIES: [["cs.CL"], ["cs.LG"], None, None, None],
            # a corpus paper's own categories decide, whatever its subfield says
            FIELD_CATEGORIES: [None, ["cs.CL"], ["cs.CL", "cs.LG"], ["cs.CL"], None],
        },
        schema_overrides={FIELD_CATEGORIES: pl.List(pl.String)},
    )
    got = frame.select(V.in_domain_expr())[:, 0].to_list()
    assert got == [True, False, True, False, False]


def test_rule_on_adds_outside_works_of_the_field_by_hand(tmp_path: Path) -> None:
    build_handmade(tmp_path)
    _records(tmp_path, SUBFIELDS)
    assert _candidates(tmp_path, subfield_as_field=True, **RULE) == EXPECTED_ON


def test_rule_off_keeps_todays_candidates_and_bytes(tmp_path: Path) -> None:
    build_handmade(tmp_path)
    run_stage(tmp_path, "negatives", _cfg())
    no_records = (tmp_path / "negatives" / "negatives.parquet").read_bytes()
    # on, but no work has a record: nothing to learn, the same bytes as off
    run_stage(tmp_path, "negatives", _cfg(subfield_as_field=True, **RULE))
    assert (tmp_path / "negatives" / "negatives.parquet").read_bytes() == no_records
    # off, with records: today's rule whatever the records say
    _records(tmp_path, SUBFIELDS)
    assert _candidates(tmp_path, **RULE) == EXPECTED_CANDIDATES
