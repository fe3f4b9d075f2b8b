"""The evaluation stage: score baselines and submitted runs, summarise, write results.

Outputs, under ``<out_dir>/eval/`` (each written to a temp file and renamed):

* ``eval_results.json``: means with 95% bootstrap intervals per system, metric
  and subset, paired tests of every submitted run against the best baseline, the
  tie rule, metric definitions and the config. Sorted keys and floats rounded
  to 12 digits, so a rerun on the same inputs is byte-identical. Input files are
  named by file name and sha256 (plus the Hub spec as given, for a Hub eval set),
  never by a local path, so the same inputs in two checkouts give the same bytes.
  Each run records ``missing_surveys``: eval surveys it has no row for (all their
  candidates rank as missing; a :class:`RunWarning`, or an error with
  ``require_complete``).
* ``per_survey.parquet``: one row per system x subset (ALL, IN, OUT) x survey with
  every metric (null = survey excluded); a survey without any candidate in the IN
  (or OUT) subset has no row there. Year subsets are the ALL rows of the surveys
  of that year (column ``survey_year``), so they are not repeated.
* ``report.md``: the Markdown summary (see :mod:`pipeline.evaluate.report`).

Subsets: ``ALL`` ranks all judged candidates of a survey; ``IN`` ranks only the
in-domain candidates (``in_domain`` true: corpus papers whose own categories include
the survey's primary category) and ``OUT`` all the others (``in_domain`` false or
null), each as if the survey had no other candidates; ``year=YYYY`` is ``ALL``
restricted to surveys first posted in that year. Means are macro-averages over
the surveys where a metric is defined.
"""

from __future__ import annotations

import dataclasses
import json
import math
import warnings
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from pipeline.config import EvaluateConfig, TrainConfig
from pipeline.evaluate.baselines import (
    BASELINES,
    BM25,
    ORACLE,
    POPULARITY,
    RANDOM,
    UPPER_BOUNDS,
    bm25_scores,
    oracle_scores,
    popularity_scores,
    random_scores,
)
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
from pipeline.evaluate.dense import DENSE, dense_scores, dense_unavailable
from pipeline.evaluate.evalset import is_hub_spec, load_eval_set, resolve_eval_file
from pipeline.evaluate.figures import write_figures
from pipeline.evaluate.learned import leak_probe, learned_baseline_scores, model_file_scores
from pipeline.evaluate.measures import main_metrics, metric_aliases, metric_registry
from pipeline.evaluate.metrics import per_survey_metrics
from pipeline.evaluate.report import render_report
from pipeline.evaluate.retrieval import (
    MODES,
    RERANK,
    RETRIEVAL,
    corpus_ids,
    load_retrieval_run,
    retrieval_frame,
)
from pipeline.evaluate.runs import Run, RunError, RunWarning, load_run, missing_surveys
from pipeline.evaluate.stats import bootstrap_means, paired_test, rng_for
from pipeline.evaluate.ties import TIE_BREAKING
from pipeline.files import atomic_path, file_identity
from pipeline.schema import CANDIDATES_VIEW, LABEL_NAMES

SUBSET_ALL, SUBSET_IN, SUBSET_OUT = "ALL", "IN", "OUT"
RANKING_SUBSETS = (SUBSET_ALL, SUBSET_IN, SUBSET_OUT)
SELECTION_METRIC = "ndcg@10"  # the best baseline has the highest mean of this metric on ALL
EVAL_DIR = "eval"
RESULTS_FILE = "eval_results.json"
PER_SURVEY_FILE = "per_survey.parquet"
REPORT_FILE = "report.md"
# 2: eval_file and run files by name + sha256; runs' missing_surveys
# 3: mode, learned baselines (lgbm, lgbm-metadata), models, leak_probe; recall@K_tier3 and
#    mrr_tier3 renamed recall@K_tier>=3 and mrr_tier>=3; metric_aliases
FORMAT_VERSION = 3
MISSING_SHOWN = 5  # missing survey ids named in a warning or error
FLOAT_DIGITS = 12
DEFAULT_CONFIG = EvaluateConfig()  # frozen, so one shared default instance is safe
DEFAULT_TRAIN_CONFIG = TrainConfig()

TEST_METHOD = (
    "Paired two-sided randomisation (sign-flip) test over surveys where both systems are "
    "defined, {n} resamples; diff = mean(system - baseline) with a 95% paired bootstrap interval."
)
CI_METHOD = "95% percentile bootstrap over surveys, {n} resamples, seed {seed}."


