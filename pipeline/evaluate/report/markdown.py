"""Markdown report rendered from the ``eval_results.json`` content (and nothing else).

It opens with the systems ranked by nDCG@10, each mean with its 95% interval and marks
against every baseline (Holm-corrected), then the submitted systems against each other,
then the details: more metrics and cutoffs, where each submitted system came from, the
reading-free probe, in-domain and out-of-domain candidates, survey years, the tier
distribution and the definitions. Metric names are ir_measures' (``eval_results.json``
lists the previous names). No expectation is written in: every number comes from the
results.
"""

from __future__ import annotations

from collections.abc import Sequence
from string import ascii_lowercase

from pipeline.evaluate.external.popularity import render_section
from pipeline.evaluate.report.figures import CAPTIONS
from pipeline.evaluate.results import EvaluationResults, Stat, as_results
from pipeline.evaluate.scoring.coverage import CHV_RATIO
from pipeline.evaluate.scoring.measures import (
    AP,
    HARD_NEGATIVE_AUC,
    RR_REL3,
    ndcg_name,
    recall_name,
    recall_rel3_name,
)
from pipeline.evaluate.systems.learned import PROBE_ALPHA

_MISSING = "n/a"
_SATURATED = "saturated"
UP, DOWN = "▲", "▼"
# the headline table's columns after the selection metric (when the results have them)
HEADLINE_REST = (recall_rel3_name(10), RR_REL3, AP, HARD_NEGATIVE_AUC, CHV_RATIO)


def _num(value: float | None, digits: int = 3, signed: bool = False) -> str:
    if value is None:
        return _MISSING
    return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"


def _with_ci(stat: Stat | None) -> str:
    if stat is None or stat.mean is None:
        return _MISSING
    return f"{_num(stat.mean)} [{_num(stat.ci_low)}, {_num(stat.ci_high)}]"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]


def _figure(figures: Sequence[str], name: str) -> list[str]:
    """A link to figure ``name`` when it was drawn (the tables above it hold its numbers)."""
    path = next((f for f in figures if f.rsplit("/", 1)[-1] == name), None)
    return [] if path is None else ["", f"![{CAPTIONS[name]}]({path})"]


def ranked_systems(results: EvaluationResults) -> list[str]:
    """Systems by mean of the selection metric (nDCG@10), best first; ties in the results'
    order, systems without a value last."""
    overall, metric = results.subsets["ALL"], results.selection_metric
    order = {s: i for i, s in enumerate(results.ranked_over)}

    def key(system: str) -> tuple:
        mean = overall[system][metric].mean
        return (mean is None, -(mean or 0.0), order[system])

    return sorted(results.ranked_over, key=key)


def baseline_letters(results: EvaluationResults) -> dict[str, str]:
    """A letter for every baseline the systems are tested against (upper bounds aside)."""
    compared = [b for b in results.baselines if b not in results.upper_bounds]
    return {b: ascii_lowercase[i % 26] for i, b in enumerate(compared)}


def significant_against(
    results: EvaluationResults, system: str, metric: str
) -> tuple[list[str], list[str]]:
    """The baselines ``system`` is significantly better and worse than on ``metric``
    (Holm-corrected), in the baselines' order."""
    better, worse = [], []
    for test in results.tests:
        if test.system != system or test.metric != metric or not test.significant:
            continue
        (better if (test.diff or 0.0) > 0 else worse).append(test.baseline or "")
    return better, worse


def _marks(results: EvaluationResults, system: str, metric: str) -> str:
    letters = baseline_letters(results)
    better, worse = significant_against(results, system, metric)
    up = "".join(sorted(letters[b] for b in better))
    down = "".join(sorted(letters[b] for b in worse))
    return (f" {UP}{up}" if up else "") + (f" {DOWN}{down}" if down else "")


def _cell(results: EvaluationResults, system: str, metric: str) -> str:
    if metric in results.saturated_metrics:
        return _SATURATED
    stat = results.subsets["ALL"][system].get(metric)
    return _with_ci(stat) + _marks(results, system, metric)


def _metric_table(results: EvaluationResults, metrics: list[str]) -> list[str]:
    rows = [
        [system, results.kind(system)] + [_cell(results, system, m) for m in metrics]
        for system in ranked_systems(results)
    ]
    return _table(["system", "kind", *metrics], rows)


