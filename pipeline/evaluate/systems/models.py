"""Evaluate a model, not a file: encoders, scorers and sentence-transformers models.

A model reads the answer-free ``candidates`` view of the eval set (never a judgment) and
scores every (survey, candidate) pair; the scores are then evaluated as a run is.

* ``encoder`` (``--encoder PKG.MODULE:CALLABLE``): a callable taking a list of texts and
  returning one vector per text (an ``n x d`` array-like). Score = cosine of the survey's
  vector and the candidate's. Its vectors also give PRISM's coverage measure
  (:mod:`pipeline.evaluate.scoring.coverage`).
* ``scorer`` (``--scorer PKG.MODULE:CALLABLE``): a callable taking a query text and a list
  of candidate texts and returning one score per candidate (a cross-encoder, a
  re-ranking API, BM25 of your own).
* ``sentence-transformer`` (``--sentence-transformer DIR``): a local sentence-transformers
  model folder, loaded offline (:func:`hub_offline`) on the CPU, used as an encoder
  (``encode(texts, normalize_embeddings=True)``).

Texts are the ones the ``dense`` baseline, BEIR and MTEB read
(:func:`pipeline.rules.text_match.paper_text`: title + " " + abstract, stripped). Distinct
texts are encoded once, in sorted order, in batches of ``batch_size``, with a progress
bar; an encoder's vectors are kept in an embedding cache keyed by the model and the
sha256 of each text (:class:`EmbeddingCache`), so a second evaluation encodes only texts
it has not seen. The cache key of a model is its target (spec or folder) plus the
sha256 of its code: the module file of a callable, every file of a model folder. A
model whose weights change under the same code and name needs ``--no-cache``.

``PKG.MODULE`` is imported as Python imports it, with the current directory on the path
(as ``python -m`` has it), so ``--encoder my_encoder:encode`` finds ``./my_encoder.py``.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from pipeline.core.errors import PipelineError, option
from pipeline.core.files import atomic_path, sha256_file, sha256_text
from pipeline.core.progress import steps
from pipeline.evaluate.cache import EMBEDDINGS_DIR
from pipeline.evaluate.columns import CANDIDATE_ID, SCORE, SURVEY_ID
from pipeline.rules.text_match import candidate_text, survey_text

log = logging.getLogger("pipeline")

ENCODER, SCORER, SENTENCE_TRANSFORMER = "encoder", "scorer", "sentence-transformer"
MODEL_KINDS = (ENCODER, SCORER, SENTENCE_TRANSFORMER)
FLAGS = {kind: f"--{kind}" for kind in MODEL_KINDS}
DEFAULT_BATCH = 64
_QUERY, _DOC = "_query_text", "_candidate_text"
_HASH, _VECTOR = "text_sha256", "vector"


class ModelError(PipelineError, ValueError):
    """A model cannot be loaded or returned something unusable (the message names the flag)."""


@dataclass(frozen=True)
class ModelSpec:
    """A model to evaluate.

    Attributes:
        kind: ``encoder``, ``scorer`` or ``sentence-transformer``.
        target: ``PKG.MODULE:CALLABLE`` (encoder, scorer) or a model folder.
        name: the system name (default: the callable's name, or the folder's name).
    """

    kind: str
    target: str
    name: str | None = None

    @property
    def flag(self) -> str:
        return FLAGS[self.kind]

    @property
    def system_name(self) -> str:
        if self.name is not None:
            return self.name
        if self.kind == SENTENCE_TRANSFORMER:
            return Path(self.target).resolve().name
        return self.target.rpartition(":")[2].rpartition(".")[2] or self.target


@dataclass(frozen=True)
class ModelScores:
    """What a model gave on the eval set.

    Attributes:
        spec: the model.
        scores: ``survey_id``, ``candidate_id``, ``score`` (one row per candidate).
        vectors: an encoder's embedding of each candidate, aligned with ``scores``
            (None for a scorer).
        facts: what ``eval_results.json`` records (kind, target, texts, embedding size).
        texts_encoded: texts the model read in this call (not found in the cache).
        seconds: wall time of the model calls.
    """

    spec: ModelSpec
    scores: pl.DataFrame
    vectors: np.ndarray | None
    facts: dict[str, Any] = field(default_factory=dict)
    texts_encoded: int = 0
    seconds: float = 0.0


# ----------------------------------------------------------------- loading
def load_callable(spec: str, flag: str) -> Callable[..., Any]:
    """The object ``PKG.MODULE:NAME[.ATTR...]`` names, imported with the current directory on
    the path.

    Raises:
        ModelError: a malformed spec, a module that does not import, a missing attribute,
            or an object that is not callable (the message names ``flag``).
    """
    module_name, colon, attribute = spec.partition(":")
    if not colon or not module_name or not attribute:
        raise ModelError(f"{flag} {spec!r}: expected PKG.MODULE:CALLABLE, e.g. my_model:encode")
    cwd = os.getcwd()
    added = cwd not in sys.path
    if added:
        sys.path.insert(0, cwd)
    try:
        module = importlib.import_module(module_name)
    except Exception as e:
        raise ModelError(
            f"{flag} {spec!r}: cannot import {module_name} ({type(e).__name__}: {e}); it must be "
            "importable from the current directory or PYTHONPATH"
        ) from e
    finally:
        if added:
            sys.path.remove(cwd)
    target: Any = module
    for part in attribute.split("."):
        if not hasattr(target, part):
            raise ModelError(f"{flag} {spec!r}: {module_name} has no attribute {attribute!r}")
        target = getattr(target, part)
    if not callable(target):
        raise ModelError(f"{flag} {spec!r}: {attribute} is a {type(target).__name__}, not callable")
    return target


def code_identity(spec: ModelSpec, model: Any) -> str:
    """A hash of the code behind a model: the sha256 of its module file, or of every file
    of its folder."""
    files: list[tuple[str, str]] = []
    if spec.kind == SENTENCE_TRANSFORMER:
        root = Path(spec.target)
        files = [
            (path.relative_to(root).as_posix(), sha256_file(path))
            for path in sorted(p for p in root.rglob("*") if p.is_file())
        ]
    else:
        source = inspect.getsourcefile(model) if inspect.isfunction(model) else None
        module = inspect.getmodule(model)
        source = source or (getattr(module, "__file__", None) if module else None)
        if source and Path(source).is_file():
            files = [(Path(source).name, sha256_file(Path(source)))]
    return sha256_text(spec.kind, spec.target, files)


def model_identity(spec: ModelSpec, model: Any) -> str:
    """What a model's cached vectors are keyed by: its name and :func:`code_identity`."""
    return f"{spec.system_name}-{code_identity(spec, model)}"


