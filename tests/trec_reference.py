"""Reference values from trec_eval (pytrec_eval, ir_measures), each call in a fresh interpreter.

ir_measures 0.4.3 over pytrec_eval-terrier 0.5.11 is wrong in some processes: for the
top-100 and full-corpus runs of ``tests/test_evaluate_retrieval.py`` it gave nDCG@5 0.0,
0.3836 or 1.0 for a query whose nDCG@5 is 0.6161 (hand-computed, and what every other
process gives), in about 1 process in 16: PYTHONHASHSEED 32, 53, 56, 58, 99 and 110 of
24 to 119, every time under those seeds. It happens when one evaluator computes several
cutoffs of a measure (``ndcg_cut_5``, ``ndcg_cut_10``, ...), which pytrec_eval receives as
a set, in hash order; CI met it on all three depths of one run. :func:`ir_measures_calc`
asks ir_measures for one measure at a time, which is right under each of those seeds.
The calls also run in their own interpreter: pytrec_eval keeps trec_eval's measure
parameters in process-global tables (cvangysel/pytrec_eval#22, #38), so a reference
does not depend on the evaluators other tests built.
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
    out = []
    for name in job["measures"]:  # one measure per evaluator: see the module's docstring
        measure = ir_measures.parse_measure(name)
        out += [
            [m.query_id, str(m.measure), m.value]
            for m in ir_measures.iter_calc([measure], job["qrels"], job["run"])
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
