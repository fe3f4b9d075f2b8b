"""The dataset card (the release's ``README.md``), apart from the release tables.

The template is package data (``pipeline/data_cards/survey_reading_lists.md``, read
through ``importlib.resources``); every number on the card is rendered from
``eval_metadata.json`` (:func:`card_values`), the field table from the schema
(:func:`field_table`), the example row from the written release (:func:`example_row`),
and the tier distribution figure it links (:func:`tier_distribution_figure`) is drawn from
the same metadata.
Its YAML front matter is what the Hub reads: ``tests/test_card.py`` validates it with
huggingface_hub's ``DatasetCard``.
"""

from __future__ import annotations

import importlib.resources
import json
import re
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from pipeline import schema as S
from pipeline.evaluate.measures import ndcg_name
from pipeline.leak_audit import RELATIVE_DOCS
from pipeline.release_files import (
    BEIR_VIEWS,
    CANDIDATES_FILE,
    EVAL_FILE,
    READING_LISTS_FILE,
    RETRIEVAL_SPLITS,
    beir_file,
)

CARD_TEMPLATE = "survey_reading_lists.md"
SOURCE_DATASET = "ines-besrour/unarxive_2024"
TIER_FIGURE = "figures/tier_distribution.png"  # beside the card, which links it
EXAMPLE_TEXT_CHARS = 160  # long strings of the example row are cut to this many characters
_PLACEHOLDER = re.compile(r"\{([a-z][a-z0-9_]*)\}")


def data_cards_dir() -> Traversable:
    """``pipeline/data_cards/``: the card template, package data (works from a wheel too)."""
    return importlib.resources.files("pipeline") / "data_cards"


def repo_id(meta: dict[str, Any]) -> str:
    """The Hub repo the card's snippets name: ``[release] repo_id``, else OWNER/<dataset_name>."""
    release = meta["config"]["release"]
    return release.get("repo_id") or f"OWNER/{release['dataset_name']}"


def example_row(release: Path, splits: list[str]) -> str:
    """A row of ``reading_lists`` as JSON, long strings cut: the first (in file order) of
    the first split written whose label is >= 3 (it shows a judgment), else its first row.
    """
    if not splits:
        return "(no split written)"
    table = pq.read_table(release / READING_LISTS_FILE.format(split=splits[0]))
    if table.num_rows == 0:
        return "(the split is empty)"
    labels = table.column(S.LABEL).to_pylist()
    index = next((i for i, label in enumerate(labels) if label is not None and label >= 3), 0)
    row = table.slice(index, 1).to_pylist()[0]

    def cut(value: Any) -> Any:
        if isinstance(value, str) and len(value) > EXAMPLE_TEXT_CHARS:
            return value[:EXAMPLE_TEXT_CHARS] + "..."
        if isinstance(value, list):
            return [cut(v) for v in value]
        return value

    return json.dumps(
        {k: cut(v) for k, v in row.items()}, indent=2, ensure_ascii=False, default=str
    )


def render_release_card(meta: dict[str, Any], splits: list[str], release: Path) -> str:
    """The card of the release in ``release`` (its tables already written), from ``meta``.

    Also writes the figure the card links, :data:`TIER_FIGURE`, into ``release``.
    """
    template = (data_cards_dir() / CARD_TEMPLATE).read_text(encoding="utf-8")
    values = card_values(meta, splits)
    values["example_row"] = example_row(release, splits)
    tier_distribution_figure(meta, release / TIER_FIGURE)
    return render_card(template, values)


def tier_distribution_figure(meta: dict[str, Any], path: Path) -> None:
    """Write the tier distribution per split as a PNG: for every label, its share of each
    split's rows, with the row count beside the bar (the numbers of the card's label table).

    Drawn as :mod:`pipeline.plots` draws every figure, so the same metadata gives the same
    bytes.
    """
    from pipeline.plots import pyplot, save_png

    labels = sorted(S.LABEL_NAMES)
    splits = list(S.SPLIT_NAMES)
    height = 0.8 / len(splits)
    colors = ("#4c72b0", "#dd8452", "#55a868", "#c44e52")
    with pyplot() as plt:
        fig, ax = plt.subplots(figsize=(6.0, 0.5 * len(labels) + 1.0))
        widest = 0.0
        for i, split in enumerate(splits):
            counts = [meta["splits"][split]["labels"][S.LABEL_NAMES[k]] for k in labels]
            total = sum(counts)
            shares = [c / total if total else 0.0 for c in counts]
            widest = max(widest, *shares)
            offset = (i - (len(splits) - 1) / 2) * height
            y = [j + offset for j in range(len(labels))]
            ax.barh(
                y, shares, height, color=colors[i % len(colors)], label=f"{split} ({total:,} rows)"
            )
            for at, share, count in zip(y, shares, counts, strict=True):
                ax.text(share, at, f" {count:,}", va="center", fontsize=6)
        ax.set_yticks(range(len(labels)), [f"{k}: {S.LABEL_NAMES[k]}" for k in labels])
        ax.invert_yaxis()
        ax.set_xlim(0, max(widest, 0.01) * 1.2)
        ax.set_xlabel("share of the split's rows")
        ax.legend(loc="lower right")
        save_png(fig, path, plt)


