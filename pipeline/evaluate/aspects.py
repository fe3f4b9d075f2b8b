"""``evaluate --task aspects``: the section-level reading lists, scored by the same
evaluation as the whole-survey task.

The aspects folder of a release is laid out as a release of its own (same file names, one
query per aspect: :data:`pipeline.core.release_files.ASPECTS_DIR`), and its readers key rows by
aspect (:mod:`pipeline.rules.aspect_queries`), so :func:`pipeline.evaluate.evaluation.run_evaluation`
scores it unchanged: the same metrics, bootstrap intervals, paired tests and baselines
(random, popularity, BM25 and dense on the aspect's query; the LightGBM rankers trained on the
aspects' train split). Two additions:

* **per aspect kind and level**: the ``kind=...`` and ``level=...`` subsets
  (:func:`query_groups`), the aspects of each kind (``schema.ASPECT_KINDS``) and of each
  layout level (``schema.ASPECT_LEVELS``);
* **whole-survey systems per aspect**: the whole-survey task's baselines (BM25 on the survey's
  title and abstract, the LightGBM rankers trained on the survey lists, dense) score each
  survey's candidates once; every aspect of a survey ranks the same candidates, so those
  scores rank each aspect's list as they rank the survey's. They are evaluated as systems
  named ``<baseline>@survey`` (:data:`WHOLE_SURVEY_SUFFIX`), tested against the aspect
  baselines, and the report sets each beside its aspect-query counterpart.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from pipeline.core import schema as S
from pipeline.core.config import TrainConfig
from pipeline.core.release_files import ASPECTS_DIR, EVAL_FILE
from pipeline.evaluate.columns import CANDIDATE_ID, SCORE, SURVEY_ID
from pipeline.evaluate.evalset import answer_free, is_hub_spec, load_eval_set, resolve_eval_file
from pipeline.evaluate.systems.baselines import BM25, bm25_scores
from pipeline.evaluate.systems.dense import DENSE, dense_model_scores, dense_unavailable
from pipeline.evaluate.systems.learned import learned_baseline_scores

TASK_LISTS, TASK_ASPECTS = "lists", "aspects"
TASKS = (TASK_LISTS, TASK_ASPECTS)
WHOLE_SURVEY_SUFFIX = "@survey"
KIND_PREFIX, LEVEL_PREFIX = "kind=", "level="


def aspects_spec(spec: str | Path) -> str | Path:
    """The aspects folder of a release given as a folder, a Hub dataset id or an
    ``hf://datasets/...`` path (an aspects eval file is returned as it is).

    Raises:
        FileNotFoundError: a local release folder without an aspects folder.
    """
    path = Path(spec)
    if path.is_file():
        return path
    if path.is_dir():
        if path.name == ASPECTS_DIR and (path / EVAL_FILE).is_file():
            return path
        inner = path / ASPECTS_DIR
        if not (inner / EVAL_FILE).is_file():
            raise FileNotFoundError(
                f"{path}: no {ASPECTS_DIR}/{EVAL_FILE}: a release built without aspects, or "
                "one whose eval surveys have no aspect (see aspects in eval_metadata.json)"
            )
        return inner
    if is_hub_spec(spec):
        return f"{str(spec).rstrip('/')}/{ASPECTS_DIR}"
    raise FileNotFoundError(f"{spec}: no such release folder, and not a Hub dataset id")


def survey_spec(aspects: str | Path) -> str | Path:
    """The whole-survey eval set beside an aspects folder (the release it is part of)."""
    if isinstance(aspects, Path) or Path(aspects).exists():
        path = Path(aspects)
        folder = path.parent if path.is_file() else path
        return folder.parent
    return str(aspects).removesuffix(f"/{ASPECTS_DIR}")


def query_groups(eval_path: Path) -> dict[str, pl.Series]:
    """``kind=<kind>`` and ``level=<level>`` -> the eval aspect ids of that kind or level
    (the kinds and levels that have aspects only)."""
    table = (
        pl.read_parquet(eval_path, columns=[S.ASPECT_ID, S.ASPECT_KIND, S.ASPECT_LEVEL])
        .unique(S.ASPECT_ID)
        .sort(S.ASPECT_ID)
    )
    groups: dict[str, pl.Series] = {}
    for prefix, column, names in (
        (KIND_PREFIX, S.ASPECT_KIND, S.ASPECT_KINDS),
        (LEVEL_PREFIX, S.ASPECT_LEVEL, S.ASPECT_LEVELS),
    ):
        for name in names:
            ids = table.filter(pl.col(column) == name)[S.ASPECT_ID].rename(SURVEY_ID)
            if ids.len():
                groups[f"{prefix}{name}"] = ids
    return groups


def whole_survey_scores(
    aspects_path: Path,
    survey_spec_: str | Path,
    train_config: TrainConfig,
    learned: bool,
    cache_dir: Path | None,
    batch_size: int,
) -> tuple[dict[str, pl.DataFrame], dict[str, Any]]:
    """The whole-survey baselines' scores as runs over the aspects (the module docstring).

    Returns:
        (``<baseline>@survey`` -> ``survey_id`` (the aspect id), ``candidate_id``, ``score``;
        facts: what each was, and why one was skipped).
    """

    survey_path = resolve_eval_file(survey_spec_)
    surveys = load_eval_set(survey_path)
    scores: dict[str, pl.Series] = {BM25: bm25_scores(answer_free(surveys))}
    facts: dict[str, Any] = {BM25: {"query": "the survey's title and abstract"}}
    if learned:
        trained, learned_facts = learned_baseline_scores(surveys, survey_path, train_config)
        scores |= trained
        facts |= learned_facts
        reason = dense_unavailable()
        if reason is None:
            result = dense_model_scores(answer_free(surveys), cache_dir, batch_size)
            aligned = surveys.select(SURVEY_ID, CANDIDATE_ID).join(
                result.scores.select(SURVEY_ID, CANDIDATE_ID, SCORE),
                on=[SURVEY_ID, CANDIDATE_ID],
                how="left",
                maintain_order="left",
            )
            scores[DENSE] = aligned[SCORE]
        else:
            facts[DENSE] = {"skipped": reason}
    per_aspect = pl.read_parquet(aspects_path, columns=[S.ASPECT_ID, S.SURVEY_ID, S.CANDIDATE_ID])
    runs = {}
    for name, values in scores.items():
        survey_run = surveys.select(SURVEY_ID, CANDIDATE_ID).with_columns(values.alias(SCORE))
        runs[f"{name}{WHOLE_SURVEY_SUFFIX}"] = (
            per_aspect.join(survey_run, on=[S.SURVEY_ID, S.CANDIDATE_ID], how="inner")
            .drop_nulls(SCORE)
            .select(pl.col(S.ASPECT_ID).alias(SURVEY_ID), CANDIDATE_ID, SCORE)
            .sort(SURVEY_ID, CANDIDATE_ID)
        )
    return runs, facts
