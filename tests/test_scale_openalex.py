"""The scale corpus's OpenAlex snapshot (bench/scale_openalex.py): deterministic, in
OpenAlex's snapshot format as the openalex stage's own reader reads it, label-free."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from bench import scale_openalex as SO
from bench.scale_corpus import ScaleCorpus, build
from pipeline.core import schema as S
from pipeline.core.config import load_config
from pipeline.corpus import openalex as OA
from pipeline.engine.reduce import run_reduce
from pipeline.stages import GRAPH

PAPERS, PER_FILE, SHARE = 1500, 500, 0.15


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("scale") / "w"
    build(out, papers=PAPERS, papers_per_file=PER_FILE, survey_share=SHARE)
    SO.write_snapshot(out, PAPERS, papers_per_file=PER_FILE)
    return out


def _records(root: Path) -> list[dict]:
    return [
        json.loads(line)
        for p in OA.snapshot_files(root)
        for line in gzip.open(p, "rt", encoding="utf-8")
    ]


def test_same_corpus_same_bytes(corpus: Path, tmp_path: Path) -> None:
    again = tmp_path / "w"
    build(again, papers=PAPERS, papers_per_file=PER_FILE, survey_share=SHARE)
    SO.write_snapshot(again, PAPERS, papers_per_file=PER_FILE)
    ours = OA.snapshot_files(SO.snapshot_dir(corpus))
    theirs = OA.snapshot_files(SO.snapshot_dir(again))
    assert [p.relative_to(SO.snapshot_dir(corpus)) for p in ours] == [
        p.relative_to(SO.snapshot_dir(again)) for p in theirs
    ]
    assert [p.read_bytes() for p in ours] == [p.read_bytes() for p in theirs]


def test_the_stages_reader_answers_every_kind_of_key(corpus: Path) -> None:
    model = ScaleCorpus(PAPERS, 1, PER_FILE, SHARE)
    root = SO.snapshot_dir(corpus)
    paper = pl.read_parquet(corpus / "extract" / "papers").sort(S.PAPER_ID).row(0, named=True)
    ext = next(i for i in range(len(model.external_dates))
               if model.external_has_doi[i] and model.external_has_openalex[i]
               and SO._unit(np.array([i]), 13)[0] >= SO.NOT_IN_OPENALEX)  # fmt: skip
    doi = f"10.{ext % 4000 + 1000}/j.{ext:08d}"
    keys = [
        f"arxiv:{paper[S.PAPER_ID]}",  # asked as its DataCite DOI
        f"openalex:W{SO.OPENALEX_EXTERNAL_BASE + ext}",
        f"doi:{doi}",
        "doi:10.1007/vol.3",  # a proceedings-volume DOI names no work
    ]
    tally = OA.Tally()
    got = {a.key: a for batch in OA.snapshot_lookup(keys, root, tally) for a in batch}
    assert tally.invalid_records == 0
    own = got[keys[0]].record
    assert got[keys[0]].found and own is not None
    # a corpus paper is described by its own title and arXiv abstract
    assert own.title == paper[S.TITLE] and own.abstract == paper[S.ABSTRACT]
    assert own.arxiv_id == paper[S.PAPER_ID]
    assert own.subfield and own.field and own.domain and own.topic and own.publication_year
    assert got[keys[1]].record.openalex_id == got[keys[2]].record.openalex_id
    assert got[keys[2]].record.doi == doi
    assert not got[keys[3]].found


def test_topics_follow_the_work_and_shares_follow_the_constants(corpus: Path) -> None:
    model = ScaleCorpus(PAPERS, 1, PER_FILE, SHARE)
    records = _records(SO.snapshot_dir(corpus))
    external = [r for r in records if int(r["id"].rsplit("W", 1)[1]) >= SO.OPENALEX_EXTERNAL_BASE]
    with_ids = int((model.external_has_doi | model.external_has_openalex).sum())
    assert 0.9 * with_ids < len(external) < with_ids  # NOT_IN_OPENALEX of them are missing
    share = sum(r["abstract_inverted_index"] is not None for r in external) / len(external)
    assert SO.ABSTRACT_SHARE_OLD - 0.05 < share < SO.ABSTRACT_SHARE_2022 + 0.05
    for r in external[:200]:
        i = int(r["id"].rsplit("W", 1)[1]) % 1_000_000_000
        cs = model.external_cats[i] < model.n_cs
        topic = r["primary_topic"]
        if cs:  # the topic is the title's area; the subfield that area's or the category's
            category = model.cat_names[model.external_cats[i]]
            assert topic["subfield"]["display_name"] in {
                SO.AREA_SUBFIELDS[model.external_area[i]],
                SO.CATEGORY_SUBFIELDS.get(category),
            }
            assert topic["display_name"] in r["title"]
        # the abstract names the title's words (a text a reader can match, as real ones do)
        if r["abstract_inverted_index"]:
            text = OA.abstract_text(r["abstract_inverted_index"])
            assert text.startswith("We propose novel " + r["title"])


def test_the_openalex_stage_reads_it_and_describes_what_is_cited(corpus: Path) -> None:
    cfg = load_config(overrides={"openalex_lookup": {"snapshot": str(SO.snapshot_dir(corpus))}})
    run_reduce(GRAPH["works"], corpus, cfg, force=True, stages=GRAPH)
    counts = run_reduce(GRAPH["openalex"], corpus, cfg, force=True, stages=GRAPH)["counts"]
    assert counts["works_not_looked_up"] == 0
    # every looked-up work has a record but the few NOT_IN_OPENALEX and the volume DOIs
    assert counts["record_rate"] > 0.9
    records = pl.read_parquet(corpus / "openalex" / "records.parquet")
    found = records.filter(pl.col(S.OA_FOUND))
    assert found[S.OA_SUBFIELD].null_count() == 0 and found[S.OA_YEAR].null_count() == 0