def load_encoder(spec: ModelSpec) -> Callable[[list[str]], Any]:
    """The encoder an ``--encoder`` or ``--sentence-transformer`` spec names, loaded."""
    if spec.kind == SENTENCE_TRANSFORMER:
        return _sentence_transformer(spec.target)
    return load_callable(spec.target, spec.flag)


def _sentence_transformer(folder: str) -> Callable[[list[str]], np.ndarray]:
    """An encoder over a local sentence-transformers model folder (offline, CPU, one thread)."""
    path = Path(folder)
    if not path.is_dir():
        raise ModelError(f"--sentence-transformer {folder}: no such model folder")
    try:
        import torch
        from sentence_transformers import SentenceTransformer
    except ImportError as e:
        raise ModelError(
            f"--sentence-transformer {folder}: sentence-transformers is not installed "
            f"({e}); pip install '.[dense]'"
        ) from e
    torch.set_num_threads(1)  # the same numbers on any machine
    try:
        with hub_offline():  # a local folder; never reach a hub
            model = SentenceTransformer(str(path), device="cpu")
    except Exception as e:
        raise ModelError(
            f"--sentence-transformer {folder}: not a sentence-transformers model folder "
            f"({type(e).__name__}: {e})"
        ) from e

    def encode(texts: list[str]) -> np.ndarray:
        return model.encode(
            texts, batch_size=len(texts), normalize_embeddings=True, show_progress_bar=False
        )

    return encode


