"""extract on real records: counts, mention totals, bad input, ids."""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
from datetime import date
from pathlib import Path

import polars as pl
import pytest

from pipeline.cli import main
from pipeline.core import schema as S
from pipeline.rules.ids import normalize_arxiv, normalize_doi, normalize_openalex
from pipeline.stages.extract.records import clean_heading, parse_version_date
from tests.conftest import SAMPLE_2022, SURVEY_ID

CITE = re.compile(r"\{\{cite:([^}]*)\}\}")


def _extract(inputs: list[Path], out: Path, *extra: str) -> int:
    args = ["extract", "--out", str(out), "--workers", "1", *extra]
    for i in inputs:
        args += ["--input", str(i)]
    return main(args)


def _read(out: Path, table: str) -> pl.DataFrame:
    return pl.read_parquet(sorted((out / "extract" / table).glob("*.parquet")))


def _manifest(out: Path) -> dict:
    (path,) = sorted((out / "extract" / "_manifests").glob("*.json"))
    return json.loads(path.read_text())


def expected_mentions(records: list[dict]) -> dict[tuple[str, str], int]:
    """Independent count: cite spans per (paper, ref) plus one per heading occurrence with a marker."""
    exp: dict[tuple[str, str], int] = {}
    for d in records:
        pid = d["paper_id"]
        bib = d["bib_entries"]
        prev = None
        spans = list(d["abstract"]["cite_spans"])
        for para in d["body_text"]:
            key = (para["section"], para["sec_type"], para["sec_number"])
            if key != prev:
                prev = key
                for rid in set(CITE.findall(para["section"] or "")):
                    exp[(pid, rid)] = exp.get((pid, rid), 0) + 1
            spans += para["cite_spans"]
        for cs in spans:
            if cs["ref_id"] in bib:
                exp[(pid, cs["ref_id"])] = exp.get((pid, cs["ref_id"]), 0) + 1
    return exp


@pytest.fixture(scope="module")
def sample_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("extract_sample")
    assert _extract([SAMPLE_2022], out) == 0
    return out


def test_real_sample_counts(sample_out: Path) -> None:
    m = _manifest(sample_out)["counts"]
    assert m["lines_read"] == 49
    assert m["papers_written"] == 49
    assert m["rejects_total"] == 0
    assert _read(sample_out, "papers").height == 49
    assert _read(sample_out, "rejects").height == 0


def test_real_sample_mention_totals(sample_out: Path, sample_records: list[dict]) -> None:
    got = {
        (p, r): n
        for p, r, n in _read(sample_out, "mentions")
        .group_by("paper_id", "ref_id")
        .agg(pl.col("n_mentions").sum())
        .iter_rows()
    }
    assert got == expected_mentions(sample_records)


def test_real_survey_paper(sample_out: Path) -> None:
    row = _read(sample_out, "papers").filter(pl.col("paper_id") == SURVEY_ID).to_dicts()[0]
    assert row["first_version_date"] == date(2022, 12, 22)
    assert row["primary_category"] == "cs.SE"
    assert row["categories"] == ["cs.SE"]
    assert row["n_bib_entries"] == 37
    assert row["layout"] == "2022"
    refs = _read(sample_out, "references").filter(pl.col("paper_id") == SURVEY_ID)
    with_id = refs.filter(pl.any_horizontal(pl.col("arxiv_id", "doi", "openalex_id").is_not_null()))
    assert refs.height == 37 and with_id.height == 31


def test_heading_markers_and_top_sections(sample_out: Path) -> None:
    m = _read(sample_out, "mentions").filter(pl.col("paper_id") == SURVEY_ID)
    # "BLUiR {{cite:e884...}}" is a subsection of "Discussion"; its marker counts once.
    bluir = m.filter(pl.col("section") == "BLUiR")
    assert set(bluir["top_section"]) == {"Discussion"}
    # subsubsections "Methodology" under reviewed tools keep the survey's top section
    assert set(m.filter(pl.col("section") == "Methodology")["top_section"]) == {"Discussion"}
    assert not m["section"].str.contains("{{cite:", literal=True).any()


def test_categories_order_and_primary(sample_out: Path, sample_records: list[dict]) -> None:
    papers = _read(sample_out, "papers")
    for d in sample_records:
        row = papers.filter(pl.col("paper_id") == d["paper_id"]).to_dicts()[0]
        assert row["categories"] == d["metadata"]["categories"].split()
        assert row["primary_category"] == row["categories"][0]
        assert row["update_date"] == date.fromisoformat(d["metadata"]["update_date"])


