"""The evaluation stage: score baselines and submitted systems, summarise, write results.

Submitted systems are run files (:mod:`pipeline.evaluate.systems.runs`), scores held in memory
(:func:`pipeline.api.evaluate_scores`), models (``--encoder``, ``--scorer``,
``--sentence-transformer``: :mod:`pipeline.evaluate.systems.models`) and LightGBM model files
(``--model-file``). :func:`run_evaluation` computes everything and writes nothing unless
asked, then into the ``out_dir`` it is given; :func:`write_evaluation` writes them under
``<out_dir>/eval/`` (each written to a
temp file and renamed):

* ``eval_results.json``: means with 95% bootstrap intervals per system, metric and
  subset; paired tests of every system against every baseline (Holm-corrected per
  system and metric over the baselines) and between every two submitted systems
  (Holm-corrected per metric over the pairs); the tie rule, metric definitions with
  their previous names (aliases), and the config. Sorted keys and floats rounded to 12
  digits, so a rerun on the same inputs is byte-identical. Input files are named by
  file name and sha256 (plus the Hub spec as given, for a Hub eval set), never by a
  local path. Each run records ``missing_surveys``: eval surveys it has no row for (all
  their candidates rank as missing; a :class:`RunWarning`, or an error with
  ``require_complete``).
* ``per_survey.parquet``: one row per system x subset (ALL, IN, OUT) x survey with
  every metric (null = survey excluded); a survey without any candidate in the IN (or
  OUT) subset has no row there. Year subsets are the ALL rows of the surveys of that
  year (column ``survey_year``), so they are not repeated.
* ``report.md``: the Markdown summary (see :mod:`pipeline.evaluate.report.markdown`).

Baselines are computed once per release and kept in the evaluation cache
(:mod:`pipeline.evaluate.cache`), so evaluating another system costs that system only.

Subsets: ``ALL`` ranks all judged candidates of a survey; ``IN`` ranks only the
in-domain candidates (``in_domain`` true: corpus papers whose own categories include
the survey's primary category) and ``OUT`` all the others (``in_domain`` false or
null), each as if the survey had no other candidates; ``year=YYYY`` is ``ALL``
restricted to surveys first posted in that year. Means are macro-averages over the
surveys where a metric is defined.
"""

from __future__ import annotations

import dataclasses
import json
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from pipeline.core.config import EvaluateConfig, TrainConfig
from pipeline.core.errors import UsageError
from pipeline.core.files import atomic_path, file_identity
from pipeline.core.schema import LABEL_NAMES
from pipeline.evaluate.columns import (
    CANDIDATE_ID,
    IN_DOMAIN,
    LABEL,
    SUBSET,
    SURVEY_ID,
    SURVEY_YEAR,
    SYSTEM,
)
from pipeline.evaluate.evalset import is_hub_spec, load_eval_set, resolve_eval_file
from pipeline.evaluate.external import NO_OPTIONS, ExternalOptions, is_foreign, with_qdrant
from pipeline.evaluate.passages import PassageOptions
from pipeline.evaluate.report.figures import write_figures
from pipeline.evaluate.report.markdown import render_report
from pipeline.evaluate.results import clean
from pipeline.evaluate.retrieval.mode import (
    MODES,
    RERANK,
    RETRIEVAL,
    RETRIEVAL_KS,
    retrieval_frame,
)
from pipeline.evaluate.retrieval.model_runs import (
    RetrievalOptions,
)
from pipeline.evaluate.scoring import compare
from pipeline.evaluate.scoring.compute import RANK_ALL, RANK_SCORED
from pipeline.evaluate.scoring.coverage import CHV_DOC, CHV_RATIO
from pipeline.evaluate.scoring.judged import JUDGED_DOC, judged_means
from pipeline.evaluate.scoring.measures import (
    main_metrics,
    metric_aliases,
    metric_registry,
    ndcg_name,
)
from pipeline.evaluate.scoring.subsets import (
    RANKING_SUBSETS,
    SUBSET_ALL,
    per_survey_subsets,
    year_subset,
)
from pipeline.evaluate.scoring.ties import TIE_BREAKING
from pipeline.evaluate.systems.baseline_values import (
    NO_BASELINES,
    Baselines,
    rerank_baselines,
    retrieval_baselines,
)
from pipeline.evaluate.systems.baselines import (
    BASELINES,
    UPPER_BOUNDS,
)
from pipeline.evaluate.systems.learned import leak_probe
from pipeline.evaluate.systems.models import (
    DEFAULT_BATCH,
    ENCODER,
    SCORER,
    SENTENCE_TRANSFORMER,
    ModelScores,
    ModelSpec,
)
from pipeline.evaluate.systems.runs import (
    RETRIEVAL_OPTION,
    RunWarning,
    missing_surveys,
    restrict_to_eval_set,
    scores_run,
)
from pipeline.evaluate.systems.submitted import (
    KIND_BASELINE,
    KIND_LEARNED,
    KIND_UPPER_BOUND,
    KIND_WHOLE_SURVEY,
    RunSpec,
    Submitted,
    aligned,
    check_complete,
    check_names,
    load_submitted,
    run_spec,
    scored_judged,
    system_chv,
    with_chv,
)