# ----------------------------------------------------------------- the cache
class EmbeddingCache:
    """Vectors of one model by text sha256, in ``<folder>/<model key>.parquet``.

    Reads once; :meth:`save` writes the union atomically (rows sorted by hash, so the same
    vectors give the same file). ``folder=None``: in memory only.
    """

    def __init__(self, folder: Path | None, key: str) -> None:
        self.path = None if folder is None else Path(folder) / f"{key}.parquet"
        self.vectors: dict[str, np.ndarray] = {}
        self.added = 0
        if self.path is not None and self.path.is_file():
            table = pl.read_parquet(self.path)
            for digest, vector in zip(table[_HASH], table[_VECTOR].to_list(), strict=True):
                self.vectors[digest] = np.asarray(vector, dtype=np.float64)

    def get(self, digest: str) -> np.ndarray | None:
        return self.vectors.get(digest)

    def put(self, digest: str, vector: np.ndarray) -> None:
        self.vectors[digest] = vector
        self.added += 1

    def save(self) -> None:
        if self.path is None or not self.added:
            return
        digests = sorted(self.vectors)
        table = pl.DataFrame(
            {
                _HASH: digests,
                _VECTOR: pl.Series([self.vectors[d].tolist() for d in digests]),
            }
        )
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with atomic_path(self.path) as tmp:
                table.write_parquet(tmp)
        except OSError as e:  # a read-only location: the cache is an optimisation
            log.warning("evaluate: embedding cache not written to %s (%s)", self.path, e)


def text_sha256(text: str) -> str:
    """The cache key of a text (:func:`pipeline.core.files.sha256_text`)."""
    return sha256_text(text)


# ----------------------------------------------------------------- running a model
def model_texts(view: pl.DataFrame) -> pl.DataFrame:
    """``survey_id``, ``candidate_id`` and the two texts a model reads, per view row."""
    return view.select(
        SURVEY_ID,
        CANDIDATE_ID,
        survey_text().alias(_QUERY),
        candidate_text().alias(_DOC),
    )


def _call(model: Callable[..., Any], spec: ModelSpec, where: str, *args: Any) -> Any:
    """The user's model called on ``args``; what it raises is the user's to fix, so it
    becomes a one-line :class:`ModelError` naming the model, the call and the signature the
    flag expects (``-v`` shows the model's traceback, chained)."""
    try:
        return model(*args)
    except Exception as e:
        expected = (
            "score(query, texts) -> one score per text"
            if spec.kind == SCORER
            else "encode(texts) -> one vector per text"
        )
        other = {
            SCORER: " (an encoder goes with --encoder)",
            ENCODER: " (a scorer goes with --scorer)",
        }
        raise ModelError(
            f"{spec.flag} {spec.target}: the model raised {type(e).__name__} "
            f"({' '.join(str(e).split())[:300]}) {where}; {spec.flag} calls {expected}"
            + other.get(spec.kind, "")
        ) from e


def _as_array(output: Any, n: int, ndim: int, spec: ModelSpec, what: str) -> np.ndarray:
    """A model's output as a float64 array of ``n`` rows (vectors: ``ndim`` 2; scores: 1)."""
    try:
        array = np.asarray(
            output.detach().cpu().numpy() if hasattr(output, "detach") else output,
            dtype=np.float64,
        )
    except (TypeError, ValueError) as e:
        raise ModelError(f"{spec.flag} {spec.target}: {what} is not numeric ({e})") from e
    if array.ndim != ndim or array.shape[0] != n:
        expected = f"({n}, d), one vector per text" if ndim == 2 else f"({n},), one score per text"
        raise ModelError(
            f"{spec.flag} {spec.target}: {what} has shape {array.shape} for {n} texts; "
            f"expected {expected}"
        )
    if not np.isfinite(array).all():
        raise ModelError(f"{spec.flag} {spec.target}: {what} holds NaN or infinity")
    return array