def size_category(n: int) -> str:
    """The Hub's ``size_categories`` bucket for ``n`` rows."""
    bounds = [
        (1_000, "n<1K"),
        (10_000, "1K<n<10K"),
        (100_000, "10K<n<100K"),
        (1_000_000, "100K<n<1M"),
    ]
    bounds += [(10_000_000, "1M<n<10M"), (100_000_000, "10M<n<100M"), (1_000_000_000, "100M<n<1B")]
    for bound, name in bounds:
        if n < bound:
            return name
    return "n>1T" if n >= 10**12 else "1B<n<10B"


def _table(header: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join("" if v is None else str(v) for v in r) + " |" for r in rows]
    return "\n".join(lines)


def _configs_yaml(splits: list[str]) -> str:
    """The card's ``configs``: the retrieval views in MTEB's layout first (``qrels`` the
    default; the eval split named ``test`` and listed first, since BEIR's ``HFDataLoader``
    takes a config's first split), then ``reading_lists`` and ``candidates`` (``train``,
    ``eval``)."""
    eval_first = sorted(splits, key=lambda split: split != "eval")
    configs = [
        (view, i == 0, [(RETRIEVAL_SPLITS[split], beir_file(view, split)) for split in eval_first])
        for i, view in enumerate(BEIR_VIEWS)
    ]
    configs += [
        (name, False, [(split, pattern.format(split=split)) for split in splits])
        for name, pattern in (
            ("reading_lists", READING_LISTS_FILE),
            ("candidates", CANDIDATES_FILE),
        )
    ]
    lines = ["configs:"]
    for name, default, files in configs:
        lines.append(f"- config_name: {name}")
        if default:
            lines.append("  default: true")
        lines.append("  data_files:")
        for split, path in files:
            lines += [f"  - split: {split}", f"    path: {path}"]
    return "\n".join(lines)