SELECTION_METRIC = ndcg_name(10)  # the headline's order, and the figures' best baseline
EVAL_DIR = "eval"
RESULTS_FILE = "eval_results.json"
PER_SURVEY_FILE = "per_survey.parquet"
REPORT_FILE = "report.md"
# 2: eval_file and run files by name + sha256; runs' missing_surveys
# 3: mode, learned baselines (lgbm, lgbm-metadata), models, leak_probe; recall@K_tier3 and
#    mrr_tier3 renamed recall@K_tier>=3 and mrr_tier>=3; metric_aliases
# 4: metric names as ir_measures writes them (previous names in metric_aliases); tests
#    against every baseline with Holm-corrected p-values; pairwise tests of submitted
#    systems; saturated_metrics; chv_ratio; systems' kinds; retrieval mode with trec_eval's
#    rule for judged candidates not retrieved
FORMAT_VERSION = 4
DEFAULT_CONFIG = EvaluateConfig()  # frozen, so one shared default instance is safe
DEFAULT_TRAIN_CONFIG = TrainConfig()
DEFAULT_RETRIEVAL = RetrievalOptions()
DEFAULT_PASSAGES = PassageOptions()

CI_METHOD = "95% percentile bootstrap over surveys, {n} resamples, seed {seed}."


@dataclass(frozen=True)
class Evaluation:
    """Everything an evaluation computed.

    Attributes:
        results: the content of ``eval_results.json`` (floats rounded).
        per_survey: the content of ``per_survey.parquet``.
        report: the Markdown report (its figure links only when written).
        model_runs: what each model scored, with its timing (not in the results).
        out: the folder written (``out_dir``), or None.
    """

    results: dict[str, Any]
    per_survey: pl.DataFrame
    report: str
    model_runs: tuple[ModelScores, ...] = ()
    out: Path | None = None


def _tier_distribution(eval_set: pl.DataFrame) -> dict[str, dict[str, Any]]:
    counts = eval_set.group_by(LABEL).agg(pl.len().alias("count"), pl.col(IN_DOMAIN).sum())
    by_label = {row[LABEL]: row for row in counts.iter_rows(named=True)}
    total = eval_set.height
    return {
        str(label): {
            "name": name,
            "count": int(by_label.get(label, {}).get("count", 0)),
            IN_DOMAIN: int(by_label.get(label, {}).get(IN_DOMAIN, 0)),
            "share": (by_label.get(label, {}).get("count", 0) / total) if total else None,
        }
        for label, name in sorted(LABEL_NAMES.items())
    }


def _saturated(eval_set: pl.DataFrame, mode: str, ks: Sequence[int]) -> tuple[list[str], int]:
    """Recall metrics whose K is at least every ranked list's length (each is 1.0 for every
    system: re-ranking mode ranks every candidate), and the longest list."""
    longest = int(eval_set.group_by(SURVEY_ID).len()["len"].max() or 0)
    if mode != RERANK:
        return [], longest
    registry = metric_registry(ks)
    return [m.name for m in registry.values() if m.recall_at and m.recall_at >= longest], longest


