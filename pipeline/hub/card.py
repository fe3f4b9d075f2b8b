"""The dataset card (the release's ``README.md``) and the method notes beside it
(``METHODS.md``), apart from the release tables.

The templates are package data (``pipeline/data_cards/``, read through
``importlib.resources``). Nothing on the card is retyped: every number comes from
``eval_metadata.json`` (:func:`card_values`; its reference tables and the leak audit's
verdict: :mod:`pipeline.hub.card_tables`), the field table from the schema
(:func:`field_table`), the example row from the written release (:func:`example_row`),
the results table from ``evaluate``'s ``eval_results.json`` (:func:`read_eval_results`,
:func:`results_table`), and the tier distribution figure it links
(:func:`tier_distribution_figure`) is drawn from the same metadata.

The card is what a Hugging Face user reads first, so it is short: what the benchmark is
(with a warning at the very top when it is built from synthetic papers), how to load it,
how to evaluate a model and the baselines' results, the columns, the label and date rules,
uses, limitations, personal data, licence, citation and contact. The reference tables sit
in collapsed sections and the full method in ``METHODS.md``.

``run`` renders the card twice: the release stage writes it before anything is
evaluated, and once ``run`` has evaluated the baselines on the release,
:func:`add_results` renders it again with their table (and records its new size and
sha256 in the release's ``_SUCCESS.json``, which ``push`` checks). The MTEB bundle's
``--card`` adds its reference results the same way, as a section between markers
(:func:`with_mteb_section`), which :func:`add_results` keeps.

Its YAML front matter is what the Hub reads: ``tests/test_card.py`` validates it with
huggingface_hub's ``DatasetCard``. ``push`` refuses a card that still holds a
placeholder (:func:`publish_problem`).
"""

from __future__ import annotations

import importlib.resources
import json
import re
from collections.abc import Mapping
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from pipeline.core import schema as S
from pipeline.core.files import sha256_text
from pipeline.core.release_files import (
    ASPECT_CANDIDATES_FILE,
    ASPECT_READING_LISTS_FILE,
    BEIR_VIEWS,
    CANDIDATES_FILE,
    CARD_FILE,
    EVAL_FILE,
    FULL_TEXT_VIEW,
    METADATA_FILE,
    METHODS_FILE,
    READING_LISTS_FILE,
    RETRIEVAL_SPLITS,
    WORKS_TABLE_FILE,
    beir_file,
)
from pipeline.corpus import provenance as P
from pipeline.evaluate.results import EvaluationResults, Stat, as_results
from pipeline.evaluate.scoring.measures import ndcg_name
from pipeline.hub.card_tables import (
    aspect_audit_table,
    candidate_text_table,
    leak_audit_table,
    leak_verdict,
    license_table,
    md_cell,
    md_table,
    passed_verdict,
    probe_table,
    reason_table,
    textless_sections,
)
from pipeline.rules.document_text import EXCLUSION_REASONS, MIN_TEXT_CHARS
from pipeline.rules.leak_audit import (
    ASPECT_FEATURE_DOCS,
    FULL_TEXT_DOCS,
    RELATIVE_DOCS,
    RELATIVE_FULL_TEXT,
)

CARD_TEMPLATE = "survey_reading_lists.md"
METHODS_TEMPLATE = "methods.md"
SOURCE_DATASET = "ines-besrour/unarxive_2024"
LICENSE_ID = "cc-by-sa-4.0"  # the card's YAML licence (the Hub's id)
LICENSE_NAME = "CC BY-SA 4.0"
LICENSE_URL = "https://creativecommons.org/licenses/by-sa/4.0/"
TIER_FIGURE = "figures/tier_distribution.png"  # beside the card, which links it
EXAMPLE_TEXT_CHARS = 160  # long strings of the example row are cut to this many characters
_PLACEHOLDER = re.compile(r"\{([a-z][a-z0-9_]*)\}")

# What the card says where the config leaves a field of the citation or the repo unset, and
# the config field that fills it; push refuses a card that still holds one.
OWNER_PLACEHOLDER = "OWNER"
PLACEHOLDERS = {
    f"{OWNER_PLACEHOLDER}/": "repo_id",
    "{AUTHORS}": "authors",
    "{YEAR}": "year",
}


def data_cards_dir() -> Traversable:
    """``pipeline/data_cards/``: the card templates, package data (works from a wheel too)."""
    return importlib.resources.files("pipeline") / "data_cards"


def repo_id(meta: dict[str, Any]) -> str:
    """The Hub repo the card's snippets name: ``[release] repo_id``, else OWNER/<dataset_name>."""
    release = meta["config"]["release"]
    return release.get("repo_id") or f"{OWNER_PLACEHOLDER}/{release['dataset_name']}"


def unset_fields(release_config: Mapping[str, Any]) -> list[str]:
    """The ``[release]`` fields the card needs that ``release_config`` leaves unset."""
    return [
        name
        for name in ("repo_id", "authors", "year")
        if not release_config.get(name)  # '', (), 0
    ]


def publish_problem(card: str, meta: dict[str, Any], repo: str) -> str | None:
    """Why ``card`` (a release's ``README.md``) must not be published to ``repo``, in one
    line, or None: it still holds a placeholder, or names another repo.
    """
    left = [field for text, field in PLACEHOLDERS.items() if text in card]
    if left:
        shown = ", ".join(text for text, field in PLACEHOLDERS.items() if field in left)
        fields = ", ".join(f"[release] {field}" for field in left)
        return (
            f"push: the card still holds the placeholder(s) {shown}; set {fields} in the "
            f"config of the build (repo_id = {repo!r}) and rebuild the release"
        )
    named = meta.get("config", {}).get("release", {}).get("repo_id") or ""
    if named and named != repo:
        return (
            f"push: the card names {named} in its snippets, not --repo-id {repo}; set "
            f"[release] repo_id = {repo!r} and rebuild the release"
        )
    return None


