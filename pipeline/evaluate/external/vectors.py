"""The cosine of a survey's and a candidate's vectors in the user's Qdrant collection, as a
feature of a foreign model (``--qdrant-url``/``--qdrant`` with ``--collection`` in re-ranking
mode, named by ``--vector-feature``, default ``cosine``).

The points are found by the payload field ``--id-field`` (default ``_id``), which holds a
paper's id in any alias form (:mod:`pipeline.evaluate.external.keys`). A survey's vector is
its own point when the collection has the survey, else its row of ``--query-vectors``
(Parquet ``_id``, ``vector``), else its text encoded by the command's ``--encoder`` or
``--sentence-transformer`` (as retrieval mode's ``--qdrant`` does); a survey or candidate
without a vector has the feature missing. The client, the API key (``--qdrant-api-key`` or ``QDRANT_API_KEY``) and every
message are :mod:`pipeline.evaluate.retrieval.qdrant_index`'s: a key is never printed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from pipeline.evaluate.columns import CANDIDATE_ID, SURVEY_ID
from pipeline.evaluate.external.keys import KEY, alias_key
from pipeline.evaluate.external.sources import Block
from pipeline.evaluate.retrieval import qdrant_index as Q

IDS_PER_REQUEST = 256
POINTS_PER_PAGE = 512
# survey ids -> (the ids encoded, their vectors): the command's encoder on the surveys' texts
SurveyEncoder = Callable[[list[str]], tuple[list[str], np.ndarray]]


@dataclass
class VectorSource:
    """The survey-candidate cosine of a Qdrant collection (module doc)."""

    location: str
    collection: str
    pairs: pl.DataFrame  # survey_id, candidate_id of the eval set
    name: str = "cosine"
    id_field: str = Q.DEFAULT_ID_FIELD
    query_vectors: Path | None = None
    encode_surveys: SurveyEncoder | None = None

    @property
    def flag(self) -> str:
        return f"--qdrant {Q._where(self.location)} --collection {self.collection}"

    @property
    def label(self) -> str:
        return f"qdrant {Q._where(self.location)} collection {self.collection}"

    def columns(self) -> tuple[str, ...]:
        return (self.name,)

    def _vectors(self, connection: object, ids: list[str]) -> dict[str, np.ndarray]:
        """Document id -> vector of every point whose ``id_field`` is one of ``ids``."""
        from qdrant_client import models

        found: dict[str, np.ndarray] = {}
        for first in range(0, len(ids), IDS_PER_REQUEST):
            chunk = ids[first : first + IDS_PER_REQUEST]
            where = models.Filter(
                must=[models.FieldCondition(key=self.id_field, match=models.MatchAny(any=chunk))]
            )
            offset = None
            while True:
                points, offset = Q._ask(
                    self.location,
                    f"the points of collection {self.collection}",
                    lambda where=where, offset=offset: connection.scroll(  # type: ignore[attr-defined]
                        self.collection, scroll_filter=where, limit=POINTS_PER_PAGE,
                        offset=offset, with_payload=[self.id_field], with_vectors=True,
                    ),
                )  # fmt: skip
                for point in points:
                    doc = (point.payload or {}).get(self.id_field)
                    vector = point.vector
                    if isinstance(vector, dict):  # named vectors: collection_size refuses them
                        continue
                    if doc is not None and vector is not None and str(doc) not in found:
                        found[str(doc)] = np.asarray(vector, dtype=np.float64)
                if offset is None:
                    break
        return found

    def _check_size(self, matrix: np.ndarray, size: int, given: str) -> None:
        """Refuse survey vectors of another size than the collection's."""
        if matrix.ndim != 2 or matrix.shape[1] != size:
            got = matrix.shape[1] if matrix.ndim == 2 else matrix.shape
            raise Q.UsageError(
                f"{given}: survey vectors of size {got}, collection {self.collection} holds "
                f"size {size}"
            )

    def read(self, columns: list[str], keys: pl.DataFrame) -> Block:
        surveys = self.pairs[SURVEY_ID].unique().sort()
        survey_forms = pl.DataFrame({SURVEY_ID: surveys}).with_columns(
            alias_key(pl.col(SURVEY_ID)).alias("_alias")
        )
        ids = sorted(
            {*keys[KEY].to_list(), *surveys.to_list(), *survey_forms["_alias"].drop_nulls()}
        )
        with Q.client(self.location) as connection:
            size = Q.collection_size(connection, self.location, self.collection)
            found = self._vectors(connection, ids)
        doc_of = {k: c for k, c in keys.iter_rows()}
        candidate_vectors: dict[str, np.ndarray] = {}
        docs = pl.DataFrame({"_doc": sorted(found)}, schema={"_doc": pl.String})
        for doc, alias in docs.with_columns(alias_key(pl.col("_doc")).alias("_a")).iter_rows():
            candidate = doc_of.get(doc) or doc_of.get(alias or "")
            if candidate is not None and candidate not in candidate_vectors:
                candidate_vectors[candidate] = found[doc]
        survey_vectors: dict[str, np.ndarray] = {}
        for survey, alias in survey_forms.iter_rows():
            vector = found.get(survey) if survey in found else found.get(alias or "")
            if vector is not None:
                survey_vectors[survey] = vector
        from_file = from_encoder = 0
        rest = [s for s in surveys.to_list() if s not in survey_vectors]
        if rest and self.query_vectors is not None:
            given = Q.read_query_vectors(self.query_vectors, rest)
            self._check_size(given.matrix, size, f"--query-vectors {self.query_vectors}")
            for survey, vector in zip(given.ids, given.matrix, strict=True):
                survey_vectors[survey] = vector
                from_file += 1
        rest = [s for s in rest if s not in survey_vectors]
        if rest and self.encode_surveys is not None:
            ids, matrix = self.encode_surveys(rest)
            self._check_size(matrix, size, "the --encoder/--sentence-transformer")
            for survey, vector in zip(ids, np.asarray(matrix, dtype=np.float64), strict=True):
                survey_vectors[survey] = vector
                from_encoder += 1
        values = [
            _cosine(survey_vectors.get(s), candidate_vectors.get(c))
            for s, c in self.pairs.select(SURVEY_ID, CANDIDATE_ID).iter_rows()
        ]
        frame = self.pairs.select(SURVEY_ID, CANDIDATE_ID).with_columns(
            pl.Series(self.name, values, dtype=pl.Float64)
        )
        facts = {
            "source": "qdrant",
            "location": Q._where(self.location),
            "collection": self.collection,
            "id_field": self.id_field,
            "candidates_with_vector": len(candidate_vectors),
            "surveys_with_vector": len(survey_vectors),
            "surveys_from_query_vectors": from_file,
            "surveys_from_encoder": from_encoder,
        }
        return Block(frame, facts)


def _cosine(a: np.ndarray | None, b: np.ndarray | None) -> float | None:
    if a is None or b is None:
        return None
    norm = float(np.linalg.norm(a) * np.linalg.norm(b))
    return float(a @ b) / norm if norm > 0 else None