def _legend(results: EvaluationResults) -> list[str]:
    letters = baseline_letters(results)
    text = (
        "Means over surveys with 95% bootstrap intervals. "
        f"{UP}x / {DOWN}x: significantly better / worse than baseline x (paired randomisation "
        "test over surveys, p < "
        f"{results.alpha} after Holm's correction over the baselines, per system "
        "and metric)."
    )
    if letters:
        text += " Baselines: " + ", ".join(f"{v} = {k}" for k, v in letters.items()) + "."
    return ["", text]


def _headline(results: EvaluationResults) -> list[str]:
    selection, systems = results.selection_metric, results.ranked_over
    present = set(results.subsets["ALL"][systems[0]]) if systems else set()
    metrics = [selection] + [m for m in HEADLINE_REST if m in present]
    lines = ["", f"## Systems by {selection}", ""]
    if not systems:
        return lines + ["No system evaluated."]
    lines += _metric_table(results, metrics)
    lines += _legend(results)
    if CHV_RATIO in metrics:
        lines += [
            "",
            "chv_ratio (systems with embeddings only): how much of the reading list's "
            "embedding space the top of the ranking spans; coverage, not relevance.",
        ]
    for system, baseline in sorted(results.same_as_baseline.items()):
        lines += [
            "",
            f"**Note:** `{system}` gives exactly the per-survey values of baseline "
            f"`{baseline}`: the same system evaluated twice.",
        ]
    return lines


def _pairwise(results: EvaluationResults) -> list[str]:
    submitted, metric = results.submitted, results.selection_metric
    if len(submitted) < 2:
        return []
    cells = {(t.system, t.other): t for t in results.pairwise if t.metric == metric}

    def cell(row: str, column: str) -> str:
        if row == column:
            return "-"
        test, sign = cells.get((row, column)), 1.0
        if test is None:
            test, sign = cells.get((column, row)), -1.0
        if test is None or test.diff is None:
            return _MISSING
        star = "*" if test.significant else ""
        return f"{_num(sign * test.diff, signed=True)}{star} (p {_num(test.p_holm, 3)})"

    lines = ["", f"## Submitted systems against each other ({metric})", ""]
    lines += _table(
        ["row - column", *submitted], [[r] + [cell(r, c) for c in submitted] for r in submitted]
    )
    lines += [
        "",
        f"Mean difference over surveys, row minus column; p: paired randomisation test, "
        f"Holm-corrected over the {len(cells)} pair{'s' if len(cells) != 1 else ''}; "
        f"* p < {results.alpha}.",
    ]
    return lines


def _more_metrics(results: EvaluationResults) -> list[str]:
    shown = {results.selection_metric, *HEADLINE_REST}
    rest = [m for m in results.main_metrics if m not in shown]
    if not rest or not results.ranked_over:
        return []
    return ["", "## More metrics", "", *_metric_table(results, rest)]


def _cutoffs(results: EvaluationResults) -> list[str]:
    ks = results.cutoffs
    systems = ranked_systems(results)
    if not systems:
        return []
    overall = results.subsets["ALL"]
    names = [ndcg_name(k) for k in ks] + [recall_name(k) for k in ks]
    rows = []
    for system in systems:
        row = [system]
        for name in names:
            if name in results.saturated_metrics:
                row.append(_SATURATED)
            else:
                stat = overall[system].get(name)
                row.append(_num(stat.mean) if stat else _MISSING)
        rows.append(row)
    lines = ["", "## Cutoffs", "", *_table(["system", *names], rows)]
    if results.saturated_metrics:
        lines += [
            "",
            f"{_SATURATED}: K is at least the longest candidate list ({results.longest_list}), "
            "so every system, random included, has recall 1 there; not a result.",
        ]
    return lines


def _runs_section(results: EvaluationResults) -> list[str]:
    """Where each submitted system came from and what it left unscored."""
    runs = results.runs
    if not runs:
        return []
    lines = ["", "## Submitted systems", ""]
    lines += _table(
        ["system", "kind", "from", "rows", "judged scored", "judged missing", "surveys missing",
         "dropped (unknown ids)"],
        [
            [
                name,
                results.kind(name),
                f"`{run.file['name']}` (`{run.file['sha256'][:12]}`)"
                if run.file
                else f"`{results.models.get(name, {}).get('target', 'in memory')}`",
                str(run.rows),
                str(run.scored_judged),
                str(run.missing_judged),
                str(run.missing_surveys),
                str(run.dropped_unknown_ids),
            ]
            for name, run in runs.items()
        ],
    )  # fmt: skip
    lines += _retrieved(results)
    lines += _full_text(results)
    gaps = [(name, run.missing_surveys) for name, run in runs.items() if run.missing_surveys]
    if gaps:
        lines.append("")
        lines += [
            f"**Warning:** `{name}` has no row for {n} of {results.n_surveys} surveys; every "
            "judged candidate of those surveys counts as not ranked."
            for name, n in gaps
        ]
    return lines


