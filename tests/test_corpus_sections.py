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


@pytest.mark.parametrize("split", ["train", "eval"])
def test_full_text_availability_is_in_the_leak_audit(demo: Path, split: str) -> None:
    """Whether a candidate has full text is visible: the audits carry it as a single feature
    (equal to its AUC computed here from the files), as a relative feature, and the probe
    learns from it (issue 51)."""
    from pipeline.rules.leak_audit import FULL_TEXT, RELATIVE_FULL_TEXT, columns_audit

    meta = json.loads((demo / METADATA_FILE).read_text())
    audit = meta["leak_audit"]
    assert audit["sample"][split]["sampled"] is False  # the demo's audit reads every row
    with_text = pl.read_parquet(demo / sections_file(split))[S.BEIR_CORPUS_ID].unique()
    lists = pl.read_parquet(demo / READING_LISTS_FILE.format(split=split))
    flag = pl.col(S.CANDIDATE_ID).is_in(with_text.implode()).cast(pl.Float64).alias(FULL_TEXT)
    expected = columns_audit(lists.select(S.SURVEY_ID, flag), lists[S.LABEL])[FULL_TEXT]
    assert audit["splits"][split][FULL_TEXT] == expected
    assert audit["relative"]["splits"][split][RELATIVE_FULL_TEXT]["pooled"] is not None
    assert FULL_TEXT in audit["reading_free_probe"]["features"]
    aspects = meta["aspects"]["leak_audit"]
    assert aspects["splits"][split][FULL_TEXT]["per_aspect"] is not None
    assert RELATIVE_FULL_TEXT in aspects["relative"]["splits"][split]
    assert FULL_TEXT in aspects["reading_free_probe"]["features"]