@dataclass(frozen=True)
class EvaluationRequest:
    """What to evaluate and how: the options of ``evaluate``, checked once, here.

    Attributes:
    eval_file: eval Parquet, release folder, or Hub dataset (see
        :func:`pipeline.evaluate.evalset.resolve_eval_file`).
    runs: run files (TREC, CSV, TSV or Parquet; :mod:`pipeline.evaluate.systems.runs`), each a
        path or ``(path, name)``.
    scores: in-memory systems, name -> ``{survey_id: {candidate_id: score}}`` or a
        DataFrame with the run columns.
    model_files: models written by ``python -m pipeline train`` (path or ``(path,
        name)``), each named by its file stem unless named; a LightGBM model without
        ``train``'s JSON beside it is a foreign model (:mod:`pipeline.evaluate.external`).
    models: encoders, scorers and sentence-transformers models to run on the
        candidates view (:mod:`pipeline.evaluate.systems.models`).
    config: bootstrap resamples, seed, random-baseline seeds and cutoffs.
    train_config: the learned baselines' hyperparameters, seeds and threads.
    lenient: drop run rows whose ids are not in the eval set instead of failing.
    require_complete: fail when a run has no row for some eval survey.
    mode: ``rerank`` (the judged candidates; the default) or ``retrieval`` (runs, scores
        and models over the split's whole corpus; a foreign model file re-ranks the first
        stage's top K, a model file of ``train`` is refused).
    baselines: evaluate the baselines (from the cache when there; in retrieval mode
        ``bm25`` over the whole corpus, when the corpus has its texts).
    learned: with the baselines, also the learned ones (``lgbm``..., ``dense``).
    cache_dir: the evaluation cache (:mod:`pipeline.evaluate.cache`); None: none.
    batch_size: texts per encoder call, candidates per scorer call.
    out_dir: the directory to write ``eval_results.json``, ``per_survey.parquet``,
        ``report.md`` and figures into (the CLI's ``--out DIR``); None: write nothing.
    task: the task's name, written into the results when given (``aspects``:
        :mod:`pipeline.evaluate.aspects`).
    query_groups: more subsets, name -> the query ids in it (each ranked as ``ALL``),
        reported beside the year subsets (the aspects' kinds and levels).
    whole_survey: systems scored on another task's queries, name -> run columns over
        this eval set's queries (the whole-survey baselines per aspect), evaluated as
        submitted systems of kind ``whole-survey baseline``.
    whole_survey_facts: what each whole-survey system is (written into the results).
    retrieval: how models retrieve in retrieval mode (``top_k``, the scorers' first
        stage; :mod:`pipeline.evaluate.retrieval.model_runs`). In re-ranking mode with a
        foreign model file, its ``qdrant``, ``collection`` and ``query_vectors`` are that
        model's vector feature and move into ``external``; with no foreign model file they
        are refused. In retrieval mode they are both the collection's retrieval and the
        foreign model's vector feature.
    external: where a foreign model file's features come from
        (:class:`pipeline.evaluate.external.ExternalOptions`); None: the release's only.

        baselines_only: evaluate only the baselines; no system may be given.

    Raises:
        UsageError: a bad mode, systems the mode cannot evaluate, systems with
            ``baselines_only``, or nothing to evaluate.
    """

    eval_file: str | Path
    runs: Sequence[RunSpec] = ()
    scores: Mapping[str, Any] = field(default_factory=dict)
    model_files: Sequence[RunSpec] = ()
    models: Sequence[ModelSpec] = ()
    config: EvaluateConfig = DEFAULT_CONFIG
    train_config: TrainConfig = DEFAULT_TRAIN_CONFIG
    lenient: bool = False
    require_complete: bool = False
    mode: str = RERANK
    baselines: bool = True
    baselines_only: bool = False
    learned: bool = True
    cache_dir: Path | None = None
    batch_size: int = DEFAULT_BATCH
    out_dir: Path | None = None
    task: str | None = None
    query_groups: Mapping[str, pl.Series] = field(default_factory=dict)
    whole_survey: Mapping[str, pl.DataFrame] = field(default_factory=dict)
    whole_survey_facts: Mapping[str, Any] = field(default_factory=dict)
    retrieval: RetrievalOptions = DEFAULT_RETRIEVAL
    external: ExternalOptions | None = None
    passages: bool = False
    passage_rule: PassageOptions = DEFAULT_PASSAGES
    passage_runs: Sequence[RunSpec] = ()

    def __post_init__(self) -> None:
        for name in (
            "runs",
            "model_files",
            "models",
            "passage_runs",
        ):  # any iterable in, a tuple kept
            object.__setattr__(self, name, tuple(getattr(self, name)))
        self._vectors_to_foreign_model()
        self._check()

    def _vectors_to_foreign_model(self) -> None:
        """A foreign model file's vector feature and survey encoder.

        Re-ranking mode retrieves nothing, so a Qdrant collection given with a foreign
        model file is that model's vector feature (our own models' features are the
        release's: for them ``_check`` refuses it). In retrieval mode the collection is
        also the retrieval it is there, and the foreign model's feature. The first
        ``--encoder`` / ``--sentence-transformer`` encodes the surveys the collection lacks,
        as in retrieval mode.
        """
        if not any(is_foreign(run_spec(spec)[0]) for spec in self.model_files):
            return
        encoder = next((m for m in self.models if m.kind in (ENCODER, SENTENCE_TRANSFORMER)), None)
        external = dataclasses.replace(
            self.external if self.external is not None else NO_OPTIONS,
            query_encoder=encoder, cache_dir=self.cache_dir, batch_size=self.batch_size,
        )  # fmt: skip
        options = self.retrieval
        if options.qdrant is not None:
            external = with_qdrant(external, options.qdrant, options.collection,
                                   options.id_field, options.query_vectors)  # fmt: skip
            if self.mode == RERANK:
                retrieval = dataclasses.replace(
                    options, qdrant=None, collection=None, query_vectors=None
                )
                object.__setattr__(self, "retrieval", retrieval)
        object.__setattr__(self, "external", external)

    def system_flags(self) -> list[str]:
        """The flags (or API arguments) of the systems given, sorted."""
        flags = {"--run"} if self.runs else set()
        flags |= {"--model-file"} if self.model_files else set()
        flags |= {"scores="} if self.scores else set()
        flags |= {"--passage-run"} if self.passage_runs else set()
        return sorted(flags | {spec.flag for spec in self.models})

    def _check(self) -> None:
        if self.baselines_only and self.system_flags():
            raise UsageError(
                f"--baselines-only evaluates no system, but {'/'.join(self.system_flags())} given"
            )
        if self.mode not in MODES:
            raise UsageError(
                f"--mode (mode=) {self.mode!r}: unknown; available: {', '.join(MODES)}"
            )
        retrieval = self.mode == RETRIEVAL
        own = [run_spec(spec)[0] for spec in self.model_files]
        own = [path for path in own if not is_foreign(path)]
        if retrieval and own:
            raise UsageError(
                f"{RETRIEVAL_OPTION}: --model-file {own[0]} is a model of `train`, whose "
                "features are the release's, which exist for the judged candidates only; "
                "evaluate it without --mode retrieval (a foreign LightGBM model re-ranks the "
                "--first-stage top K with features from --features, --turso-url, --qdrant)"
            )
        if not retrieval and self.retrieval.qdrant is not None:
            raise UsageError(f"--qdrant retrieves from the whole corpus: add {RETRIEVAL_OPTION}")
        if self.passages and any(spec.kind == SCORER for spec in self.models):
            raise UsageError(
                "--passages scores passages with an --encoder or --sentence-transformer; a "
                "--scorer reads titles and abstracts (evaluate it without --passages)"
            )
        if self.passages and not self.models:
            raise UsageError(
                "--passages needs an --encoder or --sentence-transformer to score the sections "
                "(a run over passages goes with --passage-run FILE)"
            )
        if self.passages and self.retrieval.qdrant is not None:
            raise UsageError("--passages searches the sections itself: without --qdrant")
        has_run = self.runs or self.scores or self.models or self.passage_runs
        if retrieval and not (has_run or self.model_files or self.retrieval.qdrant):
            raise UsageError(
                f"{RETRIEVAL_OPTION} needs a run over the split's corpus (--run, runs=) or a "
                "model (--encoder, --sentence-transformer, --scorer, a foreign --model-file)"
            )
        if not (has_run or self.model_files or self.baselines):
            raise UsageError("nothing to evaluate: no system given and no baselines asked for")

    @property
    def ks(self) -> tuple[int, ...]:
        """The metric cutoffs: the config's, and in retrieval mode also retrieval's own."""
        if self.mode == RETRIEVAL:
            return tuple(sorted({*self.config.ks, *RETRIEVAL_KS}))
        return tuple(self.config.ks)


