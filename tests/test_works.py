"""Stage ``works``: canonical work ids by union-find over identifiers, every bib entry resolved."""

from __future__ import annotations

import json
import random
from datetime import date
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import pipeline
from pipeline import api
from pipeline.core import schema as S
from pipeline.core.config import Config
from pipeline.core.files import file_record
from pipeline.engine.workdir import MARKERS
from pipeline.rules import aliases as A
from pipeline.stages.extract.driver import STAGE as EXTRACT
from pipeline.stages.works.dates import arxiv_month_expr
from pipeline.stages.works.identity import (
    ENTRY,
    WorkLookup,
    alias_nodes,
    alias_works,
    connected_components,
)
from tests.conftest import SAMPLE_2022, SURVEY_ID


# --------------------------------------------------------------------- helpers (shared)
def run_stages(out: Path, *names: str, config: Path | None = None) -> None:
    for name in names:
        api.reduce(name, out, config=config)


def extract_sample(out: Path, source: Path = SAMPLE_2022) -> None:
    api.extract(source, out, workers=1)


def counts(out: Path, stage: str) -> dict[str, Any]:
    return json.loads((out / stage / "_SUCCESS.json").read_text())["counts"]


def write_extract(
    out: Path,
    papers: list[dict],
    references: list[dict],
    mentions: list[dict],
    sections: list[dict] | None = None,
) -> None:
    """Hand-made extract outputs (one 'file'), with the marker the runner expects.

    Without ``sections``, every ``(paper_id, section_index)`` of the mentions is a
    top-level section headed by the mention's ``top_section``.
    """
    src = "hand.jsonl"
    if sections is None:
        tops = {(m[S.PAPER_ID], m[S.SECTION_INDEX]): m[S.TOP_SECTION] for m in mentions}
        sections = [
            {
                S.PAPER_ID: pid,
                S.SECTION_INDEX: i,
                S.SECTION: top,
                S.SEC_NUMBER: "",
                S.LEVEL: 1,
                S.TOP_INDEX: i,
                S.UNNAMED: False,
                S.APPENDIX: False,
            }
            for (pid, i), top in sorted(tops.items())
        ]
    rows = {"papers": papers, "references": references, "mentions": mentions, "sections": sections}
    for table, schema in (
        ("papers", S.PAPERS),
        ("references", S.REFERENCES),
        ("mentions", S.MENTIONS),
        ("sections", S.SECTIONS),
    ):
        cols = {n: [r.get(n) for r in rows[table]] for n in schema.names}
        cols[S.SOURCE_FILE] = [src] * len(rows[table])
        (out / "extract" / table).mkdir(parents=True, exist_ok=True)
        pq.write_table(
            pa.Table.from_pydict(cols, schema=schema), out / "extract" / table / "hand.parquet"
        )
    key = {
        "stage": "extract",
        "identity": {"path": src},
        "config_hash": Config().section_hash(*EXTRACT.hashed_sections),
        "schema_version": S.SCHEMA_VERSION,
    }
    (out / "extract" / MARKERS).mkdir(parents=True, exist_ok=True)
    outputs = {f"{t}/hand.parquet": file_record(out / "extract" / t / "hand.parquet") for t in rows}
    marker = {"key": key, "source": src, "outputs": outputs}
    (out / "extract" / MARKERS / "hand.json").write_text(json.dumps(marker))


def paper(
    pid: str, title: str, cats: str = "cs.IR", doi: str | None = None, day: date | None = None
) -> dict:
    return {
        S.PAPER_ID: pid,
        S.TITLE: title,
        S.ABSTRACT: "",
        S.CATEGORIES: cats.split(),
        S.PRIMARY_CATEGORY: cats.split()[0],
        S.FIRST_VERSION_DATE: day or date(2023, 1, 2),
        S.DOI: doi,
        S.LAYOUT: "2022",
        S.LINE_NUMBER: 1,
    }


