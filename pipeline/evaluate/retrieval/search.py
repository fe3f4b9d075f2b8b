"""The search protocol of retrieval mode: each survey's top ``k`` documents of the corpus by
cosine of its vector, one implementation per engine.

* :class:`~pipeline.evaluate.retrieval.exact.ExactSearch`: every document scored, in
  bounded memory (the reference);
* :class:`~pipeline.evaluate.retrieval.faiss_index.FaissSearch`: faiss's HNSW index
  (``--index faiss``), with its recall against exact search;
* :class:`~pipeline.evaluate.retrieval.qdrant_index.QdrantSearch`: the user's own Qdrant
  collection (``--qdrant``), whose points carry the corpus's document ids.

A new engine is one class with :meth:`VectorSearch.top_k`, in its own file beside these.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np
import polars as pl


class VectorSearch(Protocol):
    """Searches the corpus's documents with the surveys' vectors."""

    def top_k(
        self, queries: np.ndarray, query_ids: list[str], k: int
    ) -> tuple[pl.DataFrame, dict[str, Any]]:
        """Each query's ``k`` best documents and what the results record of the search.

        Args:
            queries: one vector per query (rows of ``query_ids``).
            query_ids: the survey ids.
            k: documents per query.

        Returns:
            The run (``survey_id``, ``candidate_id``, ``score``; equal scores ordered by the
            evaluation's tie rule) and the search's facts (timings, recall, counts).
        """
        ...