@dataclass(frozen=True)
class _EvalSet:
    """The eval set as loaded, with what the steps below keep asking of it."""

    path: Path
    table: pl.DataFrame
    pairs: pl.DataFrame  # survey_id, candidate_id of every judged candidate
    survey_years: pl.DataFrame  # survey_id, survey_year; one row per survey, by id


@dataclass(frozen=True)
class _Scored:
    """Every system's per-survey values and their bootstrap summaries."""

    per_survey: pl.DataFrame
    systems: list[str]
    metrics: list[str]
    with_chv: bool
    subsets: dict[str, tuple[str, pl.Series]]
    summaries: dict[str, dict[str, dict[str, dict[str, Any]]]]
    judged: dict[str, dict[str, float]]  # retrieval mode: Judged@k per system (else empty)


@dataclass(frozen=True)
class _Compared:
    """The comparisons of the systems on ALL."""

    headline: list[str]
    best: str | None
    tests: list[dict[str, Any]]
    pairwise: list[dict[str, Any]]
    same: dict[str, str]


def run_evaluation(request: EvaluationRequest) -> Evaluation:
    """Evaluate submitted systems (and the baselines) on the eval set; write the outputs
    into ``request.out_dir`` when it is given.

    Equal scores are ordered by a fixed pseudo-random tie key of (survey_id,
    candidate_id), then candidate_id (see ``results["tie_breaking"]`` and
    :func:`pipeline.evaluate.scoring.ties.tie_key`). In re-ranking mode judged candidates a
    system does not score rank below all scored ones; in retrieval mode they are not
    ranked (trec_eval's rule, :mod:`pipeline.evaluate.retrieval.mode`). A survey a run has no
    row for is counted (``runs[NAME]["missing_surveys"]``) and warned about.

    Raises:
        RunError: a run is malformed, names ids outside the eval set (unless
            ``lenient``), reuses a system name, or (with ``require_complete``) has no row
            for some eval survey; the message names the file and the flag that fixes it.
        ModelError: a model does not load or returns something unusable.
        EvalSetError: the eval table is malformed.
        ValueError: a bad mode, or systems the mode cannot evaluate, or nothing to evaluate.
        FileNotFoundError: the eval file or a run file does not exist.
    """
    eval_set = _load_eval_set(request)
    submitted, model_runs = _load_systems(request, eval_set)
    found = _load_baselines(request, eval_set)
    missing = _check_systems(request, eval_set, submitted, found)
    scored = _score(request, eval_set, submitted, found)
    compared = _compare(request, eval_set, scored, submitted, found)
    results = _results(request, eval_set, submitted, found, missing, scored, compared)
    return _write(request, results, scored.per_survey, model_runs)


