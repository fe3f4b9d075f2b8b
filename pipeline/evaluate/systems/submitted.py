"""The submitted systems of an evaluation: run files, scores held in memory, model files and
models, each validated against the eval set and named once (the checks name the flag that
fixes them)."""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from pipeline.core.errors import UsageError, option
from pipeline.evaluate.columns import CANDIDATE_ID, SCORE, SUBSET, SURVEY_ID
from pipeline.evaluate.evalset import answer_free
from pipeline.evaluate.passages import PassageOptions
from pipeline.evaluate.retrieval.corpus_vectors import load_corpus
from pipeline.evaluate.retrieval.mode import RETRIEVAL, corpus_ids, restrict_to_corpus
from pipeline.evaluate.retrieval.model_runs import (
    FIRST_STAGE_ENCODERS,
    RetrievalOptions,
    first_stage_run,
    retrieve,
)
from pipeline.evaluate.scoring.coverage import CHV_RATIO, chv_ratios
from pipeline.evaluate.scoring.subsets import SUBSET_ALL
from pipeline.evaluate.systems import full_text
from pipeline.evaluate.systems.learned import eval_view, model_file_scores
from pipeline.evaluate.systems.models import ModelError, ModelScores, ModelSpec, run_model
from pipeline.evaluate.systems.runs import (
    Run,
    RunError,
    RunWarning,
    read_run,
    restrict_to_eval_set,
    scores_run,
)

MISSING_SHOWN = 5  # missing survey ids named in a warning or error
# a system's kind in the results: what it is and where it came from
KIND_BASELINE, KIND_UPPER_BOUND, KIND_LEARNED = "baseline", "upper bound", "learned baseline"
KIND_RUN, KIND_SCORES, KIND_MODEL_FILE = "run", "scores", "model file"
KIND_WHOLE_SURVEY = "whole-survey baseline"  # another task's baseline (evaluate.aspects)

RunSpec = str | Path | tuple[str | Path, str | None]


@dataclass(frozen=True)
class Submitted:
    """A submitted system: its validated scores and what it is."""

    run: Run
    kind: str
    facts: dict[str, Any] = field(default_factory=dict)
    vectors: np.ndarray | None = None  # an encoder's candidate embeddings, aligned with run

    @property
    def name(self) -> str:
        return self.run.name


def with_scores(eval_set: pl.DataFrame, scores: pl.Series) -> pl.DataFrame:
    return eval_set.with_columns(scores.alias(SCORE))


def aligned(eval_set: pl.DataFrame, scores: pl.DataFrame) -> pl.DataFrame:
    """The eval rows with a system's score (null where it has none)."""
    return eval_set.join(
        scores.select(SURVEY_ID, CANDIDATE_ID, SCORE),
        on=[SURVEY_ID, CANDIDATE_ID],
        how="left",
        maintain_order="left",
    )


def with_chv(frame: pl.DataFrame, chv: pl.DataFrame | None) -> pl.DataFrame:
    """A system's per-survey frame with ``chv_ratio`` on its ALL rows (null without embeddings)."""
    if chv is None:
        return frame.with_columns(pl.lit(None, dtype=pl.Float64).alias(CHV_RATIO))
    keyed = chv.with_columns(pl.lit(SUBSET_ALL).alias(SUBSET))
    return frame.join(keyed, on=[SUBSET, SURVEY_ID], how="left", maintain_order="left")


def system_chv(eval_set: pl.DataFrame, system: Submitted) -> pl.DataFrame | None:
    """``chv_ratio`` per survey of a system with embeddings (row i of its vectors embeds row
    i of its scores), else None."""
    if system.vectors is None:
        return None
    index = system.run.scores.select(SURVEY_ID, CANDIDATE_ID).with_row_index("_vector")
    judged = aligned(eval_set, system.run.scores).join(
        index, on=[SURVEY_ID, CANDIDATE_ID], how="left", maintain_order="left"
    )
    rows = judged["_vector"]
    if rows.null_count():  # a model scores every candidate of the view
        raise ModelError(f"{system.name}: no embedding for {rows.null_count()} eval candidate(s)")
    return chv_ratios(judged, system.vectors[rows.to_numpy()])


