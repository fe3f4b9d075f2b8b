"""The demo release's full-text view ``corpus_sections`` (issue 51): only documents of the
split's corpus whose licence the (commercial, by default) release may carry, every marker a
neutral token, and counts in the metadata that the files give."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest

from pipeline import api
from pipeline.core import schema as S
from pipeline.core.release_files import METADATA_FILE, READING_LISTS_FILE, beir_file
from pipeline.rules.licences import name_expr, permitted
from pipeline.stages.corpus_sections import sections_file

MARKERS = ("{{cite:", "{{formula:", "{{figure:", "{{table:")


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("demo")
    api.demo(out, papers=400, workers=1)
    return out / "release"


@pytest.mark.parametrize("split", ["train", "eval"])
def test_the_view_of_each_split(demo: Path, split: str) -> None:
    path = demo / sections_file(split)
    assert pq.read_schema(path).remove_metadata() == S.CORPUS_SECTIONS
    rows = pl.read_parquet(path)
    assert rows.height > 0
    assert all(permitted(u, non_commercial=False) for u in rows[S.LICENSE].unique())
    corpus = set(pl.read_parquet(demo / beir_file("corpus", split))[S.BEIR_ID])
    assert set(rows[S.BEIR_CORPUS_ID]) <= corpus
    texts = rows[S.SECTION_TEXT]
    assert not any(m in t for t in texts for m in MARKERS)
    assert sum(t.count("[CITATION]") for t in texts) > 0
    # corpus papers under a refused licence (arXiv's, and NC in a commercial release) are
    # candidates, and have no full text
    lists = pl.read_parquet(demo / READING_LISTS_FILE.format(split=split))
    licences = lists.select(S.CANDIDATE_ID, S.CANDIDATE_LICENSE).unique().drop_nulls()
    refused = {c for c, u in licences.iter_rows() if not permitted(u, non_commercial=False)}
    assert refused and not refused & set(rows[S.BEIR_CORPUS_ID])
    meta = json.loads((demo / METADATA_FILE).read_text())
    counts = meta["corpus_sections"][split]
    docs = rows.unique(S.BEIR_CORPUS_ID)
    assert counts["sections"] == rows.height == meta["files"][sections_file(split)]["rows"]
    assert counts["documents"] == docs.height
    assert counts["characters"] == texts.str.len_chars().sum()
    by_licence = docs.select(name_expr(pl.col(S.LICENSE)))[S.LICENSE].value_counts()
    assert counts["documents_by_licence"] == dict(by_licence.iter_rows())
    assert counts["non_commercial"] is False
