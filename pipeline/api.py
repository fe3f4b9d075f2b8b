"""The pipeline as Python calls: what ``python -m pipeline`` runs, typed.

Every command of the CLI (:mod:`pipeline.cli`) is argument parsing, one call here and
printing; the Hugging Face Jobs entry point (:mod:`pipeline.jobs`), the demo and the
tests call these functions too, never the CLI with argv strings::

    from pipeline import api

    api.run(["corpus/"], "work", config="my.toml", workers=4)
    api.status("work").rows()
    api.evaluate("work/release").typed.main_metrics
    api.evaluate_scores(my_scores, "work/release").mean("scores", "nDCG@10")  # nothing written

A ``config`` argument is a :class:`~pipeline.core.config.Config`, the path of a TOML file,
or None (the defaults). Failures raise the exceptions :mod:`pipeline.core.errors` turns
into one line on the CLI (``InputError``, ``ConfigError``, ``RuntimeError``, ...).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.core.config import Config, load_config, validate
from pipeline.core.errors import UsageError
from pipeline.corpus.sources import InputError
from pipeline.engine import locks
from pipeline.engine import status as work_status
from pipeline.engine import workdir as W
from pipeline.engine.failures import DEFAULT_MAX_FAILED, check_map_failures, max_failed_share
from pipeline.engine.map_stage import run_map_stage
from pipeline.engine.reduce import run_reduce
from pipeline.stages import GRAPH

log = logging.getLogger("pipeline")

ConfigLike = Config | str | os.PathLike[str] | None
PathLike = str | os.PathLike[str]


def config_of(config: ConfigLike) -> Config:
    """A :class:`Config` from a Config, a TOML path or None (the defaults).

    Raises:
        ConfigError: the file is missing, not TOML, or holds a bad value.
    """
    if isinstance(config, Config):
        validate(config)  # a Config made in code meets the rules a TOML file does
        return config
    return load_config(config)


def default_workers() -> int:
    """The CPU count: the default number of worker processes."""
    return os.cpu_count() or 1


def _specs(inputs: PathLike | Sequence[PathLike] | None) -> list[str]:
    if inputs is None:
        return []
    if isinstance(inputs, (str, os.PathLike)):
        return [os.fspath(inputs)]
    return [os.fspath(x) for x in inputs]


def _workers(workers: int | None) -> int:
    if workers is None:
        return default_workers()
    if workers < 1:
        raise InputError(f"workers: need a whole number >= 1; got {workers!r}")
    return workers


# --------------------------------------------------------------------- results
@dataclass(frozen=True)
class ExtractResult:
    """What :func:`extract` did.

    Attributes:
        out: the work directory.
        files: finished input files in it (every shard's).
        papers: papers written, summed over those files.
        rejects: records rejected, summed over those files.
        duplicate_papers: papers found in more than one file (one copy is kept).
        failed_files: input files that could not be read to their end.
        totals: every total of ``extract/_summary.json``.
    """

    out: Path
    files: int
    papers: int
    rejects: int
    duplicate_papers: int
    failed_files: list[dict[str, Any]]
    totals: dict[str, Any] = field(repr=False)

    @property
    def outputs(self) -> Path:
        """The extract stage's folder."""
        return W.stage_dir(self.out, "extract")


@dataclass(frozen=True)
class StageResult:
    """What :func:`reduce` did for one stage.

    Attributes:
        stage: its name.
        outputs: its folder in the work directory.
        manifest: the ``_SUCCESS.json`` it wrote; None when it was done already (skipped).
    """

    stage: str
    outputs: Path
    manifest: dict[str, Any] | None = field(default=None, repr=False)

    @property
    def skipped(self) -> bool:
        """Whether the stage was already done with this config and upstream (not rerun)."""
        return self.manifest is None


@dataclass(frozen=True)
class EvalResult:
    """What :func:`evaluate` (or :func:`evaluate_scores`) computed, and where it wrote it.

    Attributes:
        out: the folder holding the results (``out`` of :func:`evaluate`); None when
            nothing was written (:func:`evaluate_scores`).
        results: the content of ``eval_results.json``.
        per_survey: the content of ``per_survey.parquet`` (a Polars DataFrame).
        report: the text of ``report.md``.
        model_runs: each model's scores and timing (``texts_encoded``, ``seconds``).
    """

    out: Path | None
    results: dict[str, Any] = field(repr=False)
    per_survey: Any = field(default=None, repr=False)
    report: str = field(default="", repr=False)
    model_runs: tuple[Any, ...] = field(default=(), repr=False)

    def _written(self, name: str) -> Path:
        if self.out is None:
            raise UsageError("nothing was written: evaluate_scores keeps its results in memory")
        return self.out / name

    @property
    def results_file(self) -> Path:
        """``eval_results.json``."""
        from pipeline.evaluate.evaluation import RESULTS_FILE

        return self._written(RESULTS_FILE)

    @property
    def per_survey_file(self) -> Path:
        """``per_survey.parquet``."""
        from pipeline.evaluate.evaluation import PER_SURVEY_FILE

        return self._written(PER_SURVEY_FILE)

    @property
    def report_file(self) -> Path:
        """``report.md``."""
        from pipeline.evaluate.evaluation import REPORT_FILE

        return self._written(REPORT_FILE)

    def mean(self, system: str, metric: str = "nDCG@10", subset: str = "ALL") -> float | None:
        """A system's mean of a metric (canonical name or a previous one, e.g. ``ndcg@10``).

        Raises:
            KeyError: no such system in the results.
            UnknownMetricError: no such metric.
        """
        from pipeline.evaluate.scoring.measures import canonical_name

        typed = self.typed
        stats = typed.subsets[subset][system]
        name = metric if metric in stats else canonical_name(metric, typed.ks)
        return stats[name].mean

    @property
    def typed(self) -> Any:
        """The results read by attribute (:class:`pipeline.evaluate.results.EvaluationResults`)."""
        from pipeline.evaluate.results import as_results

        return as_results(self.results)


@dataclass(frozen=True)
class RunResult:
    """What :func:`run` did.

    Attributes:
        out: the work directory.
        extract: the extract step; None when ``run`` had no input and used the
            extract outputs already in ``out``.
        stages: every reduce stage, in run order.
        evaluation: the baselines' evaluation of the release; None when the release has
            no eval surveys (or evaluation was not asked for).
    """

    out: Path
    extract: ExtractResult | None
    stages: tuple[StageResult, ...]
    evaluation: EvalResult | None

    @property
    def release(self) -> Path:
        """The release folder."""
        return W.release_dir(self.out)


@dataclass(frozen=True)
class StatusReport:
    """Per stage, in pipeline order, whether it is done for a config, with its counts.

    Attributes:
        out: the work directory.
        stages: ``{stage: entry}``; a map stage's entry has ``files_done``, ``current``,
            ``files_failed`` and the totals of its counts; a reduce stage's has ``done``
            and (when it ever finished) ``counts``.
        has_work: whether ``out`` holds any stage's outputs.
    """

    out: Path
    stages: dict[str, dict[str, Any]]
    has_work: bool

    def state(self, name: str) -> str:
        """``done``, ``partial`` (map), ``outdated`` (reduce) or ``not run``."""
        entry = self.stages[name]
        if "files_done" in entry:
            if entry["current"]:
                return "done"
            return "partial" if entry["files_done"] or entry["files_failed"] else "not run"
        if entry["done"]:
            return "done"
        return "outdated" if entry.get("counts") is not None else "not run"

    def rows(self) -> list[tuple[str, str, str]]:
        """``(stage, state, counts)`` per stage, in pipeline order, for a table."""
        rows = []
        for name, entry in self.stages.items():
            if "files_done" in entry:
                detail = f"{entry['files_done']} file(s) done, {len(entry['files_failed'])} failed"
                if "papers_written" in entry:
                    detail += f", {entry['papers_written']:,} papers"
            else:
                counts = entry.get("counts") or {}
                detail = ", ".join(f"{k} {v:,}" for k, v in counts.items() if isinstance(v, int))
            rows.append((name, self.state(name), detail))
        return rows


@dataclass(frozen=True)
class TrainResult:
    """What :func:`train` wrote.

    Attributes:
        model: the LightGBM text model (``<out>/<name>.txt``).
        metadata: its ``.json`` beside it (feature set, version, training facts).
    """

    model: Path
    metadata: dict[str, Any] = field(repr=False)


@dataclass(frozen=True)
class PushResult:
    """What :func:`push` did (or, with ``dry_run``, would do).

    Attributes:
        repo_id: the dataset repo.
        plan: the repo, the one commit with its files and the tag, as data.
        done: ``{"repo_id", "commit", "commit_url", "tag", "files"}``; None for a dry run.
    """

    repo_id: str
    plan: dict[str, Any] = field(repr=False)
    done: dict[str, Any] | None = None


# --------------------------------------------------------------------- stages
def extract(
    inputs: PathLike | Sequence[PathLike],
    out: PathLike,
    *,
    config: ConfigLike = None,
    workers: int | None = None,
    shard_of: tuple[int, int] = (0, 1),
    force: bool = False,
    verify: bool = False,
    prune: bool = False,
    max_failed_files: str = DEFAULT_MAX_FAILED,
) -> ExtractResult:
    """Run the extract stage over the input files (or shard ``shard_of = (I, N)`` of them).

    Args:
        inputs: files, directories, globs or ``hf://datasets/...`` specs.
        out: the work directory.
        config: a Config, a TOML path or None.
        workers: worker processes (default: the CPU count).
        shard_of: ``(I, N)``: take the plain files ``sorted(files)[I::N]`` and each archive's
            units ``u`` with ``u % N == I``; every shard records the whole input list.
        force: redo files whose markers match.
        verify: also compare finished files with the sha256 their markers record.
        prune: delete finished outputs (and other shards' records) of another input list
            instead of refusing.
        max_failed_files: input files that may fail to read: a count or a share (``"1%"``).

    Raises:
        InputError: no input, an input list that differs from the one in ``out``, or
            finished outputs of files that are not inputs (without ``prune``).
        RuntimeError: more files failed than ``max_failed_files`` allows.
    """
    cfg, specs, workers, out = config_of(config), _specs(inputs), _workers(workers), Path(out)
    max_failed_share(max_failed_files)  # a bad value is refused before any file is read
    if not specs:
        raise InputError("extract needs --input")
    stage = GRAPH["extract"]
    with locks.run_lock(out, cfg):  # a run with another config is refused (WorkDirBusyError)
        every = run_map_stage(
            stage,
            specs,
            out,
            cfg,
            workers,
            exclude=_not_input(out, specs),
            force=force,
            verify=verify,
            shard_of=shard_of,
            prune=prune,
        )
        totals = work_status.map_summary(out)
        result = ExtractResult(
            out=out,
            files=totals["files"],
            papers=totals.get("papers_written", 0),
            rejects=totals.get("rejects_total", 0),
            duplicate_papers=totals.get("duplicate_papers_across_files", 0),
            failed_files=totals["failed_files"],
            totals=totals,
        )
        log.info(
            "extract: %s files, %s papers, %s rejects, %s duplicate papers across files, "
            "%s failed files; outputs in %s",
            result.files,
            result.papers,
            result.rejects,
            result.duplicate_papers,
            len(result.failed_files),
            result.outputs,
        )
        check_map_failures(stage, out, cfg, every, max_failed_files)
    return result


def _not_input(out: Path, specs: Sequence[str]) -> list[Path]:
    """Folders input discovery must not read: the work directory (its markers and
    manifests are ``.json``), or only its stage folders when an input lies inside it (the
    demo's corpus is ``<out>/corpus``)."""
    root = out.resolve()
    inside = any(
        not s.startswith("hf://") and Path(s).resolve().is_relative_to(root) for s in specs
    )
    if not inside:
        return [out]
    return [W.stage_dir(out, name) for name in GRAPH] + [out / "eval", out / "model"]


def reduce(
    stage: str,
    out: PathLike,
    *,
    config: ConfigLike = None,
    force: bool = False,
    verify: bool = False,
    max_failed_files: str = DEFAULT_MAX_FAILED,
) -> StageResult:
    """Run one reduce stage (``works``, ``surveys``, ... ``release``) unless it is done.

    Args:
        stage: the stage's name.
        out: the work directory.
        config: a Config, a TOML path or None.
        force: rerun it even when its key matches.
        verify: also compare its finished files with the sha256 ``_SUCCESS.json`` records.
        max_failed_files: input files of extract that may have failed.

    Raises:
        InputError: ``stage`` is not a reduce stage.
        RuntimeError: an upstream stage is not done (names it).
    """
    if stage not in GRAPH or GRAPH[stage].kind != "reduce":
        names = [s.name for s in GRAPH.values() if s.kind == "reduce"]
        raise InputError(f"{stage!r} is not a reduce stage; available: {', '.join(names)}")
    cfg, out = config_of(config), Path(out)
    max_failed_share(max_failed_files)
    # no lock where there is no work directory: the stage refuses (upstream not done)
    with locks.run_lock(out, cfg) if out.is_dir() else contextlib.nullcontext():
        manifest = run_reduce(GRAPH[stage], out, cfg, force, max_failed_files, verify, stages=GRAPH)
    result = StageResult(stage, W.stage_dir(out, stage), manifest)
    log.info("%s: outputs in %s", stage, result.outputs)
    return result


def run(
    inputs: PathLike | Sequence[PathLike] | None,
    out: PathLike,
    *,
    config: ConfigLike = None,
    workers: int | None = None,
    force: bool = False,
    verify: bool = False,
    prune: bool = False,
    max_failed_files: str = DEFAULT_MAX_FAILED,
    evaluate_release: bool = True,
) -> RunResult:
    """Every stage in order, then the baselines' evaluation of the release.

    Extract is skipped when ``inputs`` is empty and ``out`` holds finished extract outputs
    (shards run elsewhere). Arguments as for :func:`extract` and :func:`reduce`;
    ``evaluate_release``: evaluate the baselines on the release into ``<out>/eval``.

    Raises:
        InputError: no input and no finished extract outputs in ``out``.
    """
    cfg, specs, out = config_of(config), _specs(inputs), Path(out)
    max_failed_share(max_failed_files)  # before any stage runs
    # held across extract (which takes it too) and the reduce stages
    with locks.run_lock(out, cfg) if specs or out.is_dir() else contextlib.nullcontext():
        extracted = None
        if specs:
            # checksums of the extract outputs now: the reduce stages would check them before
            # reading them anyway, and here a damaged file can still be redone from its input
            extracted = extract(
                specs,
                out,
                config=cfg,
                workers=workers,
                force=force,
                verify=True,
                prune=prune,
                max_failed_files=max_failed_files,
            )
        elif W.stage_key(out, "extract", cfg, GRAPH) is None:
            raise InputError("run needs --input (no finished extract outputs in --out)")
        W.clean_stale_temps(out)
        done = []
        for stage in GRAPH.values():
            if stage.kind == "reduce":
                manifest = run_reduce(
                    stage, out, cfg, force, max_failed_files, verify, stages=GRAPH
                )
                done.append(StageResult(stage.name, W.stage_dir(out, stage.name), manifest))
        evaluation = None
        if evaluate_release:
            # it reads the release and renders its card again: no other run on this --out
            # swaps the release in or renders the card meanwhile
            with locks.stage_lock(out, W.RELEASE):
                evaluation = _evaluate_release(out, cfg)
    log.info("run: every stage's outputs in %s; the release in %s", out, W.release_dir(out))
    return RunResult(out, extracted, tuple(done), evaluation)


def _evaluate_release(out: Path, cfg: Config) -> EvalResult | None:
    """Evaluate the baselines on a finished release (the last step of ``run``), then render
    the release's card again with their results (:func:`pipeline.hub.card.add_results`)."""
    import polars as pl

    from pipeline.evaluate.evaluation import EVAL_DIR
    from pipeline.hub.card import add_results

    if not W.reduce_finished(out, W.RELEASE):
        return None
    eval_file = W.eval_file(out)
    if not eval_file.exists() or pl.scan_parquet(eval_file).select(pl.len()).collect().item() == 0:
        log.warning(
            "evaluate: the release has no eval surveys (none dated on/after %s); skipped",
            cfg.split.eval_from,
        )
        return None
    from pipeline.evaluate.cache import CACHE_DIR
    from pipeline.evaluate.evaluation import EvaluationRequest, run_evaluation

    evaluation = run_evaluation(
        EvaluationRequest(
            eval_file,
            config=cfg.evaluate,
            train_config=cfg.train,
            cache_dir=out / EVAL_DIR / CACHE_DIR,
            out_dir=out / EVAL_DIR,
        )
    )
    log.info("evaluate: results in %s", out / EVAL_DIR)
    result = _eval_result(evaluation)
    # the card shows the baselines' results: rendered again now that they exist
    if add_results(out, result.results_file):
        log.info("release: the card in %s shows the baselines' results", W.release_dir(out))
    return result


def status(out: PathLike, *, config: ConfigLike = None) -> StatusReport:
    """Which stages and input files are done for ``config``, with their counts.

    Raises:
        InputError: ``out`` is not a directory.
    """
    cfg, out = config_of(config), Path(out)
    if not out.is_dir():
        raise InputError(f"--out {out}: no such work directory")
    return StatusReport(out, work_status.status(out, cfg, GRAPH), work_status.has_work(out, GRAPH))


# --------------------------------------------------------------------- evaluation, training
NamedSpec = PathLike | tuple[PathLike, str | None]


def _named(specs: Sequence[NamedSpec]) -> list[tuple[str, str | None]]:
    """``(target, name or None)`` of each spec (a bare path or spec has no name)."""
    out: list[tuple[str, str | None]] = []
    for spec in specs:
        target, name = spec if isinstance(spec, tuple) else (spec, None)
        out.append((os.fspath(target), name))
    return out


def _eval_result(evaluation: Any) -> EvalResult:
    return EvalResult(
        evaluation.out,
        evaluation.results,
        evaluation.per_survey,
        evaluation.report,
        evaluation.model_runs,
    )


def _model_specs(
    encoders: Sequence[NamedSpec],
    scorers: Sequence[NamedSpec],
    sentence_transformers: Sequence[NamedSpec],
) -> list[Any]:
    """The models to evaluate, each a ``ModelSpec`` of its kind."""
    from pipeline.evaluate.systems.models import ENCODER, SCORER, SENTENCE_TRANSFORMER, ModelSpec

    kinds = ((ENCODER, encoders), (SCORER, scorers), (SENTENCE_TRANSFORMER, sentence_transformers))
    return [ModelSpec(kind, spec, name) for kind, specs in kinds for spec, name in _named(specs)]


def _aspects_request(request: Any, eval_file: PathLike, out_given: bool) -> Any:
    """``request`` turned to the aspects task: the release's aspects as the eval set, their
    kinds and levels as subsets, and (re-ranking) the whole-survey baselines per aspect;
    written into ``<eval>/aspects/`` unless ``out`` was given."""
    from pipeline.evaluate import aspects as aspect_task

    spec = aspect_task.aspects_spec(eval_file)
    eval_path = aspect_task.resolve_eval_file(spec)
    whole, facts = (
        aspect_task.whole_survey_scores(
            eval_path,
            aspect_task.survey_spec(spec),
            request.train_config,
            request.learned,
            request.cache_dir,
            request.batch_size,
        )  # fmt: skip
        if request.mode == "rerank"
        else ({}, {})
    )
    return dataclasses.replace(
        request,
        eval_file=os.fspath(spec) if not isinstance(spec, Path) else spec,
        out_dir=request.out_dir if out_given else request.out_dir / aspect_task.TASK_ASPECTS,
        task=aspect_task.TASK_ASPECTS,
        query_groups=aspect_task.query_groups(eval_path),
        whole_survey=whole,
        whole_survey_facts=facts,
    )


def evaluate(
    eval_file: PathLike,
    *,
    out: PathLike | None = None,
    runs: Sequence[NamedSpec] = (),
    model_files: Sequence[NamedSpec] = (),
    encoders: Sequence[NamedSpec] = (),
    scorers: Sequence[NamedSpec] = (),
    sentence_transformers: Sequence[NamedSpec] = (),
    config: ConfigLike = None,
    lenient: bool = False,
    require_complete: bool = False,
    mode: str = "rerank",
    baselines_only: bool = False,
    learned: bool = True,
    cache: bool = True,
    cache_dir: PathLike | None = None,
    batch_size: int = 64,
    task: str = "lists",
    top_k: int = 1000,
    first_stage: str = "bm25",
    qdrant: str | None = None,
    collection: str | None = None,
    id_field: str = "_id",
    query_vectors: PathLike | None = None,
    index: str = "exact",
    external: Any = None,
    qdrant_api_key: str | None = None,
    passages: bool = False,
    passage_runs: Sequence[NamedSpec] = (),
    passage_aggregation: str = "max",
    passage_chars: int = 2048,
) -> EvalResult:
    """Evaluate the baselines and the given runs and models on an eval set; write the results.

    Every system is a path or spec, or ``(path or spec, name)`` to name it (the CLI's
    ``--name``).

    Args:
        eval_file: eval Parquet, a release folder, or a Hub dataset (``owner/name``).
        out: the directory the results are written to (default: ``eval/`` next to the eval
            file, see :func:`default_eval_out`).
        runs: run files (TREC, CSV, TSV or Parquet); none: the baselines only.
        model_files: models written by :func:`train`, each a system named by its stem.
        encoders: ``PKG.MODULE:CALLABLE`` texts -> vectors (cosine of survey and candidate).
        scorers: ``PKG.MODULE:CALLABLE`` (query, candidate texts) -> scores.
        sentence_transformers: local sentence-transformers model folders (an encoder each).
        config: its ``[evaluate]`` and ``[train]`` tables are used.
        lenient: drop run rows whose ids are not in the eval set instead of failing.
        require_complete: fail when a run has no row for some eval survey.
        mode: ``rerank`` or ``retrieval`` (see :mod:`pipeline.evaluate.retrieval.mode`).
        baselines_only: evaluate the baselines only; no system may be given.
        learned: also train and evaluate the learned baselines.
        cache: keep the baselines' values and the encoders' embeddings and vectors in the
            evaluation cache and reuse them.
        cache_dir: the evaluation cache's folder, for runs that share it (default:
            ``<out>/cache``, or :func:`default_cache_dir` without ``out``): never a folder
            the evaluation was not told to write, so a read-only or shared release works.
        batch_size: texts per encoder call, candidates per scorer call.
        task: ``lists`` (whole surveys, the default) or ``aspects`` (the release's
            section-level reading lists, :mod:`pipeline.evaluate.aspects`: with a per-kind
            breakdown and the whole-survey baselines scored per aspect; results in
            ``eval/aspects/`` by default).
        top_k: in retrieval mode, the documents a model keeps per survey
            (:mod:`pipeline.evaluate.retrieval.model_runs`).
        first_stage: in retrieval mode, what a scorer re-ranks: ``bm25`` (over the whole
            corpus), ``encoder`` (the first encoder given) or a run file.
        qdrant: in retrieval mode, a Qdrant server URL (API key from ``QDRANT_API_KEY``) or
            a local-mode folder whose ``collection`` holds the corpus's vectors, each point
            with its document id in payload field ``id_field``
            (:mod:`pipeline.evaluate.retrieval.qdrant_index`); the surveys are encoded by the first encoder
            given, or read from ``query_vectors`` (Parquet ``_id``, ``vector``).
        index: in retrieval mode, how an encoder searches the corpus's vectors: ``exact``
            or ``faiss`` (HNSW, with its recall against exact in the results:
            :mod:`pipeline.evaluate.retrieval.faiss_index`).
        external: where a foreign model file's features come from (a ``model_files``
            entry without ``train``'s JSON: :class:`pipeline.evaluate.external.ExternalOptions`);
            in re-ranking mode with a foreign model file, ``qdrant`` and ``collection`` give
            its vector feature (:class:`pipeline.evaluate.evaluation.EvaluationRequest`).
        qdrant_api_key: the Qdrant API key, instead of ``QDRANT_API_KEY`` (never printed).
        passages: the encoders score documents from their sections, the release's
            ``corpus_sections`` (:mod:`pipeline.evaluate.systems.full_text`); a document
            without full text on its title and abstract.
        passage_runs: runs over the passage corpus of :func:`export` (``passages/``), each
            aggregated to documents.
        passage_aggregation: a document's score from its passages': ``max`` or
            ``mean-top-K`` (``mean-top-3``).
        passage_chars: each passage is cut to this many characters before an encoder reads
            it (0: not cut).

    Raises:
        RunError, ModelError, EvalSetError, FileNotFoundError, ValueError: see
            :func:`pipeline.evaluate.evaluation.run_evaluation`.
    """
    from pipeline.evaluate import aspects as aspect_task
    from pipeline.evaluate.cache import CACHE_DIR
    from pipeline.evaluate.evaluation import EVAL_DIR, EvaluationRequest, run_evaluation
    from pipeline.evaluate.external import secrets_in_env
    from pipeline.evaluate.passages import PassageOptions
    from pipeline.evaluate.retrieval.model_runs import RetrievalOptions

    if task not in aspect_task.TASKS:
        raise ValueError(f"--task {task!r}: unknown; available: {', '.join(aspect_task.TASKS)}")
    cfg = config_of(config)
    target = Path(out) if out is not None else default_eval_out(eval_file) / EVAL_DIR
    cache_folder = None
    if cache:
        cache_folder = (
            Path(cache_dir)
            if cache_dir is not None
            else Path(out) / CACHE_DIR
            if out is not None
            else default_cache_dir(eval_file)
        )
    request = EvaluationRequest(  # checks the options before any work
        os.fspath(eval_file) if not isinstance(eval_file, Path) else eval_file,
        tuple(_named(runs)),
        model_files=_named(model_files),
        models=_model_specs(encoders, scorers, sentence_transformers),
        config=cfg.evaluate,
        train_config=cfg.train,
        lenient=lenient,
        require_complete=require_complete,
        mode=mode,
        baselines_only=baselines_only,
        learned=learned,
        cache_dir=cache_folder,
        batch_size=batch_size,
        out_dir=target,
        retrieval=RetrievalOptions(
            top_k=top_k,
            first_stage=os.fspath(first_stage),
            qdrant=None if qdrant is None else os.fspath(qdrant),
            collection=collection,
            id_field=id_field,
            query_vectors=None if query_vectors is None else Path(query_vectors),
            index=index,
        ),
        external=external,
        passages=passages,
        passage_rule=PassageOptions.parse(passage_aggregation, passage_chars),
        passage_runs=tuple(_named(passage_runs)),
    )
    if task == aspect_task.TASK_ASPECTS:
        request = _aspects_request(request, eval_file, out_given=out is not None)
    external = request.external  # with a foreign model, re-ranking mode's --qdrant is in it
    with secrets_in_env(getattr(external, "turso_token", None), qdrant_api_key):
        evaluation = run_evaluation(request)
    return _eval_result(evaluation)


def evaluate_scores(
    scores: Any,
    release: PathLike,
    *,
    name: str = "scores",
    baselines: bool = False,
    learned: bool = True,
    mode: str = "rerank",
    config: ConfigLike = None,
    lenient: bool = False,
    cache: bool = False,
    cache_dir: PathLike | None = None,
) -> EvalResult:
    """Evaluate scores held in memory; write nothing (``EvalResult.out`` is None).

    The numbers are the ones :func:`evaluate` gives for the same scores in a run file.

    Args:
        scores: ``{survey_id: {candidate_id: score}}``, or a Polars or pandas DataFrame with
            ``survey_id``, ``candidate_id``, ``score`` (or ``query-id``, ``corpus-id``,
            ``score``).
        release: the release folder (or eval Parquet, or Hub dataset).
        name: the system's name.
        baselines: also evaluate the baselines (trains the learned ones unless the cache
            has them and ``cache`` is set), with the paired tests against them.
        learned: with ``baselines``, the learned baselines too.
        mode: ``rerank`` or ``retrieval``.
        config: its ``[evaluate]`` and ``[train]`` tables are used.
        lenient: drop pairs outside the eval set instead of failing.
        cache: read and fill the evaluation cache (a disk write): ``cache_dir``, else the
            one :func:`evaluate` keeps without ``out`` (:func:`default_cache_dir`).
        cache_dir: the evaluation cache's folder (an ``evaluate``'s ``<out>/cache``).

    Raises:
        RunError, EvalSetError, FileNotFoundError, ValueError: see
            :func:`pipeline.evaluate.evaluation.run_evaluation`.
    """
    from pipeline.evaluate.evaluation import EvaluationRequest, run_evaluation

    cfg = config_of(config)
    request = EvaluationRequest(
        os.fspath(release) if not isinstance(release, Path) else release,
        scores={name: scores},
        config=cfg.evaluate,
        train_config=cfg.train,
        lenient=lenient,
        mode=mode,
        baselines=baselines,
        learned=learned,
        cache_dir=(Path(cache_dir) if cache_dir is not None else default_cache_dir(release))
        if cache
        else None,
    )
    return _eval_result(run_evaluation(request))


@dataclass(frozen=True)
class BibliographyResult:
    """What :func:`evaluate_bibliography` computed and where it wrote it.

    Attributes:
        results_file: the JSON report written.
        results: its content (counts, macro means, per survey, the run's metrics).
    """

    results_file: Path
    results: dict[str, Any] = field(repr=False)

    def mean(self, metric: str) -> float | None:
        """A metric's macro mean over the surveys where it is defined (``recall``,
        ``precision``, ``R(rel=4)``, ...: :data:`pipeline.evaluate.bibliography.score.METRICS`).

        Raises:
            UsageError: no such metric.
        """
        from pipeline.evaluate.bibliography.score import METRICS

        if metric not in self.results["metrics"]:
            raise UsageError(f"no bibliography metric {metric!r}; available: {', '.join(METRICS)}")
        return self.results["metrics"][metric]["mean"]


def evaluate_bibliography(
    release: PathLike,
    bibliography: PathLike,
    *,
    out: PathLike | None = None,
    run: bool = True,
    baselines: bool = True,
    aspects: bool = False,
    against: PathLike | None = None,
    config: ConfigLike = None,
) -> BibliographyResult:
    """Score generated surveys' bibliographies against the release's reading lists
    (:mod:`pipeline.evaluate.bibliography.score`: input format, resolution and metrics).

    Args:
        release: the release folder.
        bibliography: JSONL, one ``{"survey_id": ..., "references": [...]}`` per line, or
            a folder of ``<survey_id>.bib`` / ``<survey_id>.md`` reference lists.
        out: the directory ``bibliography_results.json`` is written to (default: ``eval/``
            next to the release, see :func:`default_eval_out`).
        run: also score the eval surveys' bibliographies, in their order, as a run.
        baselines: also score the baselines (the list itself, the list without a tier, the
            field's most-cited works and BM25's top N over the corpus, and those two over the
            survey's candidates only) on the eval surveys the bibliography gives.
        aspects: also score per-section coverage of the surveys' aspects, the references
            given per heading (``aspects`` in the report).
        against: a second bibliography (file or folder) of the same surveys: the report
            adds paired tests of the first against it (``paired``).
        config: its ``[evaluate]`` table's ``bootstrap_samples`` and ``seed`` are used.

    Raises:
        BibliographyError: a malformed line or a survey that is not in the release.
        FileNotFoundError: no such file, or a folder that is not a release.
    """
    from pipeline.core.files import write_json
    from pipeline.evaluate.bibliography.report import evaluate_file
    from pipeline.evaluate.bibliography.score import RESULTS_FILE
    from pipeline.evaluate.evaluation import EVAL_DIR

    settings = config_of(config).evaluate
    report = evaluate_file(
        Path(release),
        Path(bibliography),
        as_run=run,
        baselines=baselines,
        aspects=aspects,
        against=None if against is None else Path(against),
        bootstrap_samples=settings.bootstrap_samples,
        seed=settings.seed,
    )
    target = Path(out) if out is not None else default_eval_out(release) / EVAL_DIR
    results_file = target / RESULTS_FILE
    write_json(results_file, report)
    return BibliographyResult(results_file, report)


def default_cache_dir(spec: PathLike) -> Path:
    """The evaluation cache of an evaluation written without ``out``:
    ``<default_eval_out>/eval/cache``, beside the results it writes there (with ``out``,
    :func:`evaluate` keeps it in ``<out>/cache``)."""
    from pipeline.evaluate.cache import CACHE_DIR
    from pipeline.evaluate.evaluation import EVAL_DIR

    return default_eval_out(spec) / EVAL_DIR / CACHE_DIR


@dataclass(frozen=True)
class ExportResult:
    """What :func:`export` wrote.

    Attributes:
        out: the folder written.
        files: the files in it, relative to it, with their rows.
    """

    out: Path
    files: dict[str, int]


def export(
    release: PathLike,
    out: PathLike,
    *,
    format: str = "beir",
    split: str = "eval",
    passages: bool = False,
) -> ExportResult:
    """Write one split of a release in another tool's layout.

    Args:
        release: the release folder.
        out: the folder to write (created; files in it are replaced).
        format: ``beir``: BEIR's ``GenericDataLoader`` files (``corpus.jsonl``,
            ``queries.jsonl``, ``qrels/test.tsv``, and ``top_ranked.jsonl``).
        split: ``eval`` (written as BEIR's ``test``) or ``train``.
        passages: also the split's full-text view as a passage corpus in ``passages/``
            (``_id`` = document id ``#`` section order, ``mapping.tsv`` back to documents:
            :mod:`pipeline.evaluate.report.export`).

    Raises:
        ValueError: an unknown format or split; a release file that differs from its record.
        FileNotFoundError: the release has no such split.
    """
    from pipeline.evaluate.report.export import export_release

    files = export_release(Path(release), Path(out), format, split, passages)
    return ExportResult(Path(out), files)


def default_eval_out(spec: PathLike) -> Path:
    """The folder in whose ``eval/`` :func:`evaluate` writes without ``out``: next to the
    eval file.

    The folder holding the eval file; for a release folder (it has ``eval_metadata.json``)
    the work directory holding it, as ``run`` does, so results never mix with the files a
    ``push`` publishes; for a Hub dataset, the current directory.
    """
    from pipeline.core.release_files import METADATA_FILE
    from pipeline.evaluate.evalset import is_hub_spec

    if is_hub_spec(os.fspath(spec)):
        return Path(".")
    path = Path(spec)
    folder = path if path.is_dir() else path.parent
    return folder.parent if (folder / METADATA_FILE).is_file() else folder


def train(
    release: PathLike,
    out: PathLike,
    *,
    feature_set: str | None = None,
    config: ConfigLike = None,
    name: str | None = None,
) -> TrainResult:
    """Train a LightGBM lambdarank model on a release's train split.

    Args:
        release: the release folder.
        out: writes ``<out>/<name>.txt`` and ``<out>/<name>.json``.
        feature_set: features to train on (default: all; ``metadata``: no text feature).
        config: its ``[train]`` table is used.
        name: the model file stem (default ``lgbm``).

    Raises:
        FeatureError, FileNotFoundError: the release is not usable.
    """
    import json

    from pipeline.rank.features import FULL_SET
    from pipeline.rank.release import MODEL_NAME, train_release

    cfg = config_of(config)
    path = train_release(release, out, feature_set or FULL_SET, cfg.train, name or MODEL_NAME)
    meta = json.loads(path.with_suffix(".json").read_text(encoding="utf-8"))
    return TrainResult(path, meta)


# --------------------------------------------------------------------- publishing, demo
def push(
    release: PathLike,
    repo_id: str,
    *,
    tag: str | None = None,
    private: bool = False,
    endpoint: str | None = None,
    dry_run: bool = False,
    revision: str | None = None,
    commit_message: str | None = None,
    commit_description: str | None = None,
    allow_synthetic: bool = False,
) -> PushResult:
    """Upload a release folder to a Hub dataset repo in one commit, then tag it.

    Args:
        release: the release folder (checked against what the release stage recorded).
        repo_id: ``OWNER/NAME``, created if missing.
        tag: tag of the commit.
        private: create the repo private (ignored if it exists).
        endpoint: Hub endpoint (default: ``$HF_ENDPOINT``, else huggingface.co).
        dry_run: plan only; needs no token and changes nothing.
        revision: the branch to commit to (default ``main``; created when missing).
        commit_message: the commit's summary (default ``Release <version>``).
        commit_description: the commit's description.
        allow_synthetic: publish a release built from synthetic papers (or papers of unknown
            provenance) all the same.

    Raises:
        TokenError: no token (checked before any network call).
        RuntimeError: a release file differs from its record, or the release must not be
            published as it is (:func:`pipeline.hub.publish.publish_refusal`).
    """
    from pipeline.core.errors import require_token
    from pipeline.hub.publish import push_plan, push_release

    release = Path(release)
    options = {
        "revision": revision,
        "commit_message": commit_message,
        "commit_description": commit_description,
        "allow_synthetic": allow_synthetic,
    }
    if dry_run:
        return PushResult(repo_id, push_plan(release, repo_id, tag, private, **options))
    require_token("push")
    plan = push_plan(release, repo_id, tag, private, **options)
    return PushResult(
        repo_id, plan, push_release(release, repo_id, tag, private, endpoint, **options)
    )


def demo(
    out: PathLike,
    *,
    papers: int = 1500,
    fixtures: PathLike | None = None,
    workers: int | None = None,
    config: ConfigLike = None,
) -> RunResult:
    """Build the bundled demo corpus in ``<out>/corpus`` and :func:`run` every stage on it.

    Args:
        out: the work directory.
        papers: synthetic papers (all in the 2024 layout, as every demo record is).
        fixtures: folder holding the real samples (default: the package's ``demo_data``).
        workers: worker processes (default: the CPU count).
        config: a Config, a TOML path or None.
    """
    from pipeline.synth.demo_corpus import build_corpus

    out = Path(out)
    corpus = out / "corpus"
    snapshot = out / "openalex_snapshot"
    files = build_corpus(
        corpus, papers, Path(fixtures) if fixtures is not None else None, openalex_root=snapshot
    )
    log.info("demo: corpus of %d files in %s, OpenAlex works file in %s", len(files), corpus,
             snapshot)  # fmt: skip
    cfg = config_of(config)
    if not cfg.openalex_lookup.snapshot:  # the demo reads its works file, never the network
        lookup = dataclasses.replace(cfg.openalex_lookup, snapshot=str(snapshot))
        cfg = dataclasses.replace(cfg, openalex_lookup=lookup)
    return run([corpus], out, config=cfg, workers=workers)
