"""The user's own vector index: retrieve each survey's top ``k`` from a Qdrant collection.

``evaluate --mode retrieval --qdrant URL_OR_PATH --collection NAME`` asks an existing
collection, whose points carry the corpus's document ids in a payload field
(``--id-field``, default ``_id``), for the ``k`` nearest points of each survey's vector.
The survey vectors come from the command's ``--encoder``/``--sentence-transformer``
(queries only: the corpus is the index's) or from ``--query-vectors FILE`` (Parquet with
``_id``, the survey id, and ``vector``) for a model that cannot run here.

``URL_OR_PATH``: an ``http(s)://`` URL is a Qdrant server, reached with the API key in
``QDRANT_API_KEY`` (read from the environment, never printed or written); anything else
is the folder of qdrant-client's local mode (the same client, the engine in process).
The score is the collection's own (its distance); the evaluation orders equal scores by
the project's tie rule.

A point whose id is not a document of the split's corpus (another split's paper, a stale
point) is counted (``points_outside_corpus``, with a few examples) and dropped, never
scored as relevant; a point without the id field is counted too. qdrant-client is the
optional ``[qdrant]`` extra.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from pipeline.core.errors import UsageError
from pipeline.core.progress import steps
from pipeline.core.schema import BEIR_ID
from pipeline.evaluate.columns import CANDIDATE_ID, SCORE, SURVEY_ID

log = logging.getLogger("pipeline")

API_KEY_ENV = "QDRANT_API_KEY"
DEFAULT_ID_FIELD = BEIR_ID
QUERY_VECTOR = "vector"  # the --query-vectors column of a survey's vector
QUERY_BATCH = 64  # queries sent in one request
EXAMPLES = 5  # ids outside the corpus named in the results


def is_url(location: str) -> bool:
    return location.startswith(("http://", "https://"))


@contextmanager
def client(location: str) -> Iterator[Any]:
    """A QdrantClient on a server URL (API key from the environment) or a local folder."""
    try:
        from qdrant_client import QdrantClient
    except ImportError as e:
        raise UsageError(f"--qdrant needs qdrant-client ({e}); pip install '.[qdrant]'") from e
    if is_url(location):
        connection = QdrantClient(url=location, api_key=os.environ.get(API_KEY_ENV) or None)
    else:
        if not Path(location).is_dir():
            raise UsageError(f"--qdrant {location}: neither an http(s) URL nor a folder")
        connection = QdrantClient(path=location)
    try:
        yield connection
    finally:
        connection.close()


def read_query_vectors(path: Path, survey_ids: list[str]) -> tuple[list[str], np.ndarray]:
    """The surveys of ``survey_ids`` that ``path`` has a vector for, and their vectors.

    Raises:
        UsageError: the file lacks ``_id`` or ``vector``, or its vectors differ in size.
    """
    frame = pl.read_parquet(path)
    missing = [c for c in (BEIR_ID, QUERY_VECTOR) if c not in frame.columns]
    if missing:
        raise UsageError(
            f"--query-vectors {path}: no column {', '.join(missing)} (expected {BEIR_ID}, "
            f"{QUERY_VECTOR})"
        )
    wanted = frame.filter(pl.col(BEIR_ID).is_in(survey_ids)).sort(BEIR_ID)
    sizes = wanted[QUERY_VECTOR].list.len().unique().to_list()
    if len(sizes) > 1:
        raise UsageError(f"--query-vectors {path}: vectors of sizes {sorted(sizes)}")
    ids = wanted[BEIR_ID].to_list()
    matrix = np.asarray(wanted[QUERY_VECTOR].to_list(), dtype=np.float64).reshape(len(ids), -1)
    return ids, matrix


def qdrant_top_k(
    location: str,
    collection: str,
    id_field: str,
    query_ids: list[str],
    queries: np.ndarray,
    k: int,
    corpus_ids: pl.Series,
) -> tuple[pl.DataFrame, dict[str, Any]]:
    """Each query's ``k`` nearest points of ``collection``, kept when their ``id_field``
    names a corpus document (see the module doc).

    Returns:
        The run (``survey_id``, ``candidate_id``, ``score``) and what the results record.
    """
    from qdrant_client import models

    known = set(corpus_ids.to_list())
    rows: dict[tuple[str, str], float] = {}
    outside: list[str] = []
    counts = {"points_returned": 0, "points_outside_corpus": 0, "points_without_id_field": 0,
              "duplicate_ids": 0}  # fmt: skip
    blocks = list(range(0, len(query_ids), QUERY_BATCH))
    with client(location) as connection:
        try:
            exists = connection.collection_exists(collection)
        except Exception as e:  # the client's own errors: a server down, refused, timed out
            # the type only: a message could echo a request, and the request carries the key
            raise UsageError(
                f"--qdrant {_where(location)}: cannot be reached ({type(e).__name__})"
            ) from None
        if not exists:
            names = [c.name for c in connection.get_collections().collections]
            raise UsageError(
                f"--collection {collection}: not in {_where(location)}; available: "
                f"{', '.join(sorted(names)) or 'none'}"
            )
        for first in steps(blocks, f"evaluate: qdrant {collection}", unit="block"):
            batch = query_ids[first : first + QUERY_BATCH]
            requests = [
                models.QueryRequest(query=vector.tolist(), limit=k, with_payload=[id_field])
                for vector in queries[first : first + QUERY_BATCH]
            ]
            answers = connection.query_batch_points(collection, requests)
            for survey, answer in zip(batch, answers, strict=True):
                for point in answer.points:
                    counts["points_returned"] += 1
                    doc = (point.payload or {}).get(id_field)
                    if doc is None:
                        counts["points_without_id_field"] += 1
                    elif doc not in known:
                        counts["points_outside_corpus"] += 1
                        if len(outside) < EXAMPLES and doc not in outside:
                            outside.append(str(doc))
                    elif (survey, doc) in rows:
                        counts["duplicate_ids"] += 1
                        rows[survey, doc] = max(rows[survey, doc], float(point.score))
                    else:
                        rows[survey, doc] = float(point.score)
    if counts["points_outside_corpus"] or counts["points_without_id_field"]:
        log.warning(
            "evaluate: qdrant %s returned %d point(s) whose %s is not in the split's corpus "
            "(e.g. %s) and %d without it; dropped, never relevant",
            collection, counts["points_outside_corpus"], id_field, ", ".join(outside) or "-",
            counts["points_without_id_field"],
        )  # fmt: skip
    run = pl.DataFrame(
        {
            SURVEY_ID: [s for s, _ in rows],
            CANDIDATE_ID: [d for _, d in rows],
            SCORE: pl.Series(list(rows.values()), dtype=pl.Float64),
        },
        schema={SURVEY_ID: pl.String, CANDIDATE_ID: pl.String, SCORE: pl.Float64},
    )
    facts = {"index": "qdrant", "location": _where(location), "collection": collection,
             "id_field": id_field, "top_k": k, **counts,
             "outside_corpus_examples": outside}  # fmt: skip
    return run, facts


def _where(location: str) -> str:
    """The location as the results name it: a server's URL, a local folder's name only."""
    return location if is_url(location) else f"local folder {Path(location).name}"