def year_subset(year: int) -> str:
    """Subset name of the surveys first posted in ``year``."""
    return f"year={year}"


def per_survey_subsets(judged: pl.DataFrame, ks: Sequence[int]) -> pl.DataFrame:
    """Every metric per survey on the ALL, IN and OUT candidate subsets.

    Args:
        judged: eval rows with ``score`` (null = not scored) and ``in_domain``.
        ks: metric cutoffs.

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
            per_survey_metrics(part.select(SURVEY_ID, CANDIDATE_ID, LABEL, SCORE), ks=ks)
            .with_columns(pl.lit(subset).alias(SUBSET))
            .select(SUBSET, pl.exclude(SUBSET))
            for subset, part in parts.items()
        ]
    ).sort(SUBSET, SURVEY_ID)


def _with_scores(eval_set: pl.DataFrame, scores: pl.Series) -> pl.DataFrame:
    return eval_set.with_columns(scores.alias(SCORE))


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
        raise ValueError(f"unknown baseline {name!r}; available: {', '.join(BASELINES)}")
    # A system reads the answer-free candidates view only; the oracle is the one exception.
    visible = eval_set if name == ORACLE else answer_free(eval_set)
    return per_survey_subsets(_with_scores(eval_set, scorers[name](visible)), config.ks)


def answer_free(eval_set: pl.DataFrame) -> pl.DataFrame:
    """The columns of the eval set that the release's ``candidates`` view holds (no judgment)."""
    return eval_set.select([c for c in CANDIDATES_VIEW.names if c in eval_set.columns])


def run_per_survey(eval_set: pl.DataFrame, run: Run, config: EvaluateConfig) -> pl.DataFrame:
    """Per-survey, per-subset metrics of a validated run (unscored candidates rank last)."""
    judged = eval_set.join(
        run.scores.select(SURVEY_ID, CANDIDATE_ID, SCORE),
        on=[SURVEY_ID, CANDIDATE_ID],
        how="left",
        maintain_order="left",
    )
    return per_survey_subsets(judged, config.ks)


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


