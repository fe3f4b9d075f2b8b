"""Full text of the corpus (issue 51): the licence table, extract's ``section_texts`` on the
real records of both layouts, and the release's ``corpus_sections`` rows built from them.

The real records are the fixtures of ``tests/fixtures`` (SOURCE.md): the 49 papers of the
unarXive 2022 sample (2022 layout, and converted to the 2024 layout) and the 2024-layout
preview paper. The expected text of a section is rebuilt here from the record itself: its
paragraphs' texts with each cite span and ref span (their offsets) replaced by its token.
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from pipeline import api
from pipeline.core import schema as S
from pipeline.core.config import Config
from pipeline.corpus.layout import to_2024_layout
from pipeline.rules import licences as L
from pipeline.stages.corpus_sections import corpus_documents, section_rows
from tests.conftest import PREVIEW_2024, SAMPLE_2022

CC_BY = "http://creativecommons.org/licenses/by/4.0/"
NC_SA = "http://creativecommons.org/licenses/by-nc-sa/4.0/"
ARXIV = "http://arxiv.org/licenses/nonexclusive-distrib/1.0/"
_KIND_TOKEN = {"formula": "[FORMULA]", "figure": "[FIGURE]", "table": "[TABLE]"}
CITE = re.compile(r"\{\{cite:[^}]*\}\}")
MARKER_LEFT = ("{{cite:", "{{formula:", "{{figure:", "{{table:")


# --------------------------------------------------------------------- the licence table
@pytest.mark.parametrize(
    ("url", "commercial", "non_commercial"),
    [
        (CC_BY, True, True),
        ("https://creativecommons.org/licenses/by/4.0", True, True),
        ("http://creativecommons.org/licenses/by-sa/4.0/", True, True),
        ("http://creativecommons.org/publicdomain/zero/1.0/", True, True),
        ("http://creativecommons.org/publicdomain/mark/1.0/", True, True),
        (NC_SA, False, True),
        ("http://creativecommons.org/licenses/by-nc/4.0/", False, True),
        ("http://creativecommons.org/licenses/by-nc-nd/4.0/", False, False),
        ("http://creativecommons.org/licenses/by-nd/4.0/", False, False),
        (ARXIV, False, False),
        (None, False, False),
        ("", False, False),
        ("http://example.org/some-licence", False, False),
    ],
)
def test_licence_rule(url: str | None, commercial: bool, non_commercial: bool) -> None:
    assert L.permitted(url, non_commercial=False) is commercial
    assert L.permitted(url, non_commercial=True) is non_commercial
    assert L.extractable(url) is non_commercial
    # the Polars form of the rule says the same
    frame = pl.DataFrame({"u": [url]}, schema={"u": pl.String})
    for nc in (False, True):
        got = frame.select(L.normalise_expr(pl.col("u")).is_in(L.permitted_urls(nc)))
        assert got.item() is L.permitted(url, nc)


def test_a_change_to_the_table_comes_with_a_schema_version() -> None:
    """extract keeps the texts the table allows, and its markers know only the config and
    ``SCHEMA_VERSION``: a work directory re-extracts after a change only if the version moves.
    Changing the table? Bump ``schema.SCHEMA_VERSION`` and write both values here."""
    import hashlib

    rule = repr(tuple((lic.url, lic.allowed, lic.non_commercial) for lic in L.LICENCES))
    digest = hashlib.sha256(rule.encode()).hexdigest()[:16]
    assert (S.SCHEMA_VERSION, digest) == (7, "824c4be00fffb194")


def test_every_licence_of_the_real_records_is_in_the_table(sample_records: list[dict]) -> None:
    preview = json.loads(PREVIEW_2024.read_text())
    for rec in [*sample_records, preview]:
        url = rec["metadata"]["license"]
        assert L.normalise(url) in {lic.url for lic in L.LICENCES}, url


# --------------------------------------------------------------------- real records
def _expected_text(paragraphs: list[dict[str, Any]], separator: str) -> str:
    """The paragraphs' texts joined by ``separator``, every span's marker replaced by its
    token. Markers are found by the span's own text: the 2024 release shifts span offsets
    without the whitespace it strips (``pipeline.corpus.layout.group_sections``)."""
    out = []
    for p in paragraphs:
        text = p["text"]
        spans = [(s["text"], "[CITATION]") for s in p.get("cite_spans") or []]
        for s in p.get("ref_spans") or []:
            kind = s["text"].removeprefix("{{").partition(":")[0]
            spans.append((s["text"], _KIND_TOKEN[kind]))
        for marker, token in spans:
            assert marker in text or token in text  # a repeated marker is replaced at once
            text = text.replace(marker, token)
        out.append(text)
    return separator.join(out)


def _runs(rec: dict[str, Any]) -> list[tuple[str, list[dict[str, Any]]]]:
    """(raw heading, paragraphs) of each section occurrence, in paper order."""
    if "body_text" not in rec:
        return [(h, [s]) for h, s in rec["sections"].items()]
    runs: list[tuple[Any, list[dict[str, Any]]]] = []
    for p in rec["body_text"]:
        key = (p["section"], p["sec_type"], p["sec_number"])
        if not runs or runs[-1][0] != key:
            runs.append((key, []))
        runs[-1][1].append(p)
    return [(key[0] or "", paras) for key, paras in runs]


def _cited_ids(rec: dict[str, Any]) -> set[str]:
    """Every identifier of the record's bib entries (ref ids, arXiv ids, DOIs)."""
    ids: set[str] = set()
    for ref_id, entry in (rec.get("bib_entries") or {}).items():
        ids.add(ref_id)
        own = entry.get("ids") or {}
        ids.update(v for k, v in own.items() if v and k in ("arxiv_id", "doi"))
        ids.update(c["id"] for c in entry.get("contained_arXiv_ids") or [] if c.get("id"))
    return {i.lower() for i in ids if len(i) >= 6}


