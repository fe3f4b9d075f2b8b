"""Reference systems scored on the eval set itself.

* ``random``: uniform random scores; its per-survey metric values are the mean
  over ``EvaluateConfig.random_seeds`` seeds, each seeded from ``EvaluateConfig.seed``.
* ``popularity``: score = ``candidate_prior_citations``, the citations a candidate
  received from corpus papers dated before the survey (no future information).
* ``bm25``: per survey, BM25 (the ``bm25s`` library, Lucene variant, k1 = 1.5,
  b = 0.75) of each candidate's text against the survey's title + abstract.
  Candidate text = title + abstract, or the raw bibliography string when there is
  no abstract. Tokens are lowercase ``\\w+`` runs; the vocabulary is numbered in
  sorted order so scores do not depend on hash seeds.
* ``oracle``: score = label, an upper bound.

Every function returns one Float64 score per row of the eval frame, in its order.
"""

from __future__ import annotations

import logging

import numpy as np
import polars as pl

from pipeline.evaluate.columns import (
    CANDIDATE_ABSTRACT,
    CANDIDATE_PRIOR_CITATIONS,
    CANDIDATE_RAW,
    CANDIDATE_TITLE,
    LABEL,
    SURVEY_ABSTRACT,
    SURVEY_ID,
    SURVEY_TITLE,
)

RANDOM = "random"
POPULARITY = "popularity"
BM25 = "bm25"
ORACLE = "oracle"
BASELINES = (RANDOM, POPULARITY, BM25, ORACLE)
UPPER_BOUNDS = (ORACLE,)  # not eligible as "best baseline"

TOKEN_PATTERN = r"\w+"


def random_scores(eval_frame: pl.DataFrame, seed: int, draw: int) -> pl.Series:
    """Uniform [0, 1) scores from ``numpy.random.default_rng([seed, draw])``.

    The eval frame is in canonical (survey_id, candidate_id) order, so the scores
    depend only on the eval set, ``seed`` and ``draw``.
    """
    rng = np.random.default_rng([seed, draw])
    return pl.Series(f"{RANDOM}_{draw}", rng.random(eval_frame.height), dtype=pl.Float64)


def popularity_scores(eval_frame: pl.DataFrame) -> pl.Series:
    """``candidate_prior_citations`` as a score (null counts as 0)."""
    return eval_frame[CANDIDATE_PRIOR_CITATIONS].fill_null(0).cast(pl.Float64).rename(POPULARITY)


def oracle_scores(eval_frame: pl.DataFrame) -> pl.Series:
    """The label as a score: a perfect ranking (equal labels are ordered by the tie key)."""
    return eval_frame[LABEL].cast(pl.Float64).rename(ORACLE)


def _text(*parts: pl.Expr) -> pl.Expr:
    return pl.concat_str([p.fill_null("") for p in parts], separator=" ")


def tokenize(texts: pl.Expr) -> pl.Expr:
    """Lowercase word tokens (``\\w+`` runs) of a string expression, as a list."""
    return texts.str.to_lowercase().str.extract_all(TOKEN_PATTERN)


def _bm25_one(query: list[str], docs: list[list[str]]) -> np.ndarray:
    import bm25s  # the index library is only needed for this baseline

    # bm25s sets its logger to DEBUG on import and logs every index build
    logging.getLogger("bm25s").setLevel(logging.WARNING)

    vocabulary = {token: i for i, token in enumerate(sorted({t for doc in docs for t in doc}))}
    query_ids = [vocabulary[t] for t in query if t in vocabulary]
    if not query_ids:
        return np.zeros(len(docs))
    retriever = bm25s.BM25(dtype="float64")
    retriever.index(
        ([[vocabulary[t] for t in doc] for doc in docs], vocabulary), show_progress=False
    )
    return np.asarray(retriever.get_scores(query_ids), dtype=np.float64)


def survey_query_tokens() -> pl.Expr:
    """Tokens of the survey's title + abstract (the BM25 query)."""
    return tokenize(_text(pl.col(SURVEY_TITLE), pl.col(SURVEY_ABSTRACT)))


def joined_text(*parts: pl.Expr) -> pl.Expr:
    """The parts joined by a space, nulls as empty strings."""
    return _text(*parts)


def candidate_text() -> pl.Expr:
    """The candidate's text: title + abstract, or the raw string when there is no abstract."""
    has_abstract = pl.col(CANDIDATE_ABSTRACT).str.strip_chars().fill_null("") != ""
    return (
        pl.when(has_abstract)
        .then(_text(pl.col(CANDIDATE_TITLE), pl.col(CANDIDATE_ABSTRACT)))
        .otherwise(pl.coalesce(pl.col(CANDIDATE_RAW), pl.col(CANDIDATE_TITLE), pl.lit("")))
    )


def candidate_text_tokens() -> pl.Expr:
    """Tokens of :func:`candidate_text`."""
    return tokenize(candidate_text())


def bm25_by_survey(survey_ids: pl.Series, queries: pl.Series, docs: pl.Series) -> np.ndarray:
    """BM25 of each row's doc tokens against its query tokens, one index per survey.

    Args:
        survey_ids: one id per row, rows of a survey contiguous.
        queries: token lists; the first row of each survey's block is its query.
        docs: token lists, one per row.
    """
    starts = np.flatnonzero(survey_ids.ne_missing(survey_ids.shift(1)).to_numpy())
    stops = np.append(starts[1:], survey_ids.len())
    scores = np.zeros(survey_ids.len())
    # One small index per survey: BM25's idf is over that survey's candidates.
    for start, stop in zip(starts.tolist(), stops.tolist(), strict=True):
        scores[start:stop] = _bm25_one(queries[start].to_list(), docs[start:stop].to_list())
    return scores


def bm25_scores(eval_frame: pl.DataFrame) -> pl.Series:
    """BM25 of candidate text against the survey title + abstract, one index per survey.

    Args:
        eval_frame: the eval set with rows of a survey contiguous (canonical order).
    """
    texts = eval_frame.select(
        pl.col(SURVEY_ID),
        survey_query_tokens().alias("_query"),
        candidate_text_tokens().alias("_doc"),
    )
    scores = bm25_by_survey(texts[SURVEY_ID], texts["_query"], texts["_doc"])
    return pl.Series(BM25, scores, dtype=pl.Float64)
