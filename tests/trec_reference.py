"""Reference values from trec_eval (pytrec_eval, ir_measures), each call in a fresh interpreter.

pytrec_eval keeps trec_eval's measure parameters (the cutoffs of ``ndcg_cut``, ``recall``,
...) in process-global tables that every ``RelevanceEvaluator`` writes and reads
(cvangysel/pytrec_eval#22 and #38, terrierteam/ir_measures#42 and #49). In one pytest
process, evaluators built by earlier tests can change what a later one computes: CI saw
ir_measures' nDCG@5 differ from trec_eval's own on one machine and not on another, for the
same run and qrels. A reference computed in its own interpreter depends on its inputs alone.
"""

from __future__ import annotations

import json
import subprocess
import sys

_SCRIPT = r"""
import json, sys
job = json.load(sys.stdin)
if job["tool"] == "pytrec_eval":
    import pytrec_eval
    out = [
        pytrec_eval.RelevanceEvaluator(
            job["qrels"], set(measures), relevance_level=level
        ).evaluate(job["run"])
        for measures, level in job["evaluations"]
    ]
else:
    import ir_measures
    measures = [ir_measures.parse_measure(name) for name in job["measures"]]
    out = [
        [m.query_id, str(m.measure), m.value]
        for m in ir_measures.iter_calc(measures, job["qrels"], job["run"])
    ]
json.dump(out, sys.stdout)
"""

Qrels = dict[str, dict[str, int]]
Run = dict[str, dict[str, float]]


def _call(job: dict) -> list:
    # json writes floats as repr: scores and values cross the pipe exactly
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT],
        input=json.dumps(job),
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"reference {job['tool']} failed:\n{done.stderr}")
    return json.loads(done.stdout)


def pytrec_eval_many(
    qrels: Qrels, run: Run, evaluations: list[tuple[set[str], int]]
) -> list[dict[str, dict[str, float]]]:
    """pytrec_eval's per-query values for each (measures, relevance_level), one interpreter."""
    job = {
        "tool": "pytrec_eval",
        "qrels": qrels,
        "run": run,
        "evaluations": [[sorted(measures), level] for measures, level in evaluations],
    }
    return _call(job)


def pytrec_eval(
    qrels: Qrels, run: Run, measures: set[str], relevance_level: int = 1
) -> dict[str, dict[str, float]]:
    """``pytrec_eval.RelevanceEvaluator(qrels, measures, relevance_level).evaluate(run)``."""
    return pytrec_eval_many(qrels, run, [(measures, relevance_level)])[0]


def ir_measures_calc(measures: list[str], qrels: Qrels, run: Run) -> dict[tuple[str, str], float]:
    """``ir_measures.iter_calc`` of the measures named, as {(query id, measure name): value}."""
    job = {"tool": "ir_measures", "measures": measures, "qrels": qrels, "run": run}
    return {(query, name): value for query, name, value in _call(job)}