def _load_eval_set(request: EvaluationRequest) -> _EvalSet:
    path = resolve_eval_file(request.eval_file)
    table = load_eval_set(path)
    years = table.select(SURVEY_ID, SURVEY_YEAR).unique(SURVEY_ID, keep="first").sort(SURVEY_ID)
    return _EvalSet(path, table, table.select(SURVEY_ID, CANDIDATE_ID), years)


def _load_systems(
    request: EvaluationRequest, eval_set: _EvalSet
) -> tuple[list[Submitted], list[ModelScores]]:
    """The submitted systems, each checked against the eval set, and the whole-survey ones."""
    submitted, model_runs = load_submitted(
        eval_set.table, eval_set.path, request.mode, request.runs, request.scores,
        request.model_files, request.models, request.lenient, request.cache_dir,
        request.batch_size, request.retrieval, request.external,
        request.passage_rule if request.passages else None, request.passage_runs,
        request.passage_rule,
    )  # fmt: skip
    submitted += [
        Submitted(restrict_to_eval_set(scores_run(frame, name), eval_set.pairs), KIND_WHOLE_SURVEY)
        for name, frame in request.whole_survey.items()
    ]
    return submitted, model_runs


def _load_baselines(request: EvaluationRequest, eval_set: _EvalSet) -> Baselines:
    if not request.baselines:
        return NO_BASELINES
    if request.mode == RETRIEVAL:
        return retrieval_baselines(
            eval_set.table, eval_set.path, request.config, request.retrieval, request.learned,
            request.cache_dir, request.batch_size,
        )  # fmt: skip
    return rerank_baselines(
        eval_set.table, eval_set.path, request.config, request.train_config, request.learned,
        request.cache_dir, request.batch_size,
    )  # fmt: skip


