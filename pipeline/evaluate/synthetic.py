"""Seeded synthetic eval tables for tests and benchmarks (no data is downloaded)."""

from __future__ import annotations

import datetime as dt

import numpy as np
import polars as pl

from pipeline.core.schema import LABEL_NAMES, N_MENTIONS
from pipeline.evaluate.columns import (
    CANDIDATE_ABSTRACT,
    CANDIDATE_ID,
    CANDIDATE_PRIOR_CITATIONS,
    CANDIDATE_RAW,
    CANDIDATE_TITLE,
    IN_DOMAIN,
    LABEL,
    LABEL_NAME,
    SURVEY_ABSTRACT,
    SURVEY_DATE,
    SURVEY_ID,
    SURVEY_TITLE,
)

DEFAULT_LABEL_PROBS = (0.5, 0.2, 0.1, 0.1, 0.1)
_ID_POOL = 1_000_003  # prime, so survey-wise strides give distinct candidates


def _words(rng: np.random.Generator, n_texts: int, n_words: int, vocabulary: int) -> list[str]:
    tokens = rng.integers(0, vocabulary, size=(n_texts, n_words))
    return [" ".join(f"w{t}" for t in row) for row in tokens.tolist()]


def synthetic_eval_set(
    n_surveys: int,
    candidates_per_survey: int,
    seed: int = 0,
    label_probs: tuple[float, ...] = DEFAULT_LABEL_PROBS,
    years: tuple[int, ...] = (2023, 2024),
    with_text: bool = True,
) -> pl.DataFrame:
    """An eval table with random labels, ids, domains, citations and (optionally) text.

    Args:
        n_surveys: number of surveys (ids ``S000000``...).
        candidates_per_survey: judged candidates per survey, distinct within a survey.
        seed: numpy seed; the same arguments give the same table.
        label_probs: probability of labels 0..4.
        years: survey years, assigned round-robin.
        with_text: fill titles, abstracts and raw strings with random words
            (off for large benchmarks; text columns are then null).

    Returns:
        Every column the evaluation reads, one row per (survey, candidate).
    """
    rng = np.random.default_rng(seed)
    n = n_surveys * candidates_per_survey
    survey_index = np.repeat(np.arange(n_surveys), candidates_per_survey)
    base = rng.integers(0, _ID_POOL, size=n_surveys)
    stride = rng.integers(1, _ID_POOL, size=n_surveys)
    candidate_numbers = (
        base[:, None] + np.arange(candidates_per_survey)[None, :] * stride[:, None]
    ) % _ID_POOL
    labels = rng.choice(len(label_probs), size=n, p=np.asarray(label_probs) / sum(label_probs))
    survey_ids = pl.Series([f"S{i:06d}" for i in range(n_surveys)])
    dates = pl.Series(
        [dt.date(years[i % len(years)], 1 + i % 12, 1 + i % 28) for i in range(n_surveys)],
        dtype=pl.Date,
    )
    has_abstract = rng.random(n) < 0.7
    frame = pl.DataFrame(
        {
            SURVEY_ID: survey_ids.gather(survey_index),
            SURVEY_DATE: dates.gather(survey_index),
            CANDIDATE_ID: pl.Series(candidate_numbers.ravel()).cast(pl.String).str.zfill(7),
            LABEL: pl.Series(labels, dtype=pl.Int8),
            IN_DOMAIN: pl.Series(rng.random(n) < 0.6),
            CANDIDATE_PRIOR_CITATIONS: pl.Series(rng.poisson(3.0 + 2.0 * labels), dtype=pl.Int64),
            N_MENTIONS: pl.Series(np.where(labels > 0, 1 + rng.poisson(1.0, n), 0), dtype=pl.Int64),
        }
    ).with_columns(
        (pl.lit("W") + pl.col(CANDIDATE_ID)).alias(CANDIDATE_ID),
        pl.col(LABEL).replace_strict(LABEL_NAMES, return_dtype=pl.String).alias(LABEL_NAME),
    )
    if with_text:
        titles = _words(rng, n_surveys, 8, 300)
        abstracts = _words(rng, n_surveys, 60, 300)
        text = {
            SURVEY_TITLE: pl.Series(titles).gather(survey_index),
            SURVEY_ABSTRACT: pl.Series(abstracts).gather(survey_index),
            CANDIDATE_TITLE: pl.Series(_words(rng, n, 8, 300)),
            CANDIDATE_ABSTRACT: pl.Series(_words(rng, n, 40, 300)).zip_with(
                pl.Series(has_abstract), pl.Series([None] * n, dtype=pl.String)
            ),
            CANDIDATE_RAW: pl.Series(_words(rng, n, 12, 300)),
        }
    else:
        text = {
            c: pl.repeat(None, n, dtype=pl.String, eager=True)
            for c in (
                SURVEY_TITLE,
                SURVEY_ABSTRACT,
                CANDIDATE_TITLE,
                CANDIDATE_ABSTRACT,
                CANDIDATE_RAW,
            )
        }
    return frame.with_columns(**{name: values for name, values in text.items()})
