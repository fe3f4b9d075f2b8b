"""Stage ``release`` (reduce): the files published on the Hub, in ``<out>/release/``.

* ``{split}_survey_reading_lists.parquet``: one row per (survey, candidate), columns
  ``schema.READING_LISTS``, sorted by (survey_id, candidate_id).
* ``queries/{split}.parquet``, ``corpus/{split}.parquet``, ``qrels/{split}.parquet``:
  the same data as a BEIR/MTEB retrieval benchmark (explicit score-0 qrels for hard
  negatives).
* ``eval_metadata.json``: counts, audit, resolved config, input revision, code
  version, sha256 and row count of every Parquet file.
* ``README.md``: the dataset card, rendered from ``pipeline/data_cards/survey_reading_lists.md``
  with numbers taken from the metadata.

A split without surveys is not written (``datasets`` cannot read a Parquet file with
no rows) and is left out of the card's ``configs``; its counts are 0 in the metadata.
The runner's ``_SUCCESS.json`` is not a release file (it holds timings) and is never
pushed.

Column rules:

* ``in_domain`` (non-null bool): the candidate is a corpus paper whose own arXiv
  categories include the survey's primary category. Every other candidate is
  ``False``, including works outside the corpus, whose categories are unknown (not
  shown to be in domain). It is computed from the candidate's own metadata only, never
  from which surveys cite it, so it does not tell positives from hard negatives: the
  ``citing_survey_category`` negatives (works outside the corpus) are all out of
  domain, like the positives outside the corpus.
* ``n_citing_surveys``: *other* detected surveys citing the candidate whose first
  version date is strictly before the survey's (the survey itself never counts, nor
  does any later survey), for positives and negatives alike (``split``).
* ``candidate_prior_citations``: distinct corpus papers citing the work whose first
  version date is strictly before the survey's (papers without a date are not
  counted); the survey itself never counts. No information from after the survey.
* ``candidate_date`` is the work's ``known_date``.

Everything written is deterministic: sorted rows, Parquet with fixed options, JSON
with sorted keys, no timestamps and no absolute paths.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import json
import logging
import re
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow.parquet as pq

from pipeline import __version__
from pipeline import schema as S
from pipeline.leak_audit import audit, outside
from pipeline.runner import (
    MANIFESTS,
    STAGES,
    SUCCESS,
    ReduceContext,
    Stage,
    failed_inputs,
    register,
    write_json,
)
from pipeline.stages.common import scan_extract, write_table

READING_LISTS_FILE = "{split}_survey_reading_lists.parquet"
BEIR_FILE = "{view}/{split}.parquet"
BEIR_VIEWS = ("queries", "corpus", "qrels")
CANDIDATES_FILE = "candidates/{split}.parquet"
LEAK_AUDIT_MODES = ("warn", "error")
METADATA_FILE = "eval_metadata.json"
CARD_FILE = "README.md"
CARD_TEMPLATE = "survey_reading_lists.md"
_W_PAPER = "_work_paper_id"
_CITING_DATE = "_citing_date"
_PLACEHOLDER = re.compile(r"\{([a-z][a-z0-9_]*)\}")
log = logging.getLogger("pipeline")


def data_cards_dir() -> Traversable:
    """``pipeline/data_cards/``: the card template, package data (works from a wheel too)."""
    return importlib.resources.files("pipeline") / "data_cards"


# --------------------------------------------------------------------- tables
def prior_citations(ctx: ReduceContext, cands: pl.LazyFrame) -> pl.LazyFrame:
    """``(survey_id, work_id, candidate_prior_citations)`` for candidates cited before their survey."""
    dates = (
        scan_extract(ctx, "papers")
        .select(S.PAPER_ID, pl.col(S.FIRST_VERSION_DATE).alias(_CITING_DATE))
        .drop_nulls(_CITING_DATE)
    )
    citing = (
        S.scan(ctx.upstream("works", "cites"), S.CITES)
        .filter(pl.col(S.WORK_ID).is_not_null())
        .select(S.PAPER_ID, S.WORK_ID)
        .unique()
        .join(dates, on=S.PAPER_ID, how="inner")
    )
    return (
        cands.select(S.SURVEY_ID, S.WORK_ID, S.SURVEY_DATE)
        .join(citing, on=S.WORK_ID, how="inner")
        .filter(pl.col(_CITING_DATE) < pl.col(S.SURVEY_DATE))
        .group_by(S.SURVEY_ID, S.WORK_ID)
        .agg(pl.col(S.PAPER_ID).n_unique().cast(pl.Int64).alias(S.CANDIDATE_PRIOR_CITATIONS))
    )


def reading_lists(ctx: ReduceContext) -> pl.LazyFrame:
    """Every (survey, candidate) row of the release, both splits, with a ``split`` column."""
    cands = S.scan(ctx.upstream("split", "candidates"), S.CANDIDATES)
    surveys = scan_extract(ctx, "papers").select(
        pl.col(S.PAPER_ID).alias(S.SURVEY_ID),
        pl.col(S.TITLE).alias(S.SURVEY_TITLE),
        pl.col(S.ABSTRACT).alias(S.SURVEY_ABSTRACT),
        pl.col(S.CATEGORIES).alias(S.SURVEY_CATEGORIES),
        pl.col(S.PRIMARY_CATEGORY).alias(S.SURVEY_PRIMARY_CATEGORY),
    )
    works = S.scan(ctx.upstream("works", "works"), S.WORKS).select(
        pl.col(S.WORK_ID),
        pl.col(S.ALIASES).alias(S.CANDIDATE_ALIASES),
        pl.col(S.TITLE).alias(S.CANDIDATE_TITLE),
        pl.col(S.ABSTRACT).alias(S.CANDIDATE_ABSTRACT),
        pl.col(S.CATEGORIES).alias(S.CANDIDATE_CATEGORIES),
        pl.col(S.RAW).alias(S.CANDIDATE_RAW),
        pl.col(S.PAPER_ID).alias(_W_PAPER),
    )
    in_domain = (
        pl.col(_W_PAPER).is_not_null()
        & pl.col(S.CANDIDATE_CATEGORIES)
        .list.contains(pl.col(S.SURVEY_PRIMARY_CATEGORY))
        .fill_null(False)
    ).fill_null(False)
    names = {int(k): v for k, v in S.LABEL_NAMES.items()}
    return (
        cands.join(surveys, on=S.SURVEY_ID, how="left")
        .join(works, on=S.WORK_ID, how="left")
        .with_columns(
            pl.col(S.WORK_ID).alias(S.CANDIDATE_ID),
            pl.col(S.LABEL).replace_strict(names, return_dtype=pl.String).alias(S.LABEL_NAME),
            in_domain.alias(S.IN_DOMAIN),
        )
        .select(*S.READING_LISTS.names, S.SPLIT)
        .sort(S.SURVEY_ID, S.CANDIDATE_ID)
    )


def beir_views(rows: pl.DataFrame, surveys: pl.DataFrame) -> dict[str, pl.DataFrame]:
    """Queries, corpus and qrels of one split's reading-list rows.

    Args:
        rows: the split's reading-list rows.
        surveys: ``split_surveys`` rows (for ``has_negatives``).
    """
    queries = (
        rows.unique(S.SURVEY_ID)
        .join(surveys.select(S.SURVEY_ID, S.HAS_NEGATIVES), on=S.SURVEY_ID, how="left")
        .select(
            pl.col(S.SURVEY_ID).alias(S.BEIR_ID),
            pl.col(S.SURVEY_TITLE).fill_null("").alias(S.BEIR_TITLE),
            pl.concat_str([S.SURVEY_TITLE, S.SURVEY_ABSTRACT], separator="\n\n", ignore_nulls=True)
            .fill_null("")
            .alias(S.BEIR_TEXT),
            pl.col(S.SURVEY_PRIMARY_CATEGORY).alias(S.PRIMARY_CATEGORY),
            pl.col(S.SURVEY_DATE).alias(S.FIRST_VERSION_DATE),
            pl.col(S.HAS_NEGATIVES).fill_null(False),
        )
        .sort(S.BEIR_ID)
    )
    corpus = (
        rows.unique(S.CANDIDATE_ID)
        .select(
            pl.col(S.CANDIDATE_ID).alias(S.BEIR_ID),
            pl.col(S.CANDIDATE_TITLE).fill_null("").alias(S.BEIR_TITLE),
            pl.coalesce(S.CANDIDATE_ABSTRACT, S.CANDIDATE_RAW, S.CANDIDATE_TITLE, pl.lit("")).alias(
                S.BEIR_TEXT
            ),
        )
        .sort(S.BEIR_ID)
    )
    qrels = rows.select(
        pl.col(S.SURVEY_ID).alias(S.BEIR_QUERY_ID),
        pl.col(S.CANDIDATE_ID).alias(S.BEIR_CORPUS_ID),
        pl.col(S.LABEL).cast(pl.Int32).alias(S.BEIR_SCORE),
    ).sort(S.BEIR_QUERY_ID, S.BEIR_CORPUS_ID)
    return {"queries": queries, "corpus": corpus, "qrels": qrels}


# --------------------------------------------------------------------- metadata
def _read_counts(out: Path, stage: str) -> dict[str, Any]:
    p = out / stage / SUCCESS
    return json.loads(p.read_text())["counts"] if p.exists() else {}


def _rate(num: int, den: int) -> float | None:
    return round(num / den, 6) if den else None


def split_counts(rows: pl.DataFrame, surveys: pl.DataFrame) -> dict[str, Any]:
    """Counts of one split: surveys, rows, per tier, per category, per year."""
    by_label = rows.group_by(S.LABEL).len()
    label_counts = {S.LABEL_NAMES[k]: 0 for k in sorted(S.LABEL_NAMES)}
    for label, n in by_label.iter_rows():
        label_counts[S.LABEL_NAMES[int(label)]] = n
    per_survey = rows.group_by(S.SURVEY_ID).agg(
        pl.col(S.SURVEY_PRIMARY_CATEGORY).first(),
        pl.col(S.SURVEY_DATE).first().dt.year().cast(pl.String).alias("year"),
        pl.len().alias("rows"),
    )

    def by(key: str) -> dict[str, dict[str, int]]:
        g = per_survey.group_by(key).agg(pl.len().alias("surveys"), pl.col("rows").sum()).sort(key)
        return {str(k): {"surveys": s, "rows": r} for k, s, r in g.iter_rows()}

    released = surveys.join(rows.select(S.SURVEY_ID).unique(), on=S.SURVEY_ID, how="semi")
    dates = rows[S.SURVEY_DATE]
    return {
        "surveys": per_survey.height,
        "surveys_without_negatives": released.filter(~pl.col(S.HAS_NEGATIVES)).height,
        "rows": rows.height,
        "positives": rows.filter(pl.col(S.LABEL) > 0).height,
        "negatives": rows.filter(pl.col(S.LABEL) == 0).height,
        "candidate_works": rows[S.CANDIDATE_ID].n_unique(),
        "in_domain_rows": int(rows[S.IN_DOMAIN].sum()),
        "labels": label_counts,
        "categories": by(S.SURVEY_PRIMARY_CATEGORY),
        "years": by("year"),
        "survey_date_min": dates.min().isoformat() if rows.height else None,
        "survey_date_max": dates.max().isoformat() if rows.height else None,
    }


def resolution(ctx: ReduceContext) -> dict[str, Any]:
    """Share of bib entries resolved to a work: all corpus papers, and detected surveys."""
    surveys = S.scan(ctx.upstream("surveys", "surveys"), S.SURVEYS).select(S.PAPER_ID)
    cites = S.scan(ctx.upstream("works", "cites"), S.CITES)
    resolved = pl.col(S.WORK_ID).is_not_null().sum()
    total, n_resolved = cites.select(pl.len(), resolved).collect(engine="streaming").row(0)
    s_total, s_resolved = (
        cites.join(surveys, on=S.PAPER_ID, how="semi")
        .select(pl.len(), resolved)
        .collect(engine="streaming")
        .row(0)
    )
    n_works, n_corpus = (
        S.scan(ctx.upstream("works", "works"), S.WORKS)
        .select(pl.len(), pl.col(S.PAPER_ID).is_not_null().sum())
        .collect(engine="streaming")
        .row(0)
    )
    return {
        "bib_entries": int(total),
        "bib_entries_resolved": int(n_resolved),
        "resolved_frac": _rate(int(n_resolved), int(total)),
        "survey_bib_entries": int(s_total),
        "survey_bib_entries_resolved": int(s_resolved),
        "survey_resolved_frac": _rate(int(s_resolved), int(s_total)),
        "works": int(n_works),
        "corpus_works": int(n_corpus),
    }


def role_distribution(ctx: ReduceContext) -> dict[str, Any]:
    """Mentions per section role, by the role of the heading itself: in surveys and in all papers.

    Taken from the ``labels`` stage counts (``role_distribution_surveys``,
    ``role_distribution_all``), which classify every mention of the extract tables.
    Also ``surveys_labelled``: the per-role columns of ``labels`` summed (mentions of
    resolved works only, with a survey's topical sections counted as related work).
    """
    counts = _read_counts(ctx.out, "labels")
    sums = (
        S.scan(ctx.upstream("labels", "labels"), S.LABELS)
        .select([pl.col(c).sum() for c in S.ROLE_COUNT_COLUMNS])
        .collect(engine="streaming")
        .row(0)
    )
    out: dict[str, Any] = {
        "surveys": counts.get("role_distribution_surveys"),
        "all_papers": counts.get("role_distribution_all"),
        "surveys_labelled": {role: int(n or 0) for role, n in zip(S.ROLES, sums, strict=True)},
    }
    for key in list(out):
        dist = out[key]
        if isinstance(dist, dict):
            total = sum(int(v) for v in dist.values())
            out[f"{key}_frac"] = {r: _rate(int(n), total) for r, n in dist.items()}
    return out


def input_provenance(ctx: ReduceContext) -> dict[str, Any]:
    """Input files (names only) and their revision, from the manifests of the current extract outputs."""
    keys = {p.stem for p in ctx.upstream("extract", "papers")}
    files = []
    revisions = set()
    for p in sorted((ctx.out / "extract" / MANIFESTS).glob("*.json")):
        m = json.loads(p.read_text())
        if m.get("source_key") not in keys:
            continue
        revisions.add(m.get("revision") or "")
        c = m.get("counts", {})
        name = str(m.get("source", "")).rstrip("/").rsplit("/", 1)[-1]
        files.append(
            {
                "file": name,
                "revision": m.get("revision") or "",
                "lines_read": c.get("lines_read"),
                "papers_written": c.get("papers_written"),
                "rejects_total": c.get("rejects_total"),
            }
        )
    files.sort(key=lambda f: (f["file"], f["revision"]))
    resolved = sorted(r for r in revisions if r)
    revision = ",".join(resolved) or ctx.cfg.release.input_revision or "unknown"
    return {"revision": revision, "files": files}


def writer_environment() -> dict[str, str]:
    """Versions that decide the release's bytes (Parquet footers name the writer).

    A rebuild is byte-identical with these versions; ``constraints.txt`` pins them.
    """
    import platform
    from importlib.metadata import version

    return {
        "python": platform.python_version(),
        **{name: version(name) for name in ("polars", "pyarrow", "msgspec", "regex")},
    }


def upstream_sections(stage: str) -> list[str]:
    """Config sections of ``stage`` and of every stage it reads, transitively (sorted)."""
    seen: set[str] = set()
    sections: set[str] = set()
    todo = [stage]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        sections.update(STAGES[name].config_sections)
        todo.extend(STAGES[name].reads)
    return sorted(sections)


def file_entry(path: Path) -> dict[str, Any]:
    """sha256, size and (for Parquet) row count of a release file."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    entry: dict[str, Any] = {"sha256": digest.hexdigest(), "bytes": path.stat().st_size}
    if path.suffix == ".parquet":
        entry["rows"] = pq.ParquetFile(path).metadata.num_rows
    return entry


# --------------------------------------------------------------------- dataset card
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
    lines = ["configs:"]
    views = [
        ("reading_lists", READING_LISTS_FILE, True),
        ("candidates", CANDIDATES_FILE, False),
    ] + [(v, BEIR_FILE.replace("{view}", v), False) for v in BEIR_VIEWS]
    for name, pattern, default in views:
        lines.append(f"- config_name: {name}")
        if default:
            lines.append("  default: true")
        lines.append("  data_files:")
        for split in splits:
            lines += [f"  - split: {split}", f"    path: {pattern.format(split=split)}"]
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
    return {
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
        "leak_low": str(meta.get("leak_audit", {}).get("bounds", ["", ""])[0]),
        "leak_high": str(meta.get("leak_audit", {}).get("bounds", ["", ""])[1]),
        "leak_verdict": "passed: every audited AUC is within the bounds"
        if meta.get("leak_audit", {}).get("passed")
        else "FAILED: "
        + "; ".join(
            f"{split}: {', '.join(bad)}"
            for split, bad in sorted(meta.get("leak_audit", {}).get("outside_bounds", {}).items())
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


# --------------------------------------------------------------------- the stage
def check_unique_pairs(rows: pl.DataFrame) -> None:
    """Fail when a (survey_id, candidate_id) pair appears more than once.

    Raises:
        RuntimeError: names the first duplicated pair (in sorted order), how many times
            it appears, and how many pairs are duplicated.
    """
    dup = (
        rows.group_by(S.SURVEY_ID, S.CANDIDATE_ID)
        .len()
        .filter(pl.col("len") > 1)
        .sort(S.SURVEY_ID, S.CANDIDATE_ID)
    )
    if dup.height:
        survey, candidate, n = dup.row(0)
        raise RuntimeError(
            f"release: (survey_id, candidate_id) = ({survey!r}, {candidate!r}) appears {n} "
            f"times; {dup.height} pair(s) are duplicated, {int(dup['len'].sum()) - dup.height} "
            "extra row(s) in all. Every (survey, candidate) pair must appear once: check the "
            "split stage's candidates table"
        )


def build_release(ctx: ReduceContext) -> dict[str, Any]:
    """Write every release file; return per-split counts.

    Raises:
        RuntimeError: a (survey, candidate) pair appears twice (:func:`check_unique_pairs`).
    """
    rows = reading_lists(ctx).collect(engine="streaming")
    check_unique_pairs(rows)
    surveys = S.scan(ctx.upstream("split", "split_surveys"), S.SPLIT_SURVEYS).collect(
        engine="streaming"
    )
    rcfg = ctx.cfg.release
    if rcfg.leak_audit not in LEAK_AUDIT_MODES:
        raise ValueError(
            f"release.leak_audit={rcfg.leak_audit!r}; available: {list(LEAK_AUDIT_MODES)}"
        )
    if (
        len(rcfg.leak_auc_bounds) != 2
        or not 0 <= rcfg.leak_auc_bounds[0] <= 0.5 <= rcfg.leak_auc_bounds[1] <= 1
    ):
        raise ValueError(
            f"release.leak_auc_bounds={list(rcfg.leak_auc_bounds)}: need [low, high] with 0 <= low <= 0.5 <= high <= 1"
        )
    low, high = rcfg.leak_auc_bounds
    leak: dict[str, Any] = {}
    meta_splits: dict[str, Any] = {}
    present: list[str] = []
    for split in S.SPLIT_NAMES:
        part = rows.filter(pl.col(S.SPLIT) == split).drop(S.SPLIT)
        meta_splits[split] = split_counts(part, surveys)
        if part.height == 0:
            continue
        present.append(split)
        write_table(
            part,
            ctx.output(READING_LISTS_FILE.format(split=split)),
            S.READING_LISTS,
            ctx.cfg,
            split,
        )
        view = part.select(S.CANDIDATES_VIEW.names)
        write_table(
            view,
            ctx.output(CANDIDATES_FILE.format(split=split)),
            S.CANDIDATES_VIEW,
            ctx.cfg,
            "candidates",
        )
        leak[split] = audit(view, part[S.LABEL])
        schemas = {"queries": S.BEIR_QUERIES, "corpus": S.BEIR_CORPUS, "qrels": S.BEIR_QRELS}
        for view, df in beir_views(part, surveys).items():
            path = ctx.output(BEIR_FILE.format(view=view, split=split))
            write_table(df, path, schemas[view], ctx.cfg, f"{view}/{split}")
    files = {
        str(p.relative_to(ctx.tmp_dir)): file_entry(p)
        for p in sorted(ctx.tmp_dir.rglob("*.parquet"))
    }
    flagged = {split: outside(table, low, high) for split, table in leak.items()}
    flagged = {split: bad for split, bad in flagged.items() if bad}
    if flagged:
        message = "; ".join(f"{split}: {', '.join(bad)}" for split, bad in sorted(flagged.items()))
        if rcfg.leak_audit == "error":
            raise RuntimeError(
                f"release: leak audit: a visible feature alone separates positives from hard "
                f"negatives (AUC outside [{low}, {high}]): {message}"
            )
        log.warning("release: LEAK AUDIT: AUC outside [%s, %s]: %s", low, high, message)
    sections = upstream_sections(ctx.stage.name)
    meta = {
        "dataset": ctx.cfg.release.dataset_name,
        "version": ctx.cfg.release.version,
        "code_version": __version__,
        "environment": writer_environment(),
        "input": input_provenance(ctx),
        # input files that could not be read to their end: not in this release
        "failed_inputs": [
            {k: f[k] for k in ("file", "reason", "lines_read")}
            for f in failed_inputs(ctx.out, "extract", ctx.cfg)
        ],
        "config": {k: v for k, v in ctx.cfg.to_dict().items() if k in sections},
        "config_hash": ctx.cfg.section_hash(*sections),
        "splits": meta_splits,
        "splits_written": present,
        "leakage": _read_counts(ctx.out, "split").get("leakage", {}),
        "leak_audit": {
            "bounds": [low, high],
            "splits": leak,
            "outside_bounds": flagged,
            "passed": not flagged,
        },
        "negatives": _read_counts(ctx.out, "negatives"),
        "resolution": resolution(ctx),
        "works_resolution": _read_counts(ctx.out, "works").get("resolution", {}),
        "surveys_counts": {
            k: v
            for k, v in _read_counts(ctx.out, "surveys").items()
            if k.startswith("rejected") or k in ("kept", "candidates")
        },
        "roles": role_distribution(ctx),
        "files": files,
    }
    write_json(ctx.output(METADATA_FILE), meta)
    template = (data_cards_dir() / CARD_TEMPLATE).read_text(encoding="utf-8")
    card = render_card(template, card_values(meta, present))
    ctx.output(CARD_FILE).write_text(card, encoding="utf-8")
    return {
        **{f"{s}_surveys": meta_splits[s]["surveys"] for s in S.SPLIT_NAMES},
        **{f"{s}_rows": meta_splits[s]["rows"] for s in S.SPLIT_NAMES},
        "files": len(files) + 2,
        "input_revision": meta["input"]["revision"],
    }


STAGE = register(
    Stage(
        name="release",
        kind="reduce",
        reads=("extract", "works", "surveys", "labels", "negatives", "split"),
        config_sections=("release", "split", "negatives", "extract"),
        fn=build_release,
        help="release files: reading lists per split, BEIR queries/corpus/qrels, metadata, dataset card",
    )
)