def _check_systems(
    request: EvaluationRequest, eval_set: _EvalSet, submitted: list[Submitted], found: Baselines
) -> dict[str, list[str]]:
    """Refuse clashing names; warn about (or refuse) missing surveys: those of each system."""
    check_names(submitted, reserved=[*found.names, *BASELINES])
    n_surveys = eval_set.table[SURVEY_ID].n_unique()
    missing = {s.name: missing_surveys(s.run, eval_set.pairs) for s in submitted}
    for system in submitted:
        check_complete(system.run, missing[system.name], n_surveys, request.require_complete)
    return missing


def _score(
    request: EvaluationRequest, eval_set: _EvalSet, submitted: list[Submitted], found: Baselines
) -> _Scored:
    """Every metric per system, subset and survey; their means with bootstrap intervals."""
    ks, table = request.ks, eval_set.table
    ranked = RANK_SCORED if request.mode == RETRIEVAL else RANK_ALL
    per_system = dict(found.per_survey)
    judged_shares = dict(found.judged)
    for system in submitted:
        judged = (
            retrieval_frame(table, system.run)
            if request.mode == RETRIEVAL
            else aligned(table, system.run.scores)
        )
        if request.mode == RETRIEVAL:
            judged_shares[system.name] = judged_means(judged)
        per_system[system.name] = with_chv(
            per_survey_subsets(judged, ks, ranked), system_chv(table, system)
        )
    metrics = list(metric_registry(ks))
    chv = any(frame[CHV_RATIO].drop_nulls().len() for frame in per_system.values()) or any(
        s.vectors is not None for s in submitted
    )
    columns = [*metrics, CHV_RATIO] if chv else metrics
    per_survey = (
        pl.concat(
            [frame.select(pl.lit(n).alias(SYSTEM), pl.all()) for n, frame in per_system.items()],
            how="vertical",
        )
        .join(eval_set.survey_years, on=SURVEY_ID, how="left")
        .select(SYSTEM, SUBSET, SURVEY_ID, SURVEY_YEAR, *columns)
        .sort(SYSTEM, SUBSET, SURVEY_ID)
    )
    subsets = _subsets(eval_set.survey_years, request.query_groups)
    systems = list(per_system)
    summaries = compare.summaries(per_survey, systems, columns, subsets, request.config)
    return _Scored(per_survey, systems, metrics, chv, subsets, summaries, judged_shares)


def _subsets(
    survey_years: pl.DataFrame, query_groups: Mapping[str, pl.Series]
) -> dict[str, tuple[str, pl.Series]]:
    """Summary subset -> (the ranking subset it reads, its surveys)."""
    all_surveys = survey_years[SURVEY_ID]
    subsets: dict[str, tuple[str, pl.Series]] = {s: (s, all_surveys) for s in RANKING_SUBSETS}
    for year in sorted(survey_years[SURVEY_YEAR].unique().to_list()):
        surveys = survey_years.filter(pl.col(SURVEY_YEAR) == year)[SURVEY_ID]
        subsets[year_subset(year)] = (SUBSET_ALL, surveys)
    for name, ids in query_groups.items():
        subsets[name] = (SUBSET_ALL, all_surveys.filter(all_surveys.is_in(ids.implode())))
    return subsets


def _compare(
    request: EvaluationRequest,
    eval_set: _EvalSet,
    scored: _Scored,
    submitted: list[Submitted],
    found: Baselines,
) -> _Compared:
    """Paired tests against every baseline and between submitted systems; warn about a
    submitted system that is a baseline again."""
    config, per_survey = request.config, scored.per_survey
    all_surveys = eval_set.survey_years[SURVEY_ID]
    headline = main_metrics(request.ks)
    names = [s.name for s in submitted]
    best = compare.best_baseline(
        scored.summaries[SUBSET_ALL], SELECTION_METRIC, found.names, UPPER_BOUNDS
    )
    tests = compare.baseline_tests(
        per_survey, scored.systems, found.names, headline, all_surveys, config, UPPER_BOUNDS
    )
    pairwise = compare.pairwise_tests(per_survey, names, headline, all_surveys, config)
    same = compare.same_as_baseline(per_survey, names, found.names, scored.metrics)
    for system, baseline in same.items():
        warnings.warn(
            f"{system} gives exactly the per-survey values of baseline {baseline}: the same "
            "system evaluated twice? (compare it with the others, not with itself)",
            RunWarning,
            stacklevel=3,
        )
    return _Compared(headline, best, tests, pairwise, same)


