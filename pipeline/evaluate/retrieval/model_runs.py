"""Models in retrieval mode: each eval survey's top ``k`` of the split's whole corpus.

``evaluate --mode retrieval`` with a model builds the run a user would otherwise write
(:mod:`pipeline.evaluate.retrieval.mode` then scores it with trec_eval's rule):

* an encoder (``--encoder``, ``--sentence-transformer``) encodes the corpus once
  (:mod:`pipeline.evaluate.retrieval.corpus_vectors`: cached by model and corpus, resumable) and the
  surveys, and keeps each survey's ``top_k`` documents by cosine
  (:mod:`pipeline.evaluate.retrieval.exact`: exact; or :mod:`pipeline.evaluate.retrieval.faiss_index`, an ANN index,
  with its recall against exact);
* a scorer (``--scorer``, a cross-encoder) re-ranks the top ``k`` of a first stage, as
  BEIR's reranking does: ``bm25`` over the whole corpus, ``encoder`` (the first encoder of
  the same command) or a run file;
* ``bm25`` is the retrieval-mode baseline: BM25 (:class:`pipeline.rules.text_match.BM25Index`)
  of every corpus document's text against the survey's title + abstract, its top ``k``.

A survey reads its text (:func:`pipeline.rules.text_match.survey_text`) and a document
its corpus row's title and abstract (:func:`~pipeline.rules.text_match.paper_text`), the
strings BEIR and MTEB build from the release's ``queries`` and ``corpus``.
"""

from __future__ import annotations

import dataclasses
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from pipeline.core.errors import UsageError
from pipeline.core.progress import steps
from pipeline.core.schema import (
    BEIR_ID,
    BEIR_TEXT,
    BEIR_TITLE,
    CANDIDATE_ABSTRACT,
    CANDIDATE_TITLE,
    SURVEY_ABSTRACT,
    SURVEY_TITLE,
)
from pipeline.evaluate.cache import EMBEDDINGS_DIR
from pipeline.evaluate.columns import CANDIDATE_ID, SCORE, SURVEY_ID
from pipeline.evaluate.retrieval.corpus_vectors import Corpus, encode_corpus, vectors_folder
from pipeline.evaluate.retrieval.exact import DocOrder, keep_top, top_k_frame
from pipeline.evaluate.retrieval.faiss_index import EXACT, INDEXES, vector_search
from pipeline.evaluate.retrieval.qdrant_index import (
    DEFAULT_ID_FIELD,
    QdrantSearch,
    read_query_vectors,
)
from pipeline.evaluate.retrieval.search import VectorSearch
from pipeline.evaluate.systems.models import (
    ENCODER,
    SCORER,
    SENTENCE_TRANSFORMER,
    EmbeddingCache,
    ModelError,
    ModelSpec,
    checked_encoder,
    encode_texts,
    load_callable,
    load_encoder,
    model_identity,
    scorer_scores,
)
from pipeline.evaluate.systems.runs import Run, read_run, scores_run
from pipeline.rules.text_match import BM25Index, paper_text, survey_text, tokenize

DEFAULT_TOP_K = 1000
FIRST_BM25, FIRST_ENCODER = "bm25", "encoder"
# the runs ``--first-stage encoder`` re-ranks: an encoder's, or the --qdrant collection's
FIRST_STAGE_ENCODERS = (ENCODER, SENTENCE_TRANSFORMER, "qdrant")
BM25_QUERY_BLOCK = 16  # surveys scored against the whole corpus at a time (16 x corpus floats)


@dataclass(frozen=True)
class RetrievalOptions:
    """How models retrieve in retrieval mode (the CLI's flags).

    Attributes:
        top_k: documents kept per survey (``--top-k``).
        first_stage: what a scorer re-ranks: ``bm25``, ``encoder`` or a run file
            (``--first-stage``).
    """

    top_k: int = DEFAULT_TOP_K
    first_stage: str = FIRST_BM25
    qdrant: str | None = None
    collection: str | None = None
    id_field: str = DEFAULT_ID_FIELD
    query_vectors: Path | None = None
    index: str = EXACT

    def __post_init__(self) -> None:
        if self.top_k < 1:
            raise UsageError(f"--top-k {self.top_k}: need a whole number >= 1")
        if (self.qdrant is None) != (self.collection is None):
            raise UsageError("--qdrant URL_OR_PATH and --collection NAME go together")
        if self.index not in INDEXES:
            raise UsageError(f"--index {self.index}: unknown; available: {', '.join(INDEXES)}")
        if self.query_vectors is not None and self.qdrant is None:
            raise UsageError("--query-vectors are the queries of a --qdrant collection")

    def qdrant_collection(self) -> tuple[str, str]:
        """``(--qdrant, --collection)``; only called with ``--qdrant`` given, and
        :meth:`__post_init__` has made sure ``--collection`` is given with it."""
        if self.qdrant is None or self.collection is None:
            raise TypeError("qdrant_collection() without --qdrant")
        return self.qdrant, self.collection