def card_values(meta: dict[str, Any], splits: list[str]) -> dict[str, str]:
    """Placeholder values of the card template, every number taken from ``meta``."""
    sp = meta["splits"]
    cfg = meta["config"]
    total_rows = sum(sp[s]["rows"] for s in S.SPLIT_NAMES)
    split_rows = [
        [
            s,
            sp[s]["surveys"],
            sp[s]["rows"],
            sp[s]["positives"],
            sp[s]["negatives"],
            sp[s]["candidate_works"],
            sp[s]["surveys_without_negatives"],
            sp[s]["survey_date_min"],
            sp[s]["survey_date_max"],
        ]
        for s in S.SPLIT_NAMES
    ]
    label_rows = [
        [k, S.LABEL_NAMES[k]] + [sp[s]["labels"][S.LABEL_NAMES[k]] for s in S.SPLIT_NAMES]
        for k in sorted(S.LABEL_NAMES)
    ]
    cats = sorted({c for s in S.SPLIT_NAMES for c in sp[s]["categories"]})
    cat_rows = [
        [c] + [sp[s]["categories"].get(c, {}).get("surveys", 0) for s in S.SPLIT_NAMES]
        for c in cats
    ]
    years = sorted({y for s in S.SPLIT_NAMES for y in sp[s]["years"]})
    year_rows = [
        [y] + [sp[s]["years"].get(y, {}).get("surveys", 0) for s in S.SPLIT_NAMES] for y in years
    ]
    roles = meta["roles"]
    role_columns = [
        ("surveys", "mentions in surveys"),
        ("all_papers", "mentions in all papers"),
        ("surveys_labelled", "labelled survey mentions"),
    ]
    role_header = ["role"]
    for _, title in role_columns:
        role_header += [title, "share"]
    role_rows = [
        [r]
        + [
            x
            for key, _ in role_columns
            for x in ((roles.get(key) or {}).get(r), (roles.get(f"{key}_frac") or {}).get(r))
        ]
        for r in S.ROLES
    ]
    leak = meta["leakage"]
    res = meta["resolution"]
    files = meta["files"]
    code_url = cfg["release"].get("code_url") or ""
    return {
        "repo_id": repo_id(meta),
        "source_dataset": SOURCE_DATASET,
        "eval_file": EVAL_FILE,
        "code_link": f"<{code_url}>" if code_url else "the `survey-reading-lists` Python package",
        "install_hint": f'`pip install "git+{code_url}"`'
        if code_url
        else "the `survey-reading-lists` package",
        "code_url_bibtex": f"\n  url          = {{{code_url}}}," if code_url else "",
        "main_metric": ndcg_name(10),
        "tier_figure": TIER_FIGURE,
        "pretty_name": cfg["release"]["dataset_name"],
        "version": meta["version"],
        "code_version": meta["code_version"],
        "input_revision": meta["input"]["revision"],
        "size_category": size_category(total_rows),
        "configs_yaml": _configs_yaml(splits),
        "eval_from": cfg["split"]["eval_from"],
        "negatives_per_positive": str(cfg["negatives"]["negatives_per_positive"]),
        "negative_sampling": cfg["negatives"]["negative_sampling"],
        "negative_seed": str(cfg["negatives"]["seed"]),
        "essential_total_mentions": str(cfg.get("labels", {}).get("essential_total_mentions", "")),
        "essential_related_mentions": str(
            cfg.get("labels", {}).get("essential_related_mentions", "")
        ),
        "n_surveys": str(sum(sp[s]["surveys"] for s in S.SPLIT_NAMES)),
        "n_rows": str(total_rows),
        "split_table": _table(
            [
                "split",
                "surveys",
                "rows",
                "positives",
                "hard negatives",
                "candidate works",
                "surveys without negatives",
                "first survey",
                "last survey",
            ],
            split_rows,
        ),
        "label_table": _table(["label", "name", *S.SPLIT_NAMES], label_rows),
        "reason_table": _table(
            ["label_reason", *S.SPLIT_NAMES],
            [
                [f"`{r}`"] + [sp[s].get("label_reasons", {}).get(r, 0) for s in S.SPLIT_NAMES]
                for r in sorted({r for s in S.SPLIT_NAMES for r in sp[s].get("label_reasons", {})})
            ],
        ),
        "category_table": _table(
            ["primary category", *(f"surveys ({s})" for s in S.SPLIT_NAMES)], cat_rows
        ),
        "year_table": _table(["year", *(f"surveys ({s})" for s in S.SPLIT_NAMES)], year_rows),
        "role_table": _table(role_header, role_rows),
        "resolution_table": _table(
            ["scope", "bib entries", "resolved", "share"],
            [
                [
                    "all corpus papers",
                    res["bib_entries"],
                    res["bib_entries_resolved"],
                    res["resolved_frac"],
                ],
                [
                    "detected surveys",
                    res["survey_bib_entries"],
                    res["survey_bib_entries_resolved"],
                    res["survey_resolved_frac"],
                ],
            ],
        ),
        "leakage_table": _table(["check", "count"], [[k, leak[k]] for k in sorted(leak)]),
        "files_table": _table(
            ["file", "rows", "sha256"],
            [[f"`{k}`", v.get("rows"), f"`{v['sha256']}`"] for k, v in sorted(files.items())],
        ),
        "splits_present": ", ".join(splits) or "none",
        "field_table": field_table(),
        "leak_audit_table": leak_audit_table(meta.get("leak_audit", {})),
        "relative_audit_table": leak_audit_table(meta.get("leak_audit", {}).get("relative", {})),
        "relative_features_list": "\n".join(
            f"* `{name}`: {doc}" for name, doc in RELATIVE_DOCS.items()
        ),
        "probe_table": probe_table(meta.get("leak_audit", {}).get("reading_free_probe") or {}),
        "candidate_text_table": candidate_text_table(meta.get("candidate_text") or {}),
        "leak_low": str(meta.get("leak_audit", {}).get("bounds", ["", ""])[0]),
        "leak_high": str(meta.get("leak_audit", {}).get("bounds", ["", ""])[1]),
        "leak_verdict": "passed: every audited AUC is within the bounds"
        if meta.get("leak_audit", {}).get("passed")
        else "FAILED: "
        + "; ".join(
            f"{split}: {', '.join(bad)}"
            for table in (
                meta.get("leak_audit", {}).get("outside_bounds", {}),
                meta.get("leak_audit", {}).get("relative", {}).get("outside_bounds", {}),
            )
            for split, bad in sorted(table.items())
        )
        + (
            "; the reading-free probe beats BM25"
            if (meta.get("leak_audit", {}).get("reading_free_probe") or {}).get("flagged")
            else ""
        ),
        "resolution_by_title_table": _table(
            [
                "papers",
                "bib entries",
                "by identifier",
                "by title",
                "share (identifier only)",
                "share",
            ],
            [
                [
                    scope,
                    r.get("bib_entries"),
                    r.get("resolved_by_identifier"),
                    r.get("resolved_by_title"),
                    r.get("resolved_frac_identifier_only"),
                    r.get("resolved_frac"),
                ]
                for scope, r in (meta.get("works_resolution") or {}).items()
                if isinstance(r, dict)
            ],
        ),
        "positives_dropped_after_survey": str(
            meta.get("leakage", {}).get("positives_dated_after_survey_dropped", 0)
        ),
        "surveys_below_resolution_floor": str(
            meta.get("surveys_counts", {}).get("rejected_resolved_frac_below_floor", 0)
        ),
        "min_resolved_frac": str(cfg.get("surveys", {}).get("min_resolved_frac", "")),
    }


