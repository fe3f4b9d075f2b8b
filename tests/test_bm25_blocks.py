"""BM25 per survey block (:func:`pipeline.rules.text_match.bm25_by_block`): blocks holding the
same documents (a survey's aspects) share one index, with the scores of an index of their own."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from pipeline.rules import text_match
from pipeline.rules.text_match import BM25Index, bm25_by_block

DOCS_A = [["graph", "neural", "networks"], ["neural", "ranking"], ["graph", "graph", "survey"]]
DOCS_B = [["graph", "neural", "networks"], ["neural", "ranking"], ["graph", "survey"]]


def _blocks() -> tuple[pl.Series, list[list[str]], pl.Series]:
    # aspects a1, a2 and a4 list the same documents; a3 differs in one token of one document
    blocks = [("a1", DOCS_A), ("a2", DOCS_A), ("a3", DOCS_B), ("a4", DOCS_A)]
    ids = pl.Series([b for b, docs in blocks for _ in docs])
    docs = pl.Series([d for _, block in blocks for d in block], dtype=pl.List(pl.String))
    queries = [["graph", "neural"], ["ranking", "ranking"], ["graph", "survey"], ["unknown"]]
    return ids, queries, docs


def test_blocks_with_the_same_documents_share_one_index(monkeypatch: pytest.MonkeyPatch) -> None:
    ids, queries, docs = _blocks()
    # each block's own index, built before the count starts
    alone = np.concatenate([BM25Index(d).scores(q) for d, q in
                            zip([DOCS_A, DOCS_A, DOCS_B, DOCS_A], queries, strict=True)])  # fmt: skip
    built: list[int] = []

    class Counting(BM25Index):
        def __init__(self, block: list[list[str]]) -> None:
            built.append(len(block))
            super().__init__(block)

    monkeypatch.setattr(text_match, "BM25Index", Counting)
    scores = bm25_by_block(ids, queries, docs)
    assert built == [3, 3]  # one index for a1, a2 and a4, one for a3
    assert scores.tobytes() == alone.tobytes()
    assert scores[9:].tolist() == [0.0, 0.0, 0.0]  # no query token in the documents