def ref(
    pid: str, rid: str, arxiv: str | None = None, doi: str | None = None, oa: str | None = None
) -> dict:
    return {
        S.PAPER_ID: pid,
        S.REF_ID: rid,
        S.ARXIV_ID: arxiv,
        S.DOI: doi,
        S.OPENALEX_ID: oa,
        S.RAW: f"raw {rid}",
    }


def mention(
    pid: str, rid: str, top: str, n: int, index: int = 0, section: str | None = None
) -> dict:
    return {
        S.PAPER_ID: pid,
        S.REF_ID: rid,
        S.SECTION: section or top,
        S.TOP_SECTION: top,
        S.SECTION_INDEX: index,
        S.N_MENTIONS: n,
    }


# The hand-made corpus: survey A cites work X by DOI (a1) and by OpenAlex id (a2);
# survey B cites it by arXiv id (b1) and by its DataCite arXiv DOI (b3); only paper C
# has entries that carry two ids and link them. Paper D's entries share one junk DOI.
X = "arxiv:2001.00001"
HAND_PAPERS = [
    paper("2301.00001", "A Survey of Dense Retrieval"),
    paper("2301.00002", "Dense Retrieval: A Review"),
    paper("2301.00003", "A Method Paper"),
    paper("2301.00004", "Another Method Paper"),
    paper("2002.00002", "A Corpus Paper", doi="10.2/E", day=date(2020, 2, 3)),
]
HAND_REFS = [
    ref("2301.00001", "a1", doi="10.1/x"),
    ref("2301.00001", "a2", oa="W1"),
    ref("2301.00001", "a3", doi="10.2/e"),
    ref("2301.00001", "a4", arxiv="hep-th/9901001"),
    ref("2301.00001", "a5"),
    ref("2301.00002", "b1", arxiv="2001.00001"),
    ref("2301.00002", "b2"),
    ref("2301.00002", "b3", doi="10.48550/arxiv.2001.00001"),
    ref("2301.00002", "b4", arxiv="2002.00002"),
    ref("2301.00003", "c1", arxiv="2001.00001", doi="10.1/x"),
    ref("2301.00003", "c2", doi="10.1/x", oa="W1"),
    *[ref("2301.00004", f"d{i}", arxiv=f"1901.0000{i}", doi="10.9/junk") for i in range(1, 6)],
]
HAND_MENTIONS = [
    mention("2301.00001", "a1", "Related Work", 2, 1),
    mention("2301.00001", "a2", "Introduction", 1, 0),
    mention("2301.00001", "a3", "Conclusion", 1, 5),
    mention("2301.00001", "a5", "Introduction", 4, 0),
    mention("2301.00002", "b1", "Introduction", 1, 0),
    mention("2301.00002", "b3", "2 Evaluation", 1, 3),
]


@pytest.fixture()
def hand_out(tmp_path: Path) -> Path:
    out = tmp_path / "work"
    write_extract(out, HAND_PAPERS, HAND_REFS, HAND_MENTIONS)
    return out