def _full_text(results: EvaluationResults) -> list[str]:
    """How the full-text systems scored documents: the aggregation of passage scores, the
    passage truncation, and how many documents fell back to title and abstract."""
    if results.full_text is None:
        return []
    rule = results.full_text
    chars = rule.get("passage_chars")
    cut = f"cut to {chars} characters" if chars else "not cut"
    lines = ["", f"Full text: a document's score is its passages' by `{rule['aggregation']}`; "
             f"passages (heading and text) {cut} before an encoder reads them; a document "
             "without full text is scored on its title and abstract.", ""]  # fmt: skip
    for name, facts in sorted(results.models.items()):
        passages = facts.get("passages")
        if not isinstance(passages, dict):
            continue
        if "documents_without_full_text" in passages:
            lines.append(
                f"- `{name}`: {passages['passages_scored']} passage(s) scored; "
                f"{passages['documents_with_full_text']} document(s) with full text, "
                f"{passages['documents_without_full_text']} on title and abstract"
                + (f" ({passages['pairs_fallback']} of {passages['pairs']} judged pairs)"
                   if "pairs" in passages else "") + "."
            )  # fmt: skip
        else:
            lines.append(
                f"- `{name}` (passage run): {passages['passages_scored']} passage row(s) made "
                f"{passages['documents_scored']} document score(s), {passages['pairs_fallback']} "
                f"from a title-and-abstract passage; {passages['unknown_passages_dropped']} "
                "unknown passage row(s) dropped."
            )
    return lines


def _retrieved(results: EvaluationResults) -> list[str]:
    """How each model retrieved its top k over the corpus (retrieval mode): the search, an
    ANN index's recall against exact search, the points of a Qdrant collection dropped."""
    lines: list[str] = []
    for name, facts in sorted(results.models.items()):
        if "top_k" not in facts:
            continue
        k = facts["top_k"]
        if facts.get("index") == "qdrant":
            how = (f"from Qdrant collection `{facts['collection']}` ({facts['location']}); "
                   f"{facts['points_outside_corpus']} point(s) whose id is not in the corpus "
                   f"and {facts['points_without_id_field']} without one dropped, never relevant")  # fmt: skip
        elif "first_stage" in facts:
            how = f"re-ranking the top {k} of `{facts['first_stage']}`"
        elif facts.get("index") == "faiss":
            recall = facts.get(f"ann_recall@{k}")
            how = f"by faiss HNSW, recall@{k} against exact search {_num(recall, 4)}"
        else:
            how = "by exact search"
        lines.append(f"- `{name}`: top {k} per survey {how}.")
    return ["", *lines] if lines else []


def _judged(results: EvaluationResults) -> list[str]:
    """Retrieval mode: the share of each system's top 10 and top 100 that is judged."""
    shares = results.judged_coverage
    if not shares:
        return []
    cutoffs = sorted({name for values in shares.values() for name in values},
                     key=lambda name: int(name.split("@")[1]))  # fmt: skip
    order = [s for s in results.ranked_over if s in shares]
    lines = ["", "## Judged coverage", "",
             "The share of each system's top K that the judgments cover (listed candidates "
             "and hard negatives, mean over surveys); the rest counts as not relevant, so a "
             "low share means part of the score rests on documents nobody judged.", ""]  # fmt: skip
    lines += _table(
        ["system", *cutoffs],
        [[name, *[_num(shares[name].get(c)) for c in cutoffs]] for name in order],
    )
    return lines


def _notes(results: EvaluationResults) -> list[str]:
    """Learned baselines not trained, and the reading-free probe (loud when it fires)."""
    lines: list[str] = []
    learned = results.learned_baselines
    if learned.get("skipped"):
        lines += ["", f"Learned baselines (lgbm...) not trained: {learned['skipped']}."]
    if learned.get("dense", {}).get("skipped"):
        lines += ["", f"Dense baseline not run: {learned['dense']['skipped']}."]
    probe = results.leak_probe
    if not probe:
        return lines
    cells = ", ".join(
        f"{m} {_num(r[probe['probe']])} vs {_num(r[probe['reference']])}"
        for m, r in probe["metrics"].items()
    )
    lines += ["", "## Reading-free probe", ""]
    if probe["flagged"]:
        lines.append(
            f"> **LEAK WARNING: `{probe['probe']}`, a model that never reads the text, beats "
            f"`{probe['reference']}`** ({cells}). Metadata alone tells positives from hard "
            "negatives: the release leaks its answers."
        )
    else:
        chance = [m for m, r in probe["metrics"].items() if r.get("beats_within_chance")]
        lines.append(
            f"`{probe['probe']}` (LightGBM on the candidates' metadata: dates, categories, id "
            f"form, text length, never the words) does not beat `{probe['reference']}` beyond "
            f"chance ({cells}): the hard negatives cannot be told apart without reading."
            + (
                f" Its lead on {', '.join(chance)} is within chance (paired sign-flip test, "
                f"p >= {PROBE_ALPHA})."
                if chance
                else ""
            )
        )
    return lines


