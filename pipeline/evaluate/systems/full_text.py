"""Full-text systems (``evaluate --passages``, issue 51): a document scored from its sections.

The release's ``corpus_sections`` view holds the sections of every corpus document whose
licence permits it. A full-text system scores (query, passage) pairs and a document's score is
its passages' scores aggregated by one rule (:mod:`pipeline.evaluate.passages`: ``max`` or
``mean-top-k``); a document without full text is scored on its title and abstract, its one
passage (the report counts them). Two kinds:

* an encoder (``--encoder`` / ``--sentence-transformer`` with ``--passages``): score = cosine of
  the query's vector and the passage's (heading + text, cut to ``--passage-chars``), in
  re-ranking mode over each query's judged candidates, in retrieval mode over every document
  of the split's corpus (each survey's ``top_k`` documents by the aggregated score, ties by the
  evaluation's rule; the passages streamed from the release's files, their vectors on disk and
  scored a chunk at a time: :mod:`pipeline.evaluate.retrieval.passage_units` and
  :mod:`pipeline.evaluate.retrieval.passage_search`);
* a passage run (``--passage-run FILE``): a run over the passage corpus of
  ``export --format beir`` (``passages/``: ``_id`` = document id, ``#``, section order, or
  ``<doc>#abstract``), mapped back to documents by the same table and aggregated by the same
  rule; then checked as any run is.

Queries are the eval set's: the survey's title and abstract, or with ``--task aspects`` each
aspect's query (PRISM's aspect-to-section protocol).
"""

from __future__ import annotations

import dataclasses
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from pipeline.core import schema as S
from pipeline.core.errors import UsageError, option
from pipeline.evaluate import passages as P
from pipeline.evaluate.cache import EMBEDDINGS_DIR
from pipeline.evaluate.columns import CANDIDATE_ID, LINE_NUMBER, SCORE, SURVEY_ID
from pipeline.evaluate.evalset import answer_free
from pipeline.evaluate.retrieval.corpus_vectors import Corpus, encode_corpus, vectors_folder
from pipeline.evaluate.retrieval.exact import DocOrder, unit_rows
from pipeline.evaluate.retrieval.model_runs import surveys
from pipeline.evaluate.retrieval.passage_search import passage_top_k
from pipeline.evaluate.retrieval.passage_units import passage_units
from pipeline.evaluate.systems.models import (
    SENTENCE_TRANSFORMER,
    EmbeddingCache,
    ModelSpec,
    checked_encoder,
    encode_texts,
    load_encoder,
    model_identity,
    model_texts,
)
from pipeline.evaluate.systems.runs import Run, RunError, RunWarning, read_run, scores_run

KIND_PASSAGE_RUN = "passage run"
_QUERY_TEXT, _DOC_TEXT = "_query_text", "_candidate_text"


def sections_file(eval_path: Path) -> Path:
    """The eval split's full-text view (``corpus_sections/test.parquet``).

    Raises:
        UsageError: the release has no ``corpus_sections`` (an eval file alone, an older
            release).
    """
    path = P.sections_path(eval_path)
    if path is None:
        raise UsageError(
            f"--passages: no {P.FULL_TEXT_VIEW}/ in the release of {eval_path} (a release built "
            "before issue 51, or an eval file without its release folder)"
        )
    return path


def load_passages(eval_path: Path, options: P.PassageOptions) -> pl.DataFrame:
    """``passage_id``, ``doc_id``, ``text`` of the eval split's full-text view (re-ranking
    mode: the judged candidates' passages are taken from it).

    Raises:
        UsageError: the release has no ``corpus_sections``.
    """
    path = sections_file(eval_path)
    return P.passage_texts(pl.scan_parquet(path), options.max_chars).collect()


def _facts(spec: ModelSpec, options: P.PassageOptions, **counts: Any) -> dict[str, Any]:
    target = spec.target if spec.kind != SENTENCE_TRANSFORMER else Path(spec.target).name
    return {"kind": spec.kind, "target": target, "passages": {**options.facts(), **counts}}


def _encoded(
    spec: ModelSpec,
    encode: Callable[[list[str]], Any],
    texts: list[str],
    cache_dir: Path | None,
    batch_size: int,
) -> dict[str, np.ndarray]:
    """The vector of each distinct text, read from the embedding cache or encoded once."""
    folder = None if cache_dir is None else cache_dir / EMBEDDINGS_DIR
    cache = EmbeddingCache(folder, model_identity(spec, encode))
    vectors, _ = encode_texts(encode, texts, spec, cache, batch_size)
    cache.save()
    return vectors


def _vectors(
    spec: ModelSpec,
    encode: Callable[[list[str]], Any],
    texts: list[str],
    cache_dir: Path | None,
    batch_size: int,
) -> Callable[[list[str]], np.ndarray]:
    """The unit vectors of texts (rows in the order given), each read from the embedding
    cache or encoded once."""
    vectors = _encoded(spec, encode, texts, cache_dir, batch_size)

    def matrix(of: list[str]) -> np.ndarray:
        return unit_rows(np.stack([vectors[t] for t in of])) if of else np.zeros((0, 1))

    return matrix


