"""The evaluation cache: the baselines' per-survey values and the models' embeddings.

Baselines are computed once per release: their per-survey metrics (and the learned
baselines' facts) are kept in ``<cache>/baselines/<key>.parquet`` + ``.json``, so a
second ``evaluate`` on the same release costs only the new systems. The key is the
sha256 of everything the values depend on: the eval file's and the train split's bytes,
the ``[evaluate]`` settings that change a per-survey value (cutoffs, seed, random draws;
not the bootstrap resamples, which only the summaries use), the ``[train]`` config,
which baselines run, the mode, and the source of the ``pipeline`` package (any code edit
starts a new entry). Embeddings live in ``<cache>/embeddings/`` (:mod:`pipeline.evaluate.systems.models`).

The cache lives in the folder the evaluation writes: ``<out>/cache`` with ``--out``, else
beside the results written next to the release (``<work>/eval/cache`` for
``<work>/release``), or in the folder ``--cache-dir`` names, which runs written to
different folders can share. Nothing is written beside a release the evaluation was not
told to write there: a read-only or shared release works, and two users of one release
share no cache they did not ask for. It is an optimisation only: a cache that cannot be
read or written is recomputed, with a warning.
"""

from __future__ import annotations

import dataclasses
import importlib.resources
import json
import logging
from functools import lru_cache
from pathlib import Path
from typing import Any

import polars as pl

from pipeline import __version__
from pipeline.core.config import EvaluateConfig, TrainConfig
from pipeline.core.files import atomic_path, sha256_file, sha256_text
from pipeline.core.release_files import CANDIDATES_FILE, READING_LISTS_FILE

CACHE_DIR = "cache"  # under the evaluation's --out (<work>/eval by default)
BASELINES_DIR = "baselines"
EMBEDDINGS_DIR = "embeddings"
CACHE_FORMAT = 1

log = logging.getLogger("pipeline")


@lru_cache(maxsize=1)
def source_fingerprint() -> str:
    """A hash of every ``.py`` file of the ``pipeline`` package (name and sha256), with the
    version."""
    files: list[tuple[str, str]] = []

    def walk(node: Any, rel: str) -> None:
        for child in sorted(node.iterdir(), key=lambda c: c.name):
            name = f"{rel}/{child.name}"
            if child.is_dir() and child.name != "__pycache__":
                walk(child, name)
            elif child.name.endswith(".py"):
                files.append((name, sha256_file(Path(str(child)))))

    walk(importlib.resources.files("pipeline"), "pipeline")
    return sha256_text(__version__, files)


def baseline_key(
    eval_path: Path,
    config: EvaluateConfig,
    train_config: TrainConfig,
    systems: list[str],
    mode: str,
) -> str:
    """The cache key of the baselines' per-survey values (see the module doc)."""
    release = eval_path.parent
    train = {
        name: sha256_file(release / name.format(split="train"))
        for name in (CANDIDATES_FILE, READING_LISTS_FILE)
        if (release / name.format(split="train")).is_file()
    }
    evaluate = {k: v for k, v in dataclasses.asdict(config).items() if k != "bootstrap_samples"}
    return sha256_text(
        {
            "format": CACHE_FORMAT,
            "eval": sha256_file(eval_path),
            "train": train,
            "evaluate": evaluate,
            "train_config": dataclasses.asdict(train_config),
            "systems": systems,
            "mode": mode,
            "code": source_fingerprint(),
        }
    )


def read_baselines(cache_dir: Path | None, key: str) -> tuple[pl.DataFrame, dict[str, Any]] | None:
    """The cached per-survey rows and facts of ``key``, or None (absent or unreadable)."""
    if cache_dir is None:
        return None
    table = cache_dir / BASELINES_DIR / f"{key}.parquet"
    facts = table.with_suffix(".json")
    if not (table.is_file() and facts.is_file()):
        return None
    try:
        return pl.read_parquet(table), json.loads(facts.read_text(encoding="utf-8"))
    except (OSError, ValueError, pl.exceptions.PolarsError) as e:
        log.warning("evaluate: baseline cache %s unreadable (%s); recomputing", table, e)
        return None


def write_baselines(
    cache_dir: Path | None, key: str, per_survey: pl.DataFrame, facts: dict[str, Any]
) -> None:
    """Keep the baselines' per-survey rows and facts under ``key`` (atomically)."""
    if cache_dir is None:
        return
    table = cache_dir / BASELINES_DIR / f"{key}.parquet"
    try:
        table.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(table) as tmp:
            per_survey.write_parquet(tmp)
        with atomic_path(table.with_suffix(".json")) as tmp:
            tmp.write_text(json.dumps(facts, sort_keys=True, indent=2) + "\n", encoding="utf-8")
    except OSError as e:
        log.warning("evaluate: baseline cache not written to %s (%s)", table.parent, e)
