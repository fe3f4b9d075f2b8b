"""The baselines' per-survey values in an evaluation: from the evaluation cache when it has
them, else computed (and cached); in retrieval mode each survey's top ``k`` of the whole
corpus."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from pipeline.core.config import EvaluateConfig, TrainConfig
from pipeline.core.errors import UsageError
from pipeline.evaluate.cache import baseline_key, read_baselines, write_baselines
from pipeline.evaluate.columns import SCORE, SUBSET, SURVEY_ID, SYSTEM
from pipeline.evaluate.evalset import answer_free
from pipeline.evaluate.results import clean
from pipeline.evaluate.retrieval.corpus_vectors import load_corpus
from pipeline.evaluate.retrieval.mode import RERANK, RETRIEVAL_KS, retrieval_frame
from pipeline.evaluate.retrieval.model_runs import (
    RetrievalOptions,
    bm25_retrieval,
    encoder_retrieval,
    has_texts,
)
from pipeline.evaluate.scoring.compute import RANK_SCORED
from pipeline.evaluate.scoring.judged import judged_means
from pipeline.evaluate.scoring.subsets import per_survey_subsets
from pipeline.evaluate.systems.baselines import (
    BASELINES,
    BM25,
    JUDGMENT_SIDE,
    ORACLE,
    POPULARITY,
    RANDOM,
    UPPER_BOUNDS,
    bm25_scores,
    oracle_scores,
    popularity_scores,
    random_scores,
)
from pipeline.evaluate.systems.dense import DENSE, dense_model_scores, dense_unavailable
from pipeline.evaluate.systems.dense import encode as dense_encode
from pipeline.evaluate.systems.learned import learned_baseline_scores
from pipeline.evaluate.systems.models import ENCODER, ModelSpec
from pipeline.evaluate.systems.runs import Run
from pipeline.evaluate.systems.submitted import (
    KIND_LEARNED,
    Submitted,
    aligned,
    system_chv,
    with_chv,
    with_scores,
)


def _random_per_survey(eval_set: pl.DataFrame, config: EvaluateConfig) -> pl.DataFrame:
    """Per-survey metric values of the random baseline, averaged over the seeds."""
    draws = [
        per_survey_subsets(
            with_scores(eval_set, random_scores(eval_set, config.seed, draw)), config.ks
        )
        for draw in range(max(config.random_seeds, 1))
    ]
    metric_columns = draws[0].columns[2:]
    # Every draw has the same rows in the same order (they depend on labels only);
    # averaging in numpy keeps the float result independent of thread scheduling.
    stacked = np.stack([d.select(metric_columns).to_numpy() for d in draws])
    mean = stacked.mean(axis=0)
    return (
        draws[0]
        .select(SUBSET, SURVEY_ID)
        .hstack(pl.DataFrame({c: mean[:, j] for j, c in enumerate(metric_columns)}).fill_nan(None))
    )


def baseline_per_survey(eval_set: pl.DataFrame, name: str, config: EvaluateConfig) -> pl.DataFrame:
    """Per-survey, per-subset metrics of one baseline (see :mod:`pipeline.evaluate.systems.baselines`).

    Raises:
        ValueError: ``name`` is not a baseline.
    """
    if name == RANDOM:
        return _random_per_survey(eval_set, config)
    scorers: dict[str, Callable[[pl.DataFrame], pl.Series]] = {
        POPULARITY: popularity_scores,
        BM25: bm25_scores,
        ORACLE: oracle_scores,
    }
    if name not in scorers:
        raise UsageError(f"unknown baseline {name!r}; available: {', '.join(BASELINES)}")
    visible = eval_set if name in JUDGMENT_SIDE else answer_free(eval_set)
    return per_survey_subsets(with_scores(eval_set, scorers[name](visible)), config.ks)


@dataclass(frozen=True)
class Baselines:
    names: list[str]
    per_survey: dict[str, pl.DataFrame]
    facts: dict[str, Any]
    judged: dict[str, dict[str, float]] = field(default_factory=dict)  # retrieval: Judged@k


def rerank_baselines(
    eval_set: pl.DataFrame,
    eval_path: Path,
    config: EvaluateConfig,
    train_config: TrainConfig,
    learned: bool,
    cache_dir: Path | None,
    batch_size: int,
) -> Baselines:
    """The baselines' per-survey values: from the cache when it has them, else computed
    (and cached)."""
    dense_reason = dense_unavailable() if learned else "learned baselines not asked for"
    wanted = [*BASELINES, *(["learned"] if learned else []), *([] if dense_reason else [DENSE])]
    key = baseline_key(eval_path, config, train_config, wanted, RERANK)
    cached = read_baselines(cache_dir, key)
    if cached is not None:
        table, meta = cached
        frames = {
            name: table.filter(pl.col(SYSTEM) == name).drop(SYSTEM) for name in meta["baselines"]
        }
        return Baselines(meta["baselines"], frames, meta["learned_baselines"])
    scores: dict[str, pl.Series] = {}
    facts: dict[str, Any] = {}
    vectors: dict[str, Submitted] = {}
    if learned:
        scores, facts = learned_baseline_scores(eval_set, eval_path, train_config)
        if dense_reason is None:
            result = dense_model_scores(answer_free(eval_set), cache_dir, batch_size)
            run = Run(DENSE, None, "dense", result.scores, result.scores.height)
            vectors[DENSE] = Submitted(run, KIND_LEARNED, result.facts, result.vectors)
            scores[DENSE] = aligned(eval_set, result.scores)[SCORE].rename(DENSE)
        else:
            facts[DENSE] = {"skipped": dense_reason}
    names = [b for b in BASELINES if b not in UPPER_BOUNDS] + list(scores)
    names += [b for b in BASELINES if b in UPPER_BOUNDS]
    frames = {
        name: with_chv(
            per_survey_subsets(with_scores(eval_set, scores[name]), config.ks)
            if name in scores
            else baseline_per_survey(eval_set, name, config),
            system_chv(eval_set, vectors[name]) if name in vectors else None,
        )
        for name in names
    }
    table = pl.concat([f.select(pl.lit(n).alias(SYSTEM), pl.all()) for n, f in frames.items()])
    write_baselines(cache_dir, key, table, {"baselines": names, "learned_baselines": clean(facts)})
    return Baselines(names, frames, facts)


def retrieval_baselines(
    eval_set: pl.DataFrame,
    eval_path: Path,
    config: EvaluateConfig,
    options: RetrievalOptions,
    learned: bool,
    cache_dir: Path | None,
    batch_size: int,
) -> Baselines:
    """Retrieval mode's baselines, each survey's top ``k`` of the whole corpus: ``bm25``,
    and ``dense`` (the [dense] extra's encoder, exact search) when it can run; when the
    corpus beside the eval file has the documents' texts."""
    corpus = load_corpus(eval_path)
    if corpus is None or not has_texts(corpus):
        why = "no corpus beside the eval file" if corpus is None else "the corpus has no texts"
        return Baselines([], {}, {BM25: {"skipped": why}})
    found = {BM25: bm25_retrieval(eval_set, corpus, options.top_k, BM25)}
    dense_reason = dense_unavailable() if learned else "learned baselines not asked for"
    facts: dict[str, Any] = {} if dense_reason is None else {DENSE: {"skipped": dense_reason}}
    if dense_reason is None:
        spec = ModelSpec(ENCODER, f"{dense_encode.__module__}:{dense_encode.__name__}", DENSE)
        found[DENSE] = encoder_retrieval(spec, eval_set, corpus, cache_dir, batch_size, options)
    ks = tuple(sorted({*config.ks, *RETRIEVAL_KS}))
    retrieved = {name: retrieval_frame(eval_set, r.run) for name, r in found.items()}
    frames = {
        name: with_chv(per_survey_subsets(frame, ks, RANK_SCORED), None)
        for name, frame in retrieved.items()
    }
    facts |= {name: clean(r.facts) for name, r in found.items()}
    judged = {name: judged_means(frame) for name, frame in retrieved.items()}
    return Baselines(list(found), frames, facts, judged)


NO_BASELINES = Baselines([], {}, {})