# --------------------------------------------------------------------- hand-made corpus
def test_one_work_id_across_doi_openalex_and_arxiv(hand_out: Path) -> None:
    run_stages(hand_out, "works")
    cites = pl.read_parquet(hand_out / "works" / "cites.parquet")
    by_ref = dict(zip(cites[S.REF_ID], cites[S.WORK_ID], strict=True))
    # DOI only, OpenAlex only, arXiv only, DataCite arXiv DOI, both: one work everywhere
    assert {by_ref[r] for r in ("a1", "a2", "b1", "b3", "c1", "c2")} == {X}
    assert by_ref["a5"] is None and by_ref["b2"] is None  # no identifier: unresolved
    # a corpus paper is reached through its metadata DOI and its own arXiv id
    assert by_ref["a3"] == by_ref["b4"] == "arxiv:2002.00002"
    assert by_ref["a4"] == "arxiv:hep-th/9901001"
    assert cites.height == len(HAND_REFS)
    assert cites.sort(S.PAPER_ID, S.REF_ID).equals(cites)

    works = pl.read_parquet(hand_out / "works" / "works.parquet")
    assert works.schema == S.polars_schema(S.WORKS)
    x = works.filter(pl.col(S.WORK_ID) == X).row(0, named=True)
    assert x[S.ALIASES] == [
        "arxiv:2001.00001",
        "doi:10.1/x",
        "doi:10.48550/arxiv.2001.00001",
        "openalex:W1",
    ]
    assert x[S.N_CITING_PAPERS] == 3 and x[S.PAPER_ID] is None
    assert x[S.KNOWN_DATE] == date(2020, 1, 1) and x[S.RAW].startswith("raw ")
    corpus = works.filter(pl.col(S.WORK_ID) == "arxiv:2002.00002").row(0, named=True)
    assert corpus[S.PAPER_ID] == "2002.00002" and corpus[S.TITLE] == "A Corpus Paper"
    assert corpus[S.ALIASES] == ["arxiv:2002.00002", "doi:10.2/e"]
    assert corpus[S.KNOWN_DATE] == date(2020, 2, 3) and corpus[S.RAW] is None
    old = works.filter(pl.col(S.WORK_ID) == "arxiv:hep-th/9901001").row(0, named=True)
    assert old[S.KNOWN_DATE] == date(1999, 1, 1)

    c = counts(hand_out, "works")
    assert c["bib_entries"] == len(HAND_REFS) and c["unresolved_entries"] == 2
    assert c["papers_with_unresolved_entries"] == 2
    assert c["entries_merged_within_paper"] == 3  # a1+a2 in A, b1+b3 in B, c1+c2 in C


def test_junk_identifier_does_not_glue_works(hand_out: Path) -> None:
    run_stages(hand_out, "works")
    cites = pl.read_parquet(hand_out / "works" / "cites.parquet").filter(
        pl.col(S.PAPER_ID) == "2301.00004"
    )
    assert sorted(cites[S.WORK_ID]) == [f"arxiv:1901.0000{i}" for i in range(1, 6)]
    c = counts(hand_out, "works")
    assert c["junk_aliases"] == 1
    assert c["largest_component"] == 4  # work X: arXiv id, two DOIs, OpenAlex id
    assert c["largest_component_work_id"] == X