@dataclass(frozen=True)
class Retrieved:
    """A model's run over the corpus and what the results record of it."""

    run: Run
    facts: dict[str, Any]


def has_texts(corpus: Corpus) -> bool:
    """Whether the corpus file has the documents' title and text (a model's input)."""
    import pyarrow.parquet as pq

    return {BEIR_TITLE, BEIR_TEXT} <= set(pq.read_schema(corpus.path).names)


def surveys(eval_set: pl.DataFrame) -> pl.DataFrame:
    """``survey_id`` and the survey's text (the query), one row per eval survey, by id."""
    return (
        eval_set.select(SURVEY_ID, survey_text().alias(BEIR_TEXT))
        .unique(SURVEY_ID, keep="first")
        .sort(SURVEY_ID)
    )


def _run(name: str, kind: str, frame: pl.DataFrame) -> Run:
    return dataclasses.replace(scores_run(frame, name), format=kind)


def encoder_retrieval(
    spec: ModelSpec,
    eval_set: pl.DataFrame,
    corpus: Corpus,
    cache_dir: Path | None,
    batch_size: int,
    options: RetrievalOptions,
) -> Retrieved:
    """An encoder's top ``k`` per survey by cosine over the whole corpus (module doc)."""
    encode = load_encoder(spec)
    identity = model_identity(spec, encode)
    start = time.perf_counter()
    query_ids, matrix = _encode_queries(spec, encode, eval_set, cache_dir, batch_size)
    with tempfile.TemporaryDirectory(prefix="vectors-") as scratch:
        root = Path(scratch) if cache_dir is None else cache_dir
        stored = encode_corpus(
            checked_encoder(encode, spec),
            corpus,
            vectors_folder(root, identity, corpus, batch_size),
            batch_size,
            f"evaluate: {spec.system_name} encodes the corpus",
        )
        encoded = time.perf_counter()
        engine: VectorSearch = vector_search(options.index, stored.path, DocOrder.of(corpus.ids))
        top, search = engine.top_k(matrix, query_ids, options.top_k)
    facts = {
        "kind": spec.kind,
        "target": spec.target if spec.kind != SENTENCE_TRANSFORMER else Path(spec.target).name,
        "corpus_documents": stored.rows,
        "embedding_size": stored.dimension,
        "top_k": options.top_k,
        "index": options.index,
        "batches_encoded": stored.batches_encoded,
        "batches_reused": stored.batches_reused,
        "encode_seconds": encoded - start,
        **search,
    }
    return Retrieved(_run(spec.system_name, spec.kind, top), facts)


def _encode_queries(
    spec: ModelSpec,
    encode: Callable[[list[str]], Any],
    eval_set: pl.DataFrame,
    cache_dir: Path | None,
    batch_size: int,
) -> tuple[list[str], np.ndarray]:
    """The eval surveys' ids and vectors (kept in the embedding cache by text)."""
    queries = surveys(eval_set)
    texts = queries[BEIR_TEXT].to_list()
    folder = None if cache_dir is None else cache_dir / EMBEDDINGS_DIR
    cache = EmbeddingCache(folder, model_identity(spec, encode))
    vectors, _ = encode_texts(encode, texts, spec, cache, batch_size)
    cache.save()
    return queries[SURVEY_ID].to_list(), np.stack([vectors[t] for t in texts])


def encode_surveys(
    spec: ModelSpec, eval_set: pl.DataFrame, cache_dir: Path | None, batch_size: int
) -> tuple[list[str], np.ndarray]:
    """The ids and vectors of the surveys of ``eval_set`` by the encoder ``spec`` (a foreign
    model's Qdrant cosine, for surveys its collection lacks)."""
    return _encode_queries(spec, load_encoder(spec), eval_set, cache_dir, batch_size)