# --------------------------------------------------------------------- the example row
def _parquet_row(parquet: pq.ParquetFile, index: int) -> dict[str, Any]:
    """Row ``index`` of a Parquet file as Python values, reading its row group alone."""
    for group in range(parquet.metadata.num_row_groups):
        n = parquet.metadata.row_group(group).num_rows
        if index < n:
            return parquet.read_row_group(group).slice(index, 1).to_pylist()[0]
        index -= n
    raise IndexError(f"row {index} is past the end of the file")


def example_row(release: Path, splits: list[str]) -> str:
    """A row of ``reading_lists`` as JSON, long strings cut: of the first split written, the
    first row (in file order) whose label is >= 3 (it shows a judgment) among those whose
    survey and candidate show the most text (titles and abstracts); the first row when no
    label is >= 3.
    """
    if not splits:
        return "(no split written)"
    import polars as pl

    path = release / READING_LISTS_FILE.format(split=splits[0])
    shown = [S.SURVEY_TITLE, S.SURVEY_ABSTRACT, S.CANDIDATE_TITLE, S.CANDIDATE_ABSTRACT]
    # one streaming pass over five columns: the split's texts are never held at once
    texts = pl.sum_horizontal((pl.col(c).fill_null("") != "").cast(pl.Int32) for c in shown)
    scored = (
        pl.scan_parquet(path)
        .with_row_index("_i")
        .select("_i", (pl.col(S.LABEL) >= 3).fill_null(False).alias("_judged"), texts.alias("_t"))
    )
    # the first of the judged rows that show the most text (all four where any row does)
    best = (
        scored.filter(pl.col("_judged"))
        .sort(["_t", "_i"], descending=[True, False])
        .head(1)
        .collect(engine="streaming")
    )
    index = int(best["_i"][0]) if best.height else 0
    parquet = pq.ParquetFile(path)
    if parquet.metadata.num_rows == 0:
        return "(the split is empty)"
    row = _parquet_row(parquet, index)

    def cut(value: Any) -> Any:
        if isinstance(value, str) and len(value) > EXAMPLE_TEXT_CHARS:
            return value[:EXAMPLE_TEXT_CHARS] + "..."
        if isinstance(value, list):
            return [cut(v) for v in value]
        return value

    # one line per column, lists kept on their line
    fields = [
        f"  {json.dumps(k)}: {json.dumps(cut(v), ensure_ascii=False, default=str)}"
        for k, v in row.items()
    ]
    return "{\n" + ",\n".join(fields) + "\n}"


EXAMPLE_ASPECT_WORKS = 3  # sample positives shown with the example aspect


def example_aspect(release: Path, splits: list[str]) -> str:
    """An aspect as JSON: of the last split written (eval when it has aspects), the aspect with
    the most positives (the first in id order among equals), its query text, its counts and
    its first positives (highest label first, then by id)."""
    from pipeline.rules.aspect_queries import query_title_expr

    if not splits:
        return '{"aspects": "none in this release"}'
    import polars as pl

    rows = pl.scan_parquet(release / ASPECT_READING_LISTS_FILE.format(split=splits[-1]))
    per = (
        rows.group_by(S.ASPECT_ID)
        .agg((pl.col(S.LABEL) >= 1).sum().alias("_p"))
        .sort(["_p", S.ASPECT_ID], descending=[True, False])
        .head(1)
        .collect(engine="streaming")
    )
    # the one aspect's rows, in file order: the split's aspects are never held at once
    aspect = rows.filter(pl.col(S.ASPECT_ID) == per[S.ASPECT_ID][0]).collect()
    first = aspect.row(0, named=True)
    positives = aspect.filter(pl.col(S.LABEL) >= 1).sort(
        [S.LABEL, S.CANDIDATE_ID], descending=[True, False]
    )
    kinds = aspect.group_by(S.NEGATIVE_KIND).len()
    count = dict(kinds.iter_rows())
    out = {
        S.ASPECT_ID: first[S.ASPECT_ID],
        S.ASPECT_HEADING: first[S.ASPECT_HEADING],
        S.ASPECT_PARENT_HEADING: first[S.ASPECT_PARENT_HEADING],
        S.ASPECT_KIND: first[S.ASPECT_KIND],
        S.ASPECT_LEVEL: first[S.ASPECT_LEVEL],
        "query_title": aspect.head(1).select(query_title_expr())[0, 0],
        "positives": positives.height,
        "in_survey_negatives": int(count.get(S.NEGATIVE_KINDS[0], 0)),
        "hard_negatives": int(count.get(S.NEGATIVE_KINDS[1], 0)),
        "sample_positives": [
            {
                S.CANDIDATE_ID: r[S.CANDIDATE_ID],
                S.CANDIDATE_TITLE: r[S.CANDIDATE_TITLE],
                S.LABEL: r[S.LABEL],
                S.N_MENTIONS: r[S.N_MENTIONS],
            }
            for r in positives.head(EXAMPLE_ASPECT_WORKS).iter_rows(named=True)
        ],  # fmt: skip
    }
    return json.dumps(out, ensure_ascii=False, indent=2, default=str)


# --------------------------------------------------------------------- evaluation results
def read_eval_results(path: Path, meta: dict[str, Any]) -> dict[str, Any] | None:
    """``evaluate``'s ``eval_results.json`` at ``path`` when it evaluated this release's eval
    file (same sha256 as ``meta`` records), else None (missing, or another eval file).

    Raises:
        ValueError: the file is there but is not JSON.
    """
    if not path.is_file():
        return None
    results = json.loads(path.read_text(encoding="utf-8"))
    want = (meta.get("files", {}).get(EVAL_FILE) or {}).get("sha256")
    got = (results.get("eval_file") or {}).get("sha256")
    return results if want is not None and got == want else None


