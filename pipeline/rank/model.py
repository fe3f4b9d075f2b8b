"""LightGBM lambdarank rerankers trained on a release's train split.

Training data: the features (:mod:`pipeline.rank.features`) of the train split's
``candidates`` view, with the tiers (0 = hard negative ... 4 = essential) of
``train_survey_reading_lists.parquet`` as graded relevance; the judgments are joined
on (survey_id, candidate_id) after the features are computed, so no feature sees them.
The latest ``validation_share`` of the train surveys by survey date (ties by id) are
held out; boosting stops when their ndcg@10 has not improved for
``early_stopping_rounds`` rounds, and the model keeps the best round (no refit).

Reproducibility: fixed seeds, ``deterministic``, column-wise histograms and a fixed
thread count (``[train]`` config), rows in canonical order: the same release and
config give a byte-identical model file (tested). The model file is LightGBM's text
format; a JSON of the same stem names the feature set, its version and the features
in order, and :func:`load_model` refuses a model whose JSON does not match this code.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from pipeline.core.config import TrainConfig
from pipeline.core.errors import PipelineError
from pipeline.core.schema import CANDIDATE_ID, LABEL, SURVEY_DATE, SURVEY_ID
from pipeline.rank.features import (
    FEATURE_NAMES,
    FEATURE_SET_VERSION,
    FeatureError,
    compute_features,
    feature_docs,
    feature_set,
)
from pipeline.rank.lgbm_text import ModelTextError, check_model_text

MODEL_FORMAT = "lightgbm-lambdarank"
VALIDATION_METRIC = "ndcg@10"


class ModelError(PipelineError, ValueError):
    """A model file or its JSON is missing, unreadable or names another feature set."""


@dataclass(frozen=True)
class TrainedModel:
    """A trained (or loaded) reranker.

    Attributes:
        model_text: the LightGBM text model (what ``MODEL.txt`` holds).
        meta: the JSON written next to it (feature set, version, features, training facts).
    """

    model_text: str
    meta: dict[str, Any]

    @property
    def features(self) -> tuple[str, ...]:
        return tuple(self.meta["features"])


def _params(config: TrainConfig) -> dict[str, Any]:
    return {
        "objective": "lambdarank",
        "metric": "ndcg",
        "eval_at": [10],
        "learning_rate": config.learning_rate,
        "num_leaves": config.num_leaves,
        "min_data_in_leaf": config.min_data_in_leaf,
        "seed": config.seed,
        "deterministic": True,
        "force_col_wise": True,
        "num_threads": config.num_threads,
        "verbosity": -1,
    }


def _matrix(features: pl.DataFrame, names: tuple[str, ...]) -> np.ndarray:
    return features.select(names).to_numpy().astype(np.float64)  # nulls become NaN (missing)


def _group_sizes(survey_ids: pl.Series) -> np.ndarray:
    """Rows per survey, in order of first appearance (rows of a survey are contiguous)."""
    return (
        survey_ids.to_frame()
        .group_by(SURVEY_ID, maintain_order=True)
        .len()["len"]
        .to_numpy()
        .astype(np.int64)
    )


def validation_surveys(view: pl.DataFrame, share: float) -> list[str]:
    """The latest ``ceil(share * n)`` surveys by survey date, ties by id (at least one, never all).

    Raises:
        FeatureError: fewer than two surveys.
    """
    surveys = view.select(SURVEY_ID, SURVEY_DATE).unique(SURVEY_ID).sort(SURVEY_DATE, SURVEY_ID)
    if surveys.height < 2:
        raise FeatureError(
            f"training needs at least 2 train surveys (one to hold out), got {surveys.height}"
        )
    n_valid = min(max(math.ceil(share * surveys.height), 1), surveys.height - 1)
    return surveys[SURVEY_ID].tail(n_valid).to_list()


def train_ranker(
    view: pl.DataFrame,
    judgments: pl.DataFrame,
    set_name: str,
    config: TrainConfig,
    inputs: dict[str, Any] | None = None,
    extra: pl.DataFrame | None = None,
) -> TrainedModel:
    """Train a lambdarank model on the train split.

    Args:
        view: the train split's candidates view (every ``CANDIDATES_VIEW`` column).
        judgments: ``survey_id``, ``candidate_id``, ``label`` of the same rows.
        set_name: feature set (``full`` or ``metadata``).
        config: hyperparameters, seeds and threads.
        inputs: identities of the input files, recorded in the JSON.
        extra: features no view column holds (``pipeline.rank.features.EXTRA_FEATURES``),
            by (survey_id, candidate_id): trained on after the set's.

    Raises:
        FeatureError: unknown feature set, missing view columns, fewer than two
            surveys, or candidates without a judgment.
    """
    import lightgbm as lgb  # a heavy import, needed only here

    names = feature_set(set_name)
    if extra is not None:
        names += tuple(c for c in extra.columns if c not in (SURVEY_ID, CANDIDATE_ID))
    features = compute_features(view, names, extra)
    labelled = features.join(
        judgments.select(SURVEY_ID, CANDIDATE_ID, LABEL),
        on=[SURVEY_ID, CANDIDATE_ID],
        how="left",
        maintain_order="left",
    )
    unlabelled = labelled[LABEL].null_count()
    if unlabelled:
        raise FeatureError(f"{unlabelled} train candidate(s) have no judgment row")
    held_out = set(validation_surveys(view, config.validation_share))
    is_valid = labelled[SURVEY_ID].is_in(list(held_out))
    parts = {"train": labelled.filter(~is_valid), "valid": labelled.filter(is_valid)}
    datasets = {
        part: lgb.Dataset(
            _matrix(frame, names),
            label=frame[LABEL].cast(pl.Int64).to_numpy(),
            group=_group_sizes(frame[SURVEY_ID]),
            feature_name=list(names),
            params={"verbosity": -1, "data_random_seed": config.seed},
            free_raw_data=False,
        )
        for part, frame in parts.items()
    }
    datasets["valid"] = datasets["valid"].set_reference(datasets["train"])
    evals: dict[str, Any] = {}
    booster = lgb.train(
        _params(config),
        datasets["train"],
        num_boost_round=config.max_rounds,
        valid_sets=[datasets["valid"]],
        valid_names=["valid"],
        callbacks=[
            lgb.early_stopping(config.early_stopping_rounds, verbose=False),
            lgb.record_evaluation(evals),
        ],
    )
    best = booster.best_iteration or booster.current_iteration()
    curve = evals.get("valid", {}).get("ndcg@10", [])
    meta = {
        "format": MODEL_FORMAT,
        "feature_set": set_name,
        "feature_set_version": FEATURE_SET_VERSION,
        "features": list(names),
        "feature_docs": feature_docs(names),
        "lightgbm_version": lgb.__version__,
        "config": dataclasses.asdict(config),
        "best_iteration": best,
        "validation": {
            "metric": VALIDATION_METRIC,
            "value": round(float(curve[best - 1]), 12) if curve else None,
            "surveys": sorted(held_out),
        },
        "train_surveys": parts["train"][SURVEY_ID].n_unique(),
        "train_rows": parts["train"].height,
        "validation_rows": parts["valid"].height,
        "inputs": inputs or {},
    }
    return TrainedModel(booster.model_to_string(num_iteration=best), meta)


def meta_path(model_file: Path) -> Path:
    """The JSON that names a model file's feature set: same folder and stem, ``.json``."""
    return model_file.with_suffix(".json")


