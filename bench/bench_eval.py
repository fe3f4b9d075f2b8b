"""Benchmark: the Polars metric computation against pytrec_eval on the same random data.

Generates a seeded synthetic eval set (default 10,000 surveys x 400 candidates,
random labels 0-4 and random continuous scores), then times

* ours: :func:`pipeline.evaluate.per_survey_metrics` on a Polars frame with string
  ids, (a) every registered metric (45 with the default cutoffs), (b) only the
  measures pytrec_eval computes below, (c) every metric on the ALL, IN and OUT
  subsets as the evaluate stage does, (d) every metric for a constant-score run,
  where every candidate is tied and each needs its tie key (the worst case of the
  tie rule; the random scores of (a)-(c) have no ties), and (e) the tie keys
  alone (:func:`pipeline.evaluate.scoring.ties.tie_keys`: one BLAKE2b digest per
  distinct survey and candidate id, mixed in Polars) for every row;
* pytrec_eval: ``ndcg_cut.5,10,20,50,100``, ``recall.5,10,20,50,100``, ``map``,
  ``Rprec`` (relevance level 1) plus ``recip_rank`` at relevance level 3 (our
  ``RR(rel=3)``), i.e. two evaluators; and (f) the same measures on the run's top 100
  only, as retrieval mode ranks it (``ranked="scored"``: a judged candidate the run did
  not retrieve counts in R only, trec_eval's rule), against pytrec_eval on that run. Building pytrec_eval's qrels/run dicts
  from the frame is timed separately ("conversion"); figures are given with and
  without it. Evaluator construction is included in the pytrec_eval time.

Polars runs on ``POLARS_MAX_THREADS`` threads (default 2 here); pytrec_eval is
single-threaded. It also checks that both agree (max abs difference per survey
and measure). Prints figures and ratios, then one JSON line. Not a test.

Usage::

    .venv/bin/python bench/bench_eval.py [--surveys 10000] [--candidates 400] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

os.environ.setdefault("POLARS_MAX_THREADS", "2")  # before polars is imported

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import polars as pl  # noqa: E402
import pytrec_eval  # noqa: E402

from pipeline.core.config import EvaluateConfig  # noqa: E402
from pipeline.evaluate.columns import CANDIDATE_ID, LABEL, SCORE, SURVEY_ID  # noqa: E402
from pipeline.evaluate.scoring.compute import RANK_SCORED, per_survey_metrics  # noqa: E402
from pipeline.evaluate.scoring.measures import (  # noqa: E402
    AP,
    RPREC,
    RR_REL3,
    ndcg_name,
    recall_name,
)
from pipeline.evaluate.scoring.subsets import per_survey_subsets  # noqa: E402
from pipeline.evaluate.scoring.ties import tie_keys  # noqa: E402
from pipeline.evaluate.synthetic import synthetic_eval_set  # noqa: E402

KS = EvaluateConfig().ks
TREC_MEASURES = {
    f"ndcg_cut.{','.join(map(str, KS))}",
    f"recall.{','.join(map(str, KS))}",
    "map",
    "Rprec",
}
# ours -> pytrec_eval output key
PAIRS = (
    *[(ndcg_name(k), f"ndcg_cut_{k}") for k in KS],
    *[(recall_name(k), f"recall_{k}") for k in KS],
    (AP, "map"),
    (RPREC, "Rprec"),
    (RR_REL3, "recip_rank"),
)
TOP = 100  # depth of the retrieval-mode check


def best_of(repeats: int, fn):
    """(minimum seconds over ``repeats`` calls, last result)."""
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return min(times), result


def to_trec_dicts(frame: pl.DataFrame) -> tuple[dict, dict]:
    """pytrec_eval's {qid: {docid: rel}} and {qid: {docid: score}} from the frame."""
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    for survey, candidate, label, score in frame.select(
        SURVEY_ID, CANDIDATE_ID, LABEL, SCORE
    ).iter_rows():
        qrels.setdefault(survey, {})[candidate] = label
        run.setdefault(survey, {})[candidate] = score
    return qrels, run


