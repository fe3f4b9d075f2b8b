"""The popularity question for a foreign model: is it still a citation counter?

For each foreign model the results record, per feature: where it came from, its coverage
(the share of eval candidates the source gave a value), the model's gain importance, and the
feature's hard-negative AUC alone: the leak audit's statistic
(:func:`pipeline.rules.leak_audit.columns_audit`: positives against the hard negatives they
were matched with, pooled and per survey, each with its 95% chance half-width). A feature
that only ranks popular works first has an AUC near 0.5 here, since a survey's hard
negatives are as visible as what it cites; one that separates what the expert cited from
what they excluded does not. The report puts the model's nDCG@10 and hard-negative AUC next
to the ``popularity`` baseline's (a judgment-side upper reference: the candidates'
citation counts), with the evaluation's paired test.

Time. A feature read from outside the release cannot be checked for leakage: a citation
count taken today counts the citations after each survey. With ``--features-as-of DATE``
the results give the share of eval surveys dated before it (their features may see their
future) and of candidates dated after it (a feature taken before the paper existed).
"""

from __future__ import annotations

from datetime import date
from typing import Any

import polars as pl

from pipeline.core.schema import CANDIDATE_DATE, SURVEY_DATE
from pipeline.evaluate.columns import LABEL, SURVEY_ID
from pipeline.evaluate.results import EvaluationResults, as_results
from pipeline.evaluate.scoring.measures import HARD_NEGATIVE_AUC, ndcg_name
from pipeline.evaluate.systems.baselines import POPULARITY
from pipeline.rules.leak_audit import columns_audit

FOREIGN = "foreign LightGBM"
COMPARED = (ndcg_name(10), HARD_NEGATIVE_AUC)
TIME_NOTE = (
    "Features read from outside the release cannot be checked for time leakage: a value "
    "taken after a survey (a citation count taken today) counts what came after it."
)


def feature_facts(
    features: pl.DataFrame,
    eval_set: pl.DataFrame,
    gain: dict[str, float],
    origin: dict[str, tuple[str, str]],
    coverage_of: pl.DataFrame | None = None,
) -> dict[str, dict[str, Any]]:
    """Per model feature: ``source``, ``column``, ``coverage``, ``gain``, ``gain_share`` and
    ``auc`` (the leak audit's table row), ``features`` aligned with ``eval_set``.
    ``coverage_of``: the rows coverage is the share of (default ``features``; retrieval
    mode: every pair scored, judged or not)."""
    covered = features if coverage_of is None else coverage_of
    names = [c for c in features.columns if c in gain]
    audit = columns_audit(
        features.select(pl.Series(SURVEY_ID, eval_set[SURVEY_ID]), *names), eval_set[LABEL]
    )
    total = sum(gain.values())
    return {
        name: {
            "source": origin[name][0],
            "column": origin[name][1],
            "coverage": covered[name].is_not_null().mean() if covered.height else None,
            "gain": gain[name],
            "gain_share": gain[name] / total if total > 0 else None,
            "auc": audit.get(name, {}),
        }
        for name in names
    }


def time_facts(eval_set: pl.DataFrame, as_of: date | None) -> dict[str, Any]:
    """The time-leakage note, with the shares ``as_of`` gives (module doc)."""
    facts: dict[str, Any] = {"note": TIME_NOTE, "features_as_of": None}
    if as_of is None:
        return facts
    surveys = eval_set.unique(SURVEY_ID).select(SURVEY_DATE)
    facts |= {
        "features_as_of": as_of.isoformat(),
        "surveys_before_features": (surveys[SURVEY_DATE] < as_of).mean(),
        "candidates_after_features": (eval_set[CANDIDATE_DATE] > as_of).mean()
        if CANDIDATE_DATE in eval_set.columns
        else None,
    }
    return facts


# --------------------------------------------------------------------------- the report
def _num(value: Any, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def _auc_cell(auc: dict[str, Any], scope: str) -> str:
    value, chance = auc.get(scope), auc.get(f"{scope}_chance")
    if value is None:
        return "n/a"
    beyond = chance is not None and abs(value - 0.5) > chance
    return f"{value:.3f} (±{_num(chance)}){' *' if beyond else ''}"


def _comparison(results: EvaluationResults, name: str) -> list[str]:
    overall = results.systems
    if POPULARITY not in overall or name not in overall:
        return [f"The `{POPULARITY}` baseline was not evaluated: no comparison."]
    tests = {t.metric: t for t in results.tests if t.system == name and t.baseline == POPULARITY}
    rows = ["| metric | model | popularity | diff (model - popularity) | p (Holm) |",
            "|---|---|---|---|---|"]  # fmt: skip
    for metric in COMPARED:
        test = tests.get(metric)
        mine, theirs = overall[name].get(metric), overall[POPULARITY].get(metric)
        diff = None if test is None else test.diff
        rows.append(
            f"| {metric} | {_num(None if mine is None else mine.mean)} | "
            f"{_num(None if theirs is None else theirs.mean)} | "
            f"{'n/a' if diff is None else f'{diff:+.3f}'} | "
            f"{_num(None if test is None else test.p_holm)} |"
        )
    return rows


def render_section(results: dict[str, Any] | EvaluationResults) -> list[str]:
    """The report's lines for the foreign models of ``results`` (none: no lines)."""
    results = as_results(results)
    models = {
        name: facts
        for name, facts in sorted(results.models.items())
        if facts.get("kind") == FOREIGN
    }
    if not models:
        return []
    lines = ["", "## Is it a citation counter? (foreign models)"]
    for name, facts in models.items():
        features = facts.get("features", {})
        ranked = sorted(features.items(), key=lambda kv: (-(kv[1].get("gain") or 0.0), kv[0]))
        lines += [
            "",
            f"### `{name}`",
            "",
            "Each feature alone: its hard-negative AUC (positives against the hard negatives "
            "of their survey; 0.5 = no separation, ± the 95% chance half-width, * beyond "
            "chance), pooled and per survey; gain = the model's gain importance.",
            "",
            "| feature | source | coverage | gain share | AUC pooled | AUC per survey |",
            "|---|---|---|---|---|---|",
        ]
        for feature, f in ranked:
            source = f["source"] + ("" if f["column"] == feature else f" `{f['column']}`")
            lines.append(
                f"| `{feature}` | {source} | {_num(f.get('coverage'))} | "
                f"{_num(f.get('gain_share'))} | {_auc_cell(f['auc'], 'pooled')} | "
                f"{_auc_cell(f['auc'], 'per_survey')} |"
            )
        if ranked:
            top, f = ranked[0]
            lines += ["", f"Top feature by gain: `{top}` (share {_num(f.get('gain_share'))}), "
                      f"hard-negative AUC alone {_auc_cell(f['auc'], 'per_survey')} per survey."]  # fmt: skip
        lines += ["", *_comparison(results, name)]
        time = facts.get("time", {})
        note = time.get("note", TIME_NOTE)
        if time.get("features_as_of"):
            note += (
                f" Features as of {time['features_as_of']}: "
                f"{_num(time.get('surveys_before_features'))} of the eval surveys are dated "
                f"before it, {_num(time.get('candidates_after_features'))} of the candidates "
                "after it."
            )
        lines += ["", note]
    return lines
