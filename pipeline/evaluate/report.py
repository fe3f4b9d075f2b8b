"""Markdown report rendered from the ``eval_results.json`` content (and nothing else)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pipeline.evaluate.figures import CAPTIONS

_MISSING = "n/a"


def _num(value: float | None, digits: int = 3, signed: bool = False) -> str:
    if value is None:
        return _MISSING
    return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"


def _with_ci(stat: dict[str, Any]) -> str:
    if stat["mean"] is None:
        return _MISSING
    return f"{_num(stat['mean'])} [{_num(stat['ci_low'])}, {_num(stat['ci_high'])}]"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]


def _label(results: dict[str, Any], system: str) -> str:
    if system == results["best_baseline"]:
        return f"{system} (best baseline)"
    if system in results["upper_bounds"]:
        return f"{system} (upper bound)"
    if system in results["baselines"]:
        return f"{system} (baseline)"
    return system


def _eval_file(identity: dict[str, str]) -> str:
    hub = f", from the Hub as `{identity['hub']}`" if identity.get("hub") else ""
    return f"`{identity['name']}` (sha256 `{identity['sha256']}`{hub})"


def _runs_section(results: dict[str, Any]) -> list[str]:
    """Where each submitted run came from and what it left unscored."""
    runs = results["runs"]
    if not runs:
        return []
    lines = ["", "## Submitted runs", ""]
    lines += _table(
        [
            "system",
            "file",
            "sha256",
            "format",
            "rows",
            "judged scored",
            "judged missing",
            "surveys missing",
            "dropped (unknown ids)",
        ],
        [
            [
                name,
                f"`{run['file']['name']}`",
                f"`{run['file']['sha256'][:12]}`",
                run["format"],
                str(run["rows"]),
                str(run["scored_judged"]),
                str(run["missing_judged"]),
                str(run["missing_surveys"]),
                str(run["dropped_unknown_ids"]),
            ]
            for name, run in runs.items()
        ],
    )
    gaps = [(name, run["missing_surveys"]) for name, run in runs.items() if run["missing_surveys"]]
    if gaps:
        lines.append("")
        lines += [
            f"**Warning:** `{name}` has no row for {n} of {results['n_surveys']} surveys; every "
            "judged candidate of those surveys is ranked as missing (after all scored ones)."
            for name, n in gaps
        ]
    lines += [
        "",
        "Judged candidates a run does not score rank after all scored ones, in tie-key order.",
    ]
    return lines


def _figure(figures: Sequence[str], name: str) -> list[str]:
    """A link to figure ``name`` when it was drawn (the tables above it hold its numbers)."""
    path = next((f for f in figures if f.rsplit("/", 1)[-1] == name), None)
    return [] if path is None else ["", f"![{CAPTIONS[name]}]({path})"]


def render_report(results: dict[str, Any], figures: Sequence[str] = ()) -> str:
    """The evaluation report as Markdown.

    Args:
        results: the dict written to ``eval_results.json`` by :func:`pipeline.evaluate.evaluate`.
        figures: PNG paths relative to the report (:func:`pipeline.evaluate.figures.write_figures`),
            each linked under the table it draws; none: a report of tables only.
    """
    systems = results["baselines"] + results["submitted"]
    main = results["main_metrics"]
    overall = results["subsets"]["ALL"]
    lines = [
        "# Survey reading lists: evaluation",
        "",
        f"Eval set {_eval_file(results['eval_file'])}: {results['n_surveys']} surveys, "
        f"{results['n_candidates']} judged candidates. Means are macro-averages over surveys "
        "where a metric is defined (n = surveys used); brackets: " + results["ci_method"],
        "",
        f"Tie-breaking: {results['tie_breaking']}",
        "",
        "## Main metrics (ALL candidates)",
        "",
    ]
    rows = [[_label(results, s)] + [_with_ci(overall[s][m]) for m in main] for s in systems]
    if systems:
        rows.append(["n (surveys)"] + [str(overall[systems[0]][m]["n"]) for m in main])
    lines += _table(["system", *main], rows)
    lines += _figure(figures, "main_metrics.png")
    lines += _figure(figures, "recall_by_tier.png")
    lines += _learned_section(results)
    lines += _runs_section(results)

    lines += [
        "",
        f"## Submitted runs vs best baseline ({results['best_baseline'] or _MISSING})",
        "",
    ]
    if results["tests"]:
        lines += [results["test_method"], ""]
        lines += _table(
            ["system", "metric", "diff", "95% CI", "p", "n"],
            [
                [
                    t["system"],
                    t["metric"],
                    _num(t["diff"], signed=True),
                    f"[{_num(t['ci_low'], signed=True)}, {_num(t['ci_high'], signed=True)}]",
                    _num(t["p_value"], 4),
                    str(t["n"]),
                ]
                for t in results["tests"]
            ],
        )
    else:
        lines.append("No submitted runs.")
    lines += _figure(figures, "paired_difference.png")

    inside, outside = results["subsets"]["IN"], results["subsets"]["OUT"]
    lines += [
        "",
        "## IN/OUT gap",
        "",
        "IN ranks only the in-domain candidates (corpus papers whose own categories include the "
        "survey's primary category), OUT all the others. Cells: IN / OUT (IN - OUT).",
        "",
    ]
    gap_rows = []
    for s in systems:
        cells = []
        for m in main:
            a, b = inside[s][m]["mean"], outside[s][m]["mean"]
            gap = None if a is None or b is None else a - b
            cells.append(f"{_num(a)} / {_num(b)} ({_num(gap, signed=True)})")
        gap_rows.append([_label(results, s), *cells])
    lines += _table(["system", *main], gap_rows)
    lines += _figure(figures, "in_out.png")

    years = sorted(k for k in results["subsets"] if k.startswith("year="))
    selection = results["selection_metric"]
    lines += ["", f"## By survey year ({selection})", ""]
    lines += _table(
        ["system"] + [f"{y} (n={results['subset_surveys'][y]})" for y in years],
        [
            [_label(results, s)] + [_with_ci(results["subsets"][y][s][selection]) for y in years]
            for s in systems
        ],
    )

    lines += ["", "## Tier distribution of the eval set", ""]
    tiers = results["tier_distribution"]
    lines += _table(
        ["label", "name", "candidates", "share", "in-domain"],
        [
            [label, t["name"], str(t["count"]), _num(t["share"]), str(t["in_domain"])]
            for label, t in sorted(tiers.items(), key=lambda kv: int(kv[0]))
        ],
    )
    lines += _figure(figures, "tier_distribution.png")

    lines += ["", "## Definitions of the main metrics", ""]
    lines += [f"- `{m}`: " + " ".join(results["metrics"][m].split()) for m in main]
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------- learned systems and the seed's table
# The design this benchmark implements expects these figures (nDCG@10, hard-negative AUC);
# None = the seed states no figure. Rows: (label, system name in the results or None).
SEED_TABLE = (
    ("random", "random", None, None),
    ("popularity (citation count)", "popularity", None, None),
    ("BM25", "bm25", None, None),
    ("dense (all-MiniLM-L6-v2)", "dense", None, None),
    ("LightGBM (reading-path labels)", "lgbm", 0.65, 0.75),
    ("LightGBM, metadata only (leak probe)", "lgbm-metadata", None, None),
    ("LightGBM, reading-free (relative audit probe)", "lgbm-reading-free", None, None),
    ("cross-encoder", None, 0.70, None),
    ("oracle", "oracle", None, None),
)
SEED_METRICS = ("ndcg@10", "hard_negative_auc")


def _mean(results: dict[str, Any], system: str | None, metric: str) -> str:
    stat = results["subsets"]["ALL"].get(system or "", {}).get(metric)
    return _num(stat["mean"]) if stat else "not run"


def _expected(value: float | None) -> str:
    return f"~{value:.2f}" if value is not None else "-"


def _learned_section(results: dict[str, Any]) -> list[str]:
    """Mode, the leak probe (loud when it fires) and the table in the seed's shape."""
    mode = results.get("mode", "rerank")
    lines = [
        "",
        f"Mode: **{mode}**"
        + (
            " (each survey's judged candidates are re-ranked)."
            if mode == "rerank"
            else " (runs over the split's whole corpus; unjudged documents are not relevant)."
        ),
    ]
    learned = results.get("learned_baselines", {})
    if learned.get("skipped"):
        lines += ["", f"Learned baselines (lgbm, lgbm-metadata) not trained: {learned['skipped']}."]
    if learned.get("dense", {}).get("skipped"):
        lines += ["", f"Dense baseline not run: {learned['dense']['skipped']}."]
    probe = results.get("leak_probe")
    if probe:
        cells = ", ".join(
            f"{m} {_num(r[probe['probe']])} vs {_num(r[probe['reference']])}"
            for m, r in probe["metrics"].items()
        )
        if probe["flagged"]:
            lines += [
                "",
                f"> **LEAK WARNING: `{probe['probe']}` (a model that never reads the text) beats "
                f"`{probe['reference']}`** ({cells}). Metadata alone tells positives from hard "
                "negatives: the release leaks its answers.",
            ]
        else:
            lines += [
                "",
                f"Leak probe: `{probe['probe']}` does not beat `{probe['reference']}` ({cells}).",
            ]
    if mode != "rerank":
        return lines
    lines += ["", "## Against the seed's expected results", ""]
    header = ["system"]
    for metric in SEED_METRICS:
        header += [f"{metric} measured", f"{metric} expected"]
    rows = []
    for label, system, *expected in SEED_TABLE:
        row = [label]
        for metric, value in zip(SEED_METRICS, expected, strict=True):
            row += [_mean(results, system, metric), _expected(value)]
        rows.append(row)
    lines += _table(header, rows)
    lines += ["", "`-`: the seed states no figure; `not run`: no such system in this evaluation."]
    return lines
