"""Top-k search over the corpus's vectors: exact, batched, in bounded memory.

Score = cosine of the query's vector and the document's (both scaled to unit length in
float64; a zero vector scores 0). Queries are taken :data:`QUERY_BLOCK` at a time and the
corpus's ``vectors.npy`` is read :data:`CHUNK_ROWS` rows at a time
(:func:`pipeline.evaluate.retrieval.corpus_vectors.iter_chunks`), so the memory is that of one block of
scores and each query's best ``k`` so far, whatever the corpus's size: about 100 MB at
the defaults with ``k`` = 1000.

The top ``k`` of a query is the one the evaluation's tie rule gives
(:mod:`pipeline.evaluate.scoring.ties`): score descending, then the tie key of (survey, document)
ascending, then the document id. ``numpy.argpartition`` keeps an arbitrary subset of the
documents tied at the k-th score, so a query whose k-th score is shared by a document left
out is re-ranked by the rule itself; on real vectors that is rare, and the rule makes a
run the same on every machine.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from pipeline.evaluate.columns import CANDIDATE_ID, SCORE, SURVEY_ID
from pipeline.evaluate.retrieval.corpus_vectors import iter_chunks
from pipeline.evaluate.scoring.ties import id_hashes, splitmix64_array

QUERY_BLOCK = 1024  # queries scored together
CHUNK_ROWS = 4096  # corpus rows read at a time: a block of scores is 1024 x 4096 float64


def unit_rows(matrix: np.ndarray) -> np.ndarray:
    """``matrix`` (float64) with every row scaled to unit length; a zero row stays zero."""
    matrix = np.asarray(matrix, dtype=np.float64)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)


@dataclass(frozen=True)
class DocOrder:
    """What the tie rule needs of the corpus: each document's h(id) and its id's rank
    among the sorted ids (so the last key compares integers, not strings)."""

    ids: pl.Series
    hashes: np.ndarray
    id_rank: np.ndarray

    @classmethod
    def of(cls, ids: pl.Series) -> DocOrder:
        order = np.argsort(np.asarray(ids.to_list(), dtype=object), kind="stable")
        rank = np.empty(len(order), dtype=np.int64)
        rank[order] = np.arange(len(order))
        return cls(ids, id_hashes(ids.to_list()), rank)


def _tie_ordered(
    scores: np.ndarray, docs: np.ndarray, survey_hash: np.uint64, order: DocOrder, k: int
) -> tuple[np.ndarray, np.ndarray]:
    """The first ``k`` of one query's documents by the tie rule."""
    keys = splitmix64_array(order.hashes[docs] ^ survey_hash)
    first = np.lexsort((order.id_rank[docs], keys, -scores))[:k]
    return scores[first], docs[first]


def keep_top(
    scores: np.ndarray,
    docs: np.ndarray,
    survey_hashes: np.ndarray,
    order: DocOrder,
    k: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Each row's best ``k`` (scores, document rows), ties at the k-th score by the rule."""
    part = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    top_scores = np.take_along_axis(scores, part, axis=1)
    top_docs = np.take_along_axis(docs, part, axis=1)
    kth = top_scores.min(axis=1, keepdims=True)
    tied_out = (scores == kth).sum(axis=1) > (top_scores == kth).sum(axis=1)
    for row in np.flatnonzero(tied_out):
        keep = scores[row] >= kth[row, 0]
        top_scores[row], top_docs[row] = _tie_ordered(
            scores[row, keep], docs[row, keep], survey_hashes[row], order, k
        )
    return top_scores, top_docs


def exact_top_k(
    queries: np.ndarray,
    query_ids: list[str],
    vectors: Path,
    order: DocOrder,
    k: int,
    chunk_rows: int = CHUNK_ROWS,
    query_block: int = QUERY_BLOCK,
) -> pl.DataFrame:
    """The ``k`` documents of highest cosine for every query (see the module doc).

    Args:
        queries: one vector per query (rows of ``query_ids``).
        query_ids: the survey ids.
        vectors: the corpus's ``vectors.npy`` (row i embeds ``order.ids[i]``).
        order: the corpus's ids and tie keys (:class:`DocOrder`).
        k: documents per query (all of them when the corpus is smaller).

    Returns:
        ``survey_id``, ``candidate_id``, ``score``: ``min(k, corpus)`` rows per query.
    """
    surveys: list[np.ndarray] = []
    found_docs: list[np.ndarray] = []
    found_scores: list[np.ndarray] = []
    hashes = id_hashes(query_ids)
    for first in range(0, len(query_ids), query_block):
        block = unit_rows(queries[first : first + query_block])
        block_hashes = hashes[first : first + query_block]
        best_scores = np.zeros((len(block), 0))
        best_docs = np.zeros((len(block), 0), dtype=np.int64)
        for start, chunk in iter_chunks(vectors, chunk_rows):
            scores = block @ unit_rows(chunk).T
            rows = np.broadcast_to(np.arange(start, start + len(chunk)), scores.shape)
            best_scores = np.hstack([best_scores, scores])
            best_docs = np.hstack([best_docs, rows])
            if best_scores.shape[1] > k:
                best_scores, best_docs = keep_top(best_scores, best_docs, block_hashes, order, k)
        surveys.append(np.repeat(np.arange(first, first + len(block)), best_scores.shape[1]))
        found_docs.append(best_docs.ravel())
        found_scores.append(best_scores.ravel())
    return top_k_frame(query_ids, order.ids, surveys, found_docs, found_scores)


def top_k_frame(
    query_ids: list[str],
    doc_ids: pl.Series,
    surveys: list[np.ndarray],
    docs: list[np.ndarray],
    scores: list[np.ndarray],
) -> pl.DataFrame:
    """Rows of query and document positions as a run's ``survey_id, candidate_id, score``."""
    concat = np.concatenate if surveys else (lambda parts: np.zeros(0, dtype=np.int64))
    survey_rows, doc_rows = concat(surveys), concat(docs)
    return pl.DataFrame(
        {
            SURVEY_ID: pl.Series(query_ids, dtype=pl.String).gather(survey_rows),
            CANDIDATE_ID: doc_ids.gather(doc_rows).rename(CANDIDATE_ID),
            SCORE: pl.Series(concat(scores) if scores else [], dtype=pl.Float64),
        }
    )


@dataclass(frozen=True)
class ExactSearch:
    """Exact search of a corpus's ``vectors.npy`` (a :class:`~pipeline.evaluate.retrieval.search.VectorSearch`)."""

    vectors: Path
    order: DocOrder

    def top_k(
        self, queries: np.ndarray, query_ids: list[str], k: int
    ) -> tuple[pl.DataFrame, dict[str, Any]]:
        start = time.perf_counter()
        top = exact_top_k(queries, query_ids, self.vectors, self.order, k)
        return top, {"search_seconds": time.perf_counter() - start}
