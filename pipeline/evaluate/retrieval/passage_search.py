"""Top-k documents by their passages' scores, exact, in memory bounded by a chunk
(``evaluate --passages --mode retrieval``).

The passages' vectors (:mod:`pipeline.evaluate.retrieval.passage_units`: row i is passage i,
each document's passages together) are read :data:`CHUNK_ROWS` rows at a time
(:func:`pipeline.evaluate.retrieval.corpus_vectors.iter_chunks`) and scored against
:data:`QUERY_BLOCK` queries at a time: cosine, both sides scaled to unit length in float64
(:func:`pipeline.evaluate.retrieval.exact.unit_rows`). A chunk's scores of the documents
that end in it (with the scores carried from the chunk before of the one that began there)
are aggregated by the one rule (:func:`pipeline.evaluate.passages.document_scores`, a
document's passages in their row order) and merged into each query's best ``k`` so far by
the evaluation's tie rule (:func:`pipeline.evaluate.retrieval.exact.keep_top`); the scores of
the document the chunk ends inside are carried to the next. The file is read once.

So the memory is a chunk's vectors and scores, each query's best ``k``, and the carried
scores of one document (its passages x the queries), whatever the number of passages; the
per-document arrays (layout, tie keys) grow with the corpus's documents. The run is the
one scoring every passage at once would give: the same documents and scores, the same ties.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from pipeline.core.progress import steps
from pipeline.evaluate import passages as P
from pipeline.evaluate.retrieval.corpus_vectors import iter_chunks
from pipeline.evaluate.retrieval.exact import DocOrder, keep_top, top_k_frame, unit_rows
from pipeline.evaluate.retrieval.passage_units import PassageLayout
from pipeline.evaluate.scoring.ties import id_hashes

QUERY_BLOCK = 16  # queries scored together (the block size of every earlier release)
CHUNK_ROWS = 4096  # passages read at a time: a block's scores are 16 x 4096 float64


def aggregate(scores: np.ndarray, counts: np.ndarray, options: P.PassageOptions) -> np.ndarray:
    """Documents' scores (queries x documents) from their passages' (queries x passages,
    each document's ``counts[j]`` passages together), by ``options``' rule: the values
    :func:`pipeline.evaluate.passages.document_scores` gives.

    ``max`` is numpy's (a maximum is one of the values, whoever takes it); ``mean-top-k`` is
    Polars' for the documents of two passages or more (its sum's order is its own) and the
    one score of a document of one passage (the mean of one value), numpy picking them out:
    most documents of a corpus have no full text, one passage.
    """
    starts = np.cumsum(counts) - counts
    if options.aggregation == "max":
        return np.maximum.reduceat(scores, starts, axis=1)
    found = scores[:, starts]
    many = np.flatnonzero(counts > 1)
    if len(many) == 0:
        return found
    sizes = counts[many]
    columns = np.repeat(starts[many] - (np.cumsum(sizes) - sizes), sizes) + np.arange(sizes.sum())
    n_queries = scores.shape[0]
    frame = pl.DataFrame(
        {
            P.QUERY: np.repeat(np.arange(n_queries), len(columns)),
            P.DOCUMENT: np.tile(np.repeat(np.arange(len(many)), sizes), n_queries),
            P.SCORE: scores[:, columns].ravel(),
        }
    )
    summed = P.document_scores(frame.lazy(), options.aggregation, options.k).collect()
    found[:, many] = summed[P.SCORE].to_numpy().reshape(n_queries, len(many))
    return found


def passage_top_k(
    queries: np.ndarray,
    query_ids: list[str],
    vectors: Path,
    layout: PassageLayout,
    order: DocOrder,
    k: int,
    options: P.PassageOptions,
    what: str,
) -> pl.DataFrame:
    """Each query's ``k`` documents of highest aggregated passage score (the module doc).

    Args:
        queries: one vector per query (rows of ``query_ids``), scaled to unit length here.
        query_ids: the queries' ids (survey or aspect ids).
        vectors: the passages' ``vectors.npy`` (row i embeds passage i of ``layout``).
        layout: each document's passages' rows.
        order: the corpus's ids and tie keys.
        k: documents per query (all of them when the corpus has fewer).
        options: the aggregation.
        what: the progress bar's label.

    Returns:
        ``survey_id``, ``candidate_id``, ``score``: ``min(k, documents)`` rows per query.
    """
    hashes = id_hashes(query_ids)
    firsts = range(0, len(query_ids), QUERY_BLOCK)
    blocks = [range(first, min(first + QUERY_BLOCK, len(query_ids))) for first in firsts]
    query_blocks = [unit_rows(queries[b.start : b.stop]) for b in blocks]
    best = [(np.zeros((len(b), 0)), np.zeros((len(b), 0), dtype=np.int64)) for b in blocks]
    carried = [np.zeros((len(b), 0)) for b in blocks]
    counts = layout.counts
    first_doc = 0  # the first document not aggregated yet (its scores so far carried)
    chunks = iter_chunks(vectors, CHUNK_ROWS)
    for _ in steps(range(0, layout.rows, CHUNK_ROWS), what, unit="chunk"):
        start, chunk = next(chunks)
        passages = unit_rows(chunk).T
        begin = int(layout.ends[first_doc - 1]) if first_doc else 0  # the carried scores' row
        end_doc = int(np.searchsorted(layout.ends, start + len(chunk), side="right"))
        done = int(layout.ends[end_doc - 1]) - begin if end_doc > first_doc else 0
        docs = layout.doc_rows[first_doc:end_doc]
        for j, rows in enumerate(query_blocks):
            scores = np.hstack([carried[j], rows @ passages])
            carried[j] = scores[:, done:].copy()  # not a view: the chunk's scores are let go
            if not done:
                continue
            found = aggregate(scores[:, :done], counts[first_doc:end_doc], options)
            top_scores = np.hstack([best[j][0], found])
            top_docs = np.hstack([best[j][1], np.broadcast_to(docs, found.shape)])
            if top_scores.shape[1] > k:
                block = blocks[j]
                top_scores, top_docs = keep_top(
                    top_scores, top_docs, hashes[block.start : block.stop], order, k
                )
            best[j] = (top_scores, top_docs)
        first_doc = end_doc
    surveys = [
        np.repeat(np.arange(b.start, b.stop), kept.shape[1])
        for b, (kept, _) in zip(blocks, best, strict=True)
    ]
    return top_k_frame(
        query_ids,
        order.ids,
        surveys,
        [docs.ravel() for _, docs in best],
        [scores.ravel() for scores, _ in best],
    )
