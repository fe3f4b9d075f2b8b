"""Reference systems scored on the eval set itself.

* ``random``: uniform random scores; its per-survey metric values are the mean
  over ``EvaluateConfig.random_seeds`` seeds, each seeded from ``EvaluateConfig.seed``.
* ``popularity``: score = ``candidate_prior_citations``, the citations a candidate
  received from corpus papers dated before the survey (no future information). The
  candidates view does not show it (``schema.POPULARITY_COLUMNS``): it is a reference for a
  system that knows popularity from elsewhere, read from the judgment side.
* ``bm25``: per survey, BM25 of each candidate's text against the survey's title +
  abstract (:mod:`pipeline.rules.text_match`, shared with the rankers' text features).
* ``oracle``: score = label, an upper bound.

Every function returns one Float64 score per row of the eval frame, in its order.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from pipeline.evaluate.columns import CANDIDATE_PRIOR_CITATIONS, LABEL, SURVEY_ID
from pipeline.rules.text_match import (
    bm25_by_survey,
    candidate_text_tokens,
    survey_query_tokens,
)

RANDOM = "random"
POPULARITY = "popularity"
BM25 = "bm25"
ORACLE = "oracle"
BASELINES = (RANDOM, POPULARITY, BM25, ORACLE)
UPPER_BOUNDS = (ORACLE,)  # not eligible as "best baseline"
# references, not systems: they read the judgment side (the label; popularity, which the
# candidates view does not show), every other baseline the answer-free view only
JUDGMENT_SIDE = (ORACLE, POPULARITY)


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
