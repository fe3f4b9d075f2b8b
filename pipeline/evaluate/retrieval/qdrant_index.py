"""The user's own vector index: retrieve each survey's top ``k`` from a Qdrant collection.

``evaluate --mode retrieval --qdrant URL_OR_PATH --collection NAME`` asks an existing
collection, whose points carry the corpus's document ids in a payload field
(``--id-field``, default ``_id``), for the ``k`` nearest points of each survey's vector.
The survey vectors come from the command's ``--encoder``/``--sentence-transformer``
(queries only: the corpus is the index's) or from ``--query-vectors FILE`` (Parquet with
``_id``, the survey id, and ``vector``) for a model that cannot run here.

``URL_OR_PATH``: an ``http(s)://`` URL is a Qdrant server, reached with the API key in
``QDRANT_API_KEY`` (read from the environment, never printed or written); anything else
is the folder of qdrant-client's local mode (the same client, the engine in process). The
folder is checked before the client opens it, since the client writes ``meta.json`` and
``.lock`` into any folder it is given: a folder without qdrant-client's ``meta.json`` is
refused and left as it was. What the client or a server says goes through
:func:`pipeline.rules.redact.redact` before it reaches a message (a proxy may quote the
request's ``api-key`` header back).
The score is the collection's own (its distance); the evaluation orders equal scores by
the project's tie rule.

A point whose id is not a document of the split's corpus (another split's paper, a stale
point) is counted (``points_outside_corpus``, with a few examples) and dropped, never
scored as relevant; a point without the id field is counted too. The queries' size must
be the collection's, and a ``--query-vectors`` file is checked before any search (one
line naming the file, the survey and the row: a string, null, NaN or infinite value, ids
that are no eval survey, a survey given twice). qdrant-client is the optional ``[qdrant]``
extra.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import numpy as np
import polars as pl

from pipeline.core.errors import UsageError
from pipeline.core.progress import steps
from pipeline.core.schema import BEIR_ID
from pipeline.corpus.sources import InputError
from pipeline.evaluate.columns import CANDIDATE_ID, SCORE, SURVEY_ID
from pipeline.rules.redact import redact

log = logging.getLogger("pipeline")

API_KEY_ENV = "QDRANT_API_KEY"  # one of the secrets redact knows (SECRET_ENV)
DEFAULT_ID_FIELD = BEIR_ID
QUERY_VECTOR = "vector"  # the --query-vectors column of a survey's vector
QUERY_BATCH = 64  # queries sent in one request
EXAMPLES = 5  # ids outside the corpus named in the results
SERVER_WORDS = 300  # characters of a server's error kept in a message

T = TypeVar("T")


def is_url(location: str) -> bool:
    return location.startswith(("http://", "https://"))


def _local_store(location: str) -> None:
    """Refuse a folder that is not a qdrant-client local store, before the client opens it
    (it would create ``meta.json`` and ``.lock`` in it): ``meta.json`` must be a JSON object
    with the ``collections`` and ``aliases`` objects the client reads."""
    from qdrant_client.local.qdrant_local import META_INFO_FILENAME as LOCAL_META

    folder = Path(location)
    if not folder.is_dir():
        raise UsageError(f"--qdrant {location}: neither an http(s) URL nor a folder")
    meta = folder / LOCAL_META
    expected = (
        "give the folder a QdrantClient(path=...) wrote its collections in, or a server's "
        "http(s) URL"
    )
    if not meta.is_file():
        raise UsageError(
            f"--qdrant {location}: not a qdrant-client local-mode folder (no {LOCAL_META}); "
            f"{expected}"
        )
    try:
        found = json.loads(meta.read_bytes())
    except ValueError as e:  # not UTF-8, not JSON
        raise UsageError(
            f"--qdrant {location}: {LOCAL_META} is not JSON ({' '.join(str(e).split())}); "
            f"{expected}"
        ) from None
    shaped = (
        isinstance(found, dict)
        and isinstance(found.get("collections"), dict)
        and isinstance(found.get("aliases"), dict)
        and all(isinstance(c, dict) for c in found["collections"].values())
    )
    if not shaped:
        raise UsageError(
            f"--qdrant {location}: {LOCAL_META} is not qdrant-client's (expected an object "
            f"whose collections and aliases are objects); {expected}"
        )


@contextmanager
def client(location: str) -> Iterator[Any]:
    """A QdrantClient on a server URL (API key from the environment) or a local folder
    (checked first: :func:`_local_store`)."""
    try:
        from qdrant_client import QdrantClient
    except ImportError as e:
        raise UsageError(f"--qdrant needs qdrant-client ({e}); pip install '.[qdrant]'") from e
    if is_url(location):
        connection = QdrantClient(url=location, api_key=os.environ.get(API_KEY_ENV) or None)
    else:
        _local_store(location)
        try:
            connection = QdrantClient(path=location)
        except Exception as e:  # a collection's config or storage the client cannot load,
            # a folder another client holds: the user's folder, so one line naming it
            raise UsageError(
                f"--qdrant {location}: qdrant-client cannot open it "
                f"({type(e).__name__}: {_library_words(e)})"
            ) from e
    try:
        yield connection
    finally:
        connection.close()


def _ask(location: str, what: str, call: Callable[[], T]) -> T:
    """``call()``, the request ``what`` to the index; a refusal, a broken answer or a server
    out of reach is one line, the server's words redacted (they may quote the API key)."""
    import pydantic
    from qdrant_client.http.exceptions import ApiException, UnexpectedResponse

    try:
        return call()
    except UnexpectedResponse as e:
        raise UsageError(
            f"--qdrant {_where(location)}: HTTP {e.status_code} to {what} ({_server_words(e)})"
        ) from None
    except (ApiException, pydantic.ValidationError, OSError) as e:
        # the client wraps what went wrong in `source`: an answer it cannot parse, or a
        # request that got no answer (a server down, refused, timed out). The type only:
        # the text may hold the request, and the request holds the key.
        cause = getattr(e, "source", None) or e
        if isinstance(cause, pydantic.ValidationError):
            raise UsageError(
                f"--qdrant {_where(location)}: the answer to {what} is not Qdrant's API"
            ) from None
        raise UsageError(
            f"--qdrant {_where(location)}: cannot be reached ({type(cause).__name__})"
        ) from None


