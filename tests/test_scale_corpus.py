"""The scale benchmark's corpus generator: extract tables the reduce stages accept."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bench.scale_corpus import (
    PAPER_REFS,
    REJECTS_OUT,
    SECTION_CHARS,
    SECTIONS_PER_PAPER,
    SURVEY_REFS_MAX,
    SURVEY_REFS_MIN,
    ScaleCorpus,
    build,
    survey_bib_sizes,
)
from bench.stage_references import REFERENCES, run_reference
from pipeline.core import schema as S
from pipeline.core.config import Config
from pipeline.engine.reduce import run_reduce
from pipeline.engine.workdir import reduce_done
from pipeline.rules.licences import extractable
from pipeline.stages import GRAPH


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("scale")
    # a high survey share so a tiny corpus has several surveys per category
    build(out, papers=3000, papers_per_file=1000, survey_share=0.15)
    return out


def test_tables_follow_the_extract_schemas(corpus: Path) -> None:
    base = corpus / "extract"
    schemas = {**S.EXTRACT_TABLES, "rejects": REJECTS_OUT}
    for table, schema in schemas.items():
        files = sorted((base / table).glob("*.parquet"))
        assert len(files) == 3
        for f in files:
            assert pq.read_schema(f).remove_metadata() == schema
    summary = json.loads((base / "_summary.json").read_text())
    assert summary["papers_written"] == summary["unique_papers"] == 3000
    assert summary["lines_read"] == 3000 and summary["rejects_total"] == 0
    assert len(json.loads((base / "_inputs.json").read_text())["files"]) == 3


def test_same_parameters_same_bytes_and_resume(corpus: Path, tmp_path: Path) -> None:
    build(tmp_path, papers=3000, papers_per_file=1000, survey_share=0.15)
    for table in ("papers", "references", "mentions", "section_texts"):
        ours = sorted((corpus / "extract" / table).glob("*.parquet"))
        again = sorted((tmp_path / "extract" / table).glob("*.parquet"))
        assert [p.name for p in ours] == [p.name for p in again]
        assert [p.read_bytes() for p in ours] == [p.read_bytes() for p in again]
    before = {p: p.stat().st_mtime_ns for p in (tmp_path / "extract").rglob("*.parquet")}
    build(tmp_path, papers=3000, papers_per_file=1000, survey_share=0.15)  # markers match: skip
    assert {p: p.stat().st_mtime_ns for p in before} == before


def test_survey_bibliographies_have_the_real_long_tail() -> None:
    # issue 47: real CS surveys cite 98 to 1,052 works, mean about 330, several over 500
    sizes = survey_bib_sizes(np.random.default_rng(7), 200_000)
    assert sizes.min() >= SURVEY_REFS_MIN == 50
    assert 1_000 < sizes.max() <= SURVEY_REFS_MAX == 1_100
    assert 280 < sizes.mean() < 320
    assert 0.08 < (sizes > 500).mean() < 0.2
    # redrawn, not clipped: no pile of surveys on the cap
    assert (sizes == SURVEY_REFS_MAX).mean() < 0.001
    again = survey_bib_sizes(np.random.default_rng(7), 200_000)
    assert np.array_equal(sizes, again)


def test_the_corpus_surveys_draw_from_it(corpus: Path) -> None:
    n_bib = np.concatenate(
        [
            pq.read_table(f, columns=[S.N_BIB_ENTRIES])[S.N_BIB_ENTRIES].to_numpy()
            for f in sorted((corpus / "extract" / "papers").glob("*.parquet"))
        ]
    )
    # other papers cite at most PAPER_REFS[1]: above it, every paper is a survey
    surveys = n_bib[n_bib > PAPER_REFS[1]]
    assert len(surveys) >= 80
    assert surveys.max() > 500 and surveys.max() <= SURVEY_REFS_MAX
    assert 250 < surveys.mean() < 350


def test_section_texts_have_the_real_records_shape(corpus: Path) -> None:
    # issue 51: the papers whose licence some release may carry have full text, with the
    # real sample's mean section count and section length (bench/measure_full_text.py)
    papers = pl.read_parquet(corpus / "extract" / "papers" / "*.parquet")
    texts = pl.read_parquet(corpus / "extract" / "section_texts" / "*.parquet")
    keeps = {p for p, url in papers.select("paper_id", "license").iter_rows() if extractable(url)}
    assert 0.4 < len(keeps) / papers.height < 0.6  # half the bench's licences: CC BY, BY-NC-SA
    per_paper = texts.group_by("paper_id").agg(
        pl.len().alias("n"), (pl.col("section_index").max() + 1).alias("last")
    )
    assert set(per_paper["paper_id"]) == keeps
    assert (per_paper["n"] == per_paper["last"]).all()  # sections 0 .. n - 1, each once
    assert per_paper["n"].mean() == pytest.approx(SECTIONS_PER_PAPER[0], rel=0.06)
    lengths = texts["text"].str.len_chars()
    assert lengths.mean() == pytest.approx(SECTION_CHARS[0], rel=0.06)
    assert lengths.median() == pytest.approx(SECTION_CHARS[1], rel=0.06)
    assert texts["text"].str.contains("[CITATION]", literal=True).mean() > 0.5
    assert not texts["text"].str.contains("{{", literal=True).any()  # no unarXive marker


def test_section_texts_do_not_depend_on_the_batch(corpus: Path) -> None:
    model = ScaleCorpus(3000, papers_per_file=1000, survey_share=0.15)
    papers = pq.read_table(sorted((corpus / "extract" / "papers").glob("*.parquet"))[1])
    whole = pa.concat_tables(model.section_texts(1, papers, 1000))
    batched = list(model.section_texts(1, papers, 77))
    assert len(batched) > 5 and pa.concat_tables(batched).equals(whole)
    written = pq.read_table(sorted((corpus / "extract" / "section_texts").glob("*.parquet"))[1])
    assert written.cast(whole.schema).equals(whole)


def test_every_reduce_stage_runs_on_it(corpus: Path) -> None:
    cfg = Config()
    manifests = {}
    for name, stage in GRAPH.items():
        if stage.kind == "reduce":
            manifests[name] = run_reduce(stage, corpus, cfg, force=True, stages=GRAPH)
            assert reduce_done(corpus, name, cfg, GRAPH)
    works = manifests["works"]["counts"]
    # entries without identifier (some of them resolve by title since issue 8)
    id_less = 1 - works["resolution"]["all"]["resolved_frac_identifier_only"]
    assert id_less == pytest.approx(0.29, abs=0.05)
    assert works["junk_aliases"] >= 0 and works["works_in_corpus"] > 0
    surveys = manifests["surveys"]["counts"]
    assert surveys["kept"] >= 30
    assert set(surveys["kept_by_cue"]) <= {
        "title:survey",
        "title:review",
        "title:systematic review",
        "title:overview",
        "title:recent advances",
    }
    tiers = manifests["labels"]["counts"]["labels"]
    assert all(
        tiers[name] > 0 for name in ("background", "tool_method", "related_work", "essential")
    )
    assert manifests["negatives"]["counts"]["negatives"] > 0
    assert manifests["release"]["counts"]["train_rows"] > 0
    # the full-text view has the candidates' sections whose licence permits it (CC BY here)
    view = pl.read_parquet(corpus / "release" / "corpus_sections" / "test.parquet")
    assert view.height > 0 and set(view["license"]) == {
        "http://creativecommons.org/licenses/by/4.0/"
    }


def test_each_stages_reference_query_runs_on_it(corpus: Path, tmp_path: Path) -> None:
    """bench-scale runs a reference query after every reduce stage (issue 53): each reads
    the stage's inputs and writes output of its size, under a scratch folder it deletes."""
    cfg = Config()
    for name, stage in GRAPH.items():
        if stage.kind == "reduce" and not reduce_done(corpus, name, cfg, GRAPH):
            run_reduce(stage, corpus, cfg, force=True, stages=GRAPH)
    assert sorted(REFERENCES) == sorted(n for n, s in GRAPH.items() if s.kind == "reduce")
    cites = pq.ParquetFile(corpus / "works" / "cites.parquet").metadata.num_rows
    for name in REFERENCES:
        rows = run_reference(name, corpus, tmp_path / name)
        assert not (tmp_path / name).exists()
        assert rows, name
        if name == "works":
            assert rows["cites.parquet"] == cites  # one row per bib entry, as the stage's
        if name == "labels":
            assert rows["labels.parquet"] > 0
        if name == "release":
            assert rows["train_survey_reading_lists.parquet"] > 0