@pytest.fixture(scope="module")
def extracted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """extract on the real records: the 2022 sample, the same converted to the 2024 layout,
    and the 2024 preview; each layout's records and tables."""
    records = [json.loads(line) for line in gzip.open(SAMPLE_2022).read().splitlines()]
    preview = json.loads(PREVIEW_2024.read_text())
    base = tmp_path_factory.mktemp("texts")
    inputs = {
        "2022": records,
        "2024": [to_2024_layout(r) for r in records] + [preview],
    }
    out: dict[str, Any] = {}
    for layout, recs in inputs.items():
        src = base / f"in{layout}" / f"real_{layout}.jsonl"
        src.parent.mkdir()
        src.write_text("\n".join(json.dumps(r) for r in recs) + "\n")
        api.extract(src, base / layout, workers=1)
        tables = {
            t: pl.read_parquet(sorted((base / layout / "extract" / t).glob("*.parquet")))
            for t in ("papers", "sections", "section_texts")
        }
        out[layout] = {"records": {r["metadata"]["id"]: r for r in recs}, **tables}
    return out


@pytest.mark.parametrize("layout", ["2022", "2024"])
def test_every_text_row_of_the_real_records(extracted: dict[str, Any], layout: str) -> None:
    got = extracted[layout]
    texts, sections, papers = got["section_texts"], got["sections"], got["papers"]
    licences = dict(zip(papers[S.PAPER_ID], papers[S.LICENSE], strict=True))
    headings = {
        (p, i): h for p, i, h in sections.select(S.PAPER_ID, S.SECTION_INDEX, S.SECTION).iter_rows()
    }
    separator = "\n\n" if layout == "2022" else ""
    n_expected = 0
    for paper_id, rec in got["records"].items():
        rows = texts.filter(pl.col(S.PAPER_ID) == paper_id).sort(S.SECTION_INDEX)
        assert L.extractable(licences[paper_id])  # every real record's licence allows it
        expected = [(heading, _expected_text(paras, separator)) for heading, paras in _runs(rec)]
        expected = [(h, t) for h, t in expected if t.strip()]
        n_expected += len(expected)
        assert rows.height == len(expected), paper_id
        cited = _cited_ids(rec)
        for (heading, text), (index, got_text) in zip(
            expected, rows.select(S.SECTION_INDEX, S.SECTION_TEXT).iter_rows(), strict=True
        ):
            assert got_text == text
            assert headings[(paper_id, index)] == " ".join(CITE.sub("", heading).split())
            assert not any(m in got_text for m in MARKER_LEFT)
            low = got_text.lower()
            assert not [i for i in cited if i in low], paper_id
    assert texts.height == n_expected > 500
    # every citation became the same token: the 2022 sample cites 3,042 times in its body
    if layout == "2022":
        assert sum(t.count("[CITATION]") for t in texts[S.SECTION_TEXT]) == 3042


