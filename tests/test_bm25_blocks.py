"""BM25 per survey block (:func:`pipeline.rules.text_match.bm25_by_block`): the scores of
``bm25s`` (:class:`BM25Index`) to the bit, and blocks holding the same documents (a survey's
aspects) share one index."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from pipeline.rules import text_match
from pipeline.rules.text_match import BlockIndex, BM25Index, bm25_by_block

DOCS_A = [["graph", "neural", "networks"], ["neural", "ranking"], ["graph", "graph", "survey"]]
DOCS_B = [["graph", "neural", "networks"], ["neural", "ranking"], ["graph", "survey"], []]


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

    class Counting(BlockIndex):
        def __init__(self, block: pl.Series) -> None:
            built.append(block.len())
            super().__init__(block)

    monkeypatch.setattr(text_match, "BlockIndex", Counting)
    scores = bm25_by_block(ids, queries, docs)
    assert built == [3, 4]  # one index for a1, a2 and a4, one for a3
    assert scores.tobytes() == alone.tobytes()
    assert scores[10:].tolist() == [0.0, 0.0, 0.0]  # no query token in the documents


@pytest.mark.parametrize(
    "query",
    [
        ["graph", "neural", "graph", "unknown", "survey"],  # repeated and unknown tokens
        ["ranking"],
        ["unknown"],
        [],
    ],
)
def test_block_index_gives_the_bits_of_bm25s(query: list[str]) -> None:
    docs = [*DOCS_A, *DOCS_B, [], ["networks", "networks", "networks", "graph"]]
    expected = BM25Index(docs).scores(query)
    got = BlockIndex(pl.Series(docs, dtype=pl.List(pl.String))).scores(query)
    assert got.tobytes() == expected.tobytes()


def test_block_index_of_empty_documents_scores_zero() -> None:
    assert BlockIndex(pl.Series([[], []], dtype=pl.List(pl.String))).scores(["a"]).tolist() == [
        0.0,
        0.0,
    ]