def _kinds(found: Baselines, submitted: list[Submitted]) -> dict[str, str]:
    """What each system is: baseline, upper bound, learned baseline, or how it was given."""
    kinds = {
        name: KIND_UPPER_BOUND
        if name in UPPER_BOUNDS
        else KIND_BASELINE
        if name in BASELINES
        else KIND_LEARNED
        for name in found.names
    }
    return kinds | {s.name: s.kind for s in submitted}


def _results(
    request: EvaluationRequest,
    eval_set: _EvalSet,
    submitted: list[Submitted],
    found: Baselines,
    missing: dict[str, list[str]],
    scored: _Scored,
    compared: _Compared,
) -> dict[str, Any]:
    """The content of ``eval_results.json``: floats rounded, NaN as null."""
    ks, table = request.ks, eval_set.table
    all_surveys = eval_set.survey_years[SURVEY_ID]
    eval_identity = file_identity(eval_set.path)
    if is_hub_spec(request.eval_file):
        eval_identity["hub"] = str(request.eval_file)
    saturated, longest = _saturated(table, request.mode, ks)
    registry = metric_registry(ks)
    docs = {name: registry[name].doc for name in scored.metrics}
    if scored.with_chv:
        docs[CHV_RATIO] = CHV_DOC
    names = [s.name for s in submitted]
    kinds = _kinds(found, submitted)
    return clean(
        {
            "format_version": FORMAT_VERSION,
            "eval_file": eval_identity,
            "n_surveys": all_surveys.len(),
            "n_candidates": table.height,
            "config": {
                k: list(v) if isinstance(v, tuple) else v
                for k, v in dataclasses.asdict(request.config).items()
            },
            "ks": list(ks),
            "tie_breaking": TIE_BREAKING,
            "ci_method": CI_METHOD.format(
                n=request.config.bootstrap_samples, seed=request.config.seed
            ),
            "test_method": compare.TEST_METHOD.format(n=request.config.bootstrap_samples),
            "alpha": compare.ALPHA,
            "metrics": docs,
            "metric_aliases": {
                name: alias for name, alias in metric_aliases(ks).items() if name in scored.metrics
            },
            "main_metrics": compared.headline,
            "selection_metric": SELECTION_METRIC,
            "saturated_metrics": saturated,
            "longest_list": longest,
            "mode": request.mode,
            "baselines": found.names,
            "upper_bounds": list(UPPER_BOUNDS),
            "best_baseline": compared.best,
            "submitted": names,
            "kinds": kinds,
            "same_as_baseline": compared.same,
            "learned_baselines": found.facts,
            "models": {s.name: s.facts for s in submitted if s.facts},
            "leak_probe": leak_probe(scored.summaries[SUBSET_ALL], compared.tests),
            "runs": _runs(eval_set, submitted, missing),
            "subset_surveys": {
                name: surveys.len() for name, (_, surveys) in scored.subsets.items()
            },
            "systems": scored.summaries[SUBSET_ALL],
            "subsets": scored.summaries,
            "tests": compared.tests,
            "pairwise": compared.pairwise,
            "tier_distribution": _tier_distribution(table),
            **_judged(request, scored),
            **_task(request),
            **_full_text(request),
        }
    )


def _runs(
    eval_set: _EvalSet, submitted: list[Submitted], missing: dict[str, list[str]]
) -> dict[str, dict[str, Any]]:
    """Where each submitted system came from and what it scored of the judged candidates."""
    return {
        s.name: {
            "file": file_identity(s.run.path) if s.run.path is not None else None,
            "format": s.run.format,
            "rows": s.run.n_rows,
            "dropped_unknown_ids": s.run.n_dropped_unknown,
            "scored_judged": scored_judged(s.run, eval_set.pairs),
            "missing_judged": eval_set.table.height - scored_judged(s.run, eval_set.pairs),
            "missing_surveys": len(missing[s.name]),
        }
        for s in submitted
    }