def _paired_tests(
    per_survey: pl.DataFrame,
    submitted: list[str],
    best: str | None,
    metrics: list[str],
    surveys: pl.Series,
    config: EvaluateConfig,
) -> list[dict[str, Any]]:
    """One entry per submitted system x metric: paired test against ``best`` on ALL."""
    if best is None:
        return []
    baseline_values = _matrix(per_survey, best, SUBSET_ALL, surveys, metrics)
    tests: list[dict[str, Any]] = []
    for system in submitted:
        # Every run meets the same sign flips and resamples (the generator is keyed by
        # the baseline only), so equal runs get equal results whatever else is submitted.
        result = paired_test(
            _matrix(per_survey, system, SUBSET_ALL, surveys, metrics),
            baseline_values,
            config.bootstrap_samples,
            rng_for(config.seed, "paired", best),
        )
        tests += [
            {
                "system": system,
                "baseline": best,
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
    return tests


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
        f"{run.path}: no row for {len(missing)} of {n_surveys} eval survey(s) "
        f"(first: {shown}{more})"
    )
    if require_complete:
        raise RunError(f"{what}; --require-complete needs every eval survey scored")
    warnings.warn(
        f"{what}; every judged candidate of those surveys is ranked as missing",
        RunWarning,
        stacklevel=3,
    )


def _scored_judged(run: Run, pairs: pl.DataFrame) -> int:
    """Judged candidates a run scores (in retrieval mode a run also scores unjudged documents)."""
    return run.scores.join(pairs, on=[SURVEY_ID, CANDIDATE_ID], how="semi").height


def _check_names(loaded: list[Run], reserved: Sequence[str] = BASELINES) -> None:
    seen: dict[str, Path] = {}
    for run in loaded:
        if run.name in reserved:
            raise RunError(
                f"{run.path}: system name {run.name!r} is reserved for a baseline; rename the run"
            )
        if run.name in seen:
            raise RunError(
                f"{run.path}: system name {run.name!r} is already used by {seen[run.name]}"
            )
        seen[run.name] = run.path


def evaluate(
    eval_file: str | Path,
    runs: Iterable[str | Path] = (),
    baselines_only: bool = False,
    out_dir: Path = Path("work"),
    config: EvaluateConfig = DEFAULT_CONFIG,
    lenient: bool = False,
    require_complete: bool = False,
    model_files: Iterable[str | Path] = (),
    mode: str = RERANK,
    learned: bool = True,
    train_config: TrainConfig = DEFAULT_TRAIN_CONFIG,
    *,
    target: Path | None = None,
) -> dict[str, Any]:
    """Evaluate the baselines and the given runs on the eval set and write the outputs.

    Equal scores are ordered by a fixed pseudo-random tie key of (survey_id,
    candidate_id), then candidate_id; judged candidates missing from a run rank
    below all scored ones, ordered the same way (see ``results["tie_breaking"]``
    and :func:`pipeline.evaluate.ties.tie_key`). A survey a run has no row for
    is counted (``runs[NAME]["missing_surveys"]``) and warned about with a
    :class:`RunWarning`.

    Args:
        eval_file: eval Parquet, release folder, or Hub dataset (see
            :func:`pipeline.evaluate.evalset.resolve_eval_file`).
        runs: run files (TREC, CSV or Parquet; see :mod:`pipeline.evaluate.runs`).
        baselines_only: evaluate only the baselines; no runs may be given.
        out_dir: outputs go to ``<out_dir>/eval/``.
        config: bootstrap resamples, seed, random-baseline seeds and cutoffs
            (default ``EvaluateConfig()``).
        lenient: drop run rows whose ids are not in the eval set instead of failing.
        require_complete: fail when a run has no row for some eval survey (instead
            of warning and ranking all its candidates as missing).
        model_files: models written by ``python -m pipeline train``, each scored on
            the eval candidates as a submitted system named by its file stem.
        mode: ``rerank`` (the judged candidates only; the default) or ``retrieval``
            (runs over the split's whole corpus, unjudged = not relevant; runs only,
            see :mod:`pipeline.evaluate.retrieval`).
        learned: train and evaluate the ``lgbm`` and ``lgbm-metadata`` baselines
            when the eval file sits in a release folder with a train split.
        train_config: their hyperparameters, seeds and threads.
        target: the directory the outputs go to, when not ``<out_dir>/eval/`` (the CLI's
            ``--out DIR`` names it).

    Returns:
        The content of ``eval_results.json`` (floats already rounded).

    Raises:
        RunError: a run is malformed, names ids outside the eval set (unless
            ``lenient``), reuses a system name, or (with ``require_complete``) has
            no row for some eval survey; the message names the file and the first
            missing survey ids.
        EvalSetError: the eval table is malformed.
        ValueError: ``baselines_only`` together with runs.
        FileNotFoundError: the eval file or a run file does not exist.
    """
    run_paths = [Path(p) for p in runs]
    model_paths = [Path(p) for p in model_files]
    if baselines_only and run_paths:
        raise ValueError("baselines_only evaluates no runs, but runs were given")
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; available: {', '.join(MODES)}")
    if mode == RETRIEVAL and (model_paths or not run_paths):
        raise ValueError(
            "--mode retrieval evaluates runs over the whole corpus only: give --run files "
            "(the baselines and --model-file re-rank the judged candidates)"
        )
    eval_path = resolve_eval_file(eval_file)
    eval_set = load_eval_set(eval_path)
    pairs = eval_set.select(SURVEY_ID, CANDIDATE_ID)
    if mode == RETRIEVAL:
        corpus = corpus_ids(eval_path)
        loaded = [load_retrieval_run(p, pairs, corpus, lenient=lenient) for p in run_paths]
    else:
        loaded = [load_run(p, pairs, lenient=lenient) for p in run_paths]

    # --- learned systems (pipeline.evaluate.learned): lgbm baselines and --model-file models
    learned_scores: dict[str, pl.Series] = {}
    learned_facts: dict[str, Any] = {}
    if mode == RERANK and learned:
        learned_scores, learned_facts = learned_baseline_scores(eval_set, eval_path, train_config)
        dense_reason = dense_unavailable()
        if dense_reason is None:
            learned_scores[DENSE] = dense_scores(answer_free(eval_set))
        else:
            learned_facts[DENSE] = {"skipped": dense_reason}
    baselines = [b for b in BASELINES if b not in UPPER_BOUNDS] + list(learned_scores)
    baselines += [b for b in BASELINES if b in UPPER_BOUNDS]
    if mode == RETRIEVAL:
        baselines = []
    model_scores: dict[str, pl.Series] = {}
    models: dict[str, Any] = {}
    for path in model_paths:
        name, scores, facts = model_file_scores(eval_set, eval_path, path)
        if name in baselines or name in models:
            raise RunError(f"{path}: system name {name!r} is already used; rename the model file")
        model_scores[name], models[name] = scores, facts
    _check_names(loaded, reserved=[*baselines, *BASELINES, *models])
    n_eval_surveys = eval_set[SURVEY_ID].n_unique()
    missing = {run.name: missing_surveys(run, pairs) for run in loaded}
    for run in loaded:
        _check_complete(run, missing[run.name], n_eval_surveys, require_complete)
    eval_identity = file_identity(eval_path)
    if is_hub_spec(eval_file):
        eval_identity["hub"] = str(eval_file)

    metrics = list(metric_registry(config.ks))
    headline = main_metrics(config.ks)
    per_system = {
        name: (
            per_survey_subsets(_with_scores(eval_set, learned_scores[name]), config.ks)
            if name in learned_scores
            else baseline_per_survey(eval_set, name, config)
        )
        for name in baselines
    }
    per_system |= {
        name: per_survey_subsets(_with_scores(eval_set, scores), config.ks)
        for name, scores in model_scores.items()
    }
    if mode == RETRIEVAL:
        per_system |= {
            run.name: per_survey_subsets(retrieval_frame(eval_set, run), config.ks)
            for run in loaded
        }
    else:
        per_system |= {run.name: run_per_survey(eval_set, run, config) for run in loaded}
    systems = list(per_system)
    submitted = [*models, *(run.name for run in loaded)]

    survey_years = (
        eval_set.select(SURVEY_ID, SURVEY_YEAR).unique(SURVEY_ID, keep="first").sort(SURVEY_ID)
    )
    per_survey = (
        pl.concat(
            [
                frame.select(pl.lit(name).alias(SYSTEM), pl.all())
                for name, frame in per_system.items()
            ],
            how="vertical",
        )
        .join(survey_years, on=SURVEY_ID, how="left")
        .select(SYSTEM, SUBSET, SURVEY_ID, SURVEY_YEAR, *metrics)
        .sort(SYSTEM, SUBSET, SURVEY_ID)
    )

    all_surveys = survey_years[SURVEY_ID]
    subsets: dict[str, tuple[str, pl.Series]] = {s: (s, all_surveys) for s in RANKING_SUBSETS}
    for year in sorted(survey_years[SURVEY_YEAR].unique().to_list()):
        surveys = survey_years.filter(pl.col(SURVEY_YEAR) == year)[SURVEY_ID]
        subsets[year_subset(year)] = (SUBSET_ALL, surveys)
    summaries = _summaries(per_survey, systems, metrics, subsets, config)

    selection = SELECTION_METRIC if SELECTION_METRIC in metrics else metrics[0]
    best = _best_baseline(summaries[SUBSET_ALL], selection, baselines)
    tests = _paired_tests(per_survey, submitted, best, headline, all_surveys, config)

    registry = metric_registry(config.ks)
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
            "tie_breaking": TIE_BREAKING,
            "ci_method": CI_METHOD.format(n=config.bootstrap_samples, seed=config.seed),
            "test_method": TEST_METHOD.format(n=config.bootstrap_samples),
            "metrics": {name: registry[name].doc for name in metrics},
            "metric_aliases": {
                name: alias for name, alias in metric_aliases(config.ks).items() if name in metrics
            },
            "main_metrics": headline,
            "selection_metric": selection,
            "mode": mode,
            "baselines": baselines,
            "upper_bounds": list(UPPER_BOUNDS),
            "best_baseline": best,
            "submitted": submitted,
            "learned_baselines": learned_facts,
            "models": models,
            "leak_probe": leak_probe(summaries[SUBSET_ALL]),
            "runs": {
                run.name: {
                    "file": file_identity(run.path),
                    "format": run.format,
                    "rows": run.n_rows,
                    "dropped_unknown_ids": run.n_dropped_unknown,
                    "scored_judged": _scored_judged(run, pairs),
                    "missing_judged": eval_set.height - _scored_judged(run, pairs),
                    "missing_surveys": len(missing[run.name]),
                }
                for run in loaded
            },
            "subset_surveys": {name: surveys.len() for name, (_, surveys) in subsets.items()},
            "systems": summaries[SUBSET_ALL],
            "subsets": summaries,
            "tests": tests,
            "tier_distribution": _tier_distribution(eval_set),
        }
    )

    target = Path(target) if target is not None else Path(out_dir) / EVAL_DIR
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
    return results