def write_model(model: TrainedModel, model_file: Path) -> None:
    """Write the model text and its JSON, each to a temp file renamed into place."""
    from pipeline.core.files import atomic_path, write_json

    with atomic_path(model_file) as tmp:
        tmp.write_text(model.model_text, encoding="utf-8")
    write_json(meta_path(model_file), model.meta)


def load_model(model_file: str | Path) -> TrainedModel:
    """Read a model file and its JSON; check the feature set against this code.

    Raises:
        ModelError: the file or its JSON is missing or unreadable, the model text is
            damaged or out of range (:func:`pipeline.rank.lgbm_text.check_model_text`),
            the JSON names another feature-set version or unknown features, or the
            model's own feature names differ from the JSON's.
    """
    import lightgbm as lgb

    path = Path(model_file)
    if not path.is_file():
        raise ModelError(f"{path}: model file not found")
    sidecar = meta_path(path)
    if not sidecar.is_file():
        raise ModelError(
            f"{path}: no {sidecar.name} next to it; `python -m pipeline train` writes one naming "
            f"the feature set (feature_set_version {FEATURE_SET_VERSION}, features from "
            f"{', '.join(FEATURE_NAMES)})"
        )
    try:
        meta = json.loads(sidecar.read_text(encoding="utf-8"))
        features = list(meta["features"])
        version = meta["feature_set_version"]
    except (json.JSONDecodeError, KeyError, TypeError) as e:
        raise ModelError(
            f"{sidecar}: not a model JSON with features and feature_set_version ({e})"
        ) from e
    if version != FEATURE_SET_VERSION:
        raise ModelError(
            f"{sidecar}: feature_set_version {version}, this code computes version "
            f"{FEATURE_SET_VERSION}; retrain the model"
        )
    unknown = [f for f in features if f not in FEATURE_NAMES]
    if unknown:
        raise ModelError(f"{sidecar}: unknown feature(s) {unknown}; available: {FEATURE_NAMES}")
    try:
        # LightGBM aborts or crashes on some damaged files: check the text before it parses it
        text = check_model_text(path.read_bytes(), path)
    except ModelTextError as e:
        raise ModelError(str(e)) from None
    try:
        booster = lgb.Booster(model_str=text)
    except lgb.basic.LightGBMError as e:
        raise ModelError(f"{path}: not a LightGBM text model ({e})") from e
    if booster.feature_name() != features:
        raise ModelError(
            f"{path}: model features {booster.feature_name()} differ from {sidecar.name}'s {features}"
        )
    return TrainedModel(text, meta)


def score(
    model: TrainedModel, view: pl.DataFrame, extra: pl.DataFrame | None = None
) -> pl.DataFrame:
    """``survey_id``, ``candidate_id``, ``score`` of every row of a candidates view (``extra``:
    the model's features no view column holds, as :func:`train_ranker` took them).

    The booster is always rebuilt from the model text, so an in-memory model and the
    same model read from its file give identical scores.
    """
    import lightgbm as lgb

    booster = lgb.Booster(model_str=model.model_text)
    features = compute_features(view, model.features, extra)
    values = booster.predict(_matrix(features, model.features), num_threads=1)
    return features.select(SURVEY_ID, CANDIDATE_ID).with_columns(
        pl.Series("score", values, dtype=pl.Float64)
    )
