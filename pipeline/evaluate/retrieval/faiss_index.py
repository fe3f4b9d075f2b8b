"""Approximate search of the corpus's vectors (``--index faiss``), and what it costs in recall.

The index is faiss's HNSW graph over the unit-length vectors (inner product = cosine),
:data:`HNSW_M` links a node, :data:`EF_CONSTRUCTION` candidates while building and
:data:`EF_SEARCH` (at least ``k``) while searching, built with one thread so that the same
vectors give the same graph. faiss over usearch: with one thread and the same M and ef,
faiss builds its graph and searches faster at the same recall (the figures are in
``bench/bench_retrieval.py``'s results, which also measure faiss at the full eval corpus's
size).

The index file sits beside the vectors it indexes (``vectors/<key>/``, keyed by model,
corpus sha256 and batch size: :mod:`pipeline.evaluate.retrieval.corpus_vectors`), so it is rebuilt when the
corpus or the model changes, and written atomically. The report gives the ANN top k's
recall against exact search on the same vectors (:func:`recall_against`), so a user sees
what the index costs. faiss-cpu is the optional ``[ann]`` extra.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from pipeline.core.errors import UsageError
from pipeline.core.files import atomic_path
from pipeline.evaluate.columns import CANDIDATE_ID, SURVEY_ID
from pipeline.evaluate.retrieval.corpus_vectors import iter_chunks
from pipeline.evaluate.retrieval.exact import (
    CHUNK_ROWS,
    DocOrder,
    ExactSearch,
    top_k_frame,
    unit_rows,
)

EXACT, FAISS = "exact", "faiss"
INDEXES = (EXACT, FAISS)
HNSW_M = 32
EF_CONSTRUCTION = 100
EF_SEARCH = 200


def _faiss():
    try:
        import faiss
    except ImportError as e:
        raise UsageError(f"--index faiss needs faiss-cpu ({e}); pip install '.[ann]'") from e
    faiss.omp_set_num_threads(1)  # one thread: the same vectors give the same graph
    return faiss


def index_file(vectors: Path) -> Path:
    """The HNSW index of a ``vectors.npy``, beside it, named by its parameters."""
    return vectors.with_name(f"faiss-hnsw-m{HNSW_M}-ef{EF_CONSTRUCTION}.index")


def build_index(vectors: Path) -> tuple[object, bool]:
    """The HNSW index of ``vectors`` (read from its file when it exists), and whether this
    call built it. The vectors are added a chunk at a time."""
    faiss = _faiss()
    path = index_file(vectors)
    if path.is_file():
        return faiss.read_index(str(path)), False
    index = None
    for _, chunk in iter_chunks(vectors, CHUNK_ROWS):
        if index is None:
            index = faiss.IndexHNSWFlat(chunk.shape[1], HNSW_M, faiss.METRIC_INNER_PRODUCT)
            index.hnsw.efConstruction = EF_CONSTRUCTION
        index.add(np.ascontiguousarray(unit_rows(chunk), dtype=np.float32))
    if index is None:
        raise UsageError(f"{vectors}: no vectors to index")
    with atomic_path(path) as tmp:
        faiss.write_index(index, str(tmp))
    return index, True


def ann_top_k(
    index: object, queries: np.ndarray, query_ids: list[str], order: DocOrder, k: int
) -> pl.DataFrame:
    """Each query's approximate top ``k`` (``survey_id``, ``candidate_id``, ``score``)."""
    index.hnsw.efSearch = max(EF_SEARCH, k)  # type: ignore[attr-defined]
    k = min(k, order.ids.len())
    scores, docs = index.search(  # type: ignore[attr-defined]
        np.ascontiguousarray(unit_rows(queries), dtype=np.float32), k
    )
    found = docs >= 0  # faiss pads with -1 when the graph yields fewer than k
    surveys = np.repeat(np.arange(len(query_ids)), k).reshape(len(query_ids), k)
    return top_k_frame(
        query_ids,
        order.ids,
        [surveys[found]],
        [docs[found].astype(np.int64)],
        [scores[found].astype(np.float64)],
    )


def recall_against(approximate: pl.DataFrame, exact: pl.DataFrame) -> float:
    """Mean over queries of |ANN top k ∩ exact top k| / |exact top k|."""
    keys = [SURVEY_ID, CANDIDATE_ID]
    hits = exact.join(approximate.select(keys), on=keys, how="semi").group_by(SURVEY_ID).len()
    totals = exact.group_by(SURVEY_ID).len().rename({"len": "_total"})
    joined = totals.join(hits, on=SURVEY_ID, how="left").fill_null(0)
    return float((joined["len"] / joined["_total"]).mean() or 0.0)


@dataclass(frozen=True)
class FaissSearch:
    """faiss HNSW search of a corpus's ``vectors.npy``, its index built once beside it (a
    :class:`~pipeline.evaluate.retrieval.search.VectorSearch`). The exact search runs too:
    the facts hold the index's recall against it."""

    vectors: Path
    order: DocOrder

    def top_k(
        self, queries: np.ndarray, query_ids: list[str], k: int
    ) -> tuple[pl.DataFrame, dict[str, Any]]:
        exact, facts = ExactSearch(self.vectors, self.order).top_k(queries, query_ids, k)
        start = time.perf_counter()
        index, built = build_index(self.vectors)
        indexed = time.perf_counter()
        top = ann_top_k(index, queries, query_ids, self.order, k)
        return top, {**facts, f"ann_recall@{k}": recall_against(top, exact),
                     "index_built": built, "index_seconds": indexed - start,
                     "ann_search_seconds": time.perf_counter() - indexed}  # fmt: skip


def vector_search(index: str, vectors: Path, order: DocOrder) -> ExactSearch | FaissSearch:
    """The engine ``--index`` names over a corpus's vectors."""
    return FaissSearch(vectors, order) if index == FAISS else ExactSearch(vectors, order)
