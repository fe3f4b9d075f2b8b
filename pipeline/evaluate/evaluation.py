"""The evaluation stage: score baselines and submitted systems, summarise, write results.

Submitted systems are run files (:mod:`pipeline.evaluate.runs`), scores held in memory
(:func:`pipeline.api.evaluate_scores`), models (``--encoder``, ``--scorer``,
``--sentence-transformer``: :mod:`pipeline.evaluate.models`) and LightGBM model files
(``--model-file``). :func:`run_evaluation` computes everything and writes nothing unless
asked, then into the ``out_dir`` it is given; :func:`evaluate` writes them under
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
* ``report.md``: the Markdown summary (see :mod:`pipeline.evaluate.report`).

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
import math
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from pipeline.core.config import EvaluateConfig, TrainConfig
from pipeline.core.errors import UsageError, option
from pipeline.core.files import atomic_path, file_identity
from pipeline.core.schema import CANDIDATES_VIEW, LABEL_NAMES
from pipeline.evaluate.baselines import (
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
from pipeline.evaluate.cache import baseline_key, read_baselines, write_baselines
from pipeline.evaluate.columns import (
    CANDIDATE_ID,
    IN_DOMAIN,
    LABEL,
    SCORE,
    SUBSET,
    SURVEY_ID,
    SURVEY_YEAR,
    SYSTEM,
)
from pipeline.evaluate.coverage import CHV_DOC, CHV_RATIO, chv_ratios
from pipeline.evaluate.dense import DENSE, dense_model_scores, dense_unavailable
from pipeline.evaluate.dense import encode as dense_encode
from pipeline.evaluate.evalset import is_hub_spec, load_eval_set, resolve_eval_file
from pipeline.evaluate.figures import write_figures
from pipeline.evaluate.learned import (
    eval_view,
    leak_probe,
    learned_baseline_scores,
    model_file_scores,
)
from pipeline.evaluate.measures import (
    main_metrics,
    metric_aliases,
    metric_registry,
    ndcg_name,
)
from pipeline.evaluate.metrics import RANK_ALL, RANK_SCORED, per_survey_metrics
from pipeline.evaluate.model_retrieval import (
    RetrievalOptions,
    bm25_retrieval,
    encoder_retrieval,
    has_texts,
    retrieve,
)
from pipeline.evaluate.models import (
    DEFAULT_BATCH,
    ENCODER,
    ModelError,
    ModelScores,
    ModelSpec,
    run_model,
)
from pipeline.evaluate.report import render_report
from pipeline.evaluate.retrieval import (
    MODES,
    RERANK,
    RETRIEVAL,
    RETRIEVAL_KS,
    corpus_ids,
    restrict_to_corpus,
    retrieval_frame,
)
from pipeline.evaluate.runs import (
    RETRIEVAL_OPTION,
    Run,
    RunError,
    RunWarning,
    missing_surveys,
    read_run,
    restrict_to_eval_set,
    scores_run,
)
from pipeline.evaluate.stats import bootstrap_means, holm, paired_test, rng_for
from pipeline.evaluate.ties import TIE_BREAKING
from pipeline.evaluate.vectors import load_corpus

SUBSET_ALL, SUBSET_IN, SUBSET_OUT = "ALL", "IN", "OUT"
RANKING_SUBSETS = (SUBSET_ALL, SUBSET_IN, SUBSET_OUT)
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
MISSING_SHOWN = 5  # missing survey ids named in a warning or error
FLOAT_DIGITS = 12
ALPHA = 0.05  # significance level of the report's marks (Holm-adjusted p below it)
DEFAULT_CONFIG = EvaluateConfig()  # frozen, so one shared default instance is safe
DEFAULT_TRAIN_CONFIG = TrainConfig()
DEFAULT_RETRIEVAL = RetrievalOptions()

TEST_METHOD = (
    "Paired two-sided randomisation (sign-flip) test over surveys where both systems are "
    "defined, {n} resamples; diff = mean(system - baseline) with a 95% paired bootstrap "
    "interval. p_holm: Holm-Bonferroni adjusted over the family (a system's tests against "
    "every baseline, per metric; or every pair of submitted systems, per metric)."
)
CI_METHOD = "95% percentile bootstrap over surveys, {n} resamples, seed {seed}."
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


def year_subset(year: int) -> str:
    """Subset name of the surveys first posted in ``year``."""
    return f"year={year}"


def per_survey_subsets(
    judged: pl.DataFrame, ks: Sequence[int], ranked: str = RANK_ALL
) -> pl.DataFrame:
    """Every metric per survey on the ALL, IN and OUT candidate subsets.

    Args:
        judged: eval rows with ``score`` (null = not scored) and ``in_domain``.
        ks: metric cutoffs.
        ranked: ``all`` (re-ranking) or ``scored`` (retrieval; see
            :func:`pipeline.evaluate.metrics.per_survey_metrics`).

    Returns:
        ``subset``, ``survey_id`` then one column per metric; sorted by subset, survey.
    """
    parts = {
        SUBSET_ALL: judged,
        SUBSET_IN: judged.filter(pl.col(IN_DOMAIN).eq_missing(True)),
        SUBSET_OUT: judged.filter(pl.col(IN_DOMAIN).ne_missing(True)),  # the rest, null too
    }
    return pl.concat(
        [
            per_survey_metrics(part.select(SURVEY_ID, CANDIDATE_ID, LABEL, SCORE), ks=ks, ranked=ranked)
            .with_columns(pl.lit(subset).alias(SUBSET))
            .select(SUBSET, pl.exclude(SUBSET))
            for subset, part in parts.items()
        ]
    ).sort(SUBSET, SURVEY_ID)  # fmt: skip


def _with_scores(eval_set: pl.DataFrame, scores: pl.Series) -> pl.DataFrame:
    return eval_set.with_columns(scores.alias(SCORE))


def _aligned(eval_set: pl.DataFrame, scores: pl.DataFrame) -> pl.DataFrame:
    """The eval rows with a system's score (null where it has none)."""
    return eval_set.join(
        scores.select(SURVEY_ID, CANDIDATE_ID, SCORE),
        on=[SURVEY_ID, CANDIDATE_ID],
        how="left",
        maintain_order="left",
    )