def _bad_file(tmp: Path, sample_lines: list[bytes]) -> tuple[Path, dict[int, str], set[str]]:
    """A file mixing good records with every kind of bad line; returns expected rejects by line."""
    recs = [json.loads(x) for x in sample_lines[:6]]
    no_meta = dict(recs[2])
    del no_meta["metadata"]
    null_cats = json.loads(sample_lines[3])
    null_cats["metadata"]["categories"] = None
    missing_bib = json.loads(sample_lines[4])
    para = next(p for p in missing_bib["body_text"] if p["text"])
    para["cite_spans"].append({"start": 0, "end": 1, "text": "x", "ref_id": "no-such-ref"})
    big = json.loads(sample_lines[5])
    filler = {
        **big["body_text"][0],
        "cite_spans": [],
        "ref_spans": [],
        "text": "lorem ipsum " * 2000,
    }
    while len(json.dumps(big)) < 5_000_000:
        big["body_text"] += [filler] * 50
    lines = [
        sample_lines[0],  # 1 good
        b"[]",  # 2
        sample_lines[1],  # 3 good
        b'{"paper_id": "x", "metadata": {"id": "\xff\xfe"}}',  # 4 invalid utf-8
        json.dumps(no_meta).encode(),  # 5
        json.dumps(null_cats).encode(),  # 6
        json.dumps(missing_bib).encode(),  # 7 good, one span to a missing bib entry
        sample_lines[0],  # 8 duplicate of line 1
        json.dumps(big).encode(),  # 9 good, > 5 MB
        sample_lines[1][: len(sample_lines[1]) // 2],  # 10 truncated last line
    ]
    path = tmp / "bad.jsonl"
    path.write_bytes(b"\n".join(lines))  # no final newline: the last line is cut
    expected = {
        2: "not_an_object",
        4: "invalid_utf8",
        5: "missing_metadata",
        6: "missing_categories",
        8: "duplicate_paper",
        10: "truncated_json",
    }
    good = {recs[0]["paper_id"], recs[1]["paper_id"], recs[4]["paper_id"], recs[5]["paper_id"]}
    return path, expected, good


def test_bad_input_file(tmp_path: Path, sample_lines: list[bytes]) -> None:
    path, expected, good = _bad_file(tmp_path, sample_lines)
    out = tmp_path / "out"
    assert _extract([path], out) == 0
    rejects = _read(out, "rejects")
    assert dict(zip(rejects["line_number"], rejects["reason"], strict=True)) == expected
    assert all(len(h) <= 200 for h in rejects["head"])
    assert set(_read(out, "papers")["paper_id"]) == good
    c = _manifest(out)["counts"]
    assert c["lines_read"] == 10 == c["papers_written"] + c["rejects_total"]
    assert c["cite_spans_missing_bib"] == 1
    assert c["rejects"] == {r: 1 for r in expected.values()}


def test_input_forms_agree(tmp_path: Path, sample_lines: list[bytes]) -> None:
    """.jsonl, .jsonl.gz, .jsonl.zst, .jsonl.xz and a pretty-printed .json give the same rows."""
    import lzma

    import zstandard

    raw = b"\n".join(sample_lines[:3]) + b"\n"
    forms = {
        "a.jsonl": raw,
        "b.jsonl.gz": gzip.compress(raw),
        "c.jsonl.zst": zstandard.ZstdCompressor().compress(raw),
        "d.jsonl.xz": lzma.compress(raw),
    }
    tables = []
    for name, data in forms.items():
        d = tmp_path / name.split(".")[0]
        d.mkdir()
        (d / name).write_bytes(data)
        assert _extract([d / name], tmp_path / f"out_{name}") == 0
        tables.append(_read(tmp_path / f"out_{name}", "mentions").drop("source_file"))
    for t in tables[1:]:
        assert t.equals(tables[0])
    pretty = tmp_path / "one.json"
    pretty.write_text(json.dumps(json.loads(sample_lines[0]), indent=2))
    assert _extract([pretty], tmp_path / "out_json") == 0
    assert _read(tmp_path / "out_json", "papers").height == 1
    assert (
        _read(tmp_path / "out_json", "mentions")
        .drop("source_file")
        .equals(tables[0].filter(pl.col("paper_id") == json.loads(sample_lines[0])["paper_id"]))
    )


def test_reads_2024_preview(tmp_path: Path) -> None:
    from tests.conftest import PREVIEW_2024

    assert _extract([PREVIEW_2024], tmp_path) == 0
    p = _read(tmp_path, "papers").to_dicts()[0]
    assert (p["paper_id"], p["layout"], p["primary_category"]) == ("2310.00826", "2024", "cs.CV")
    assert p["first_version_date"] == date(2023, 10, 2)  # versions[0], not update_date
    m = _read(tmp_path, "mentions")
    assert (m["section"] == m["top_section"]).all()
    refs = _read(tmp_path, "references")
    assert refs.filter(pl.col("doi") == "10.3390/rs8030166").height == 1


@pytest.mark.parametrize(
    ("value", "arxiv"),
    [
        ("arXiv:2104.06921v2", "2104.06921"),
        ("https://arxiv.org/abs/2104.06921", "2104.06921"),
        ("hep-th/9901001v3", "hep-th/9901001"),
        ("math.PR/0601001", "math/0601001"),
        ("", None),
        ("not an id", None),
    ],
)
def test_normalize_arxiv(value: str, arxiv: str | None) -> None:
    assert normalize_arxiv(value) == arxiv


def test_normalize_doi_and_openalex() -> None:
    assert normalize_doi("https://doi.org/10.1090/TRAN/8674") == "10.1090/tran/8674"
    assert normalize_doi("doi:10.1145/3290605.3300233") == "10.1145/3290605.3300233"
    assert normalize_doi("") is None
    assert normalize_openalex("https://openalex.org/W4225968159") == "W4225968159"


def test_small_parsers() -> None:
    assert parse_version_date("Thu, 22 Dec 2022 15:08:58 GMT") == date(2022, 12, 22)
    assert parse_version_date("garbage") is None
    assert clean_heading("BLUiR {{cite:abc}}  ") == "BLUiR"


def test_sections_table(sample_out: Path) -> None:
    """Every occurrence of every paper is a row of ``sections``; mentions point into it and
    their ``top_section`` is the heading of the occurrence's top-level section."""
    sec = _read(sample_out, "sections")
    m = _read(sample_out, "mentions")
    assert sec[S.PAPER_ID].n_unique() == 49
    assert (
        sec.group_by(S.PAPER_ID)
        .agg((pl.col(S.SECTION_INDEX).sort() == pl.int_range(pl.len())).all().alias("dense"))[
            "dense"
        ]
        .all()
    )
    tops = sec.select(
        S.PAPER_ID, pl.col(S.SECTION_INDEX).alias(S.TOP_INDEX), pl.col(S.SECTION).alias("top")
    )
    joined = m.join(sec, on=[S.PAPER_ID, S.SECTION_INDEX], how="left").join(
        tops, on=[S.PAPER_ID, S.TOP_INDEX], how="left"
    )
    assert joined[S.TOP_INDEX].null_count() == 0
    assert (joined[S.TOP_SECTION] == joined["top"]).all()
    assert (joined[S.SECTION] == joined[f"{S.SECTION}_right"]).all()
    # the survey: 5 top-level sections plus the acknowledgment, no unnamed ones
    s = sec.filter(
        (pl.col(S.PAPER_ID) == SURVEY_ID) & (pl.col(S.SECTION_INDEX) == pl.col(S.TOP_INDEX))
    )
    assert s[S.SECTION].to_list() == [
        "Introduction", "Background", "Overview of tools and techniques", "Discussion",
        "Conclusion", "Acknowledgment",
    ]  # fmt: skip
    assert _manifest(sample_out)["counts"]["sections_rows"] == sec.height


def test_one_paper_in_two_members_of_a_unit_keeps_each_copys_bib(
    tmp_path: Path, sample_records: list[dict]
) -> None:
    """Mentions are counted per copy: two members of one archive unit (one batch) hold the
    same paper, the second with half its bib entries gone; each member's mentions follow
    its own bib, and the second's spans to the dropped entries count as missing."""
    from pipeline.corpus.archive import pack

    full = sample_records[0]
    cut = json.loads(json.dumps(full))
    cut["bib_entries"] = dict(list(full["bib_entries"].items())[::2])
    spans = list(full["abstract"]["cite_spans"])
    for para in full["body_text"]:
        spans += para["cite_spans"]
    missing = sum(1 for cs in spans if cs["ref_id"] not in cut["bib_entries"])
    assert missing and all(cs["ref_id"] in full["bib_entries"] for cs in spans)
    members = [
        (f"d/m{i}.jsonl", (json.dumps(r) + "\n").encode()) for i, r in enumerate([full, cut])
    ]
    pack(members, tmp_path / "parts", parts=1)
    out = tmp_path / "out"
    assert _extract([tmp_path / "parts"], out) == 0
    mentions = _read(out, "mentions")
    for i, rec in enumerate([full, cut]):
        got = {
            (p, r): n
            for p, r, n in mentions.filter(pl.col(S.SOURCE_FILE) == f"d/m{i}.jsonl")
            .group_by(S.PAPER_ID, S.REF_ID)
            .agg(pl.col(S.N_MENTIONS).sum())
            .iter_rows()
        }
        assert got == expected_mentions([rec])
    (path,) = sorted((out / "extract" / "_manifests").glob("*.json"))
    assert json.loads(path.read_text())["counts"]["cite_spans_missing_bib"] == missing


def test_extract_does_not_import_pandas(tmp_path: Path, sample_lines: list[bytes]) -> None:
    """pyarrow's conversion of Python objects (``pa.array``, ``pa.scalar``,
    ``Schema.empty_table``) imports pandas on its first call: 0.3 s and 40 MB of RSS in
    every extract process, for nothing the stage uses. Run in a fresh interpreter, on
    papers and a reject, so every table's columns are built."""
    corpus = tmp_path / "in.jsonl"
    corpus.write_bytes(b"\n".join([*sample_lines[:3], b"{not json"]) + b"\n")
    script = (
        "import sys\n"
        "from pipeline.cli import main\n"
        f"rc = main(['extract', '--input', {str(corpus)!r}, '--out', {str(tmp_path / 'out')!r},"
        " '--workers', '1', '-q'])\n"
        "print(rc, 'pandas' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-2:] == ["0", "False"], done.stdout + done.stderr
    assert _read(tmp_path / "out", "rejects").height == 1
    assert _read(tmp_path / "out", "papers").height == 3