def qdrant_retrieval(
    encoder: ModelSpec | None,
    eval_set: pl.DataFrame,
    corpus: Corpus,
    cache_dir: Path | None,
    batch_size: int,
    options: RetrievalOptions,
) -> Retrieved:
    """Each survey's top ``k`` from the user's Qdrant collection (:mod:`pipeline.evaluate.retrieval.qdrant_index`),
    the surveys encoded by ``encoder`` or read from ``options.query_vectors``."""
    url, collection = options.qdrant_collection()
    start = time.perf_counter()
    source: dict[str, Any]
    if options.query_vectors is not None:
        found = read_query_vectors(options.query_vectors, surveys(eval_set)[SURVEY_ID].to_list())
        query_ids, matrix = found.ids, found.matrix
        queries_from = f"--query-vectors {options.query_vectors}"
        source = {"queries": f"--query-vectors {Path(options.query_vectors).name}",
                  "query_vectors_not_in_eval": found.not_in_eval}  # fmt: skip
    elif encoder is not None:
        query_ids, matrix = _encode_queries(
            encoder, load_encoder(encoder), eval_set, cache_dir, batch_size
        )
        queries_from = f"{encoder.flag} {encoder.system_name}"
        source = {"queries": queries_from}
    else:
        raise UsageError(
            "--qdrant needs the surveys' vectors: --encoder, --sentence-transformer or "
            "--query-vectors FILE"
        )
    engine: VectorSearch = QdrantSearch(url, collection, options.id_field, corpus.ids, queries_from)
    run, facts = engine.top_k(matrix, query_ids, options.top_k)
    name = encoder.system_name if encoder is not None else collection
    facts = {"kind": "qdrant", **source, **facts, "search_seconds": time.perf_counter() - start}
    return Retrieved(_run(name, "qdrant", run), facts)


def bm25_retrieval(eval_set: pl.DataFrame, corpus: Corpus, top_k: int, name: str) -> Retrieved:
    """BM25 of every corpus document against each survey's text, its top ``top_k``."""
    start = time.perf_counter()
    docs = (
        pl.read_parquet(corpus.path, columns=[BEIR_TITLE, BEIR_TEXT])
        .select(tokenize(paper_text(pl.col(BEIR_TITLE), pl.col(BEIR_TEXT))))
        .to_series()
        .to_list()
    )
    index = BM25Index(docs)
    del docs
    queries = surveys(eval_set).with_columns(tokenize(pl.col(BEIR_TEXT)).alias("_tokens"))
    query_ids, tokens = queries[SURVEY_ID].to_list(), queries["_tokens"].to_list()
    order = DocOrder.of(corpus.ids)
    found = blocks_top_k(query_ids, order, top_k, lambda i: index.scores(tokens[i]), "bm25")
    facts = {"kind": "baseline", "corpus_documents": corpus.ids.len(), "top_k": top_k,
             "search_seconds": time.perf_counter() - start}  # fmt: skip
    return Retrieved(_run(name, "bm25", found), facts)


def blocks_top_k(
    query_ids: list[str],
    order: DocOrder,
    k: int,
    scores_of: Callable[[int], np.ndarray],
    what: str,
) -> pl.DataFrame:
    """Top ``k`` by the tie rule of whole-corpus score rows, :data:`BM25_QUERY_BLOCK`
    queries at a time."""
    hashes = DocOrder.of(pl.Series(query_ids)).hashes
    blocks = list(range(0, len(query_ids), BM25_QUERY_BLOCK))
    surveys_rows, docs_rows, score_rows = [], [], []
    for first in steps(blocks, f"evaluate: {what} over the corpus", unit="block"):
        rows = range(first, min(first + BM25_QUERY_BLOCK, len(query_ids)))
        block = np.stack([scores_of(i) for i in rows])
        docs = np.broadcast_to(np.arange(block.shape[1]), block.shape)
        if block.shape[1] > k:
            block, docs = keep_top(block, docs, hashes[first : first + len(rows)], order, k)
        surveys_rows.append(np.repeat(np.arange(first, first + len(rows)), block.shape[1]))
        docs_rows.append(np.asarray(docs).ravel())
        score_rows.append(block.ravel())
    return top_k_frame(query_ids, order.ids, surveys_rows, docs_rows, score_rows)