def check_complete(run: Run, missing: list[str], n_surveys: int, require_complete: bool) -> None:
    """Warn about (or, with ``require_complete``, refuse) eval surveys a run has no row for."""
    if not missing:
        return
    shown = ", ".join(repr(s) for s in missing[:MISSING_SHOWN])
    more = ", ..." if len(missing) > MISSING_SHOWN else ""
    what = (
        f"{run.where}: no row for {len(missing)} of {n_surveys} eval survey(s) "
        f"(first: {shown}{more})"
    )
    if require_complete:
        raise RunError(f"{what}; {option('--require-complete')} needs every eval survey scored")
    warnings.warn(
        f"{what}; every judged candidate of those surveys is ranked as missing "
        f"({option('--require-complete')} makes this an error)",
        RunWarning,
        stacklevel=3,
    )


def scored_judged(run: Run, pairs: pl.DataFrame) -> int:
    """Judged candidates a run scores (in retrieval mode a run also scores unjudged documents)."""
    return run.scores.join(pairs, on=[SURVEY_ID, CANDIDATE_ID], how="semi").height


def check_names(submitted: list[Submitted], reserved: Sequence[str]) -> None:
    """Refuse a system name given twice or taken by a baseline (the message names ``--name``)."""
    seen: dict[str, str] = {}
    for system in submitted:
        where = system.run.where
        if system.name in reserved:
            raise RunError(
                f"{where}: system name {system.name!r} is a baseline's; give the system "
                "another with --name after it"
            )
        if system.name in seen:
            raise RunError(
                f"{where}: system name {system.name!r} is already used by {seen[system.name]}; "
                "give one of them another with --name after it"
            )
        seen[system.name] = where


def run_spec(spec: RunSpec) -> tuple[Path, str | None]:
    """A run or model file spec as its path and the name given (None: the file's own)."""
    if isinstance(spec, tuple):
        path, name = spec
        return Path(path), name
    return Path(spec), None


def _model_file_run(
    eval_set: pl.DataFrame, eval_path: Path, spec: RunSpec, external: Any = None
) -> Submitted:
    """A ``--model-file``: one ``train`` wrote (its JSON beside it), or a foreign LightGBM
    model whose features come from ``external`` (:mod:`pipeline.evaluate.external`)."""
    from pipeline.evaluate import external as X

    path, name = run_spec(spec)
    kind = X.KIND_FOREIGN if X.is_foreign(path) else KIND_MODEL_FILE
    if kind == X.KIND_FOREIGN:
        stem, scores, facts = X.foreign_model_scores(
            eval_set, eval_path, eval_view(eval_path), path, external or X.NO_OPTIONS
        )
    else:
        stem, scores, facts = model_file_scores(eval_set, eval_path, path)
    frame = eval_set.select(SURVEY_ID, CANDIDATE_ID).with_columns(scores.alias(SCORE))
    run = Run(
        name=name or stem, path=path, format="model", scores=frame.drop_nulls(SCORE),
        n_rows=frame.height,
    )  # fmt: skip
    return Submitted(run, kind, facts)


def _foreign_retrieval(
    eval_set: pl.DataFrame,
    eval_path: Path,
    spec: RunSpec,
    first_stage: tuple[pl.DataFrame, str],
    external: Any,
) -> Submitted:
    """A foreign ``--model-file`` in retrieval mode: its scores of the first stage's top K."""
    from pipeline.evaluate import external as X

    path, name = run_spec(spec)
    pairs, first = first_stage
    stem, scores, facts = X.foreign_model_retrieval(
        eval_set, eval_path, pairs, first, path, external or X.NO_OPTIONS
    )
    run = Run(
        name=name or stem, path=path, format="model", scores=scores, n_rows=scores.height,
    )  # fmt: skip
    return Submitted(run, X.KIND_FOREIGN, facts)


def _model_run(
    eval_set: pl.DataFrame, spec: ModelSpec, cache_dir: Path | None, batch_size: int
) -> tuple[Submitted, ModelScores]:
    result = run_model(spec, answer_free(eval_set), cache_dir, batch_size)
    run = Run(
        name=spec.system_name, path=None, format=spec.kind, scores=result.scores,
        n_rows=result.scores.height,
    )  # fmt: skip
    return Submitted(run, spec.kind, result.facts, result.vectors), result