def _server_words(error: Any) -> str:
    """A server's error message, one line, redacted and cut to :data:`SERVER_WORDS`."""
    content = getattr(error, "content", b"") or b""
    try:
        said = json.loads(content)["status"]["error"]
    except (ValueError, TypeError, KeyError):
        said = content.decode("utf-8", "replace")
    return redact(" ".join(str(said).split()))[:SERVER_WORDS] or "no message"


def _library_words(error: Exception) -> str:
    """What qdrant-client says of a folder it cannot open, one line: pydantic's first error
    (its location in meta.json and its message) or the exception's text, redacted and cut."""
    errors = getattr(error, "errors", None)
    if callable(errors):  # pydantic's ValidationError: a screenful, the first one is enough
        first = errors()[0]
        where = ".".join(str(part) for part in first.get("loc", ()))
        said = f"{where}: {first.get('msg', '')}"
    else:
        said = str(error)
    return redact(" ".join(said.split()))[:SERVER_WORDS]


class QueryVectors(NamedTuple):
    """The surveys' vectors of a ``--query-vectors`` file (:func:`read_query_vectors`).

    Attributes:
        ids: the eval surveys the file has a vector for, sorted.
        matrix: their vectors (float64, one row per id).
        not_in_eval: rows whose id is no eval survey (another split's query), not used.
    """

    ids: list[str]
    matrix: np.ndarray
    not_in_eval: int