def results_systems(results: EvaluationResults) -> list[str]:
    """The systems of the card's results table: the baselines, then the upper bounds (each
    once, in the order ``eval_results.json`` lists them)."""
    return list(dict.fromkeys([*results.baselines, *results.upper_bounds]))


def results_cell(summary: Stat | None) -> str:
    """``mean [ci_low, ci_high]`` to 3 decimals, as the evaluation report writes it."""
    if summary is None or summary.mean is None:
        return "n/a"
    lo, hi = summary.ci_low, summary.ci_high
    ci = f" [{lo:.3f}, {hi:.3f}]" if lo is not None and hi is not None else ""
    return f"{summary.mean:.3f}{ci}"


def results_table(results: dict[str, Any] | None, meta: dict[str, Any]) -> str:
    """The baselines' means with 95% intervals on the eval split, from ``eval_results.json``;
    or a sentence saying why there is none."""
    eval_split = S.SPLIT_NAMES[-1]
    if not meta["splits"][eval_split]["surveys"]:
        return f"No `{eval_split}` split in this release, so nothing was evaluated."
    if results is None:
        return (
            "Not evaluated yet: `run` evaluates the baselines once the release is written "
            "and renders this table from the evaluation's `eval_results.json`."
        )
    typed = as_results(results)
    metrics, best, uppers = typed.main_metrics, typed.best_baseline, set(typed.upper_bounds)
    rows = []
    for name in results_systems(typed):
        label = f"`{name}`" + (
            " (best)" if name == best else " (upper bound)" if name in uppers else ""
        )
        summary = typed.systems.get(name, {})
        rows.append([label, *(results_cell(summary.get(m)) for m in metrics)])
    table = md_table(["system", *(f"`{m}`" for m in metrics)], rows)
    return (
        f"{table}\n\n{md_cell(typed.n_surveys)} `{eval_split}` surveys, "
        f"{md_cell(typed.n_candidates)} judged candidates; means over surveys, "
        f"{typed.ci_method} `random` is the mean over "
        f"{typed.config.get('random_seeds')} seeds; `lgbm*` are trained on "
        f"`{S.SPLIT_NAMES[0]}`. Every metric: `eval/report.md` of the evaluation."
    )


# --------------------------------------------------------------------- rendering
def render_release_card(
    meta: dict[str, Any], splits: list[str], release: Path, results: dict[str, Any] | None = None
) -> str:
    """The card of the release in ``release`` (its tables already written), from ``meta``.

    Also writes the figure the card links, :data:`TIER_FIGURE`, and the method notes,
    :data:`METHODS_FILE`, into ``release``.
    """
    tier_distribution_figure(meta, release / TIER_FIGURE)
    (release / METHODS_FILE).write_text(render_methods(meta, splits), encoding="utf-8")
    return card_text(meta, splits, release, results)


def card_text(
    meta: dict[str, Any], splits: list[str], release: Path, results: dict[str, Any] | None
) -> str:
    """The card (``README.md``) alone: nothing is written."""
    template = (data_cards_dir() / CARD_TEMPLATE).read_text(encoding="utf-8")
    values = card_values(meta, splits)
    values["example_row"] = example_row(release, splits)
    values["example_aspect"] = example_aspect(
        release, list((meta.get("aspects") or {}).get("splits_written") or [])
    )
    values["results_table"] = results_table(results, meta)
    return render_card(template, values)


def render_methods(meta: dict[str, Any], splits: list[str]) -> str:
    """``METHODS.md``: every rule of the build and the audit tables, from ``meta``."""
    template = (data_cards_dir() / METHODS_TEMPLATE).read_text(encoding="utf-8")
    return render_card(template, card_values(meta, splits))


def add_results(out: Path, results_file: Path) -> bool:
    """Render the card of ``out``'s release again with the results table of
    ``results_file`` (``evaluate``'s ``eval_results.json``) and record its new size and
    sha256 in the release's ``_SUCCESS.json``; False (nothing written) when the results are
    not of this release's eval file.
    """
    from pipeline.engine import workdir as W

    release = W.release_dir(out)
    meta = json.loads((release / METADATA_FILE).read_text(encoding="utf-8"))
    results = read_eval_results(results_file, meta)
    if results is None:
        return False
    text = card_text(meta, list(meta.get("splits_written", [])), release, results)
    kept = mteb_section((release / CARD_FILE).read_text(encoding="utf-8"))
    if kept is not None:  # the MTEB bundle's section stays on the card rendered again
        text = with_mteb_section(text, kept)
    W.replace_release_file(out, CARD_FILE, text.encode("utf-8"))
    return True


# the section the MTEB bundle adds to a finished release's card, its reference results
# (``python -m pipeline.integrations.mteb_bundle --card``): between these markers, placed
# before MTEB_BEFORE; the release stage never writes it, so a release rebuilt without that
# command has the card it always had
MTEB_START = "<!-- mteb-reference-results: start -->"
MTEB_END = "<!-- mteb-reference-results: end -->"
MTEB_BEFORE = "\n## What is in it\n"


def mteb_section(card: str) -> str | None:
    """The body of ``card``'s MTEB section (between :data:`MTEB_START` and
    :data:`MTEB_END`), or None when it has none."""
    start, end = card.find(MTEB_START), card.find(MTEB_END)
    if start < 0 or end < start:
        return None
    return card[start + len(MTEB_START) : end].strip("\n")


def with_mteb_section(card: str, body: str) -> str:
    """``card`` with its MTEB section set to ``body``: the section replaced where it is,
    else inserted before :data:`MTEB_BEFORE` (at the end when the card has no such heading)."""
    block = f"{MTEB_START}\n{body.strip(chr(10))}\n{MTEB_END}\n"
    start, end = card.find(MTEB_START), card.find(MTEB_END)
    if start >= 0 and end > start:
        rest = card[end + len(MTEB_END) :].lstrip("\n")
        return card[:start] + block + ("\n" + rest if rest else "")
    at = card.find(MTEB_BEFORE)
    if at < 0:
        return card.rstrip("\n") + "\n\n" + block
    return card[: at + 1] + block + card[at:]