def first_stage_run(
    options: RetrievalOptions,
    eval_set: pl.DataFrame,
    corpus: Corpus | None,
    encoders: list[Retrieved],
) -> tuple[pl.DataFrame, str]:
    """The (survey, document) pairs a scorer or a foreign model file re-ranks: each survey's
    top ``k`` of the first stage, and the first stage's name.

    Raises:
        UsageError: ``bm25`` without the corpus's texts beside the eval file, ``encoder``
            without an encoder run, or a run file that does not exist.
    """
    if options.first_stage == FIRST_BM25:
        if corpus is None or not has_texts(corpus):
            raise UsageError(
                "--first-stage bm25 needs the split's corpus with its texts (corpus/test.parquet "
                "of a release folder) beside the eval file; or give --first-stage RUN"
            )
        run = bm25_retrieval(eval_set, corpus, options.top_k, FIRST_BM25).run
        return run.scores, FIRST_BM25
    if options.first_stage == FIRST_ENCODER:
        if not encoders:
            raise UsageError(
                "--first-stage encoder re-ranks the run of an --encoder or "
                "--sentence-transformer of the same command; none was given"
            )
        return encoders[0].run.scores, encoders[0].run.name
    path = Path(options.first_stage)
    if not path.is_file():
        raise UsageError(
            f"--first-stage {options.first_stage}: not bm25, encoder, or a run file that exists"
        )
    run = read_run(path)
    ranked = run.scores.sort([SURVEY_ID, SCORE], descending=[False, True])
    return ranked.group_by(SURVEY_ID, maintain_order=True).head(options.top_k), run.name


def scorer_retrieval(
    spec: ModelSpec,
    eval_set: pl.DataFrame,
    corpus: Corpus,
    batch_size: int,
    options: RetrievalOptions,
    encoders: list[Retrieved],
) -> Retrieved:
    """A scorer's scores of the first stage's top ``k`` of every survey (BEIR's reranking)."""
    pairs, first = first_stage_run(options, eval_set, corpus, encoders)
    # only the first stage's documents: the texts of k per survey, not of the corpus
    documents = (
        pl.scan_parquet(corpus.path)
        .filter(pl.col(BEIR_ID).is_in(pairs[CANDIDATE_ID].unique().implode()))
        .select(
            pl.col(BEIR_ID).alias(CANDIDATE_ID),
            pl.col(BEIR_TITLE).alias(CANDIDATE_TITLE),
            pl.col(BEIR_TEXT).alias(CANDIDATE_ABSTRACT),
        )
        .collect()
    )
    survey_columns = eval_set.select(SURVEY_ID, SURVEY_TITLE, SURVEY_ABSTRACT).unique(
        SURVEY_ID, keep="first"
    )
    view = (
        pairs.select(SURVEY_ID, CANDIDATE_ID)
        .join(survey_columns, on=SURVEY_ID, how="inner")
        .join(documents, on=CANDIDATE_ID, how="inner")
        .sort(SURVEY_ID, CANDIDATE_ID)
    )
    result = scorer_scores(load_callable(spec.target, spec.flag), view, spec, batch_size)
    facts = {"kind": spec.kind, "target": spec.target, "first_stage": first,
             "top_k": options.top_k, "pairs_scored": view.height,
             "score_seconds": result.seconds}  # fmt: skip
    return Retrieved(_run(spec.system_name, spec.kind, result.scores), facts)


def retrieve(
    models: list[ModelSpec],
    eval_set: pl.DataFrame,
    corpus: Corpus | None,
    cache_dir: Path | None,
    batch_size: int,
    options: RetrievalOptions,
) -> list[Retrieved]:
    """Every model's run over the corpus, encoders first (a scorer may re-rank one).

    Raises:
        UsageError: no corpus beside the eval file.
        ModelError: a model does not load or returns something unusable.
    """
    if not models and options.qdrant is None:
        return []
    if corpus is None:
        raise UsageError(
            "--mode retrieval with a model needs the split's corpus (corpus/test.parquet of "
            "a release folder) beside the eval file"
        )
    encoder_specs = [spec for spec in models if spec.kind in (ENCODER, SENTENCE_TRANSFORMER)]
    if options.qdrant is not None:  # the encoder is the query side of the user's index
        first = encoder_specs[0] if encoder_specs else None
        encoders = [qdrant_retrieval(first, eval_set, corpus, cache_dir, batch_size, options)]
    else:
        encoders = [
            encoder_retrieval(spec, eval_set, corpus, cache_dir, batch_size, options)
            for spec in encoder_specs
        ]
    scorers = [
        scorer_retrieval(spec, eval_set, corpus, batch_size, options, encoders)
        for spec in models
        if spec.kind == SCORER
    ]
    unknown = [s.kind for s in models if s.kind not in (ENCODER, SENTENCE_TRANSFORMER, SCORER)]
    if unknown:
        raise ModelError(f"unknown model kind(s) {unknown}")
    return [*encoders, *scorers]