def test_a_refused_licence_keeps_no_text(tmp_path: Path, sample_records: list[dict]) -> None:
    recs = [dict(r, metadata=dict(r["metadata"])) for r in sample_records[:3]]
    recs[0]["metadata"]["license"] = ARXIV
    recs[1]["metadata"]["license"] = NC_SA  # a non-commercial release may carry it
    recs[2]["metadata"]["license"] = None
    src = tmp_path / "in" / "x.jsonl"
    src.parent.mkdir()
    src.write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    api.extract(src, tmp_path / "out", workers=1)
    texts = pl.read_parquet(sorted((tmp_path / "out" / "extract" / "section_texts").glob("*")))
    assert set(texts[S.PAPER_ID]) == {recs[1]["metadata"]["id"]}


def test_the_view_rows_of_the_real_records(extracted: dict[str, Any]) -> None:
    got = extracted["2022"]
    papers = got["papers"].with_columns(
        pl.when(pl.col(S.PAPER_ID) == "2212.11774").then(pl.lit(NC_SA)).otherwise(S.LICENSE)
        .alias(S.LICENSE)
    )  # fmt: skip
    corpus = papers.select(("arxiv:" + pl.col(S.PAPER_ID)).alias(S.BEIR_ID))
    works = papers.select(("arxiv:" + pl.col(S.PAPER_ID)).alias(S.WORK_ID), S.PAPER_ID)
    for nc in (False, True):
        docs = corpus_documents(corpus.lazy(), works.lazy(), papers.lazy(), nc).collect()
        assert ("2212.11774" in docs[S.PAPER_ID].to_list()) is nc
        assert docs.height == papers.height - (not nc)
    rows = section_rows(docs, got["sections"], got["section_texts"].lazy(), Config().roles)
    assert rows.columns == S.CORPUS_SECTIONS.names
    assert rows.height == got["section_texts"].height
    orders = rows.group_by(S.BEIR_CORPUS_ID, maintain_order=True).agg(S.SECTION_ORDER)
    assert all(o == list(range(len(o))) for o in orders[S.SECTION_ORDER].to_list())
    assert rows[S.ROLE].null_count() == 0 and set(rows[S.ROLE]) <= set(S.ROLES)
    assert rows[S.SECTION_TEXT].to_list() == got["section_texts"][S.SECTION_TEXT].to_list()
    # a 2022 subsection names its top-level section; a top-level section names none
    survey = rows.filter(pl.col(S.BEIR_CORPUS_ID) == "arxiv:2212.11774")
    with_parent = survey.filter(pl.col(S.PARENT_HEADING).is_not_null())
    assert with_parent.height > 0
    assert set(with_parent[S.PARENT_HEADING]) <= set(survey[S.HEADING])


def test_an_unreadable_text_leaves_the_paper_without_text(
    tmp_path: Path, sample_records: list[dict]
) -> None:
    rec = json.loads(json.dumps(sample_records[0]))
    rec["body_text"][0]["text"] = 12  # the main decoder reads no text: only this is wrong
    src = tmp_path / "in" / "x.jsonl"
    src.parent.mkdir()
    src.write_text(json.dumps(rec) + "\n" + json.dumps(sample_records[1]) + "\n")
    result = api.extract(src, tmp_path / "out", workers=1)
    assert result.papers == 2
    texts = pl.read_parquet(sorted((tmp_path / "out" / "extract" / "section_texts").glob("*")))
    assert set(texts[S.PAPER_ID]) == {sample_records[1]["metadata"]["id"]}
    summary = json.loads((tmp_path / "out" / "extract" / "_summary.json").read_text())
    assert summary["section_texts_skipped"] == 1