def test_junk_limit_is_configurable(hand_out: Path, tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text("[works]\nmax_alias_partners = 10\n")
    run_stages(hand_out, "works", config=config)
    c = counts(hand_out, "works")
    assert c["junk_aliases"] == 0 and c["largest_component"] == 6  # 5 arXiv ids + the DOI


def test_junk_rule_targets_identifiers_shared_by_unrelated_works(tmp_path: Path) -> None:
    out = tmp_path / "work"
    refs = [
        # a proceedings-volume DOI given to six unrelated arXiv papers, and cited alone once
        *[ref("2301.00005", f"v{i}", arxiv=f"1905.0000{i}", doi="10.9/volume") for i in range(6)],
        ref("2301.00005", "v6", doi="10.9/volume"),
        # no arXiv id involved: one OpenAlex id matched to six works known by their DOIs
        *[ref("2301.00005", f"o{i}", doi=f"10.8/paper{i}", oa="W999") for i in range(6)],
        # a popular arXiv paper under five OpenAlex ids and three DOIs: normal, all one work
        *[ref("2301.00006", f"p{i}", arxiv="1706.03762", oa=f"W{i}") for i in range(5)],
        ref("2301.00006", "p5", arxiv="1706.03762", doi="10.5/neurips"),
        ref("2301.00006", "p6", arxiv="1706.03762", doi="10.48550/arxiv.1706.03762"),
        ref("2301.00006", "p7", doi="10.5/neurips", oa="W0"),
        ref("2301.00006", "p8", doi="10.5/acl", oa="W1"),
    ]
    papers = [paper("2301.00005", "Proceedings User"), paper("2301.00006", "Attention User")]
    write_extract(out, papers, refs, [])
    run_stages(out, "works")
    cites = pl.read_parquet(out / "works" / "cites.parquet")
    by_ref = dict(zip(cites[S.REF_ID], cites[S.WORK_ID], strict=True))
    assert [by_ref[f"v{i}"] for i in range(6)] == [f"arxiv:1905.0000{i}" for i in range(6)]
    assert by_ref["v6"] == "doi:10.9/volume"  # the junk DOI is a work of its own
    assert [by_ref[f"o{i}"] for i in range(6)] == [f"doi:10.8/paper{i}" for i in range(6)]
    assert {by_ref[f"p{i}"] for i in range(9)} == {"arxiv:1706.03762"}
    works = pl.read_parquet(out / "works" / "works.parquet")
    aliases = dict(zip(works[S.WORK_ID], works[S.ALIASES].to_list(), strict=True))
    assert aliases["arxiv:1706.03762"] == [
        "arxiv:1706.03762",
        "doi:10.48550/arxiv.1706.03762",
        "doi:10.5/acl",
        "doi:10.5/neurips",
        *[f"openalex:W{i}" for i in range(5)],
    ]
    assert aliases["doi:10.9/volume"] == ["doi:10.9/volume"]
    assert counts(out, "works")["junk_aliases"] == 2  # doi:10.9/volume and openalex:W999


# --------------------------------------------------------------------- real sample
def test_real_sample(tmp_path: Path) -> None:
    out = tmp_path / "work"
    extract_sample(out)
    run_stages(out, "works")
    c = counts(out, "works")
    assert c["papers"] == 49 and c["bib_entries"] == 1786
    assert c["resolved_entries"] + c["unresolved_entries"] == 1786
    assert c["works"] > 0 and c["largest_component"] <= 4
    cites = pl.read_parquet(out / "works" / "cites.parquet")
    survey = cites.filter(pl.col(S.PAPER_ID) == SURVEY_ID)
    assert survey.height == 37
    assert survey[S.WORK_ID].is_not_null().sum() == 31
    assert survey[S.WORK_ID].drop_nulls().n_unique() == 31
    works = pl.read_parquet(out / "works" / "works.parquet")
    assert works[S.WORK_ID].is_unique().all()
    assert works[S.WORK_ID].str.contains(r"^(arxiv|doi|openalex):").all()
    assert (
        works.filter(pl.col(S.WORK_ID).str.starts_with("arxiv:"))[S.KNOWN_DATE].is_not_null().all()
    )
    assert (works[S.N_CITING_PAPERS] >= 1).all()
    for aliases, wid in zip(works[S.ALIASES], works[S.WORK_ID], strict=True):
        assert aliases.to_list() == sorted(aliases) and wid == min(aliases)
    # deterministic: a forced rerun writes the same bytes
    before = {t: (out / "works" / f"{t}.parquet").read_bytes() for t in ("works", "cites")}
    api.reduce("works", out, force=True)
    for t, data in before.items():
        assert (out / "works" / f"{t}.parquet").read_bytes() == data


# --------------------------------------------------------------------- units
def _union_find(n: int, edges: list[tuple[int, int]]) -> list[int]:
    parent = list(range(n))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in edges:
        ra, rb = find(a), find(b)
        parent[max(ra, rb)] = min(ra, rb)
    return [find(x) for x in range(n)]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_connected_components_match_union_find(seed: int) -> None:
    rng = random.Random(seed)
    n = 400
    edges = [(rng.randrange(n), rng.randrange(n)) for _ in range(300)]
    edges += [(i, i + 1) for i in range(100, 160)]  # a long chain
    edges += [(399, 398), (398, 397)]  # a component whose edges name its smallest node last
    df = pl.DataFrame(
        {"node": [a for a, _ in edges], "other_alias": [b for _, b in edges]},
        schema={"node": pl.Int64, "other_alias": pl.Int64},
    )
    comp = connected_components(df)
    expected = _union_find(n, edges)
    assert comp["node"].to_list() == sorted({x for e in edges for x in e})
    assert comp.schema == {"node": pl.Int64, "component": pl.Int64}
    got = dict(zip(comp["node"], comp["component"], strict=True))
    for node, root in got.items():
        assert root == min(x for x in range(n) if expected[x] == expected[node])


def test_connected_components_of_sparse_large_ids_and_no_edges() -> None:
    """Node ids need not be dense: 10**12 and 5 form one component named 5."""
    df = pl.DataFrame({"node": [10**12, 7], "other_alias": [5, 10**12]})
    comp = connected_components(df)
    assert comp.rows() == [(5, 5), (7, 5), (10**12, 5)]
    empty = connected_components(df.clear())
    assert empty.height == 0 and empty.schema == {"node": pl.Int64, "component": pl.Int64}


class _OneHash(WorkLookup):
    """Every alias of one hash: the lookup must join the strings."""

    def hash(self, alias: pl.Expr) -> pl.Expr:
        return alias.str.len_bytes().cast(pl.UInt64) * 0


@pytest.mark.parametrize("lookup", [WorkLookup, _OneHash])
def test_an_entry_resolves_to_its_non_junk_aliases_work_by_hash_or_by_string(
    lookup: type[WorkLookup],
) -> None:
    """An entry's work is the smallest work id of its non-junk aliases, else of its junk
    ones, whether aliases are joined by their hashes or (two sharing a hash) by string."""
    names = ["arxiv:2101.00001", "doi:10.1/a", "doi:10.9/vol", "openalex:W2", "openalex:W9"]
    nodes = alias_nodes([pl.DataFrame({"alias": names})])
    node = dict(zip(nodes["alias"], nodes["node"], strict=True))
    edges = pl.DataFrame(  # a junk alias's links are dropped before the components
        {"node": [node["doi:10.1/a"]], "other_alias": [node["arxiv:2101.00001"]]},
        schema={"node": pl.Int64, "other_alias": pl.Int64},
    )
    junk = pl.DataFrame({"alias": ["doi:10.9/vol"]})
    alias_work = alias_works(nodes, connected_components(edges), junk)
    entries = pl.DataFrame(
        {ENTRY: [0, 0, 1, 2, 2, 3],
         "alias": ["openalex:W9", "doi:10.9/vol", "doi:10.9/vol", "openalex:W9", "openalex:W2",
                   "doi:10.1/a"]},
        schema={ENTRY: pl.UInt32, "alias": pl.String},
    )  # fmt: skip
    found = lookup(alias_work, nodes)
    assert found.by_hash is (lookup is WorkLookup)
    got = found.entry_works(entries.lazy()).sort(ENTRY)
    assert got.rows() == [
        (0, "openalex:W9"),  # not the junk volume DOI's work, though its id is smaller
        (1, "doi:10.9/vol"),  # an entry with a junk alias only: that alias's work
        (2, "openalex:W2"),  # of W2 and W9, the smaller work id
        (3, "arxiv:2101.00001"),  # a DOI linked to an arXiv id: that arXiv work
    ]


def test_arxiv_month() -> None:
    got = pl.DataFrame(
        {
            "a": [
                "arxiv:2104.06921",
                "arxiv:0704.0001",
                "arxiv:hep-th/9901001",
                "arxiv:math/0601001",
                "doi:10.1/x",
                "arxiv:2113.00001",
            ]
        }
    ).select(arxiv_month_expr(pl.col("a")))
    assert got.to_series().to_list() == [
        date(2021, 4, 1),
        date(2007, 4, 1),
        date(1999, 1, 1),
        date(2006, 1, 1),
        None,
        None,
    ]


def test_id_kind_is_the_prefix_and_has_one_owner() -> None:
    ids = pl.Series(["arxiv:2104.06921", "doi:10.1/x:y", "openalex:W1", "2104.06921", None])
    got = pl.DataFrame({"id": ids}).select(A.id_kind(pl.col("id")))["id"].to_list()
    assert got == ["arxiv", "doi", "openalex", None, None]
    root = Path(pipeline.__file__).parent
    spelled = {
        p.relative_to(root).as_posix()
        for p in root.rglob("*.py")
        if A.ID_KIND in p.read_text(encoding="utf-8")
    }
    # rank/features.py still spells it: remove it here once it calls aliases.id_kind
    assert spelled <= {"rules/aliases.py", "rank/features.py"}, spelled
    assert "rules/aliases.py" in spelled