def _full_text_models(
    eval_set: pl.DataFrame,
    eval_path: Path,
    mode: str,
    models: Sequence[ModelSpec],
    passages: PassageOptions,
    cache_dir: Path | None,
    batch_size: int,
    retrieval: RetrievalOptions,
    restrict: Any,
) -> list[Submitted]:
    """The encoders given with ``--passages``, each scoring documents from their sections
    (:mod:`pipeline.evaluate.systems.full_text`)."""
    if not models:
        return []
    sections = full_text.sections_file(eval_path)
    corpus = load_corpus(eval_path) if mode == RETRIEVAL else None
    if mode == RETRIEVAL and corpus is None:
        raise UsageError(
            "--mode retrieval with --passages needs the split's corpus (corpus/test.parquet of "
            "a release folder) beside the eval file"
        )
    if corpus is None:
        texts = full_text.load_passages(eval_path, passages)
        runs = [
            full_text.encoder_rerank(spec, eval_set, texts, passages, cache_dir, batch_size)
            for spec in models
        ]
    else:  # every passage of the corpus, streamed from the sections file: bounded memory
        runs = [
            full_text.encoder_retrieval(
                spec, eval_set, corpus, sections, passages, cache_dir, batch_size, retrieval.top_k
            )
            for spec in models
        ]
    return [
        Submitted(restrict(run), spec.kind, facts)
        for spec, (run, facts) in zip(models, runs, strict=True)
    ]


def load_submitted(
    eval_set: pl.DataFrame,
    eval_path: Path,
    mode: str,
    runs: Sequence[RunSpec],
    scores: Mapping[str, Any],
    model_files: Sequence[RunSpec],
    models: Sequence[ModelSpec],
    lenient: bool,
    cache_dir: Path | None,
    batch_size: int,
    retrieval: RetrievalOptions,
    external: Any = None,
    passages: PassageOptions | None = None,
    passage_runs: Sequence[RunSpec] = (),
    passage_rule: PassageOptions | None = None,
) -> tuple[list[Submitted], list[ModelScores]]:
    pairs = eval_set.select(SURVEY_ID, CANDIDATE_ID)
    corpus = corpus_ids(eval_path)
    if mode == RETRIEVAL:

        def restrict(run: Run) -> Run:
            return restrict_to_corpus(run, pairs, corpus, lenient=lenient)
    else:

        def restrict(run: Run) -> Run:
            return restrict_to_eval_set(run, pairs, lenient=lenient)

    submitted = [
        Submitted(restrict(read_run(path, name)), KIND_RUN)
        for path, name in (run_spec(spec) for spec in runs)
    ]
    submitted += [
        Submitted(restrict(scores_run(s, name)), KIND_SCORES) for name, s in scores.items()
    ]
    rule = passage_rule or PassageOptions()
    for path, name in (run_spec(spec) for spec in passage_runs):
        run, facts = full_text.passage_run(path, name, eval_set, corpus, eval_path, rule, lenient)
        submitted.append(Submitted(restrict(run), full_text.KIND_PASSAGE_RUN, facts))
    if passages is not None:  # the encoders read the documents' sections
        submitted += _full_text_models(eval_set, eval_path, mode, models, passages, cache_dir,
                                       batch_size, retrieval, restrict)  # fmt: skip
        models = []
    model_runs: list[ModelScores] = []
    if mode == RETRIEVAL:
        corpus_files = load_corpus(eval_path)
        found = retrieve(list(models), eval_set, corpus_files, cache_dir, batch_size, retrieval)
        submitted += [Submitted(restrict(r.run), r.run.format, r.facts) for r in found]
        if model_files:  # foreign models (EvaluationRequest refuses train's in this mode)
            encoders = [r for r in found if r.run.format in FIRST_STAGE_ENCODERS]
            first = first_stage_run(retrieval, eval_set, corpus_files, encoders)
            submitted += [
                Submitted(restrict(s.run), s.kind, s.facts)
                for s in (_foreign_retrieval(eval_set, eval_path, spec, first, external)
                          for spec in model_files)
            ]  # fmt: skip
        return submitted, model_runs
    submitted += [_model_file_run(eval_set, eval_path, spec, external) for spec in model_files]
    for spec in models:
        system, result = _model_run(eval_set, spec, cache_dir, batch_size)
        submitted.append(system)
        model_runs.append(result)
    return submitted, model_runs