def _in_out(results: EvaluationResults, figures: Sequence[str]) -> list[str]:
    selection = results.selection_metric
    inside, outside = results.subsets["IN"], results.subsets["OUT"]
    lines = [
        "",
        f"## In-domain and out-of-domain candidates ({selection})",
        "",
        "Each survey's candidates ranked apart: in-domain ones (corpus papers whose own "
        "categories include the survey's primary category) and all the others.",
        "",
    ]
    rows = []
    for s in ranked_systems(results):
        a, b = inside[s][selection].mean, outside[s][selection].mean
        gap = None if a is None or b is None else a - b
        rows.append([s, _num(a), _num(b), _num(gap, signed=True)])
    lines += _table(["system", "in-domain", "other", "difference"], rows)
    return lines + _figure(figures, "in_out.png")


def _years(results: EvaluationResults) -> list[str]:
    years = sorted(k for k in results.subsets if k.startswith("year="))
    selection = results.selection_metric
    lines = ["", f"## By survey year ({selection})", ""]
    return lines + _table(
        ["system"] + [f"{y.removeprefix('year=')} (n={results.subset_surveys[y]})" for y in years],
        [
            [s] + [_with_ci(results.subsets[y][s][selection]) for y in years]
            for s in ranked_systems(results)
        ],
    )  # fmt: skip


def _groups(results: EvaluationResults) -> list[str]:
    """The ``query_groups`` subsets (the aspects' kinds and levels), one column each."""
    groups = [g for g in results.query_groups if g in results.subsets]
    if not groups:
        return []
    selection = results.selection_metric
    lines = ["", f"## By aspect kind and level ({selection})", ""]
    lines.append(
        "Each column: the aspects of one kind (the role of the section's own heading) or one "
        "layout level (2022 section or subsection, 2024 heading key), each ranked as in ALL."
    )
    lines.append("")
    return lines + _table(
        ["system"] + [f"{g} (n={results.subset_surveys[g]})" for g in groups],
        [[s] + [_with_ci(results.subsets[g][s][selection]) for g in groups]
         for s in ranked_systems(results)],
    )  # fmt: skip


def _whole_survey(results: EvaluationResults) -> list[str]:
    """Each whole-survey baseline per aspect beside the same baseline on the aspect's query."""
    pairs = results.whole_survey
    if not pairs and not results.whole_survey_skipped:
        return []
    lines = ["", "## Whole-survey systems per aspect", ""]
    lines.append(
        "A whole-survey system scores each survey's candidates once, from the survey's title "
        "and abstract (the LightGBM rankers: trained on the survey lists); every aspect of the "
        "survey ranks the same candidates, so its scores rank each aspect's list. Beside it, "
        "the same baseline given the aspect's query (heading, parent heading, survey title and "
        "abstract; rankers trained on the aspects' train split)."
    )
    lines.append("")
    metrics = results.main_metrics[:4]
    systems = results.systems
    rows = []
    for name, facts in sorted(pairs.items()):
        base = facts.get("baseline", "")
        for label, system in ((f"{base} (aspect query)", base), (f"{name} (whole survey)", name)):
            if system in systems:
                rows.append([label] + [_with_ci(systems[system].get(m)) for m in metrics])
    lines += _table(["system"] + metrics, rows)
    for name, reason in sorted(results.whole_survey_skipped.items()):
        lines += ["", f"{name}@survey not run: {reason}."]
    return lines


def _tiers(results: EvaluationResults, figures: Sequence[str]) -> list[str]:
    lines = ["", "## Tier distribution of the eval set", ""]
    tiers = results.tier_distribution
    lines += _table(
        ["label", "name", "candidates", "share", "in-domain"],
        [
            [label, t.name, str(t.count), _num(t.share), str(t.in_domain)]
            for label, t in sorted(tiers.items(), key=lambda kv: int(kv[0]))
        ],
    )
    return lines + _figure(figures, "tier_distribution.png")