def _random_per_survey(eval_set: pl.DataFrame, config: EvaluateConfig) -> pl.DataFrame:
    """Per-survey metric values of the random baseline, averaged over the seeds."""
    draws = [
        per_survey_subsets(
            _with_scores(eval_set, random_scores(eval_set, config.seed, draw)), config.ks
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
    """Per-survey, per-subset metrics of one baseline (see :mod:`pipeline.evaluate.baselines`).

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
    return per_survey_subsets(_with_scores(eval_set, scorers[name](visible)), config.ks)


def answer_free(eval_set: pl.DataFrame) -> pl.DataFrame:
    """The columns of the eval set that the release's ``candidates`` view holds (no judgment)."""
    return eval_set.select([c for c in CANDIDATES_VIEW.names if c in eval_set.columns])


def _with_chv(frame: pl.DataFrame, chv: pl.DataFrame | None) -> pl.DataFrame:
    """A system's per-survey frame with ``chv_ratio`` on its ALL rows (null without embeddings)."""
    if chv is None:
        return frame.with_columns(pl.lit(None, dtype=pl.Float64).alias(CHV_RATIO))
    keyed = chv.with_columns(pl.lit(SUBSET_ALL).alias(SUBSET))
    return frame.join(keyed, on=[SUBSET, SURVEY_ID], how="left", maintain_order="left")


def _chv(eval_set: pl.DataFrame, system: Submitted) -> pl.DataFrame | None:
    """``chv_ratio`` per survey of a system with embeddings (row i of its vectors embeds row
    i of its scores), else None."""
    if system.vectors is None:
        return None
    index = system.run.scores.select(SURVEY_ID, CANDIDATE_ID).with_row_index("_vector")
    judged = _aligned(eval_set, system.run.scores).join(
        index, on=[SURVEY_ID, CANDIDATE_ID], how="left", maintain_order="left"
    )
    rows = judged["_vector"]
    if rows.null_count():  # a model scores every candidate of the view
        raise ModelError(f"{system.name}: no embedding for {rows.null_count()} eval candidate(s)")
    return chv_ratios(judged, system.vectors[rows.to_numpy()])


def _matrix(
    per_survey: pl.DataFrame, system: str, subset: str, surveys: pl.Series, metrics: list[str]
) -> np.ndarray:
    """surveys x metrics values of one system on one subset (NaN = excluded or no candidates)."""
    rows = per_survey.filter((pl.col(SYSTEM) == system) & (pl.col(SUBSET) == subset))
    return (
        surveys.to_frame(SURVEY_ID)
        .join(rows, on=SURVEY_ID, how="left", maintain_order="left")
        .select([pl.col(m).cast(pl.Float64) for m in metrics])
        .to_numpy()
        .reshape(surveys.len(), len(metrics))
    )


def _summaries(
    per_survey: pl.DataFrame,
    systems: list[str],
    metrics: list[str],
    subsets: dict[str, tuple[str, pl.Series]],
    config: EvaluateConfig,
) -> dict[str, dict[str, dict[str, dict[str, Any]]]]:
    """subset -> system -> metric -> {mean, ci_low, ci_high, n}."""
    out: dict[str, dict[str, dict[str, dict[str, Any]]]] = {}
    for subset, (source, surveys) in subsets.items():
        values = np.hstack([_matrix(per_survey, s, source, surveys, metrics) for s in systems])
        summary = bootstrap_means(
            values, config.bootstrap_samples, rng_for(config.seed, "bootstrap", subset)
        )
        out[subset] = {
            system: {
                metric: {
                    "mean": summary.mean[i * len(metrics) + j],
                    "ci_low": summary.ci_low[i * len(metrics) + j],
                    "ci_high": summary.ci_high[i * len(metrics) + j],
                    "n": int(summary.n[i * len(metrics) + j]),
                }
                for j, metric in enumerate(metrics)
            }
            for i, system in enumerate(systems)
        }
    return out


def _best_baseline(
    overall: dict[str, dict[str, dict[str, Any]]], selection: str, baselines: Sequence[str]
) -> str | None:
    """The non-upper-bound baseline with the highest mean ``selection`` metric on ALL."""
    scored = [(b, overall[b][selection]["mean"]) for b in baselines if b not in UPPER_BOUNDS]
    scored = [(b, m) for b, m in scored if m is not None and np.isfinite(m)]
    # max() keeps the first of equal means, i.e. the baselines' order decides ties.
    return max(scored, key=lambda bm: bm[1])[0] if scored else None


def _test_entries(
    result: Any, system: str, other: str, metrics: list[str], key: str
) -> list[dict[str, Any]]:
    return [
        {
            "system": system,
            key: other,
            "metric": metric,
            "subset": SUBSET_ALL,
            "diff": result.diff[j],
            "p_value": result.p_value[j],
            "ci_low": result.ci_low[j],
            "ci_high": result.ci_high[j],
            "n": int(result.n[j]),
        }
        for j, metric in enumerate(metrics)
    ]


def _with_holm(tests: list[dict[str, Any]], family: Callable[[dict[str, Any]], Any]) -> None:
    """Add ``p_holm`` and ``significant`` to every test, Holm-adjusted within its family."""
    groups: dict[Any, list[dict[str, Any]]] = {}
    for test in tests:
        groups.setdefault(family(test), []).append(test)
    for members in groups.values():
        raw = np.array([np.nan if t["p_value"] is None else t["p_value"] for t in members])
        for test, adjusted in zip(members, holm(raw), strict=True):
            test["p_holm"] = adjusted
            test["significant"] = bool(np.isfinite(adjusted) and adjusted < ALPHA)


def _baseline_tests(
    per_survey: pl.DataFrame,
    systems: list[str],
    baselines: list[str],
    metrics: list[str],
    surveys: pl.Series,
    config: EvaluateConfig,
) -> list[dict[str, Any]]:
    """Every system (upper bounds aside) against every other baseline, per metric, on ALL;
    Holm-adjusted per (system, metric) over the baselines."""
    compared = [b for b in baselines if b not in UPPER_BOUNDS]
    matrices = {s: _matrix(per_survey, s, SUBSET_ALL, surveys, metrics) for s in systems}
    tests: list[dict[str, Any]] = []
    for system in systems:
        if system in UPPER_BOUNDS:
            continue
        for baseline in compared:
            if baseline == system:
                continue
            # Every system meets the same sign flips and resamples against a baseline (the
            # generator is keyed by the baseline only), so equal systems get equal results
            # whatever else is evaluated.
            result = paired_test(
                matrices[system],
                matrices[baseline],
                config.bootstrap_samples,
                rng_for(config.seed, "paired", baseline),
            )
            tests += _test_entries(result, system, baseline, metrics, "baseline")
    _with_holm(tests, lambda t: (t["system"], t["metric"]))
    return tests


def _pairwise_tests(
    per_survey: pl.DataFrame,
    submitted: list[str],
    metrics: list[str],
    surveys: pl.Series,
    config: EvaluateConfig,
) -> list[dict[str, Any]]:
    """Every two submitted systems (in submission order), per metric, on ALL; Holm-adjusted
    per metric over the pairs."""
    tests: list[dict[str, Any]] = []
    for i, system in enumerate(submitted):
        for other in submitted[i + 1 :]:
            result = paired_test(
                _matrix(per_survey, system, SUBSET_ALL, surveys, metrics),
                _matrix(per_survey, other, SUBSET_ALL, surveys, metrics),
                config.bootstrap_samples,
                rng_for(config.seed, "pairwise", system, other),
            )
            tests += _test_entries(result, system, other, metrics, "other")
    _with_holm(tests, lambda t: t["metric"])
    return tests


def _same_as_baseline(
    per_survey: pl.DataFrame, submitted: list[str], baselines: list[str], metrics: list[str]
) -> dict[str, str]:
    """Submitted systems whose every per-survey value equals a baseline's (the same system
    evaluated twice, as ``make eval`` once did with ``lgbm``)."""
    rows = per_survey.filter(pl.col(SUBSET) == SUBSET_ALL).sort(SYSTEM, SURVEY_ID)

    def values(system: str) -> list[tuple]:
        return rows.filter(pl.col(SYSTEM) == system).select(SURVEY_ID, *metrics).rows()

    known = {b: values(b) for b in baselines}
    same: dict[str, str] = {}
    for system in submitted:
        mine = values(system)
        match = next((b for b, theirs in known.items() if theirs == mine), None)
        if match is not None:
            same[system] = match
    return same


def _clean(value: Any) -> Any:
    """JSON-ready copy: floats rounded to 12 digits, NaN/inf -> null, numpy scalars -> Python."""
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        number = float(value)
        return None if not math.isfinite(number) else round(number, FLOAT_DIGITS) + 0.0
    return value


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


def _check_complete(run: Run, missing: list[str], n_surveys: int, require_complete: bool) -> None:
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


def _scored_judged(run: Run, pairs: pl.DataFrame) -> int:
    """Judged candidates a run scores (in retrieval mode a run also scores unjudged documents)."""
    return run.scores.join(pairs, on=[SURVEY_ID, CANDIDATE_ID], how="semi").height


def _check_names(submitted: list[Submitted], reserved: Sequence[str]) -> None:
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


def _run_spec(spec: RunSpec) -> tuple[Path, str | None]:
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

    path, name = _run_spec(spec)
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


def _model_run(
    eval_set: pl.DataFrame, spec: ModelSpec, cache_dir: Path | None, batch_size: int
) -> tuple[Submitted, ModelScores]:
    result = run_model(spec, answer_free(eval_set), cache_dir, batch_size)
    run = Run(
        name=spec.system_name, path=None, format=spec.kind, scores=result.scores,
        n_rows=result.scores.height,
    )  # fmt: skip
    return Submitted(run, spec.kind, result.facts, result.vectors), result


@dataclass(frozen=True)
class _Baselines:
    names: list[str]
    per_survey: dict[str, pl.DataFrame]
    facts: dict[str, Any]


def _baselines(
    eval_set: pl.DataFrame,
    eval_path: Path,
    config: EvaluateConfig,
    train_config: TrainConfig,
    learned: bool,
    cache_dir: Path | None,
    batch_size: int,
) -> _Baselines:
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
        return _Baselines(meta["baselines"], frames, meta["learned_baselines"])
    scores: dict[str, pl.Series] = {}
    facts: dict[str, Any] = {}
    vectors: dict[str, Submitted] = {}
    if learned:
        scores, facts = learned_baseline_scores(eval_set, eval_path, train_config)
        if dense_reason is None:
            result = dense_model_scores(answer_free(eval_set), cache_dir, batch_size)
            run = Run(DENSE, None, "dense", result.scores, result.scores.height)
            vectors[DENSE] = Submitted(run, KIND_LEARNED, result.facts, result.vectors)
            scores[DENSE] = _aligned(eval_set, result.scores)[SCORE].rename(DENSE)
        else:
            facts[DENSE] = {"skipped": dense_reason}
    names = [b for b in BASELINES if b not in UPPER_BOUNDS] + list(scores)
    names += [b for b in BASELINES if b in UPPER_BOUNDS]
    frames = {
        name: _with_chv(
            per_survey_subsets(_with_scores(eval_set, scores[name]), config.ks)
            if name in scores
            else baseline_per_survey(eval_set, name, config),
            _chv(eval_set, vectors[name]) if name in vectors else None,
        )
        for name in names
    }
    table = pl.concat([f.select(pl.lit(n).alias(SYSTEM), pl.all()) for n, f in frames.items()])
    write_baselines(cache_dir, key, table, {"baselines": names, "learned_baselines": _clean(facts)})
    return _Baselines(names, frames, facts)


def _retrieval_baselines(
    eval_set: pl.DataFrame,
    eval_path: Path,
    config: EvaluateConfig,
    options: RetrievalOptions,
    learned: bool,
    cache_dir: Path | None,
    batch_size: int,
) -> _Baselines:
    """Retrieval mode's baselines, each survey's top ``k`` of the whole corpus: ``bm25``,
    and ``dense`` (the [dense] extra's encoder, exact search) when it can run; when the
    corpus beside the eval file has the documents' texts."""
    corpus = load_corpus(eval_path)
    if corpus is None or not has_texts(corpus):
        why = "no corpus beside the eval file" if corpus is None else "the corpus has no texts"
        return _Baselines([], {}, {BM25: {"skipped": why}})
    found = {BM25: bm25_retrieval(eval_set, corpus, options.top_k, BM25)}
    dense_reason = dense_unavailable() if learned else "learned baselines not asked for"
    facts: dict[str, Any] = {} if dense_reason is None else {DENSE: {"skipped": dense_reason}}
    if dense_reason is None:
        spec = ModelSpec(ENCODER, f"{dense_encode.__module__}:{dense_encode.__name__}", DENSE)
        found[DENSE] = encoder_retrieval(spec, eval_set, corpus, cache_dir, batch_size, options)
    ks = tuple(sorted({*config.ks, *RETRIEVAL_KS}))
    frames = {
        name: _with_chv(per_survey_subsets(retrieval_frame(eval_set, r.run), ks, RANK_SCORED), None)
        for name, r in found.items()
    }
    facts |= {name: _clean(r.facts) for name, r in found.items()}
    return _Baselines(list(found), frames, facts)


def _load_submitted(
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
    retrieval: RetrievalOptions = DEFAULT_RETRIEVAL,
    external: Any = None,
) -> tuple[list[Submitted], list[ModelScores]]:
    pairs = eval_set.select(SURVEY_ID, CANDIDATE_ID)
    if mode == RETRIEVAL:
        corpus = corpus_ids(eval_path)

        def restrict(run: Run) -> Run:
            return restrict_to_corpus(run, pairs, corpus, lenient=lenient)
    else:

        def restrict(run: Run) -> Run:
            return restrict_to_eval_set(run, pairs, lenient=lenient)

    submitted = [
        Submitted(restrict(read_run(path, name)), KIND_RUN)
        for path, name in (_run_spec(spec) for spec in runs)
    ]
    submitted += [
        Submitted(restrict(scores_run(s, name)), KIND_SCORES) for name, s in scores.items()
    ]
    submitted += [_model_file_run(eval_set, eval_path, spec, external) for spec in model_files]
    model_runs: list[ModelScores] = []
    if mode == RETRIEVAL:
        found = retrieve(list(models), eval_set, load_corpus(eval_path), cache_dir, batch_size,
                         retrieval)  # fmt: skip
        submitted += [Submitted(restrict(r.run), r.run.format, r.facts) for r in found]
        return submitted, model_runs
    for spec in models:
        system, result = _model_run(eval_set, spec, cache_dir, batch_size)
        submitted.append(system)
        model_runs.append(result)
    return submitted, model_runs


def _saturated(eval_set: pl.DataFrame, mode: str, ks: Sequence[int]) -> tuple[list[str], int]:
    """Recall metrics whose K is at least every ranked list's length (each is 1.0 for every
    system: re-ranking mode ranks every candidate), and the longest list."""
    longest = int(eval_set.group_by(SURVEY_ID).len()["len"].max() or 0)
    if mode != RERANK:
        return [], longest
    registry = metric_registry(ks)
    return [m.name for m in registry.values() if m.recall_at and m.recall_at >= longest], longest


def run_evaluation(
    eval_file: str | Path,
    runs: Iterable[RunSpec] = (),
    *,
    scores: Mapping[str, Any] | None = None,
    model_files: Iterable[RunSpec] = (),
    models: Iterable[ModelSpec] = (),
    config: EvaluateConfig = DEFAULT_CONFIG,
    train_config: TrainConfig = DEFAULT_TRAIN_CONFIG,
    lenient: bool = False,
    require_complete: bool = False,
    mode: str = RERANK,
    baselines: bool = True,
    learned: bool = True,
    cache_dir: Path | None = None,
    batch_size: int = DEFAULT_BATCH,
    out_dir: Path | None = None,
    task: str | None = None,
    query_groups: Mapping[str, pl.Series] | None = None,
    whole_survey: Mapping[str, pl.DataFrame] | None = None,
    whole_survey_facts: Mapping[str, Any] | None = None,
    retrieval: RetrievalOptions = DEFAULT_RETRIEVAL,
    external: Any = None,
) -> Evaluation:
    """Evaluate submitted systems (and the baselines) on the eval set.

    Equal scores are ordered by a fixed pseudo-random tie key of (survey_id,
    candidate_id), then candidate_id (see ``results["tie_breaking"]`` and
    :func:`pipeline.evaluate.ties.tie_key`). In re-ranking mode judged candidates a
    system does not score rank below all scored ones; in retrieval mode they are not
    ranked (trec_eval's rule, :mod:`pipeline.evaluate.retrieval`). A survey a run has no
    row for is counted (``runs[NAME]["missing_surveys"]``) and warned about.

    Args:
        eval_file: eval Parquet, release folder, or Hub dataset (see
            :func:`pipeline.evaluate.evalset.resolve_eval_file`).
        runs: run files (TREC, CSV, TSV or Parquet; :mod:`pipeline.evaluate.runs`), each a
            path or ``(path, name)``.
        scores: in-memory systems, name -> ``{survey_id: {candidate_id: score}}`` or a
            DataFrame with the run columns.
        model_files: models written by ``python -m pipeline train`` (path or ``(path,
            name)``), each named by its file stem unless named.
        models: encoders, scorers and sentence-transformers models to run on the
            candidates view (:mod:`pipeline.evaluate.models`).
        config: bootstrap resamples, seed, random-baseline seeds and cutoffs.
        train_config: the learned baselines' hyperparameters, seeds and threads.
        lenient: drop run rows whose ids are not in the eval set instead of failing.
        require_complete: fail when a run has no row for some eval survey.
        mode: ``rerank`` (the judged candidates; the default) or ``retrieval`` (runs, scores
            and models over the split's whole corpus; not model files).
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
            stage; :mod:`pipeline.evaluate.model_retrieval`).
        external: where a foreign ``--model-file``'s features come from
            (:class:`pipeline.evaluate.external.ExternalOptions`).

    Raises:
        RunError: a run is malformed, names ids outside the eval set (unless
            ``lenient``), reuses a system name, or (with ``require_complete``) has no row
            for some eval survey; the message names the file and the flag that fixes it.
        ModelError: a model does not load or returns something unusable.
        EvalSetError: the eval table is malformed.
        ValueError: a bad mode, or systems the mode cannot evaluate, or nothing to evaluate.
        FileNotFoundError: the eval file or a run file does not exist.
    """
    runs, model_files, models = list(runs), list(model_files), list(models)
    scores = dict(scores or {})
    if mode not in MODES:
        raise UsageError(f"--mode (mode=) {mode!r}: unknown; available: {', '.join(MODES)}")
    if mode == RETRIEVAL and model_files:
        raise UsageError(
            f"{RETRIEVAL_OPTION} evaluates systems over the whole corpus: a --model-file "
            "re-ranks the judged candidates with their features (evaluate it without it)"
        )
    if mode != RETRIEVAL and retrieval.qdrant is not None:
        raise UsageError(f"--qdrant retrieves from the whole corpus: add {RETRIEVAL_OPTION}")
    if mode == RETRIEVAL and not (runs or scores or models or retrieval.qdrant):
        raise UsageError(
            f"{RETRIEVAL_OPTION} needs a run over the split's corpus (--run, runs=) or a model "
            "(--encoder, --sentence-transformer, --scorer)"
        )
    if not (runs or scores or model_files or models or baselines):
        raise UsageError("nothing to evaluate: no system given and no baselines asked for")
    eval_path = resolve_eval_file(eval_file)
    eval_set = load_eval_set(eval_path)
    pairs = eval_set.select(SURVEY_ID, CANDIDATE_ID)
    submitted, model_runs = _load_submitted(
        eval_set, eval_path, mode, runs, scores, model_files, models, lenient, cache_dir,
        batch_size, retrieval, external,
    )  # fmt: skip
    submitted += [
        Submitted(restrict_to_eval_set(scores_run(frame, name), pairs), KIND_WHOLE_SURVEY)
        for name, frame in (whole_survey or {}).items()
    ]
    if not baselines:
        found = _Baselines([], {}, {})
    elif mode == RETRIEVAL:
        found = _retrieval_baselines(
            eval_set, eval_path, config, retrieval, learned, cache_dir, batch_size
        )
    else:
        found = _baselines(
            eval_set, eval_path, config, train_config, learned, cache_dir, batch_size
        )
    _check_names(submitted, reserved=[*found.names, *BASELINES])
    n_eval_surveys = eval_set[SURVEY_ID].n_unique()
    missing = {s.name: missing_surveys(s.run, pairs) for s in submitted}
    for system in submitted:
        _check_complete(system.run, missing[system.name], n_eval_surveys, require_complete)
    eval_identity = file_identity(eval_path)
    if is_hub_spec(eval_file):
        eval_identity["hub"] = str(eval_file)

    ks = tuple(sorted({*config.ks, *RETRIEVAL_KS})) if mode == RETRIEVAL else tuple(config.ks)
    ranked = RANK_SCORED if mode == RETRIEVAL else RANK_ALL
    per_system = dict(found.per_survey)
    for system in submitted:
        judged = (
            retrieval_frame(eval_set, system.run)
            if mode == RETRIEVAL
            else _aligned(eval_set, system.run.scores)
        )
        per_system[system.name] = _with_chv(
            per_survey_subsets(judged, ks, ranked), _chv(eval_set, system)
        )
    systems = list(per_system)
    names = [s.name for s in submitted]
    registry = metric_registry(ks)
    metrics = list(registry)
    with_chv = any(frame[CHV_RATIO].drop_nulls().len() for frame in per_system.values()) or any(
        s.vectors is not None for s in submitted
    )
    columns = [*metrics, CHV_RATIO] if with_chv else metrics

    survey_years = (
        eval_set.select(SURVEY_ID, SURVEY_YEAR).unique(SURVEY_ID, keep="first").sort(SURVEY_ID)
    )
    per_survey = (
        pl.concat(
            [frame.select(pl.lit(n).alias(SYSTEM), pl.all()) for n, frame in per_system.items()],
            how="vertical",
        )
        .join(survey_years, on=SURVEY_ID, how="left")
        .select(SYSTEM, SUBSET, SURVEY_ID, SURVEY_YEAR, *columns)
        .sort(SYSTEM, SUBSET, SURVEY_ID)
    )

    all_surveys = survey_years[SURVEY_ID]
    subsets: dict[str, tuple[str, pl.Series]] = {s: (s, all_surveys) for s in RANKING_SUBSETS}
    for year in sorted(survey_years[SURVEY_YEAR].unique().to_list()):
        surveys = survey_years.filter(pl.col(SURVEY_YEAR) == year)[SURVEY_ID]
        subsets[year_subset(year)] = (SUBSET_ALL, surveys)
    for name, ids in (query_groups or {}).items():
        subsets[name] = (SUBSET_ALL, all_surveys.filter(all_surveys.is_in(ids.implode())))
    summaries = _summaries(per_survey, systems, columns, subsets, config)

    headline = main_metrics(ks)
    best = _best_baseline(summaries[SUBSET_ALL], SELECTION_METRIC, found.names)
    tests = _baseline_tests(per_survey, systems, found.names, headline, all_surveys, config)
    pairwise = _pairwise_tests(per_survey, names, headline, all_surveys, config)
    same = _same_as_baseline(per_survey, names, found.names, metrics)
    for system, baseline in same.items():
        warnings.warn(
            f"{system} gives exactly the per-survey values of baseline {baseline}: the same "
            "system evaluated twice? (compare it with the others, not with itself)",
            RunWarning,
            stacklevel=2,
        )
    saturated, longest = _saturated(eval_set, mode, ks)

    docs = {name: registry[name].doc for name in metrics}
    if with_chv:
        docs[CHV_RATIO] = CHV_DOC
    kinds = {
        name: KIND_UPPER_BOUND
        if name in UPPER_BOUNDS
        else KIND_BASELINE
        if name in BASELINES
        else KIND_LEARNED
        for name in found.names
    }
    kinds |= {s.name: s.kind for s in submitted}
    results = _clean(
        {
            "format_version": FORMAT_VERSION,
            "eval_file": eval_identity,
            "n_surveys": all_surveys.len(),
            "n_candidates": eval_set.height,
            "config": {
                k: list(v) if isinstance(v, tuple) else v
                for k, v in dataclasses.asdict(config).items()
            },
            "ks": list(ks),
            "tie_breaking": TIE_BREAKING,
            "ci_method": CI_METHOD.format(n=config.bootstrap_samples, seed=config.seed),
            "test_method": TEST_METHOD.format(n=config.bootstrap_samples),
            "alpha": ALPHA,
            "metrics": docs,
            "metric_aliases": {
                name: alias for name, alias in metric_aliases(ks).items() if name in metrics
            },
            "main_metrics": headline,
            "selection_metric": SELECTION_METRIC,
            "saturated_metrics": saturated,
            "longest_list": longest,
            "mode": mode,
            "baselines": found.names,
            "upper_bounds": list(UPPER_BOUNDS),
            "best_baseline": best,
            "submitted": names,
            "kinds": kinds,
            "same_as_baseline": same,
            "learned_baselines": found.facts,
            "models": {s.name: s.facts for s in submitted if s.facts},
            "leak_probe": leak_probe(summaries[SUBSET_ALL], tests),
            "runs": {
                s.name: {
                    "file": file_identity(s.run.path) if s.run.path is not None else None,
                    "format": s.run.format,
                    "rows": s.run.n_rows,
                    "dropped_unknown_ids": s.run.n_dropped_unknown,
                    "scored_judged": _scored_judged(s.run, pairs),
                    "missing_judged": eval_set.height - _scored_judged(s.run, pairs),
                    "missing_surveys": len(missing[s.name]),
                }
                for s in submitted
            },
            "subset_surveys": {name: surveys.len() for name, (_, surveys) in subsets.items()},
            "systems": summaries[SUBSET_ALL],
            "subsets": summaries,
            "tests": tests,
            "pairwise": pairwise,
            "tier_distribution": _tier_distribution(eval_set),
            **(
                {
                    "task": task,
                    "query_groups": list(query_groups or {}),
                    "whole_survey": {
                        name: {"baseline": name.rsplit("@", 1)[0], **dict(facts)}
                        for name in (whole_survey or {})
                        for facts in [(whole_survey_facts or {}).get(name.rsplit("@", 1)[0], {})]
                    },
                    "whole_survey_skipped": {
                        name: f["skipped"]
                        for name, f in (whole_survey_facts or {}).items()
                        if isinstance(f, dict) and "skipped" in f
                    },
                }
                if task is not None
                else {}
            ),
        }
    )
    if out_dir is None:
        return Evaluation(results, per_survey, render_report(results), tuple(model_runs))
    target = Path(out_dir)
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


def evaluate(
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
    ``<out_dir>/eval/`` (:func:`run_evaluation` with ``out_dir``).

    Args:
        baselines_only: evaluate only the baselines; no runs may be given.
        Others: as :func:`run_evaluation`.

    Returns:
        The content of ``eval_results.json`` (floats already rounded).

    Raises:
        ValueError: ``baselines_only`` together with runs; and as :func:`run_evaluation`.
    """
    runs = list(runs)
    if baselines_only and runs:
        raise UsageError("--baselines-only evaluates no runs, but --run files were given")
    return run_evaluation(
        eval_file,
        runs,
        model_files=model_files,
        models=models,
        config=config,
        train_config=train_config,
        lenient=lenient,
        require_complete=require_complete,
        mode=mode,
        learned=learned,
        cache_dir=cache_dir,
        out_dir=Path(out_dir) / EVAL_DIR,
    ).results