CONFIG_SCHEMAS = (
    ("reading_lists", "READING_LISTS"),
    ("candidates", "CANDIDATES_VIEW"),
    ("queries", "BEIR_QUERIES"),
    ("corpus", "BEIR_CORPUS"),
    ("qrels", "BEIR_QRELS"),
    ("top_ranked", "BEIR_TOP_RANKED"),
)


def field_table() -> str:
    """Every column of every release config with its type and role (input or judgment)."""
    rows = []
    for config, name in CONFIG_SCHEMAS:
        for f in getattr(S, name):
            role = "**judgment**" if f.name in S.JUDGMENT_COLUMNS else "input"
            rows.append([f"`{config}`", f"`{f.name}`", str(f.type), role])
    return _table(["config", "column", "type", "role"], rows)


def leak_audit_table(leak: dict[str, Any]) -> str:
    """Feature x split: pooled AUC and mean per-survey AUC."""
    splits = sorted(leak.get("splits", {}))
    names = sorted({f for sp in splits for f in leak["splits"][sp]})
    header = ["feature"] + [f"{sp} {scope}" for sp in splits for scope in ("pooled", "per survey")]
    rows = [
        [f"`{n}`"]
        + [
            leak["splits"][sp].get(n, {}).get(scope)
            for sp in splits
            for scope in ("pooled", "per_survey")
        ]
        for n in names
    ]
    return _table(header, rows)


def probe_table(probe: dict[str, Any]) -> str:
    """The reading-free probe against BM25 on the eval split, or why it was not trained."""
    if not probe.get("metrics"):
        return f"Not trained: {probe.get('skipped', 'no train split')}."
    rows = [
        [f"`{m}`", r[probe["probe"]], r[probe["reference"]], "**yes**" if r["beats"] else "no"]
        for m, r in probe["metrics"].items()
    ]
    return _table(["metric (eval)", f"`{probe['probe']}`", f"`{probe['reference']}`", "beats"],
                  rows)  # fmt: skip


def candidate_text_table(texts: dict[str, Any]) -> str:
    """Split x text source: positives, hard negatives, share of the split's rows."""
    rows = [
        [split, f"`{source}`", c["positives"], c["negatives"], c["share"]]
        for split, by_source in sorted(texts.items())
        for source, c in by_source.items()
    ]
    return _table(["split", "text", "positives", "hard negatives", "share"], rows)


def render_card(template: str, values: dict[str, str]) -> str:
    """Replace ``{name}`` placeholders (lowercase names only; other braces are left alone).

    Raises:
        KeyError: the template names a placeholder with no value (lists the available names).
    """

    def sub(m: re.Match[str]) -> str:
        key = m.group(1)
        if key not in values:
            raise KeyError(
                f"card template placeholder {{{key}}} has no value; available: {sorted(values)}"
            )
        return values[key]

    return _PLACEHOLDER.sub(sub, template)
