"""Reading a release's splits for features and training, and the two library entry points.

* :func:`write_features` - the ``features`` command: one Parquet of features per split.
* :func:`train_release` - the ``train`` command: a model file and its JSON.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from pipeline.core.config import TrainConfig
from pipeline.core.release_files import CANDIDATES_FILE, READING_LISTS_FILE
from pipeline.core.schema import ASPECT_ID, CANDIDATE_ID, LABEL, SPLIT_NAMES, SURVEY_ID
from pipeline.rank.features import (
    FEATURE_NAMES,
    FEATURE_SET_VERSION,
    FULL_SET,
    FeatureError,
    candidates_view,
    compute_features,
    feature_docs,
)
from pipeline.rank.model import TrainedModel, train_ranker, write_model
from pipeline.rules.aspect_queries import as_queries, is_aspects, present_query_columns

SPLITS = SPLIT_NAMES
# The release's file names (pipeline/stages/release.py writes them; spelled there).
FEATURES_JSON = "features.json"
MODEL_NAME = "model"


def _identity(path: Path) -> dict[str, str]:
    from pipeline.core.files import file_identity

    return file_identity(path)


def split_view_file(release: Path, split: str) -> Path:
    """The answer-free candidates file of a split.

    Raises:
        FileNotFoundError: the release has no such file (names it).
    """
    path = Path(release) / CANDIDATES_FILE.format(split=split)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: not found; is {release} a release folder?")
    return path


def _query_key(path: Path) -> str:
    """The column that names a query of a split file: the aspect for an aspects table."""
    return ASPECT_ID if is_aspects(pl.read_parquet_schema(path)) else SURVEY_ID


def _read(path: Path, columns: list[str] | None, queries: pl.Series | None) -> pl.DataFrame:
    """``path``'s rows (of the queries ``queries`` only, filtered as the file is read)."""
    frame = pl.scan_parquet(path)
    if queries is not None:
        frame = frame.filter(pl.col(_query_key(path)).is_in(queries.implode()))
    return frame.select(columns).collect() if columns else frame.collect()


def query_sizes(release: Path, split: str) -> pl.DataFrame:
    """``survey_id`` (the query: the aspect id of an aspects table) and its rows, by id,
    counted without holding the split."""
    path = split_view_file(release, split)
    key = _query_key(path)
    return (
        pl.scan_parquet(path)
        .group_by(pl.col(key).alias(SURVEY_ID))
        .len()
        .sort(SURVEY_ID)
        .collect(engine="streaming")
    )


def read_view(release: Path, split: str, queries: pl.Series | None = None) -> pl.DataFrame:
    """The candidates view of a split (of the queries ``queries`` only, if given: ids as
    :func:`query_sizes` names them), checked and in canonical order."""
    path = split_view_file(release, split)
    return candidates_view(as_queries(_read(path, None, queries)), where=str(path))


def read_judgments(release: Path, split: str, queries: pl.Series | None = None) -> pl.DataFrame:
    """``survey_id``, ``candidate_id``, ``label`` of a split (read only for training; of the
    queries ``queries`` only, if given)."""
    path = Path(release) / READING_LISTS_FILE.format(split=split)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: not found; training needs the split's reading lists")
    columns = [SURVEY_ID, CANDIDATE_ID, LABEL]
    extra = present_query_columns(pl.read_parquet_schema(path))
    return as_queries(_read(path, columns + extra, queries)).select(columns)


def write_features(release: str | Path, out: str | Path) -> dict[str, Any]:
    """Write ``<out>/{train,eval}.parquet`` (features of each split) and ``<out>/features.json``.

    Returns:
        The content of ``features.json``: feature definitions, version and row counts.
    """
    from pipeline.core.files import atomic_path, write_json

    release, out = Path(release), Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rows: dict[str, int] = {}
    inputs: dict[str, Any] = {}
    for split in SPLITS:
        path = split_view_file(release, split)
        features = compute_features(read_view(release, split))
        with atomic_path(out / f"{split}.parquet") as tmp:
            features.write_parquet(tmp, statistics=False)
        rows[split] = features.height
        inputs[split] = _identity(path)
    meta = {
        "feature_set_version": FEATURE_SET_VERSION,
        "features": feature_docs(FEATURE_NAMES),
        "rows": rows,
        "inputs": inputs,
    }
    write_json(out / FEATURES_JSON, meta)
    return meta


def train_from_release(
    release: str | Path, set_name: str = FULL_SET, config: TrainConfig | None = None
) -> TrainedModel:
    """Train on a release's train split (candidates view + train reading lists' labels)."""
    release = Path(release)
    view = read_view(release, "train")
    if view.height == 0:
        raise FeatureError(f"{release}: the train split is empty")
    inputs = {
        "candidates": _identity(split_view_file(release, "train")),
        "judgments": _identity(release / READING_LISTS_FILE.format(split="train")),
    }
    return train_ranker(
        view, read_judgments(release, "train"), set_name, config or TrainConfig(), inputs
    )


def train_release(
    release: str | Path,
    out: str | Path,
    set_name: str = FULL_SET,
    config: TrainConfig | None = None,
    name: str = MODEL_NAME,
) -> Path:
    """Train and write ``<out>/<name>.txt`` and ``<out>/<name>.json``; returns the model path."""
    model = train_from_release(release, set_name, config)
    path = Path(out) / f"{name}.txt"
    write_model(model, path)
    return path