def tier_distribution_figure(meta: dict[str, Any], path: Path) -> None:
    """Write the tier distribution per split as a PNG: for every label, its share of each
    split's rows, with the row count beside the bar (the numbers of the card's label table).

    Drawn as :mod:`pipeline.evaluate.report.plots` draws every figure, so the same metadata gives the same
    bytes.
    """
    from pipeline.evaluate.report.plots import pyplot, save_png

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


def _subfield_rule(negatives: dict[str, Any]) -> str:
    """METHODS.md's sentence on ``[negatives] subfield_as_field``: empty when it is off (the
    default), so a build without it renders the text it always did."""
    if not negatives.get("subfield_as_field"):
        return ""
    return (
        " In this build (`[negatives] subfield_as_field`), a work without arXiv categories (outside"
        " arXiv, or an arXiv work outside the corpus) takes as its field the categories whose"
        " subfields its OpenAlex subfield is: a category's subfields are those of at least"
        f" {negatives['subfield_min_share']} of its corpus papers' OpenAlex records (at least"
        f" {negatives['subfield_min_papers']} papers). Such a work is `in_domain` and an"
        " `own_category` entry for surveys of those categories, as a corpus paper of them is"
        " (`pipeline/rules/fields.py`)."
    )


# every config of the card: (name, a file of it, its schema in pipeline.core.schema)
CARD_CONFIGS = (
    ("reading_lists", READING_LISTS_FILE, "READING_LISTS"),
    ("candidates", CANDIDATES_FILE, "CANDIDATES_VIEW"),
    *((view, beir_file(view, "eval"), f"BEIR_{view.upper()}") for view in BEIR_VIEWS),
    ("aspects", ASPECT_READING_LISTS_FILE, "ASPECT_READING_LISTS"),
    ("aspect_candidates", ASPECT_CANDIDATES_FILE, "ASPECT_CANDIDATES_VIEW"),
    ("corpus_sections", beir_file(FULL_TEXT_VIEW, "eval"), "CORPUS_SECTIONS"),
)
# answer-free view -> the config with its judgments (the field table lists a column once)
VIEW_OF = {"candidates": "reading_lists", "aspect_candidates": "aspects"}


def _configs_yaml(
    splits: list[str],
    aspect_splits: list[str] = (),  # type: ignore[assignment]
    files: Mapping[str, Any] | None = None,
) -> str:
    """The card's ``configs``: the retrieval views in MTEB's layout first (``qrels`` the
    default; the eval split named ``test`` and listed first, since BEIR's ``HFDataLoader``
    takes a config's first split), then ``reading_lists`` and ``candidates`` (``train``,
    ``eval``), then the section-level ``aspects`` and ``aspect_candidates`` (the splits
    that have aspects; none when no split has one).

    Each config's ``description`` carries a fingerprint of its files (a hash of their
    sha256s, from ``files``, the metadata's file records). ``datasets`` keys the cache of a
    local folder by the folder's name and a hash of the card's configs, never by the
    files' paths or contents, so without it ``load_dataset("<folder>/release", CONFIG)``
    would return the rows of another folder named ``release``, or of an earlier build in the
    same folder (datasets 5.2); a config's ``description`` is part of that hash.
    """
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
    configs += [
        (name, False, [(split, pattern.format(split=split)) for split in aspect_splits])
        for name, pattern in (
            ("aspects", ASPECT_READING_LISTS_FILE),
            ("aspect_candidates", ASPECT_CANDIDATES_FILE),
        )
        if aspect_splits
    ]
    # the full-text view: the splits whose file was written (a split whose documents have no
    # permitted full text has none)
    sections = [
        (RETRIEVAL_SPLITS[split], beir_file(FULL_TEXT_VIEW, split))
        for split in eval_first
        if beir_file(FULL_TEXT_VIEW, split) in (files or {})
    ]
    if sections:
        configs.append((FULL_TEXT_VIEW, False, sections))
    lines = ["configs:"]
    for name, default, paths in configs:
        lines.append(f"- config_name: {name}")
        if default:
            lines.append("  default: true")
        digests = [(files or {}).get(path, {}).get("sha256", "") for _, path in paths]
        if all(digests):
            fingerprint = sha256_text(digests)[:16]
            lines.append(f"  description: data files sha256 {fingerprint}")
        lines.append("  data_files:")
        for split, path in paths:
            lines += [f"  - split: {split}", f"    path: {path}"]
    return "\n".join(lines)


# --------------------------------------------------------------------- provenance
def provenance_banner(meta: dict[str, Any]) -> str:
    """The warning at the top of the card of a release not built from real records only;
    '' for one that is."""
    prov = meta.get("provenance") or {}
    kind = P.verdict(meta)
    if kind == P.REAL:
        return ""
    if kind == P.SYNTHETIC:
        names = ", ".join(f"`{g}`" for g in prov.get("generators") or {}) or "a generator"
        return (
            "> **SYNTHETIC DATA. NOT A BENCHMARK OF REAL PAPERS.** "
            f"{prov.get('synthetic_papers', 0):,} of the {prov.get('papers', 0):,} papers this "
            f"release was built from are synthetic, generated by {names}: their titles, "
            "abstracts, authors, dates and citations are made up, and the figures below "
            "describe the generator, not arXiv. Use it to try the pipeline and the evaluation; "
            "do not report results on it or cite it as arXiv data."
        )
    return (
        "> **PROVENANCE UNKNOWN.** "
        f"{prov.get('unknown_papers', 0):,} of the {prov.get('papers', 0):,} papers this "
        "release was built from come from extract outputs that do not record whether they "
        "are synthetic (an older version, or tables built by hand). Treat it as synthetic."
    )