def _definitions(results: EvaluationResults) -> list[str]:
    names = list(results.main_metrics)
    if CHV_RATIO in results.metrics:
        names.append(CHV_RATIO)
    lines = ["", "## Definitions", ""]
    lines += [f"- `{m}`: " + " ".join(results.metrics[m].split()) for m in names]
    lines += [
        f"- Intervals: {results.ci_method}",
        f"- Tests: {results.test_method}",
        "- Ties: equal scores are put in a fixed pseudo-random order of (survey, candidate) "
        "that does not depend on the ids' form (the exact rule: `tie_breaking` in "
        "eval_results.json); trec_eval orders them by docid instead (and compares scores as "
        "32-bit floats), so values equal trec_eval's for runs without ties in single precision.",
        "- Previous metric names (`ndcg@10`, `map`, ...) are listed under `metric_aliases` in "
        "eval_results.json.",
    ]
    return lines


def _mode(results: EvaluationResults) -> str:
    if results.mode == "rerank":
        return (
            "Re-ranking: each system ranks every judged candidate of each survey; candidates "
            "it does not score come last."
        )
    return (
        "Retrieval: each run ranks the split's whole corpus; a document without a judgment "
        "is not relevant, and a judged candidate the run did not retrieve counts only in the "
        "number of relevant candidates (trec_eval's rule)."
    )


def render_report(
    results: EvaluationResults | EvaluationResults, figures: Sequence[str] = ()
) -> str:
    """The evaluation report as Markdown.

    Args:
        results: the content of ``eval_results.json``
            (:func:`pipeline.evaluate.evaluation.run_evaluation`), as a dict or typed.
        figures: PNG paths relative to the report (:func:`pipeline.evaluate.report.figures.write_figures`),
            each linked under the table it draws; none: a report of tables only.
    """
    results = as_results(results)
    identity = results.eval_file
    hub = f", from the Hub as `{identity['hub']}`" if identity.get("hub") else ""
    aspects = results.task == "aspects"
    lines = [
        "# Survey reading lists: evaluation" + (" of the aspects" if aspects else ""),
        "",
        (
            "Section-level reading lists: one query per topical section of a survey; "
            "'survey' below means the query, an aspect. "
            if aspects
            else ""
        )
        + f"{results.n_surveys} eval {'aspects' if aspects else 'surveys'}, "
        f"{results.n_candidates} judged candidates "
        f"(`{identity['name']}`, sha256 `{identity['sha256'][:12]}`{hub}). {_mode(results)}",
    ]
    lines += _headline(results)
    lines += _figure(figures, "main_metrics.png")
    lines += _pairwise(results)
    lines += _figure(figures, "paired_difference.png")
    lines += _more_metrics(results)
    lines += _cutoffs(results)
    lines += _figure(figures, "recall_by_tier.png")
    lines += _runs_section(results)
    lines += _judged(results)
    lines += _notes(results)
    lines += render_section(results)  # foreign models: is it a citation counter?
    lines += _in_out(results, figures)
    lines += _years(results)
    lines += _groups(results)
    lines += _whole_survey(results)
    lines += _tiers(results, figures)
    lines += _definitions(results)
    return "\n".join(lines) + "\n"


def summary_line(results: EvaluationResults | EvaluationResults, where: str) -> str:
    """One line: the best system by the selection metric, each submitted system, where the
    report is (what ``evaluate -q`` prints)."""
    results = as_results(results)
    metric, overall = results.selection_metric, results.subsets["ALL"]
    ranked = [s for s in ranked_systems(results) if s not in results.upper_bounds]
    parts = []
    if ranked:
        best = ranked[0]
        parts.append(f"best {best} {_num(overall[best][metric].mean)}")
    for system in results.submitted:
        if ranked and system == ranked[0]:
            continue
        better, worse = significant_against(results, system, metric)
        versus = [f"above {', '.join(better)}"] * bool(better) + [
            f"below {', '.join(worse)}"
        ] * bool(worse)
        note = f" ({'; '.join(versus)})" if versus else ""
        parts.append(f"{system} {_num(overall[system][metric].mean)}{note}")
    body = "; ".join(parts) if parts else "no system"
    queries = "aspects" if results.task == "aspects" else "surveys"
    return f"evaluate: {metric} over {results.n_surveys} {queries}: {body}; report: {where}"