def checked_encoder(
    encode: Callable[[list[str]], Any], spec: ModelSpec
) -> Callable[[list[str]], np.ndarray]:
    """``encode`` with its output checked: one finite vector per text, the same size on
    every call (a :class:`ModelError` naming the call otherwise). float32 output stays
    float32 (a corpus's vectors take half the bytes), anything else becomes float64."""
    calls = {"n": 0, "dimension": None}

    def checked(batch: list[str]) -> np.ndarray:
        where = f"on batch {calls['n']} of {len(batch)} texts"
        calls["n"] += 1
        output = _call(encode, spec, where, list(batch))
        matrix = _as_array(output, len(batch), 2, spec, "its output")
        dimension = calls["dimension"]
        if dimension is not None and matrix.shape[1] != dimension:
            raise ModelError(
                f"{spec.flag} {spec.target}: vectors of size {matrix.shape[1]} after {dimension}"
            )
        calls["dimension"] = matrix.shape[1]
        raw = output.detach().cpu().numpy() if hasattr(output, "detach") else output
        return matrix.astype(np.float32) if getattr(raw, "dtype", None) == np.float32 else matrix

    return checked


def encode_texts(
    encode: Callable[[list[str]], Any],
    texts: Sequence[str],
    spec: ModelSpec,
    cache: EmbeddingCache,
    batch_size: int = DEFAULT_BATCH,
) -> tuple[dict[str, np.ndarray], int]:
    """Vectors of the distinct ``texts`` (by text), the ones not cached in sorted batches.

    Returns:
        (text -> vector, number of texts the model read).
    """
    distinct = sorted(set(texts))
    digests = {t: text_sha256(t) for t in distinct}
    todo = [t for t in distinct if cache.get(digests[t]) is None]
    batches = [todo[i : i + batch_size] for i in range(0, len(todo), batch_size)]
    checked = checked_encoder(encode, spec)
    for batch in steps(batches, f"evaluate: {spec.system_name} encodes", unit="batch"):
        for text, vector in zip(batch, checked(batch).astype(np.float64), strict=True):
            cache.put(digests[text], vector)
    vectors = {t: cache.get(digests[t]) for t in distinct}
    sizes = {v.shape[0] for v in vectors.values() if v is not None}
    if len(sizes) > 1:
        raise ModelError(
            f"{spec.flag} {spec.target}: cached vectors of sizes {sorted(sizes)}; rerun with "
            f"{option('--no-cache', 'cache=False')}"
        )
    return vectors, len(todo)  # type: ignore[return-value]


def _unit(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)


def encoder_scores(
    encode: Callable[[list[str]], Any],
    view: pl.DataFrame,
    spec: ModelSpec,
    cache: EmbeddingCache,
    batch_size: int = DEFAULT_BATCH,
) -> ModelScores:
    """Cosine of survey and candidate vectors for every view row (see the module doc)."""
    texts = model_texts(view)
    queries, docs = texts[_QUERY].to_list(), texts[_DOC].to_list()
    start = time.perf_counter()
    vectors, encoded = encode_texts(encode, queries + docs, spec, cache, batch_size)
    seconds = time.perf_counter() - start
    query_matrix = _unit(np.stack([vectors[t] for t in queries])) if queries else np.zeros((0, 0))
    doc_matrix = np.stack([vectors[t] for t in docs]) if docs else np.zeros((0, 0))
    scores = np.einsum("ij,ij->i", query_matrix, _unit(doc_matrix)) if docs else np.zeros(0)
    cache.save()
    return ModelScores(
        spec=spec,
        scores=texts.select(SURVEY_ID, CANDIDATE_ID).with_columns(
            pl.Series(SCORE, scores, dtype=pl.Float64)
        ),
        vectors=doc_matrix,
        facts={
            "kind": spec.kind,
            "target": spec.target if spec.kind != SENTENCE_TRANSFORMER else Path(spec.target).name,
            "texts": len(set(queries) | set(docs)),
            "embedding_size": int(doc_matrix.shape[1]) if docs else 0,
        },
        texts_encoded=encoded,
        seconds=seconds,
    )


