"""Synthetic unarXive corpus (pipeline.synth.generator) and the 2022 -> 2024 layout conversion.

Only generated data is used here: the generator must stand on its own.
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import re
from collections import Counter
from datetime import datetime
from pathlib import Path

import pytest

from pipeline import api
from pipeline.corpus.layout import convert_line, group_sections, to_2024_layout
from pipeline.synth import corpus_model, vocabulary
from pipeline.synth import generator as synth
from pipeline.synth import records as synth_records
from pipeline.synth.generator import generate

CITE = re.compile(r"\{\{cite:([0-9a-f]{40})\}\}")
HEX40 = re.compile(r"^[0-9a-f]{40}$")
CREATED = re.compile(
    r"^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d{1,2} [A-Z][a-z]{2} \d{4} \d\d:\d\d:\d\d GMT$"
)
ARXIV_NEW = re.compile(r"(\d{4}\.\d{4,5})")
SURVEY_CUE = "In this survey, we review"

RECORD_KEYS_2022 = [
    "paper_id",
    "_pdf_hash",
    "_source_hash",
    "_source_name",
    "metadata",
    "discipline",
    "abstract",
    "body_text",
    "bib_entries",
    "ref_entries",
    "_synthetic",  # the generated-record mark (pipeline.corpus.provenance), never in real records
]
RECORD_KEYS_2024 = [
    "paper_id",
    "_pdf_hash",
    "_source_hash",
    "_source_name",
    "metadata",
    "abstract",
    "bib_entries",
    "ref_entries",
    "_synthetic",
    "sections",
]
METADATA_KEYS = [
    "id",
    "submitter",
    "authors",
    "title",
    "comments",
    "journal-ref",
    "doi",
    "report-no",
    "categories",
    "license",
    "abstract",
    "versions",
    "update_date",
    "authors_parsed",
]
IDS_KEYS = ["open_alex_id", "sem_open_alex_id", "pubmed_id", "pmc_id", "doi", "arxiv_id"]


def _lines(paths: list[Path]) -> list[bytes]:
    return [line for p in paths for line in p.read_bytes().splitlines()]


def _records(paths: list[Path]) -> list[dict]:
    """Decodable paper records (malformed lines skipped)."""
    out = []
    for line in _lines(paths):
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if (
            isinstance(rec, dict)
            and isinstance(rec.get("metadata"), dict)
            and rec["metadata"].get("categories")
        ):
            out.append(rec)
    return out


def _flat(text: str) -> str:
    # arXiv metadata is hard-wrapped; cue phrases can straddle a line break.
    return " ".join(text.split())


def _is_survey(rec: dict) -> bool:
    return SURVEY_CUE in _flat(rec["abstract"]["text"])


def _doi(value: str) -> str:
    return value.removeprefix("https://doi.org/").lower() if value else ""


def _arxiv_ids(entry: dict) -> tuple[str, str]:
    """(arXiv id from ids, arXiv id from the raw string only)."""
    ids = entry.get("ids") or {}
    contained = entry["contained_arXiv_ids"][0]["id"] if entry["contained_arXiv_ids"] else ""
    return ids.get("arxiv_id", ""), contained


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    out = tmp_path_factory.mktemp("synth2022")
    return generate(out, 150, small=True, seed=3, survey_share=0.3, files=2)


@pytest.fixture(scope="module")
def records(corpus: list[Path]) -> list[dict]:
    return _records(corpus)


# ------------------------------------------------------------------ determinism
def test_same_arguments_give_identical_bytes(tmp_path: Path) -> None:
    kw = dict(small=True, seed=11, malformed=6, files=2)
    a = generate(tmp_path / "a", 40, **kw)
    b = generate(tmp_path / "b", 40, **kw)
    assert [p.name for p in a] == ["synth_2022_11_000.jsonl", "synth_2022_11_001.jsonl"]
    assert [p.read_bytes() for p in a] == [p.read_bytes() for p in b]
    c = generate(tmp_path / "c", 40, small=True, seed=12, malformed=6, files=2)
    assert [p.read_bytes() for p in a] != [p.read_bytes() for p in c]
    assert not list((tmp_path / "a").glob("*.tmp")), "temporary files left behind"


def test_file_split_and_malformed_lines_do_not_change_papers(tmp_path: Path) -> None:
    one = _lines(generate(tmp_path / "one", 30, small=True, seed=5))
    three = _lines(generate(tmp_path / "three", 30, small=True, seed=5, files=3))
    assert one == three
    bad = _lines(generate(tmp_path / "bad", 30, small=True, seed=5, malformed=12, files=3))
    assert len(bad) == 30 + 12
    papers = set(one)
    # Same papers in the same order; the duplicate line repeats one of them later.
    assert list(dict.fromkeys(line for line in bad if line in papers)) == one


# ---------------------------------------------------------------- record format
def test_records_mirror_the_2022_layout(records: list[dict]) -> None:
    assert len(records) == 150
    ids = [r["paper_id"] for r in records]
    assert len(set(ids)) == len(ids)
    assert ids == sorted(ids, key=lambda i: (int(i[:4]), int(i[5:])))
    for r in records:
        assert list(r) == RECORD_KEYS_2022
        meta = r["metadata"]
        assert list(meta) == METADATA_KEYS
        assert meta["id"] == r["paper_id"] and r["_source_name"] == f"{r['paper_id']}.gz"
        assert r["_pdf_hash"] is None and HEX40.match(r["_source_hash"])
        first = datetime.strptime(meta["versions"][0]["created"], "%a, %d %b %Y %H:%M:%S GMT")
        assert all(CREATED.match(v["created"]) for v in meta["versions"])
        assert r["paper_id"][:4] == f"{first.year % 100:02d}{first.month:02d}"
        assert datetime(2015, 1, 1) <= first < datetime(2026, 1, 1)
        assert (
            re.match(r"^\d{4}-\d\d-\d\d$", meta["update_date"])
            and meta["update_date"] > first.date().isoformat()
        )
        cats = meta["categories"].split(" ")
        assert cats and all(re.match(r"^[a-z-]+(\.[A-Za-z-]+)?$", c) for c in cats)
        assert (r["discipline"] == "Computer Science") == cats[0].startswith("cs.")
        assert r["abstract"]["section"] == "Abstract" and r["abstract"]["text"] == meta["abstract"]
        assert all(len(a) == 3 for a in meta["authors_parsed"])
        for para in r["body_text"]:
            assert list(para) == [
                "section",
                "sec_number",
                "sec_type",
                "content_type",
                "text",
                "cite_spans",
                "ref_spans",
            ]
            for span in para["cite_spans"]:
                assert (
                    para["text"][span["start"] : span["end"]]
                    == span["text"]
                    == f"{{{{cite:{span['ref_id']}}}}}"
                )
                assert span["ref_id"] in r["bib_entries"]
            for span in para["ref_spans"]:
                assert para["text"][span["start"] : span["end"]] == span["text"]
                assert span["ref_id"] in r["ref_entries"]
            # Every marker in the text is a span (heading markers are not in the text).
            assert len(CITE.findall(para["text"])) == len(para["cite_spans"])
        for ref_id, entry in r["bib_entries"].items():
            assert HEX40.match(ref_id)
            assert list(entry)[:3] == ["bib_entry_raw", "contained_arXiv_ids", "contained_links"]
            if "ids" in entry:
                assert list(entry["ids"]) == IDS_KEYS and "discipline" in entry
            for c in entry["contained_arXiv_ids"]:
                assert (
                    entry["bib_entry_raw"][c["start"] : c["end"]] == c["text"]
                    and c["id"] in c["text"]
                )
    assert any(r["metadata"]["doi"] for r in records), "some corpus papers have a metadata DOI"
    assert any(" " in r["metadata"]["categories"] for r in records), "some cross-lists"
    assert (
        0.5
        < sum(r["metadata"]["categories"].startswith("cs.") for r in records) / len(records)
        < 0.9
    )


def test_survey_structure(records: list[dict]) -> None:
    surveys = [r for r in records if _is_survey(r)]
    assert surveys
    heading_markers = 0
    for r in surveys:
        body = r["body_text"]
        assert body[0]["section"] == "Introduction"
        tops = [p["section"] for p in body if p["sec_type"] == "section"]
        if body[-1]["sec_number"] == "A":  # a lettered appendix after the back matter
            tops = tops[:-1]
        assert tops[-2:] == ["Conclusion", "Acknowledgment"]
        assert tops[-3] in ("Discussion", "Threats to Validity")
        assert any(p["sec_type"] == "subsection" for p in body)
        # Subsection numbers restart at 1 inside each parent, like the real data.
        assert all(
            p["sec_number"] == "1"
            for i, p in enumerate(body)
            if p["sec_type"] == "subsection" and body[i - 1]["sec_type"] == "section"
        )
        for heading in dict.fromkeys(p["section"] or "" for p in body):
            for ref_id in CITE.findall(heading):
                heading_markers += 1
                assert ref_id in r["bib_entries"]
                # The work named in the heading is also cited in that subsection's text.
                assert any(
                    s["ref_id"] == ref_id
                    for p in body
                    if p["section"] == heading
                    for s in p["cite_spans"]
                )
        assert 25 <= len(r["bib_entries"]) <= 60
    assert heading_markers > 0


def test_real_section_structures(tmp_path: Path) -> None:
    """Sections that open with a subsection, paragraph-level headings, lettered
    appendices and protocol sections occur, and extract recovers the structure."""
    from pipeline.core import schema as S

    records = _records(generate(tmp_path / "g", 60, seed=5, survey_share=0.3))

    opened_by_sub = para_level = lettered = protocol = 0
    for r in records:
        body = r["body_text"]
        numbers = [p["sec_number"] for p in body if p["sec_type"] == "section"]
        nums = [int(x) for x in numbers if x.isdigit()]
        opened_by_sub += sum(1 for a, b in zip(nums, nums[1:], strict=False) if b > a + 1)
        opened_by_sub += any(re.match(r"^[A-Z]\.", p["sec_number"]) for p in body) and not any(
            re.match(r"^[A-Z]$", p["sec_number"]) and p["sec_type"] == "section"
            and any(q["sec_number"].startswith(p["sec_number"] + ".") for q in body)
            for p in body
        )  # fmt: skip
        para_level += any(p["sec_type"] == "" and p["section"] for p in body)
        lettered += any(p["sec_number"][:1].isalpha() for p in body)
        protocol += _is_survey(r) and any(p["section"] in vocabulary.PROTOCOL_STEPS for p in body)
    assert opened_by_sub > 0 and para_level > 0 and lettered > 0 and protocol > 0, (
        opened_by_sub,
        para_level,
        lettered,
        protocol,
    )
    src = tmp_path / "in"
    src.mkdir()
    (src / "c.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    api.extract(src, tmp_path / "o", workers=1)
    import polars as pl

    sec = pl.read_parquet(sorted((tmp_path / "o" / "extract" / "sections").glob("*.parquet")))
    tops = sec.filter(pl.col(S.SECTION_INDEX) == pl.col(S.TOP_INDEX))
    assert tops.filter(pl.col(S.UNNAMED)).height > 0
    assert tops.filter(pl.col(S.APPENDIX)).height > 0
    assert tops.filter((pl.col(S.LEVEL) == 4) & (pl.col(S.SECTION) != "")).height == 0
    # a dotted number is inside the section it names
    t = tops.select(
        S.PAPER_ID, pl.col(S.SECTION_INDEX).alias(S.TOP_INDEX), pl.col(S.SEC_NUMBER).alias("t")
    )
    dotted = sec.filter(pl.col(S.SEC_NUMBER).str.contains(r"^[0-9A-Z]+\.")).join(
        t, on=[S.PAPER_ID, S.TOP_INDEX]
    )
    assert dotted.height > 0
    assert (dotted[S.SEC_NUMBER].str.extract(r"^([0-9A-Z]+)\.", 1) == dotted["t"]).all()


def test_survey_share_and_traps(tmp_path: Path) -> None:
    recs = _records(generate(tmp_path, 400, small=True, seed=8, survey_share=0.2))
    cs = [r for r in recs if r["metadata"]["categories"].startswith("cs.")]
    share = sum(map(_is_survey, cs)) / len(cs)
    assert 0.12 < share < 0.28, share
    traps = [
        r["metadata"]["title"]
        for r in cs
        if re.search(r"(?i)survey|review", r["metadata"]["title"]) and not _is_survey(r)
    ]
    assert traps, "non-surveys with survey-like titles"
    assert not any(_is_survey(r) for r in recs if not r["metadata"]["categories"].startswith("cs."))
    none = _records(generate(tmp_path / "none", 40, small=True, seed=8, survey_share=0.0))
    assert not any(map(_is_survey, none))


# -------------------------------------------------------------------- citations
def test_mentions_spread_over_sections(records: list[dict]) -> None:
    multi = across = 0
    for r in records:
        counts: Counter[str] = Counter()
        sections: dict[str, set[str]] = {}
        for p in r["body_text"]:
            for s in p["cite_spans"]:
                counts[s["ref_id"]] += 1
                sections.setdefault(s["ref_id"], set()).add(str(p["section"]))
        assert set(counts) == set(r["bib_entries"]), "every bib entry is cited"
        assert max(counts.values(), default=1) <= 7
        multi += sum(1 for n in counts.values() if n >= 3)
        across += sum(1 for s in sections.values() if len(s) >= 2)
    assert multi > 20 and across > 20


def test_identifier_mix_and_doi_arxiv_overlap(records: list[dict]) -> None:
    entries = [(r["paper_id"], e) for r in records for e in r["bib_entries"].values()]
    no_id = url_doi = bare_doi = contained_only = no_ids_key = 0
    both: dict[str, str] = {}
    doi_only: dict[str, set[str]] = {}
    arxiv_only: dict[str, set[str]] = {}
    for pid, e in entries:
        ids = e.get("ids") or {}
        in_ids, in_raw = _arxiv_ids(e)
        arxiv, doi, oa = in_ids or in_raw, _doi(ids.get("doi", "")), ids.get("open_alex_id", "")
        no_ids_key += "ids" not in e
        no_id += not (arxiv or doi or oa)
        url_doi += ids.get("doi", "").startswith("https://doi.org/10.")
        bare_doi += ids.get("doi", "").startswith("10.")
        contained_only += bool(in_raw and not in_ids)
        assert not oa or re.match(r"^https://openalex\.org/W\d+$", oa)
        if arxiv and doi:
            both[doi] = arxiv
        elif doi:
            doi_only.setdefault(doi, set()).add(pid)
        elif arxiv:
            arxiv_only.setdefault(arxiv, set()).add(pid)
    # real sample: 29% of entries in CS papers and 59% overall carry no identifier
    # (synth_records.ID_LESS_EXTRA); this corpus mixes CS and other papers
    assert 0.25 < no_id / len(entries) < 0.6
    assert url_doi and bare_doi and contained_only and no_ids_key
    merged = [
        d
        for d, a in both.items()
        if d in doi_only
        and a in arxiv_only
        and (doi_only[d] | arxiv_only[a]) - (doi_only[d] & arxiv_only[a])
    ]
    assert merged, (
        "a work cited by DOI only and by arXiv id only in different papers, with an entry having both"
    )


def test_corpus_papers_cited_only_after_they_appear(records: list[dict]) -> None:
    first = {
        r["paper_id"]: datetime.strptime(
            r["metadata"]["versions"][0]["created"], "%a, %d %b %Y %H:%M:%S GMT"
        )
        for r in records
    }
    cited = 0
    for r in records:
        for e in r["bib_entries"].values():
            for aid in filter(None, _arxiv_ids(e)):
                if aid in first:
                    cited += 1
                    assert first[aid] < first[r["paper_id"]]
    assert cited > 10


def test_surveys_of_a_category_share_works(records: list[dict]) -> None:
    def works(r: dict) -> set[str]:
        out = set()
        for e in r["bib_entries"].values():
            ids = e.get("ids") or {}
            key = next(
                filter(
                    None, (*_arxiv_ids(e), _doi(ids.get("doi", "")), ids.get("open_alex_id", ""))
                ),
                "",
            )
            out.add(key or e["bib_entry_raw"])
        return out

    by_cat: dict[str, list[set[str]]] = {}
    for r in records:
        if _is_survey(r):
            by_cat.setdefault(r["metadata"]["categories"].split()[0], []).append(works(r))
    found = 0
    for sets in by_cat.values():
        for i, mine in enumerate(sets):
            others = set().union(*(s for j, s in enumerate(sets) if j != i))
            found += bool(mine & others) and bool(others - mine)
    assert found >= 2, "hard negatives need works cited by other surveys of the same category"


# ------------------------------------------------------------------------ sizes
def test_record_sizes(tmp_path: Path, corpus: list[Path]) -> None:
    small = [len(line) for line in _lines(corpus)]
    assert 5_000 < sum(small) / len(small) < 20_000
    normal = [len(line) for line in _lines(generate(tmp_path, 6, seed=2, cs_share=0.5))]
    assert 80_000 < sum(normal) / len(normal) < 400_000


# --------------------------------------------------------------------- malformed
def test_malformed_lines(tmp_path: Path) -> None:
    paths = generate(tmp_path, 20, small=True, seed=4, malformed=6, files=2)
    lines = _lines(paths)
    assert len(lines) == 26
    kinds: Counter[str] = Counter()
    seen: set[bytes] = set()
    for line in lines:
        if line in seen:
            kinds["duplicate"] += 1
            continue
        seen.add(line)
        try:
            rec = json.loads(line)
        except UnicodeDecodeError:
            kinds["invalid_utf8"] += 1
            continue
        except ValueError:
            kinds["truncated"] += 1
            continue
        if not isinstance(rec, dict):
            kinds["array"] += 1
        elif "metadata" not in rec:
            kinds["no_metadata"] += 1
        elif rec["metadata"]["categories"] is None:
            kinds["null_categories"] += 1
        else:
            kinds["ok"] += 1
    assert kinds == Counter({"ok": 20, **{k: 1 for k in synth.MALFORMED_KINDS}})
    # Spread over both files, not appended in one block.
    assert all(len(p.read_bytes().splitlines()) > 10 for p in paths)


# ------------------------------------------------------------------ 2024 layout
def test_generate_2024_layout(tmp_path: Path) -> None:
    new = _records(generate(tmp_path / "new", 25, layout="2024", small=True, seed=6))
    old = _records(generate(tmp_path / "old", 25, layout="2022", small=True, seed=6))
    assert len(new) == len(old) == 25
    for n, o in zip(new, old, strict=True):
        assert list(n) == RECORD_KEYS_2024 and "body_text" not in n and "discipline" not in n
        assert isinstance(n["sections"], dict) and n["sections"]
        assert list(n["metadata"])[-3:] == ["language", "cited_by_count", "discipline"]
        assert isinstance(n["metadata"]["cited_by_count"], int)
        converted = to_2024_layout(o)
        converted["metadata"]["cited_by_count"] = n["metadata"]["cited_by_count"]
        assert converted == n


def test_to_2024_layout_preserves_spans_and_mentions(records: list[dict]) -> None:
    for r in records:
        before = copy.deepcopy(r)
        out = to_2024_layout(r)
        assert r == before, "argument mutated"
        assert list(out) == RECORD_KEYS_2024
        assert (
            out["metadata"]["discipline"] == r["discipline"] and out["metadata"]["language"] == "en"
        )

        # the publisher's rule: keys "null" for a null heading, stripped texts, spans
        # shifted by the stripped text before them (not by what the strip removed)
        def key(p: dict) -> str:
            return "null" if p["section"] is None else p.get("section", "Unknown Section")

        offsets: dict[str, int] = {}
        want: dict[str, list[int]] = {}
        for p in r["body_text"]:
            k = key(p)
            want.setdefault(k, []).extend(
                s["start"] + offsets.get(k, 0)
                for s in p["cite_spans"] + p["ref_spans"]
                if s in p["cite_spans"]
            )
            offsets[k] = offsets.get(k, 0) + len(p["text"].strip())
        for heading, sec in out["sections"].items():
            assert list(sec) == ["text", "cite_spans", "ref_spans"]
            assert [s["start"] for s in sec["cite_spans"]] == want[heading], heading
        old = Counter(s["ref_id"] for p in r["body_text"] for s in p["cite_spans"])
        new = Counter(s["ref_id"] for sec in out["sections"].values() for s in sec["cite_spans"])
        assert old == new
        assert sum(len(p["text"].strip()) for p in r["body_text"]) == sum(
            len(s["text"]) for s in out["sections"].values()
        )
        assert list(out["sections"]) == list(dict.fromkeys(key(p) for p in r["body_text"]))


def test_group_sections_merges_repeated_headings() -> None:
    def para(section: str | None, text: str, cite_at: int | None = None) -> dict:
        spans = []
        if cite_at is not None:
            marker = "{{cite:" + "a" * 40 + "}}"
            text = text[:cite_at] + marker + text[cite_at:]
            spans = [
                {"start": cite_at, "end": cite_at + len(marker), "text": marker, "ref_id": "a" * 40}
            ]
        return {
            "section": section,
            "sec_number": "1",
            "sec_type": "subsection",
            "text": text,
            "cite_spans": spans,
            "ref_spans": [],
        }

    body = [
        para("Methodology", "Alpha. ", 0),
        para("Evaluation", "Beta. "),
        para("Methodology", "Gamma ", 6),
        para(None, "Untitled."),
    ]
    out = group_sections(body)
    assert list(out) == ["Methodology", "Evaluation", "null"]
    meth = out["Methodology"]
    assert meth["text"] == body[0]["text"].strip() + body[2]["text"].strip()
    assert [s["start"] for s in meth["cite_spans"]] == [0, len(body[0]["text"].strip()) + 6]
    for s in meth["cite_spans"]:
        assert meth["text"][s["start"] : s["end"]] == s["text"]
    assert body[2]["cite_spans"][0]["start"] == 6, "input spans untouched"
    with pytest.raises(ValueError):
        to_2024_layout({"paper_id": "x", "sections": {}})


def test_convert_line_keeps_broken_lines(tmp_path: Path) -> None:
    (src,) = generate(tmp_path, 12, small=True, seed=9, malformed=6)
    src_lines = _lines([src])
    got = [convert_line(line) for line in src_lines]
    assert len(src_lines) == 18
    converted = 0
    for a, (b, done) in zip(src_lines, got, strict=True):
        try:
            rec = json.loads(a)
        except ValueError:
            assert a == b and not done
            continue
        if isinstance(rec, dict) and "body_text" in rec:
            converted += 1
            assert done and json.loads(b) == to_2024_layout(rec)
        else:
            assert a == b and not done
    assert converted == 12 + 3  # papers, duplicate, no-metadata and null-categories records


# --------------------------------------------------------------------------- CLI
def test_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from pipeline.cli import synth as synth_cli

    parser = argparse.ArgumentParser()
    synth_cli.add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(
        [
            "synth",
            "--out",
            str(tmp_path),
            "--papers",
            "5",
            "--small",
            "--layout",
            "2024",
            "--seed",
            "1",
            "--files",
            "2",
            "--malformed",
            "2",
            "--survey-share",
            "0.5",
            "--cs-share",
            "1",
        ]
    )
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and "MB/s" in out
    assert sorted(p.name for p in tmp_path.glob("*.jsonl")) == [
        "synth_2024_1_000.jsonl",
        "synth_2024_1_001.jsonl",
    ]
    bad = parser.parse_args(["synth", "--out", str(tmp_path), "--papers", "5", "--files", "0"])
    with pytest.raises(ValueError):  # python -m pipeline: one error line, exit 2
        bad.func(bad)
    with pytest.raises(SystemExit):
        parser.parse_args(["synth", "--out", str(tmp_path), "--papers", "5", "--layout", "2023"])


def _style_signature(raw: str) -> tuple[bool, ...]:
    """Marks that tell the citation styles apart: IEEE quotes, an inverted first author
    ("Smith, J."), LNCS/export's "Smith, J.:", ACM/AAAI's year after the authors, APA's
    "(2016). "."""
    return (
        "“" in raw,
        bool(re.match(r"^[^,\s.]+, \S{1,4}\.", raw)),
        bool(re.match(r"^[^:“]*[^\s,:]\.(?:, et al\.)?: ", raw)),
        bool(re.search(r"\. (?:19|20)\d\d\. ", raw)),
        bool(re.match(r"^[^:“(]*\. \((?:19|20)\d\d\)\. ", raw)),
    )


def test_each_bibliography_is_written_in_one_style(records: list[dict]) -> None:
    """A real paper's bib entries come from one BibTeX style: every entry of a
    synthetic paper carries the same style marks, and the corpus uses every style."""
    seen: set[tuple[bool, ...]] = set()
    papers = 0
    for r in records:
        raws = [e["bib_entry_raw"] for e in r["bib_entries"].values()]
        if len(raws) < 2:
            continue
        papers += 1
        signatures = {_style_signature(raw) for raw in raws}
        assert len(signatures) == 1, (r["paper_id"], raws[:3])
        seen |= signatures
    assert papers > 50
    assert len(seen) >= 5, seen  # ieee, acm/plainnat, aaai, apa, lncs/export


def test_citation_styles_carry_the_real_marks() -> None:
    """Each style's raw string has the marks of the real strings of that style."""
    w = corpus_model._Work("Deep residual learning for image recognition", "K. He, X. Zhang, and J. Sun",
                    "Proceedings of CVPR", 2016, 0, "10.1109/cvpr.2016.90", "1512.03385", 0, "cs")  # fmt: skip
    got = {
        s: synth_records._styled_raw(random.Random(0), w, s, w.venue, True)
        for s in synth_records.CITATION_STYLES
    }
    assert got["ieee"].startswith("K. He, X. Zhang, and J. Sun, “Deep residual learning")
    assert "” in Proceedings of CVPR, 2016, pp. " in got["ieee"].replace(",”", "”")
    assert got["acm"].startswith("K. He, X. Zhang, and J. Sun. 2016. Deep residual")
    assert got["aaai"].startswith("He, K.; Zhang, X.; and Sun, J. 2016. Deep residual")
    assert got["apa"].startswith("He, K., Zhang, X., & Sun, J. (2016). Deep residual")
    assert ", pages " in got["plainnat"] and "image recognition" in got["plainnat"]
    assert (
        got["lncs"].startswith("He, K., Zhang, X., Sun, J.: Deep residual")
        and "In: " in got["lncs"]
    )
    assert (
        got["export"]
        == "He, K., Zhang, X., Sun, J.: Deep residual learning for image recognition (2016)"
    )


def test_the_demo_help_names_the_layout_its_records_have() -> None:
    """The help said "a quarter in the 2024 layout"; every demo record is 2024 layout."""
    import json

    from pipeline.cli import build_parser
    from pipeline.synth.demo_corpus import corpus_members

    layouts = set()
    for name, data in corpus_members(40):
        if name.endswith(".jsonl") and data:
            for line in data.splitlines():
                try:
                    record = json.loads(line)
                except ValueError:
                    continue  # the malformed lines that show rejects
                if isinstance(record, dict):
                    layouts.add("2024" if "sections" in record else "2022")
    assert layouts == {"2024"}
    (sub,) = [a for a in build_parser()._actions if getattr(a, "choices", None)]
    help_text = next(a.help for a in sub.choices["demo"]._actions if "--papers" in a.option_strings)
    assert "all in the 2024 layout" in help_text and "quarter" not in help_text