def encoder_rerank(
    spec: ModelSpec,
    eval_set: pl.DataFrame,
    passages: pl.DataFrame,
    options: P.PassageOptions,
    cache_dir: Path | None,
    batch_size: int,
) -> tuple[Run, dict[str, Any]]:
    """Each judged (query, candidate) pair scored from the candidate's passages (module doc)."""
    pairs = model_texts(answer_free(eval_set))
    own = passages.join(
        pairs.select(pl.col(CANDIDATE_ID).alias(P.DOCUMENT)).unique(), on=P.DOCUMENT, how="semi"
    )
    with_text = set(own[P.DOCUMENT].to_list())
    fallback = pairs.filter(~pl.col(CANDIDATE_ID).is_in(list(with_text)))
    texts = [
        *pairs[_QUERY_TEXT].to_list(),
        *own[S.BEIR_TEXT].to_list(),
        *fallback[_DOC_TEXT].to_list(),
    ]
    matrix = _vectors(spec, load_encoder(spec), texts, cache_dir, batch_size)
    passage_pairs = pairs.select(SURVEY_ID, CANDIDATE_ID, _QUERY_TEXT).join(
        own, left_on=CANDIDATE_ID, right_on=P.DOCUMENT, how="inner"
    )
    passage_scores = pl.DataFrame(
        {
            P.QUERY: passage_pairs[SURVEY_ID],
            P.DOCUMENT: passage_pairs[CANDIDATE_ID],
            P.SCORE: _cosines(matrix, passage_pairs[_QUERY_TEXT], passage_pairs[S.BEIR_TEXT]),
        }
    )
    fallback_scores = pl.DataFrame(
        {
            P.QUERY: pairs[SURVEY_ID],
            P.DOCUMENT: pairs[CANDIDATE_ID],
            P.SCORE: pl.Series(_fallback_column(matrix, pairs, with_text), dtype=pl.Float64),
        }
    )
    documents = P.document_scores(passage_scores.lazy(), options.aggregation, options.k)
    scored, n_fallback = P.with_fallback(documents, fallback_scores.lazy())
    frame = scored.select(
        pl.col(P.QUERY).alias(SURVEY_ID), pl.col(P.DOCUMENT).alias(CANDIDATE_ID), SCORE
    )
    run = dataclasses.replace(scores_run(frame, spec.system_name), format=spec.kind)
    facts = _facts(
        spec, options,
        passages_scored=passage_pairs.height,
        documents_with_full_text=len(with_text),
        documents_without_full_text=fallback[CANDIDATE_ID].n_unique(),
        pairs_fallback=n_fallback,
        pairs=pairs.height,
    )  # fmt: skip
    return run, facts


def _cosines(
    matrix: Callable[[list[str]], np.ndarray], left: pl.Series, right: pl.Series
) -> np.ndarray:
    """Row-wise cosine of the texts of two aligned columns (vectors already unit length)."""
    if left.len() == 0:
        return np.zeros(0)
    return np.einsum("ij,ij->i", matrix(left.to_list()), matrix(right.to_list()))


def _fallback_column(
    matrix: Callable[[list[str]], np.ndarray], pairs: pl.DataFrame, with_text: set[str]
) -> list[float | None]:
    """The title-and-abstract cosine of the pairs whose document has no full text; null for
    the others (their score is their passages')."""
    mask = ~pairs[CANDIDATE_ID].is_in(list(with_text))
    values = np.full(pairs.height, np.nan)
    rows = np.flatnonzero(mask.to_numpy())
    values[rows] = _cosines(matrix, pairs[_QUERY_TEXT].gather(rows), pairs[_DOC_TEXT].gather(rows))
    return [None if np.isnan(v) else float(v) for v in values]


