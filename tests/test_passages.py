"""Document scores from passage scores (issue 51): max and mean-top-k against a hand
computation, the fallback to title-and-abstract scores, and the passage corpus's ids."""

from __future__ import annotations

import polars as pl
import pytest

from pipeline.core import schema as S
from pipeline.evaluate.passages import (
    DOCUMENT,
    QUERY,
    SCORE,
    document_scores,
    passage_corpus,
    with_fallback,
)

PASSAGES = pl.DataFrame(
    {
        QUERY: ["q1"] * 5 + ["q2"] * 2,
        DOCUMENT: ["a", "a", "a", "a", "b", "a", "b"],
        SCORE: [0.1, 0.9, 0.5, 0.7, 0.3, 0.2, 0.4],
    }
)


def _scores(frame: pl.DataFrame) -> dict[tuple[str, str], float]:
    return {(q, d): s for q, d, s in frame.select(QUERY, DOCUMENT, SCORE).iter_rows()}


def test_max_and_mean_top_k() -> None:
    best = _scores(document_scores(PASSAGES.lazy(), "max").collect())
    assert best == {("q1", "a"): 0.9, ("q1", "b"): 0.3, ("q2", "a"): 0.2, ("q2", "b"): 0.4}
    top = _scores(document_scores(PASSAGES.lazy(), "mean-top-k", k=3).collect())
    assert top[("q1", "a")] == pytest.approx((0.9 + 0.7 + 0.5) / 3)
    assert top[("q1", "b")] == pytest.approx(0.3)  # fewer passages than k: all of them
    one = _scores(document_scores(PASSAGES.lazy(), "mean-top-k", k=1).collect())
    assert one == best
    with pytest.raises(ValueError, match="one of max, mean-top-k"):
        document_scores(PASSAGES.lazy(), "sum")


def test_documents_without_text_keep_their_abstract_score() -> None:
    fallback = pl.LazyFrame(
        {QUERY: ["q1", "q1", "q1"], DOCUMENT: ["a", "b", "c"], SCORE: [0.0, 0.0, 0.25]}
    )
    scores, n = with_fallback(document_scores(PASSAGES.lazy(), "max"), fallback)
    assert _scores(scores) == {("q1", "a"): 0.9, ("q1", "b"): 0.3, ("q1", "c"): 0.25}
    assert n == 1


def test_the_passage_corpus_maps_back_to_documents() -> None:
    sections = pl.LazyFrame(
        {
            S.BEIR_CORPUS_ID: ["arxiv:1", "arxiv:1", "doi:10.1/x"],
            S.SECTION_ORDER: [0, 1, 0],
            S.HEADING: ["Introduction", "Method", "Intro"],
            S.SECTION_TEXT: ["a [CITATION] b", "c", "d"],
        }
    )
    corpus = passage_corpus(sections).collect()
    assert corpus[S.BEIR_ID].to_list() == ["arxiv:1#0", "arxiv:1#1", "doi:10.1/x#0"]
    assert corpus[S.BEIR_CORPUS_ID].to_list() == ["arxiv:1", "arxiv:1", "doi:10.1/x"]
    assert corpus.columns == [S.BEIR_ID, S.BEIR_TITLE, S.BEIR_TEXT, S.BEIR_CORPUS_ID]