def provenance_line(meta: dict[str, Any]) -> str:
    """One cell of the card's facts: what the release was built from."""
    prov = meta.get("provenance") or {}
    files = meta.get("input", {}).get("files", [])
    what = f"{prov.get('papers', 0):,} papers read from {len(files):,} input file(s)"
    kind = P.verdict(meta)
    if kind == P.REAL:
        return f"{what}; none is synthetic"
    if kind == P.SYNTHETIC:
        return f"{what}; **{prov.get('synthetic_papers', 0):,} synthetic**"
    return f"{what}; **{prov.get('unknown_papers', 0):,} of unknown provenance**"


# --------------------------------------------------------------------- values
TIER_RULES = {
    4: "mentioned at least {t} times in all, or at least {r} times in related work",
    3: "otherwise, mentioned in related work, or listed but never cited in the running text",
    2: "otherwise, mentioned in a method or experiment section",
    1: "otherwise: cited in the text, only in introduction, background, conclusion or back matter",
    0: "not cited by the survey: a hard negative (below)",
}


def _bibtex_authors(authors: list[str]) -> str:
    return " and ".join(authors) if authors else "{AUTHORS}"


def openalex_values(oa: dict[str, Any]) -> dict[str, str]:
    """The card's lines on the candidates' OpenAlex records (stage ``openalex``) and on the
    abstracts taken from them (the rule: :mod:`pipeline.rules.described`)."""
    works = oa.get("works")
    if not works:
        return {"openalex_summary": "", "openalex_licence": ""}

    def pct(key: str) -> str:
        return f"{100 * (oa.get(key) or 0):.1f}%"

    summary = (
        f"**Candidate records.** Of the {works} works a release can show (positives and the "
        f"pools hard negatives are drawn from), {oa.get('works_with_record', 0)} have an "
        f"OpenAlex record ({pct('record_rate')}): a candidate's title is its record's title, "
        f"else a corpus paper's title, else the title parsed from the bib strings citing it. "
        f"{oa.get('works_not_looked_up', 0)} works were not looked up and "
        f"{oa.get('works_not_in_openalex', 0)} have no record in OpenAlex; they lack a record. "
        f"Records with an abstract: {pct('abstract_rate')} of the works, carried: "
        f"{pct('abstract_carried_rate')}; with a venue: {pct('venue_rate')}; retracted: "
        f"{oa.get('retracted', 0)} (`candidate_retracted`). Venue, year and subfield are on the "
        f"judgment side until the leak audit passes with them in `candidates`. The records were "
        f"last updated by OpenAlex between {oa.get('updated_date_min')} and "
        f"{oa.get('updated_date_max')}; their table's sha256 is `{oa.get('records_sha256')}`."
    )
    policy = oa.get("abstracts")
    licence = (
        "OpenAlex's data is CC0, but an abstract is its authors' or publisher's text under their "
        "terms (OpenAlex itself ships abstracts only as an inverted index). "
        + {
            "open": "This release carries the OpenAlex abstracts of works whose OpenAlex "
            "location names a Creative Commons or public-domain licence, and for every other "
            "work only its id (`candidate_openalex_id`): `https://api.openalex.org/works/<id>` "
            "gives its abstract to whoever may use it.",
            "all": "This release carries every OpenAlex abstract (`[openalex] abstracts = "
            '"all"`): it is built for local use, not to be published.',
            "none": "This release carries no OpenAlex abstract, only each work's id "
            "(`candidate_openalex_id`).",
        }.get(policy, "")
    )
    return {"openalex_summary": summary, "openalex_licence": licence}


def card_values(meta: dict[str, Any], splits: list[str]) -> dict[str, str]:
    """Placeholder values of the card templates, every number taken from ``meta``: one
    function per part of the card, in the card's order."""
    return {
        **_identity_values(meta, splits),
        **_citation_values(meta),
        **_summary_values(meta),
        **_build_values(meta),
        **_size_values(meta),
        **_role_values(meta),
        **_resolution_values(meta),
        **_files_values(meta, splits),
        **_audit_values(meta),
        **openalex_values(meta.get("openalex") or {}),
        **aspect_values(meta.get("aspects") or {}, splits, S.SPLIT_NAMES[-1], S.SPLIT_NAMES[0]),
        **_full_text_values(meta.get("corpus_sections") or {}),
        **_document_text_values(meta),
    }


def _document_text_values(meta: dict[str, Any]) -> dict[str, str]:
    """The works left out for their text (``text_exclusion``) and MTEB's data checks of the
    BEIR files (``mteb_checks``), as tables."""
    excluded = meta.get("text_exclusion") or {}
    rows = []
    for split, c in sorted((excluded.get("splits") or {}).items(), key=lambda kv: kv[0] != "eval"):
        rows.append(
            [f"`{split}`"]
            + [f"{c[r]['positives']:,} / {c[r]['negatives']:,}" for r in EXCLUSION_REASONS]
            + [f"{c['surveys_without_positive']:,} ({c['their_other_rows']:,} rows)"]
        )
    works = excluded.get("works") or {}
    exclusion = (
        md_table(
            [
                "split",
                *(f"`{r}` rows (positives / hard negatives)" for r in EXCLUSION_REASONS),
                "surveys left without a positive",
            ],
            rows,
        )  # fmt: skip
        + "\n\nWorks left out: "
        + ", ".join(f"`{r}` {works.get(r, 0):,}" for r in EXCLUSION_REASONS)
        + "."
        if rows
        else "This build applied no text rule."
    )
    checks = (meta.get("mteb_checks") or {}).get("splits") or {}
    check_rows = [
        [
            f"`{split}`",
            *(f"{c[side]['count']:,}" for side in ("queries", "documents")),
            *(f"{c[side]['duplicates']:,}" for side in ("queries", "documents")),
            *(f"{c[side]['short_texts']:,}" for side in ("queries", "documents")),
            f"{c['qrels']['missing_corpus_ids'] + c['qrels']['missing_query_ids']:,}",
            f"{c['qrels']['queries_without_relevant']:,}",
            "passed" if c["passed"] else "FAILED: " + "; ".join(c["problems"]),
        ]
        for split, c in sorted(checks.items(), key=lambda kv: kv[0] != "test")
    ]
    header = ["split", "queries", "documents", "duplicate queries", "duplicate documents"]
    header += [f"queries under {MIN_TEXT_CHARS} characters"]
    header += [f"documents under {MIN_TEXT_CHARS} characters", "qrels ids missing"]
    header += ["queries without a relevant document", "verdict"]
    return {
        "text_exclusion_table": exclusion,
        "mteb_checks_table": md_table(header, check_rows) if check_rows else "Not run.",
    }


