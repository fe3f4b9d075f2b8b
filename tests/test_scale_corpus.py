"""The scale benchmark's corpus generator: extract tables the reduce stages accept."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from bench.scale_corpus import REJECTS_OUT, build
from pipeline.core import schema as S
from pipeline.core.config import Config
from pipeline.engine.reduce import run_reduce
from pipeline.engine.workdir import reduce_done
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
    for table in ("papers", "references", "mentions"):
        ours = sorted((corpus / "extract" / table).glob("*.parquet"))
        again = sorted((tmp_path / "extract" / table).glob("*.parquet"))
        assert [p.name for p in ours] == [p.name for p in again]
        assert [p.read_bytes() for p in ours] == [p.read_bytes() for p in again]
    before = {p: p.stat().st_mtime_ns for p in (tmp_path / "extract").rglob("*.parquet")}
    build(tmp_path, papers=3000, papers_per_file=1000, survey_share=0.15)  # markers match: skip
    assert {p: p.stat().st_mtime_ns for p in before} == before


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