def read_query_vectors(path: Path, survey_ids: list[str]) -> QueryVectors:
    """The surveys of ``survey_ids`` that ``path`` has a vector for, and their vectors,
    checked before any arithmetic.

    Raises:
        InputError: the file is not Parquet, is empty, lacks ``_id`` or ``vector``, its ids
            are not strings or name no eval survey, a survey has two vectors, or a vector
            is null, not numbers, of another size than the others, NaN or infinite (one
            line naming the file, and the survey and row where there is one).
    """
    where = f"--query-vectors {path}"
    expected = f"Parquet with {BEIR_ID} (the survey id) and {QUERY_VECTOR} (a list of numbers)"
    if Path(path).is_file() and Path(path).stat().st_size == 0:
        raise InputError(f"{where}: the file is empty; expected {expected}")

    def unreadable(e: Exception) -> InputError:
        return InputError(
            f"{where}: not a readable Parquet file ({' '.join(str(e).split())[:200]}); "
            f"expected {expected}"
        )

    try:
        schema = pl.read_parquet_schema(path)
    except pl.exceptions.PolarsError as e:
        raise unreadable(e) from None
    missing = [c for c in (BEIR_ID, QUERY_VECTOR) if c not in schema]
    if missing:
        raise InputError(f"{where}: no column {', '.join(missing)}; expected {expected}")
    if schema[BEIR_ID] != pl.String:
        example = f" such as {min(survey_ids)!r}" if survey_ids else ""
        raise InputError(
            f"{where}: column {BEIR_ID} holds {schema[BEIR_ID]} values; survey ids are "
            f"strings{example}"
        )
    vector_type = schema[QUERY_VECTOR]
    if not (isinstance(vector_type, (pl.List, pl.Array)) and vector_type.inner.is_numeric()):
        raise InputError(
            f"{where}: column {QUERY_VECTOR} holds {vector_type} values; expected a list of "
            "numbers per survey"
        )
    try:  # a footer that reads and pages that do not
        frame = pl.read_parquet(path, columns=[BEIR_ID, QUERY_VECTOR])
    except pl.exceptions.PolarsError as e:
        raise unreadable(e) from None
    frame = frame.with_row_index("_row", offset=1)
    if frame.height == 0:
        raise InputError(f"{where}: no rows; expected {expected}")
    frame = frame.with_columns(pl.col(QUERY_VECTOR).cast(pl.List(pl.Float64)))
    wanted = frame.filter(pl.col(BEIR_ID).is_in(survey_ids)).sort(BEIR_ID)
    if wanted.height == 0:
        theirs = ", ".join(repr(x) for x in frame[BEIR_ID].drop_nulls().unique().sort()[:3])
        ours = ", ".join(repr(x) for x in sorted(survey_ids)[:3])
        raise InputError(
            f"{where}: none of its {frame.height} id(s) is an eval survey (it has "
            f"{theirs or 'null ids'}; the eval surveys are ids such as {ours})"
        )

    def refuse(row: dict[str, Any], what: str) -> InputError:
        return InputError(f"{where}: survey {row[BEIR_ID]!r} (row {row['_row']}) {what}")

    twice = wanted.filter(pl.col(BEIR_ID).is_duplicated())
    if twice.height:
        raise refuse(twice.row(0, named=True), "has more than one vector; give one per survey")
    sizes = wanted.with_columns(
        pl.col(QUERY_VECTOR).list.len().alias("_size"),
        pl.col(QUERY_VECTOR).list.drop_nulls().list.len().alias("_numbers"),
    )
    for row in sizes.filter(pl.col(QUERY_VECTOR).is_null()).head(1).iter_rows(named=True):
        raise refuse(row, "has no vector (null)")
    for row in sizes.filter(pl.col("_numbers") < pl.col("_size")).head(1).iter_rows(named=True):
        raise refuse(row, "has null values in its vector")
    for row in sizes.filter(pl.col("_size") == 0).head(1).iter_rows(named=True):
        raise refuse(row, "has an empty vector")
    first = sizes.row(0, named=True)
    for row in sizes.filter(pl.col("_size") != first["_size"]).head(1).iter_rows(named=True):
        raise refuse(
            row,
            f"has a vector of size {row['_size']}, survey {first[BEIR_ID]!r} one of size "
            f"{first['_size']}; every vector must have the same size",
        )
    matrix = wanted[QUERY_VECTOR].list.to_array(first["_size"]).to_numpy()
    finite = np.isfinite(matrix).all(axis=1)
    if not finite.all():
        bad = int(np.flatnonzero(~finite)[0])
        value = "NaN" if np.isnan(matrix[bad]).any() else "an infinite value"
        raise refuse(wanted.row(bad, named=True), f"has {value} in its vector")
    not_in_eval = frame.height - wanted.height
    if not_in_eval:
        log.info(
            "evaluate: %s: %d of %d row(s) are no eval survey (another split's queries?); "
            "not used", where, not_in_eval, frame.height,
        )  # fmt: skip
    return QueryVectors(wanted[BEIR_ID].to_list(), matrix, not_in_eval)