def pytrec_eval_all(qrels: dict, run: dict) -> dict[str, dict[str, float]]:
    """All compared measures: relevance level 1, plus recip_rank at level 3."""
    main = pytrec_eval.RelevanceEvaluator(qrels, TREC_MEASURES, relevance_level=1).evaluate(run)
    tier3 = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}, relevance_level=3).evaluate(run)
    for qid, values in tier3.items():
        main[qid]["recip_rank"] = values["recip_rank"]
    return main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--surveys", type=int, default=10_000)
    parser.add_argument("--candidates", type=int, default=400)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--repeats", type=int, default=3, help="timed calls per figure; the minimum is reported"
    )
    parser.add_argument(
        "--no-write", action="store_true", help="do not write bench/results/eval.json"
    )
    args = parser.parse_args()

    rng = np.random.default_rng(args.seed)
    frame = synthetic_eval_set(args.surveys, args.candidates, seed=args.seed, with_text=False)
    # trec_eval stores scores as 32-bit floats and orders ties by docid descending (we
    # order them by a hash tie key), so agreement needs runs without ties: the scores
    # are a random permutation of 0..C-1 per survey, divided by C: random, and distinct
    # even in float32. The frame is survey-major with C rows per survey, so the
    # matrix ravels onto its rows.
    ranks = rng.random((args.surveys, args.candidates)).argsort(axis=1).argsort(axis=1)
    frame = frame.with_columns(pl.Series(SCORE, (ranks / args.candidates).ravel()))
    # shuffle so that nothing benefits from the generator's order
    frame = frame.sample(fraction=1.0, shuffle=True, seed=args.seed)
    print(
        f"data: {args.surveys} surveys x {args.candidates} candidates = {frame.height} rows; "
        f"POLARS_MAX_THREADS={os.environ['POLARS_MAX_THREADS']} (polars uses {pl.thread_pool_size()}), "
        f"{os.cpu_count()} CPUs visible"
    )

    compared = [ours for ours, _ in PAIRS]
    t_all, ours_all = best_of(args.repeats, lambda: per_survey_metrics(frame))
    t_same, _ = best_of(args.repeats, lambda: per_survey_metrics(frame, compared))
    t_subsets, _ = best_of(max(1, args.repeats - 2), lambda: per_survey_subsets(frame, KS))
    n_metrics = len(ours_all.columns) - 1
    constant = frame.with_columns(pl.lit(0.0).alias(SCORE))
    t_constant, _ = best_of(args.repeats, lambda: per_survey_metrics(constant))
    t_keys, _ = best_of(args.repeats, lambda: tie_keys(frame))
    n_candidate_ids = frame[CANDIDATE_ID].n_unique()

    t_convert, (qrels, run) = best_of(1, lambda: to_trec_dicts(frame))
    t_trec, trec = best_of(args.repeats, lambda: pytrec_eval_all(qrels, run))

    # Per survey, where ours is defined (trec_eval reports 0 where we exclude a survey).
    def largest_difference(ours_frame: pl.DataFrame, theirs: dict) -> float:
        worst = 0.0
        surveys = ours_frame[SURVEY_ID].to_list()
        for ours, key in PAIRS:
            theirs_values = pl.Series([theirs[q][key] for q in surveys], dtype=pl.Float64)
            diff = (ours_frame[ours] - theirs_values).abs().max()
            worst = max(worst, diff if diff is not None else 0.0)
        return worst

    max_diff = largest_difference(ours_all, trec)
    # (f) retrieval mode: the run's top TOP per survey; the rest not retrieved
    top = frame.with_columns(
        pl.when(pl.col(SCORE) >= 1 - TOP / args.candidates).then(pl.col(SCORE)).alias(SCORE)
    )
    t_top, ours_top = best_of(
        args.repeats, lambda: per_survey_metrics(top, compared, ranked=RANK_SCORED)
    )
    top_run = {
        q: {d: v for d, v in docs.items() if v >= 1 - TOP / args.candidates}
        for q, docs in run.items()
    }
    max_diff_top = largest_difference(ours_top, pytrec_eval_all(qrels, top_run))

    figures = {
        "surveys": args.surveys,
        "candidates_per_survey": args.candidates,
        "rows": frame.height,
        "polars_threads": pl.thread_pool_size(),
        "ours_all_metrics_s": round(t_all, 3),
        "ours_all_metrics_count": n_metrics,
        "ours_trec_measures_s": round(t_same, 3),
        "ours_all_metrics_all_in_out_s": round(t_subsets, 3),
        "ours_all_metrics_constant_run_s": round(t_constant, 3),
        "tie_keys_all_rows_s": round(t_keys, 3),
        "distinct_candidate_ids": n_candidate_ids,
        "ratio_pytrec_over_ours_all_metrics_constant_run": round(t_trec / t_constant, 2),
        "pytrec_eval_s": round(t_trec, 3),
        "pytrec_eval_conversion_s": round(t_convert, 3),
        "pytrec_eval_with_conversion_s": round(t_trec + t_convert, 3),
        "ratio_pytrec_over_ours_same_measures": round(t_trec / t_same, 2),
        "ratio_pytrec_over_ours_all_metrics": round(t_trec / t_all, 2),
        "ratio_pytrec_with_conversion_over_ours_all_metrics": round(
            (t_trec + t_convert) / t_all, 2
        ),
        "max_abs_diff_per_survey": max_diff,
        "retrieval_top_s": round(t_top, 3),
        "retrieval_top_depth": TOP,
        "retrieval_top_max_abs_diff_per_survey": max_diff_top,
        "python": platform.python_version(),
        "polars": pl.__version__,
    }
    print(f"ours, all {n_metrics} metrics (ALL subset):        {t_all:8.3f} s")
    print(f"ours, the {len(PAIRS)} pytrec_eval measures:          {t_same:8.3f} s")
    print(f"ours, all metrics x ALL/IN/OUT subsets:     {t_subsets:8.3f} s")
    print(f"ours, all metrics, constant run (all tied): {t_constant:8.3f} s")
    print(
        f"tie keys of all {frame.height} rows:           {t_keys:8.3f} s  "
        f"({n_candidate_ids} distinct candidate ids)"
    )
    print(
        f"pytrec_eval, {len(PAIRS)} measures (2 evaluators):    {t_trec:8.3f} s  (excl. dict conversion)"
    )
    print(f"pytrec_eval dict conversion:                {t_convert:8.3f} s")
    print(f"pytrec_eval incl. conversion:               {t_trec + t_convert:8.3f} s")
    print(f"ratio pytrec_eval / ours, same measures:    {t_trec / t_same:8.2f}x")
    print(f"ratio pytrec_eval / ours (all {n_metrics} metrics):  {t_trec / t_all:8.2f}x")
    print(f"ratio pytrec_eval / ours, constant run:     {t_trec / t_constant:8.2f}x")
    print(f"ratio incl. conversion / ours (all metrics):{(t_trec + t_convert) / t_all:8.2f}x")
    print(f"agreement: max per-survey |ours - pytrec_eval| = {max_diff:.2e}")
    print(
        f"retrieval mode, top {TOP} of each survey: {t_top:8.3f} s; max per-survey "
        f"|ours - pytrec_eval| = {max_diff_top:.2e}"
    )
    print(json.dumps(figures, sort_keys=True))
    if not args.no_write:
        from bench.results import write

        write("eval", figures)


if __name__ == "__main__":
    main()