def _full_text(request: EvaluationRequest) -> dict[str, Any]:
    """How full-text systems made a document's score (none without one): the aggregation and
    the passage truncation length (:mod:`pipeline.evaluate.systems.full_text`)."""
    if not (request.passages or request.passage_runs):
        return {}
    return {"full_text": request.passage_rule.facts()}


def _judged(request: EvaluationRequest, scored: _Scored) -> dict[str, Any]:
    """Retrieval mode's judged coverage per system (:mod:`pipeline.evaluate.scoring.judged`);
    none in re-ranking mode, where every ranked candidate is judged."""
    if request.mode != RETRIEVAL:
        return {}
    return {"judged_coverage": scored.judged, "judged_coverage_doc": JUDGED_DOC}


def _task(request: EvaluationRequest) -> dict[str, Any]:
    """The task's own entries (none without a task): its query groups and the whole-survey
    systems scored on its queries."""
    if request.task is None:
        return {}
    facts = request.whole_survey_facts
    return {
        "task": request.task,
        "query_groups": list(request.query_groups),
        "whole_survey": {
            name: {
                "baseline": name.rsplit("@", 1)[0],
                **dict(facts.get(name.rsplit("@", 1)[0], {})),
            }
            for name in request.whole_survey
        },
        "whole_survey_skipped": {
            name: f["skipped"]
            for name, f in facts.items()
            if isinstance(f, dict) and "skipped" in f
        },
    }


def _write(
    request: EvaluationRequest,
    results: dict[str, Any],
    per_survey: pl.DataFrame,
    model_runs: list[ModelScores],
) -> Evaluation:
    """Write the results, the per-survey table, the figures and the report into
    ``request.out_dir`` (none without it)."""
    if request.out_dir is None:
        return Evaluation(results, per_survey, render_report(results), tuple(model_runs))
    target = Path(request.out_dir)
    target.mkdir(parents=True, exist_ok=True)
    text = json.dumps(results, sort_keys=True, indent=2, allow_nan=False) + "\n"
    with atomic_path(target / RESULTS_FILE) as tmp:
        tmp.write_text(text, encoding="utf-8")
    with atomic_path(target / PER_SURVEY_FILE) as tmp:
        per_survey.write_parquet(tmp)
    figures = write_figures(json.loads(text), per_survey, target)
    report = render_report(results, figures)
    with atomic_path(target / REPORT_FILE) as tmp:
        tmp.write_text(report, encoding="utf-8")
    return Evaluation(results, per_survey, report, tuple(model_runs), target)


def write_evaluation(
    eval_file: str | Path,
    runs: Iterable[RunSpec] = (),
    baselines_only: bool = False,
    out_dir: Path = Path("work"),
    config: EvaluateConfig = DEFAULT_CONFIG,
    lenient: bool = False,
    require_complete: bool = False,
    model_files: Iterable[RunSpec] = (),
    mode: str = RERANK,
    learned: bool = True,
    train_config: TrainConfig = DEFAULT_TRAIN_CONFIG,
    models: Iterable[ModelSpec] = (),
    cache_dir: Path | None = None,
) -> dict[str, Any]:
    """Evaluate the baselines and the given systems and write the outputs into
    ``<out_dir>/eval/`` (:func:`run_evaluation` with ``out_dir``; the public API's
    :func:`pipeline.api.evaluate` adds the models, tasks and retrieval options).

    Args:
        Others: as :class:`EvaluationRequest`.

    Returns:
        The content of ``eval_results.json`` (floats already rounded).

    Raises:
        UsageError: as :class:`EvaluationRequest`; and as :func:`run_evaluation`.
    """
    request = EvaluationRequest(
        eval_file,
        tuple(runs),
        model_files=tuple(model_files),
        models=tuple(models),
        config=config,
        train_config=train_config,
        lenient=lenient,
        require_complete=require_complete,
        mode=mode,
        baselines_only=baselines_only,
        learned=learned,
        cache_dir=cache_dir,
        out_dir=Path(out_dir) / EVAL_DIR,
    )
    return run_evaluation(request).results