def collection_size(connection: Any, location: str, collection: str) -> int:
    """The size of the vectors of ``collection`` (its one unnamed vector).

    Raises:
        UsageError: the collection is not there (naming those that are), or it holds
            named vectors only.
    """
    from qdrant_client import models

    exists = _ask(
        location, f"collection {collection}", lambda: connection.collection_exists(collection)
    )
    if not exists:
        found = _ask(location, "the collections", connection.get_collections)
        names = [c.name for c in found.collections]
        raise UsageError(
            f"--collection {collection}: not in {_where(location)}; available: "
            f"{', '.join(sorted(names)) or 'none'}"
        )
    info = _ask(location, f"collection {collection}", lambda: connection.get_collection(collection))
    vectors = info.config.params.vectors
    if isinstance(vectors, models.VectorParams):
        return int(vectors.size)
    names = ", ".join(sorted(vectors or {})) or "none"
    raise UsageError(
        f"--collection {collection}: its points have named vectors only ({names}); --qdrant "
        "asks a collection's one unnamed vector"
    )


def qdrant_top_k(
    location: str,
    collection: str,
    id_field: str,
    query_ids: list[str],
    queries: np.ndarray,
    k: int,
    corpus_ids: pl.Series,
    queries_from: str,
) -> tuple[pl.DataFrame, dict[str, Any]]:
    """Each query's ``k`` nearest points of ``collection``, kept when their ``id_field``
    names a corpus document (see the module doc).

    Args:
        queries_from: where the queries come from, as a message names it
            (``--query-vectors FILE``, ``--encoder NAME``).

    Returns:
        The run (``survey_id``, ``candidate_id``, ``score``) and what the results record.

    Raises:
        UsageError: the index cannot be opened or reached, refuses a request, has no such
            collection, or its vectors' size is not the queries'.
    """
    from qdrant_client import models

    known = set(corpus_ids.to_list())
    rows: dict[tuple[str, str], float] = {}
    outside: list[str] = []
    counts = {"points_returned": 0, "points_outside_corpus": 0, "points_without_id_field": 0,
              "duplicate_ids": 0}  # fmt: skip
    blocks = list(range(0, len(query_ids), QUERY_BATCH))
    with client(location) as connection:
        size = collection_size(connection, location, collection)
        if queries.shape[1] != size:
            raise UsageError(
                f"--collection {collection} in {_where(location)} holds vectors of size {size}; "
                f"{queries_from} gives vectors of size {queries.shape[1]}"
            )
        for first in steps(blocks, f"evaluate: qdrant {collection}", unit="block"):
            batch = query_ids[first : first + QUERY_BATCH]
            requests = [
                models.QueryRequest(query=vector.tolist(), limit=k, with_payload=[id_field])
                for vector in queries[first : first + QUERY_BATCH]
            ]
            answers = _ask(
                location,
                f"the queries of collection {collection}",
                lambda requests=requests: connection.query_batch_points(collection, requests),
            )
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
    """The location as the results and messages name it: a server's URL (redacted: it may
    carry a user:password), a local folder's name only."""
    return redact(location) if is_url(location) else f"local folder {Path(location).name}"


@dataclass(frozen=True)
class QdrantSearch:
    """The user's Qdrant collection (a :class:`~pipeline.evaluate.retrieval.search.VectorSearch`):
    see :func:`qdrant_top_k`."""

    location: str
    collection: str
    id_field: str
    corpus_ids: pl.Series
    queries_from: str

    def top_k(
        self, queries: np.ndarray, query_ids: list[str], k: int
    ) -> tuple[pl.DataFrame, dict[str, Any]]:
        return qdrant_top_k(self.location, self.collection, self.id_field, query_ids, queries,
                            k, self.corpus_ids, self.queries_from)  # fmt: skip