def encoder_retrieval(
    spec: ModelSpec,
    eval_set: pl.DataFrame,
    corpus: Corpus,
    sections: Path,
    options: P.PassageOptions,
    cache_dir: Path | None,
    batch_size: int,
    top_k: int,
) -> tuple[Run, dict[str, Any]]:
    """Each survey's ``top_k`` documents of the whole corpus by their aggregated passage
    score: every passage of the corpus (:mod:`pipeline.evaluate.retrieval.passage_units`)
    encoded in batches to disk, as a corpus's vectors are
    (:func:`~pipeline.evaluate.retrieval.corpus_vectors.encode_corpus`: cached, resumable),
    then scored chunk by chunk (:mod:`pipeline.evaluate.retrieval.passage_search`: exact)."""
    encode = load_encoder(spec)
    units = passage_units(corpus, sections, options.max_chars)
    queries = surveys(eval_set)
    query_texts = queries[S.BEIR_TEXT].to_list()
    vectors = _encoded(spec, encode, query_texts, cache_dir, batch_size)
    # scaled to unit length once, by the search, as every query vector is
    query_matrix = np.stack([vectors[t] for t in query_texts]) if query_texts else np.zeros((0, 1))
    with tempfile.TemporaryDirectory(prefix="passage-vectors-") as scratch:
        root = Path(scratch) if cache_dir is None else cache_dir
        stored = encode_corpus(
            checked_encoder(encode, spec),
            units,
            vectors_folder(root, model_identity(spec, encode), units, batch_size),
            batch_size,
            f"evaluate: {spec.system_name} encodes the passages",
        )
        top = passage_top_k(query_matrix, queries[SURVEY_ID].to_list(), stored.path,
                            units.layout, DocOrder.of(corpus.ids), top_k, options,
                            f"evaluate: {spec.system_name} over the passages")  # fmt: skip
    run = dataclasses.replace(scores_run(top, spec.system_name), format=spec.kind)
    n_docs = corpus.rows
    facts = _facts(
        spec, options,
        passages_scored=units.rows,
        documents_with_full_text=units.documents_with_full_text,
        documents_without_full_text=n_docs - units.documents_with_full_text,
        corpus_documents=n_docs,
    ) | {"top_k": top_k, "index": "exact"}  # fmt: skip
    return run, facts


def passage_run(
    path: Path,
    name: str | None,
    eval_set: pl.DataFrame,
    corpus_ids: pl.Series | None,
    eval_path: Path,
    options: P.PassageOptions,
    lenient: bool,
) -> tuple[Run, dict[str, Any]]:
    """A run over passage ids as a run over documents: each passage mapped to its document by
    the passage corpus's table (:func:`pipeline.evaluate.passages.passage_map`), the
    document's score its passages' by ``options``' rule.

    Raises:
        RunError: a passage id the passage corpus does not have (unless ``lenient``: dropped,
            counted, warned about).
    """
    path_sections = P.sections_path(eval_path)
    if path_sections is None:
        raise UsageError(f"--passage-run {path}: the release has no {P.FULL_TEXT_VIEW}/")
    documents = pl.concat(
        [eval_set[CANDIDATE_ID], *([corpus_ids] if corpus_ids is not None else [])]
    ).unique()
    mapping = P.passage_map(
        pl.scan_parquet(path_sections), documents.to_frame(S.BEIR_ID).lazy()
    ).collect()
    raw = read_run(path, name)
    joined = raw.scores.join(
        mapping.select(
            pl.col(S.BEIR_ID).alias(CANDIDATE_ID), pl.col(S.BEIR_CORPUS_ID).alias("_doc"),
            pl.col(S.SECTION_ORDER).is_null().alias("_fallback"),
        ),
        on=CANDIDATE_ID, how="left",
    )  # fmt: skip
    unknown = joined.filter(pl.col("_doc").is_null())
    if unknown.height:
        line, passage = unknown.select(LINE_NUMBER, CANDIDATE_ID).row(0)
        what = (
            f"{raw.where}: line {line}: passage {passage!r} is not in the passage corpus "
            f"(export --format beir writes it: passages/corpus.jsonl; {unknown.height} such row(s))"
        )
        if not lenient:
            raise RunError(f"{what}; {option('--lenient')} drops them")
        warnings.warn(what + "; dropped", RunWarning, stacklevel=2)
    kept = joined.filter(pl.col("_doc").is_not_null())
    documents_scored = P.document_scores(
        kept.select(
            pl.col(SURVEY_ID).alias(P.QUERY), pl.col("_doc").alias(P.DOCUMENT), SCORE
        ).lazy(),
        options.aggregation,
        options.k,
    ).collect()
    lines = kept.group_by(SURVEY_ID, "_doc").agg(pl.col(LINE_NUMBER).min())
    frame = (
        documents_scored.select(
            pl.col(P.QUERY).alias(SURVEY_ID), pl.col(P.DOCUMENT).alias(CANDIDATE_ID), SCORE
        )
        .join(lines.rename({"_doc": CANDIDATE_ID}), on=[SURVEY_ID, CANDIDATE_ID], how="left")
        .sort(LINE_NUMBER, SURVEY_ID, CANDIDATE_ID)
    )
    run = Run(raw.name, raw.path, raw.format, frame, raw.n_rows, unknown.height)
    fallback = kept.filter(pl.col("_fallback")).select(SURVEY_ID, "_doc").unique().height
    facts = {
        "kind": KIND_PASSAGE_RUN,
        "passages": {
            "aggregation": options.rule,
            "passages_scored": kept.height,
            "documents_scored": frame.height,
            "pairs_fallback": fallback,
            "unknown_passages_dropped": unknown.height,
        },
    }
    return run, facts