def _share(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"  # the split has no such candidate


def _full_text_values(per_split: dict[str, Any]) -> dict[str, str]:
    """The full-text view's table: per split, documents with full text by licence, sections,
    characters, and the share of positives and of hard negatives that have it."""
    if not per_split:
        return {"full_text_table": "This build wrote no full-text view."}
    rows = []
    for split, c in sorted(per_split.items(), key=lambda kv: kv[0] != "eval"):
        licences = ", ".join(f"{k} {v:,}" for k, v in sorted(c["documents_by_licence"].items()))
        rows.append(
            [
                f"`{RETRIEVAL_SPLITS[split]}`",
                f"{c['documents']:,}",
                licences or "none",
                f"{c['sections']:,}",
                f"{c['characters']:,}",
                _share(c["positives_with_text"]),
                _share(c["hard_negatives_with_text"]),
            ]
        )
    header = ["split", "documents", "by licence", "sections", "characters"]
    header += ["positives with full text", "hard negatives with full text"]
    return {"full_text_table": md_table(header, rows)}


def _identity_values(meta: dict[str, Any], splits: list[str]) -> dict[str, str]:
    """What the release is and where its parts are: the front matter, the file names, the
    splits, the label range and the code."""
    rel = meta["config"]["release"]
    train_split, eval_split = S.SPLIT_NAMES[0], S.SPLIT_NAMES[-1]
    files = meta["files"]
    code_url = rel.get("code_url") or ""
    aspect_splits = list((meta.get("aspects") or {}).get("splits_written") or [])
    return {
        "repo_id": repo_id(meta),
        "source_dataset": SOURCE_DATASET,
        "license_id": LICENSE_ID,
        "license_name": LICENSE_NAME,
        "license_url": LICENSE_URL,
        "eval_file": EVAL_FILE,
        "methods_file": METHODS_FILE,
        "works_table_file": WORKS_TABLE_FILE,
        "n_works_table_rows": f"{(files.get(WORKS_TABLE_FILE) or {}).get('rows', 0):,}",
        "train_split": train_split,
        "eval_split": eval_split,
        # the split the snippet loads the candidates of: eval, else the one written
        "snippet_split": eval_split if eval_split in splits or not splits else splits[0],
        "label_min": str(min(S.LABEL_NAMES)),
        "label_max": str(max(S.LABEL_NAMES)),
        "code_link": f"<{code_url}>" if code_url else "the `survey-reading-lists` Python package",
        "install_hint": f'`pip install "git+{code_url}"`'
        if code_url
        else "the `survey-reading-lists` package",
        "main_metric": ndcg_name(10),
        "tier_figure": TIER_FIGURE,
        "pretty_name": rel["dataset_name"],
        "version": meta["version"],
        "code_version": meta["code_version"],
        "input_revision": meta["input"]["revision"],
        "size_category": size_category(meta["totals"]["rows"]),
        "configs_yaml": _configs_yaml(splits, aspect_splits, meta.get("files")),
    }


def _citation_values(meta: dict[str, Any]) -> dict[str, str]:
    """The citation (BibTeX) and the contact."""
    rel = meta["config"]["release"]
    code_url = rel.get("code_url") or ""
    year = rel.get("year") or 0
    contact = rel.get("contact") or ""
    synthetic = P.verdict(meta) != P.REAL
    return {
        "code_url_bibtex": f"\n  url          = {{{code_url}}}," if code_url else "",
        "bibtex_key": re.sub(r"[^A-Za-z0-9]+", "_", rel["dataset_name"]).strip("_").lower(),
        "bibtex_authors": _bibtex_authors(list(rel.get("authors") or [])),
        "bibtex_year": str(year) if year else "{YEAR}",
        "bibtex_title": f"{rel['dataset_name']}: "
        + (
            "Survey Reading Lists of a Synthetic Corpus"
            if synthetic
            else "Survey Reading Lists Mined from the Full Text of arXiv"
        ),
        "contact": (f"<{contact}>" if contact.startswith("http") else f"<mailto:{contact}>")
        if contact
        else "The Community tab of the dataset's page, "
        f"<https://huggingface.co/datasets/{repo_id(meta)}/discussions>",
    }


def _summary_values(meta: dict[str, Any]) -> dict[str, str]:
    """The top of the card: where the papers come from (with a warning when they are
    synthetic) and the Hub's tags."""
    synthetic = P.verdict(meta) != P.REAL
    banner = provenance_banner(meta)
    tags = (
        "scientific-literature",
        "citation-recommendation",
        "literature-review",
        "arxiv",
        "unarxive",
        "beir",
        "mteb",
        *(["synthetic"] if synthetic else []),
    )
    return {
        # with the blank line after it, so a release of real records has no gap there
        "provenance_banner": f"{banner}\n\n" if banner else "",
        "provenance_line": provenance_line(meta),
        "summary_source": (
            "built from a corpus in the unarXive record format that is **not** real arXiv "
            "data (see the warning above)"
            if synthetic
            else f"mined from the full text of arXiv papers in [unarXive 2024]"
            f"(https://huggingface.co/datasets/{SOURCE_DATASET})"
        ),
        "tags_yaml": "\n".join(f"- {tag}" for tag in tags),
    }


def _build_values(meta: dict[str, Any]) -> dict[str, str]:
    """The rules of the build, as configured: split, negatives, labels, survey floor."""
    cfg = meta["config"]
    labels = cfg.get("labels", {})
    negatives = cfg["negatives"]
    return {
        "eval_from": cfg["split"]["eval_from"],
        "negatives_per_positive": str(negatives["negatives_per_positive"]),
        "candidates_per_negative": str(negatives.get("candidates_per_negative", "")),
        "negative_sampling": negatives["negative_sampling"],
        "negative_seed": str(negatives["seed"]),
        "subfield_rule": _subfield_rule(negatives),
        "essential_total_mentions": str(labels.get("essential_total_mentions", "")),
        "essential_related_mentions": str(labels.get("essential_related_mentions", "")),
        "min_resolved_frac": str(cfg.get("surveys", {}).get("min_resolved_frac", "")),
    }


_SPLIT_COLUMNS = {
    "split": None,
    "surveys": "surveys",
    "rows": "rows",
    "positives": "positives",
    "hard negatives": "negatives",
    "candidate works": "candidate_works",
    "surveys without negatives": "surveys_without_negatives",
    "first survey": "survey_date_min",
    "last survey": "survey_date_max",
}


def _size_values(meta: dict[str, Any]) -> dict[str, str]:
    """How big the release is: totals, and per split its rows, labels, label reasons,
    licences, categories and years."""
    sp = meta["splits"]
    totals = meta["totals"]
    labels = meta["config"].get("labels", {})
    t, r = labels.get("essential_total_mentions", ""), labels.get("essential_related_mentions", "")
    split_rows = [
        [s, *(sp[s][key] for key in list(_SPLIT_COLUMNS.values())[1:])] for s in S.SPLIT_NAMES
    ]
    label_rows = [
        [k, f"`{S.LABEL_NAMES[k]}`", TIER_RULES[k].format(t=t, r=r)]
        + [sp[s]["labels"][S.LABEL_NAMES[k]] for s in S.SPLIT_NAMES]
        for k in sorted(S.LABEL_NAMES, reverse=True)
    ]

    def surveys_by(key: str) -> list[list[Any]]:
        values = sorted({v for s in S.SPLIT_NAMES for v in sp[s][key]})
        return [
            [v] + [sp[s][key].get(v, {}).get("surveys", 0) for s in S.SPLIT_NAMES] for v in values
        ]

    per_split = [f"surveys ({s})" for s in S.SPLIT_NAMES]
    return {
        "n_surveys": f"{totals['surveys']:,}",
        "n_rows": f"{totals['rows']:,}",
        "n_positives": f"{totals['positives']:,}",
        "n_negatives": f"{totals['negatives']:,}",
        "n_papers": f"{(meta.get('provenance') or {}).get('papers', 0):,}",
        "surveys_per_split": ", ".join(f"{sp[s]['surveys']:,} `{s}`" for s in S.SPLIT_NAMES),
        "split_table": md_table(list(_SPLIT_COLUMNS), split_rows),
        "label_table": md_table(
            ["label", "name", "rule", *(f"rows ({s})" for s in S.SPLIT_NAMES)], label_rows
        ),
        "reason_table": reason_table(sp),
        "license_table": license_table(sp),
        "category_table": md_table(["primary category", *per_split], surveys_by("categories")),
        "year_table": md_table(["year", *per_split], surveys_by("years")),
    }


_ROLE_COLUMNS = (
    ("surveys", "mentions in surveys"),
    ("all_papers", "mentions in all papers"),
    ("surveys_labelled", "labelled survey mentions"),
)


def _role_values(meta: dict[str, Any]) -> dict[str, str]:
    """The section roles of the mentions, in surveys and in all papers."""
    roles = meta["roles"]
    header = ["role"]
    for _, title in _ROLE_COLUMNS:
        header += [title, "share"]
    rows = [
        [r]
        + [
            x
            for key, _ in _ROLE_COLUMNS
            for x in ((roles.get(key) or {}).get(r), (roles.get(f"{key}_frac") or {}).get(r))
        ]
        for r in S.ROLES
    ]
    return {
        "role_table": md_table(header, rows),
        "textless_sections": textless_sections(roles.get("textless_top_sections") or {}),
    }


def _resolution_values(meta: dict[str, Any]) -> dict[str, str]:
    """How bib entries resolved to works, how negatives were matched, and the split's
    leakage checks."""
    res = meta["resolution"]
    leak = meta["leakage"]
    negatives = meta.get("negatives", {})
    rounds = sorted((negatives.get("match_rounds") or {}).items(), key=lambda kv: int(kv[0]))
    by_round = negatives.get("negatives_by_match_round", {})
    rejected = meta.get("surveys_counts", {}).get("rejected_resolved_frac_below_floor", 0)
    return {
        "resolution_table": md_table(
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
        "match_rounds_table": md_table(
            ["round", "matched on", "negatives"],
            [[k, ", ".join(f"`{c}`" for c in cols), by_round.get(k, 0)] for k, cols in rounds],
        ),
        "checks_table": md_table(["check", "count"], [[f"`{k}`", leak[k]] for k in sorted(leak)]),
        "resolution_by_title_table": md_table(
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
        "positives_dropped_after_survey": f"{leak.get('positives_dated_after_survey_dropped', 0):,}",
        "surveys_below_resolution_floor": f"{rejected:,}",
    }


def _files_values(meta: dict[str, Any], splits: list[str]) -> dict[str, str]:
    """The files of the release, the splits written, the columns and where shown texts
    come from."""
    files = meta["files"]
    return {
        "files_table": md_table(
            ["file", "rows", "sha256"],
            [[f"`{k}`", v.get("rows"), f"`{v['sha256']}`"] for k, v in sorted(files.items())],
        ),
        "splits_present": ", ".join(f"`{s}`" for s in splits) or "none",
        "field_table": field_table(),
        "candidate_text_table": candidate_text_table(meta.get("candidate_text") or {}),
    }


def _audit_values(meta: dict[str, Any]) -> dict[str, str]:
    """The leak audit of the reading lists: its tables, the probe and the verdict."""
    audit = meta.get("leak_audit", {})
    bounds = audit.get("bounds", ["", ""])
    return {
        "leak_audit_table": leak_audit_table(audit),
        "relative_audit_table": leak_audit_table(audit.get("relative", {})),
        "relative_features_list": "\n".join(
            f"* `{name}`: {doc}"
            for name, doc in {
                **RELATIVE_DOCS,
                RELATIVE_FULL_TEXT: FULL_TEXT_DOCS[RELATIVE_FULL_TEXT],
            }.items()
        ),
        "probe_table": probe_table(audit.get("reading_free_probe") or {}),
        "leak_low": str(bounds[0]),
        "leak_high": str(bounds[1]),
        "leak_verdict": leak_verdict(audit),
    }


def aspect_values(
    aspects: dict[str, Any], splits: list[str], eval_split: str, train_split: str
) -> dict[str, str]:
    """The card's and METHODS.md's placeholders of the section-level reading lists."""
    sp = aspects.get("splits") or {}
    written = list(aspects.get("splits_written") or [])
    audit = aspects.get("leak_audit") or {}
    stage = aspects.get("stage") or {}

    def spread(s: str, what: str) -> str:
        d = (sp.get(s, {}).get("per_aspect") or {}).get(what) or {}
        if d.get("min") is None:
            return ""
        return f"{d['min']}-{d['max']} (median {d['median']})"

    rows = [
        [s, sp.get(s, {}).get("aspects", 0), sp.get(s, {}).get("surveys", 0),
         sp.get(s, {}).get("rows", 0), sp.get(s, {}).get("positives", 0),
         sp.get(s, {}).get("in_survey_negatives", 0), sp.get(s, {}).get("hard_negatives", 0),
         spread(s, "positives"), spread(s, "in_survey_negatives"), spread(s, "hard_negatives")]
        for s in S.SPLIT_NAMES
    ]  # fmt: skip
    kind_rows = [
        [f"`{k}`"] + [(sp.get(s, {}).get("by_kind") or {}).get(k, 0) for s in S.SPLIT_NAMES]
        for k in S.ASPECT_KINDS
    ] + [
        [f"`{k}`"] + [(sp.get(s, {}).get("by_level") or {}).get(k, 0) for s in S.SPLIT_NAMES]
        for k in S.ASPECT_LEVELS
    ]
    unit_rows = [[f"`{k}`", stage[k]] for k in sorted(stage) if isinstance(stage[k], int)]
    verdict = (
        passed_verdict(audit)
        if audit.get("passed")
        else "FAILED: " + "; ".join(audit.get("problems") or ["no aspect audited"])
        if written
        else "not run: no split has an aspect"
    )
    return {
        "aspect_min_works": str(aspects.get("min_works", "")),
        "aspect_splits": ", ".join(f"`{s}`" for s in written) or "none",
        "aspect_snippet_split": eval_split if eval_split in written or not written else written[0],
        "aspect_table": md_table(
            [
                "split",
                "aspects",
                "surveys",
                "rows",
                "positives",
                "in-survey negatives",
                "hard negatives",
                "positives per aspect",
                "in-survey negatives per aspect",
                "hard negatives per aspect",
            ],
            rows,
        ),  # fmt: skip
        "aspect_kind_table": md_table(["kind / level", *S.SPLIT_NAMES], kind_rows),
        "aspect_unit_table": md_table(["count", "value"], unit_rows),
        "aspect_leak_verdict": verdict,
        "aspect_audit_table": aspect_audit_table(audit.get("splits") or {}),
        "aspect_relative_audit_table": aspect_audit_table(
            (audit.get("relative") or {}).get("splits") or {}
        ),
        "aspect_judgment_side_table": aspect_audit_table(audit.get("judgment_side") or {}),
        "aspect_probe_table": probe_table(audit.get("reading_free_probe") or {}),
        "aspect_features_list": "\n".join(
            f"* `{name}`: {doc}" for name, doc in ASPECT_FEATURE_DOCS.items()
        ),
    }


def column_role(name: str) -> str:
    """``**judgment**``, ``licence`` or ``input`` (what a system may read)."""
    if name in S.JUDGMENT_COLUMNS:
        return "**judgment**"
    if name in S.LICENSE_COLUMNS:
        return "licence"
    return "input"


def column_doc(config: str, name: str) -> str:
    """What column ``name`` of ``config`` holds (``schema.COLUMN_DOCS``; a ``config.column``
    entry where one name means different things in two configs)."""
    return S.COLUMN_DOCS.get(f"{config}.{name}", S.COLUMN_DOCS.get(name, ""))


def field_table() -> str:
    """Every column of every release config with its type, role and meaning; a column of
    ``reading_lists`` that the ``candidates`` view also has is listed once, with both."""
    schemas = {config: getattr(S, name) for config, _, name in CARD_CONFIGS}
    in_view = {full: (view, set(schemas[view].names)) for view, full in VIEW_OF.items()}
    rows = []
    for config, fields in schemas.items():
        if config in VIEW_OF:
            continue
        for f in fields:
            view, names = in_view.get(config, ("", set()))
            configs = f"`{config}`" + (f", `{view}`" if f.name in names else "")
            rows.append([configs, f"`{f.name}`", str(f.type), column_role(f.name),
                         column_doc(config, f.name)])  # fmt: skip
    return md_table(["configs", "column", "type", "role", "what it holds"], rows)


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