def scorer_scores(
    score: Callable[[str, list[str]], Any],
    view: pl.DataFrame,
    spec: ModelSpec,
    batch_size: int = DEFAULT_BATCH,
) -> ModelScores:
    """The scorer's score of every view row: one call per survey and block of ``batch_size``
    candidates, surveys in id order."""
    texts = model_texts(view)
    out = np.empty(texts.height, dtype=np.float64)
    groups = list(texts.with_row_index("_row").group_by(SURVEY_ID, maintain_order=True))
    start = time.perf_counter()
    for (survey,), group in steps(groups, f"evaluate: {spec.system_name} scores", unit="survey"):
        query = group[_QUERY][0]
        rows, docs = group["_row"].to_list(), group[_DOC].to_list()
        for i in range(0, len(docs), batch_size):
            block = docs[i : i + batch_size]
            output = _call(score, spec, f"for survey {survey!r}", query, block)
            out[rows[i : i + batch_size]] = _as_array(
                output, len(block), 1, spec, f"its output for survey {survey!r}"
            )
    return ModelScores(
        spec=spec,
        scores=texts.select(SURVEY_ID, CANDIDATE_ID).with_columns(pl.Series(SCORE, out)),
        vectors=None,
        facts={"kind": spec.kind, "target": spec.target, "texts": texts.height},
        texts_encoded=texts.height,
        seconds=time.perf_counter() - start,
    )


def run_model(
    spec: ModelSpec,
    view: pl.DataFrame,
    cache_dir: Path | None = None,
    batch_size: int = DEFAULT_BATCH,
) -> ModelScores:
    """Load a model and score the candidates view with it (see the module doc).

    Args:
        spec: the model.
        view: the eval set's candidates-view rows (canonical order).
        cache_dir: the evaluation cache (:mod:`pipeline.evaluate.cache`; embeddings in its
            ``embeddings/``); None: no cache on disk.
        batch_size: texts per encoder call, candidates per scorer call.

    Raises:
        ModelError: the model does not load or returns something unusable.
    """
    if spec.kind not in MODEL_KINDS:
        raise ModelError(f"unknown model kind {spec.kind!r}; available: {', '.join(MODEL_KINDS)}")
    if batch_size < 1:
        raise ModelError(f"--batch-size {batch_size}: need a whole number >= 1")
    if spec.kind == SCORER:
        result = scorer_scores(load_callable(spec.target, spec.flag), view, spec, batch_size)
    else:
        model = load_encoder(spec)
        folder = None if cache_dir is None else cache_dir / EMBEDDINGS_DIR
        cache = EmbeddingCache(folder, model_identity(spec, model))
        result = encoder_scores(model, view, spec, cache, batch_size)
    rate = result.texts_encoded / result.seconds if result.seconds > 0 else float("inf")
    log.info(
        "evaluate: %s (%s) read %d texts in %.2f s (%.0f texts/s)%s",
        spec.system_name,
        spec.flag,
        result.texts_encoded,
        result.seconds,
        rate,
        f"; {result.facts['texts'] - result.texts_encoded} from the cache"
        if spec.kind != SCORER
        else "",
    )
    return result


@contextlib.contextmanager
def hub_offline() -> Iterator[None]:
    """Offline mode for the Hub clients, for the block only.

    huggingface_hub reads ``HF_HUB_OFFLINE`` once, when it is imported; left set, the
    process could not push the release it has just evaluated. Both the variable and the
    client's constant are restored on exit.
    """
    from huggingface_hub import constants

    before_env, before_const = os.environ.get("HF_HUB_OFFLINE"), constants.HF_HUB_OFFLINE
    os.environ["HF_HUB_OFFLINE"], constants.HF_HUB_OFFLINE = "1", True
    try:
        yield
    finally:
        constants.HF_HUB_OFFLINE = before_const
        if before_env is None:
            os.environ.pop("HF_HUB_OFFLINE", None)
        else:
            os.environ["HF_HUB_OFFLINE"] = before_env
