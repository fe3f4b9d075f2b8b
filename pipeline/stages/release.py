"""Stage ``release`` (reduce): the files published on the Hub, in ``<out>/release/``.

* ``{split}_survey_reading_lists.parquet``: one row per (survey, candidate), columns
  ``schema.READING_LISTS``, sorted by (survey_id, candidate_id).
* ``qrels/``, ``corpus/``, ``queries/``, ``top_ranked/`` ``{train,test}.parquet``: the same
  data in MTEB's retrieval/re-ranking layout (explicit score-0 qrels for hard negatives;
  ``top_ranked``: each query's candidate ids), the eval split named ``test`` as MTEB's
  and BEIR's loaders ask (:data:`pipeline.core.release_files.RETRIEVAL_SPLITS`).
* ``aspects/``: the section-level reading lists (stage ``aspects`` says what
  an aspect is), laid out as a release of its own: ``{split}_survey_reading_lists.parquet`` (one
  row per (aspect, candidate), ``schema.ASPECT_READING_LISTS``, sorted by (aspect_id,
  candidate_id)) and its answer-free view ``candidates/{split}.parquet``
  (``schema.ASPECT_CANDIDATES_VIEW``); a split without aspects is not written. Their leak
  audit (:func:`aspect_audit_meta`) is ``aspects.leak_audit`` in the metadata.
* ``eval_metadata.json``: counts, audit, resolved config, input revision, code
  version, sha256 and row count of every Parquet file.
* ``README.md``: the dataset card (:mod:`pipeline.hub.card`)
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
  ``citing_survey_category`` negatives (works outside the corpus, and corpus papers of
  other categories) are all out of domain, like the positives outside the survey's
  category.
* ``n_citing_surveys``, ``candidate_prior_citations``: other detected surveys and distinct
  corpus papers citing the work, posted before the survey, for positives and negatives
  alike (the survey itself never counts). Judgment-side (``schema.POPULARITY_COLUMNS``):
  in the reading lists, not in the candidates view. The date rule is :mod:`pipeline.rules.visible`'s
  (citers by their first version, the survey by its text date; the card's "Dates").
* ``candidate_date`` is the work's ``known_date``.
* ``candidate_title`` is the title of the work's OpenAlex record, else a corpus paper's own
  title, else the work's ``parsed_title`` (``works``: the most common title key of the bib
  strings citing it), so a work is shown in one canonical form whoever cited it
  (:mod:`pipeline.rules.described`, which also labels where each shown text came from). ``candidate_raw`` (one
  citing paper's bib string, with that paper's style) is in the reading lists, on the
  judgment side, and not in the ``candidates`` view or the BEIR corpus: its formatting
  tells whose bibliography it came from (the card, "Candidate text").
* Missing text is ``''`` in every config, never null (``schema.TEXT_COLUMNS``).
* ``survey_license``, ``candidate_license``: the papers' own licences (``extract``'s
  ``license``; null for a work outside the corpus), in ``reading_lists`` only.

Everything written is deterministic: sorted rows, Parquet with fixed options, JSON
with sorted keys, no timestamps and no absolute paths.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow.parquet as pq

from pipeline import __version__
from pipeline.core import schema as S
from pipeline.core.errors import StageError
from pipeline.core.files import sha256_file, write_json
from pipeline.core.parquet import RowGroupWriter, write_table
from pipeline.core.progress import steps
from pipeline.core.release_files import (
    ASPECT_CANDIDATES_FILE,
    ASPECT_READING_LISTS_FILE,
    ASPECTS_DIR,
    BIBLIOGRAPHY_BASELINES_FILE,
    CANDIDATES_FILE,
    CARD_FILE,
    METADATA_FILE,
    READING_LISTS_FILE,
    WORKS_TABLE_FILE,
    beir_file,
)
from pipeline.corpus.provenance import summarize as summarize_provenance
from pipeline.engine.context import ReduceContext
from pipeline.engine.stage import Stage
from pipeline.evaluate.field_baselines import write_field_baselines
from pipeline.evaluate.probe import reading_free_probe
from pipeline.hub.card import render_release_card
from pipeline.rules import visible as V
from pipeline.rules.audit_sample import keep, sample_record, sample_surveys
from pipeline.rules.described import TEXT_SOURCE, TEXT_SOURCES, described_works
from pipeline.rules.fields import FIELD_CATEGORIES, fields_of, with_field_categories
from pipeline.rules.leak_audit import (
    ASPECT_SCOPES,
    aspect_audit,
    aspect_feature_values,
    aspect_judgment_values,
    aspect_relative_audit,
    aspect_relative_values,
    audit_values,
    feature_values,
    outside,
    relative_audit,
    relative_feature_values,
    within_chance,
)
from pipeline.rules.roles import TEXTLESS_MEASURED
from pipeline.rules.tables import id_batches, scan_extract
from pipeline.rules.text_match import survey_text
from pipeline.rules.titles import work_title_keys
from pipeline.stages.corpus_sections import write_corpus_sections

_W_PAPER = V.WORK_PAPER  # the candidate's corpus paper id, as in_domain_expr reads it
log = logging.getLogger("pipeline")


# --------------------------------------------------------------------- tables
def reading_lists(ctx: ReduceContext, survey_ids: pl.Series | None = None) -> pl.LazyFrame:
    """Every (survey, candidate) row of the release, both splits, with a ``split`` column
    (of the surveys ``survey_ids`` only, if given: their papers and candidates are filtered
    as the files are read)."""
    cands = ctx.read("split", "candidates")
    fields = fields_of(ctx.cfg, ctx.read("works", "works"), ctx.read("openalex", "records"))
    works = with_field_categories(
        described_works(ctx.read("works", "works"), ctx.read("openalex", "records")), fields
    )
    if survey_ids is not None:
        cands = cands.filter(pl.col(S.SURVEY_ID).is_in(survey_ids.implode()))
        work_ids = cands.select(S.WORK_ID).unique().collect(engine="streaming")[S.WORK_ID]
        works = works.filter(pl.col(S.WORK_ID).is_in(work_ids.implode()))
    extract = ctx.files_by_table("extract")
    surveys = scan_extract(extract, "papers", survey_ids).select(
        pl.col(S.PAPER_ID).alias(S.SURVEY_ID),
        pl.col(S.TITLE).alias(S.SURVEY_TITLE),
        pl.col(S.ABSTRACT).alias(S.SURVEY_ABSTRACT),
        pl.col(S.CATEGORIES).alias(S.SURVEY_CATEGORIES),
        pl.col(S.PRIMARY_CATEGORY).alias(S.SURVEY_PRIMARY_CATEGORY),
        pl.col(S.LICENSE).alias(S.SURVEY_LICENSE),
    )
    licenses = scan_extract(extract, "papers").select(
        pl.col(S.PAPER_ID).alias(_W_PAPER), pl.col(S.LICENSE).alias(S.CANDIDATE_LICENSE)
    )
    works = works.select(
        pl.col(S.WORK_ID),
        pl.col(S.ALIASES).alias(S.CANDIDATE_ALIASES),
        V.shown_title().alias(S.CANDIDATE_TITLE),
        pl.col(S.ABSTRACT).alias(S.CANDIDATE_ABSTRACT),
        pl.col(S.CATEGORIES).alias(S.CANDIDATE_CATEGORIES),
        pl.col(S.RAW).alias(S.CANDIDATE_RAW),
        pl.col(S.PAPER_ID).alias(_W_PAPER),
        pl.col(S.OA_ANSWERED_ID).alias(S.CANDIDATE_OPENALEX_ID),
        pl.col(S.OA_VENUE).alias(S.CANDIDATE_VENUE),
        pl.col(S.OA_YEAR).alias(S.CANDIDATE_YEAR),
        pl.col(S.OA_SUBFIELD).alias(S.CANDIDATE_SUBFIELD),
        pl.col(S.OA_RETRACTED).alias(S.CANDIDATE_RETRACTED),
        FIELD_CATEGORIES,
        TEXT_SOURCE,
    )
    in_domain = V.in_domain_expr(S.SURVEY_PRIMARY_CATEGORY)
    names = {int(k): v for k, v in S.LABEL_NAMES.items()}
    return (
        cands.join(surveys, on=S.SURVEY_ID, how="left")
        .join(works, on=S.WORK_ID, how="left")
        .join(licenses, on=_W_PAPER, how="left")
        .with_columns(
            pl.col(S.WORK_ID).alias(S.CANDIDATE_ID),
            pl.col(S.LABEL).replace_strict(names, return_dtype=pl.String).alias(S.LABEL_NAME),
            in_domain.alias(S.IN_DOMAIN),
            pl.col(S.CANDIDATE_RETRACTED).fill_null(False),
            # one representation for missing text: '' (schema.TEXT_COLUMNS)
            *[pl.col(c).fill_null("") for c in S.READING_LISTS.names if c in S.TEXT_COLUMNS],
        )
        .select(*S.READING_LISTS.names, S.SPLIT, TEXT_SOURCE)
        .sort(S.SURVEY_ID, S.CANDIDATE_ID)
    )


def beir_views(rows: pl.DataFrame) -> dict[str, pl.DataFrame]:
    """Queries, corpus, qrels and top_ranked of one split's reading-list rows (whole
    surveys; their texts are never null: ``schema.TEXT_COLUMNS``)."""
    queries = (
        rows.unique(S.SURVEY_ID)
        .select(
            pl.col(S.SURVEY_ID).alias(S.BEIR_ID),
            pl.col(S.SURVEY_TITLE).alias(S.BEIR_TITLE),
            # BEIR and MTEB read a query's text alone: the string the evaluation reads
            survey_text().alias(S.BEIR_TEXT),
            pl.col(S.SURVEY_PRIMARY_CATEGORY).alias(S.PRIMARY_CATEGORY),
        )
        .sort(S.BEIR_ID)
    )
    corpus = (
        rows.unique(S.CANDIDATE_ID)
        .select(
            pl.col(S.CANDIDATE_ID).alias(S.BEIR_ID),
            pl.col(S.CANDIDATE_TITLE).alias(S.BEIR_TITLE),
            # BEIR and MTEB read (title + " " + text).strip(): the abstract, '' when there
            # is none, makes that the string the evaluation reads (paper_text)
            pl.col(S.CANDIDATE_ABSTRACT).alias(S.BEIR_TEXT),
        )
        .sort(S.BEIR_ID)
    )
    qrels = rows.select(
        pl.col(S.SURVEY_ID).alias(S.BEIR_QUERY_ID),
        pl.col(S.CANDIDATE_ID).alias(S.BEIR_CORPUS_ID),
        pl.col(S.LABEL).cast(pl.Int32).alias(S.BEIR_SCORE),
    ).sort(S.BEIR_QUERY_ID, S.BEIR_CORPUS_ID)
    top_ranked = (
        qrels.group_by(S.BEIR_QUERY_ID)
        .agg(pl.col(S.BEIR_CORPUS_ID).sort().alias(S.BEIR_CORPUS_IDS))
        .sort(S.BEIR_QUERY_ID)
    )
    return {"queries": queries, "corpus": corpus, "qrels": qrels, "top_ranked": top_ranked}


# the name of label 0 for another positive of the survey (``negative_kind`` in_survey)
IN_SURVEY_NEGATIVE_NAME = "in_survey_negative"


def aspect_rows(aspects: pl.LazyFrame, cands: pl.LazyFrame, rows: pl.DataFrame) -> pl.DataFrame:
    """The ``aspects`` rows (``schema.ASPECT_READING_LISTS``) of the surveys of ``rows`` (their
    reading-list rows): each aspect's candidates with the survey's and the candidate's columns
    as the reading lists show them, sorted by (aspect_id, candidate_id).

    Raises:
        RuntimeError: an aspect candidate is not a candidate of its survey's reading list.
    """
    ids = rows[S.SURVEY_ID].unique().implode()
    query = aspects.filter(pl.col(S.SURVEY_ID).is_in(ids)).select(
        S.ASPECT_ID, S.ASPECT_HEADING, S.ASPECT_PARENT_HEADING, S.ASPECT_KIND, S.ASPECT_LEVEL,
        S.ASPECT_RANK, S.N_ASPECTS,
    )  # fmt: skip
    judged = (S.ASPECT_ID, S.LABEL, S.LABEL_REASON, S.NEGATIVE_KIND, S.N_MENTIONS)
    own = [c for c in S.ASPECT_READING_LISTS.names if c in rows.columns and c not in judged]
    names = {int(k): v for k, v in S.LABEL_NAMES.items()}
    picked = (
        cands.filter(pl.col(S.SURVEY_ID).is_in(ids))
        .select(S.SURVEY_ID, pl.col(S.WORK_ID).alias(S.CANDIDATE_ID), *judged)
        .collect(engine="streaming")
    )
    out = (
        picked.join(query.collect(engine="streaming"), on=S.ASPECT_ID, how="inner")
        .join(rows.select(own), on=[S.SURVEY_ID, S.CANDIDATE_ID], how="inner")
        .with_columns(
            pl.when(pl.col(S.NEGATIVE_KIND) == S.NEGATIVE_KINDS[0])
            .then(pl.lit(IN_SURVEY_NEGATIVE_NAME))
            .otherwise(pl.col(S.LABEL).replace_strict(names, return_dtype=pl.String))
            .alias(S.LABEL_NAME)
        )
        .select(S.ASPECT_READING_LISTS.names)
        .sort(S.ASPECT_ID, S.CANDIDATE_ID)
    )
    if out.height != picked.height:
        raise RuntimeError(
            f"release: {picked.height - out.height} aspect candidate(s) are not candidates of "
            "their survey's reading list; rerun the aspects stage after split"
        )
    return out


def write_works_table(ctx: ReduceContext) -> int:
    """Write the works table (:data:`WORKS_TABLE_FILE`, ``schema.WORKS_TABLE``): every work of
    ``works`` (corpus papers and the works they cite), sorted by work id, with its aliases and
    the two title keys bibliography resolution looks a reference up by
    (:func:`pipeline.rules.titles.work_title_keys` of the title the release shows and of
    ``works.raw``, as the reading lists key a candidate); return its row count.

    The works are read from a scratch copy of their id, aliases, shown title and bib string,
    ``ctx.limits.release_works_batch_rows`` at a time: a raw string's segment keys are about
    twenty rows each, too many to hold for six million works at once.

    Raises:
        StageError: the works do not come in work-id order (the file's bytes would depend on
            how Polars ordered them).
    """
    scratch = ctx.scratch() / "works_table_input.parquet"
    shown = described_works(ctx.read("works", "works"), ctx.read("openalex", "records"))
    # works.parquet is sorted by work id, and described_works keeps its order
    shown.select(S.WORK_ID, S.ALIASES, V.shown_title().alias(S.TITLE), S.RAW).sink_parquet(
        scratch, compression=ctx.cfg.common.compression
    )
    writer = RowGroupWriter(ctx.output(WORKS_TABLE_FILE), S.WORKS_TABLE, ctx.cfg, "works table")
    last: str | None = None
    try:
        source = pq.ParquetFile(scratch)
        for batch in source.iter_batches(batch_size=ctx.limits.release_works_batch_rows):
            works: pl.DataFrame = pl.from_arrow(batch)  # type: ignore[assignment]
            ids = works[S.WORK_ID]
            if not ids.is_sorted() or (last is not None and ids.len() and ids[0] <= last):
                raise StageError(
                    "release: the works table's rows are not in work-id order; rerun the "
                    "works stage"
                )
            last = ids[-1] if ids.len() else last
            keys = work_title_keys(works, S.TITLE, S.RAW)
            writer.write(
                works.select(S.WORK_ID, S.ALIASES).join(
                    keys, on=S.WORK_ID, how="left", maintain_order="left"
                )
            )
        return writer.close()
    finally:
        # the release's files are listed (and hashed) before the runner removes the scratch
        scratch.unlink(missing_ok=True)


# --------------------------------------------------------------------- metadata
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

    def licenses(key: str, column: str) -> dict[str, int]:
        # distinct papers per licence; null (a work outside the corpus) is not a paper's licence
        g = rows.filter(pl.col(column).is_not_null()).unique(key).group_by(column).len()
        return {str(k): int(n) for k, n in g.sort(column).iter_rows()}

    dates = rows[S.SURVEY_DATE]
    reasons = rows.group_by(S.LABEL_REASON).len().sort(S.LABEL_REASON)
    return {
        "label_reasons": {str(k): int(n) for k, n in reasons.iter_rows()},
        "label_reasons_frac": {str(k): _rate(int(n), rows.height) for k, n in reasons.iter_rows()},
        "licenses": {
            "surveys": licenses(S.SURVEY_ID, S.SURVEY_LICENSE),
            "candidate_papers": licenses(S.CANDIDATE_ID, S.CANDIDATE_LICENSE),
        },
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
    surveys = ctx.read("surveys", "surveys").select(S.PAPER_ID)
    cites = ctx.read("works", "cites")
    resolved = pl.col(S.WORK_ID).is_not_null().sum()
    total, n_resolved = cites.select(pl.len(), resolved).collect(engine="streaming").row(0)
    s_total, s_resolved = (
        cites.join(surveys, on=S.PAPER_ID, how="semi")
        .select(pl.len(), resolved)
        .collect(engine="streaming")
        .row(0)
    )
    n_works, n_corpus = (
        ctx.read("works", "works")
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
    resolved works only, with a survey's topical sections counted as related work), and
    ``textless_top_sections``: numbered top-level sections without text of their own.
    """
    counts = ctx.counts("labels")
    sums = (
        ctx.read("labels", "labels")
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
    # numbered top-level sections without text of their own (2022 layout; see
    # pipeline.rules.roles.textless_top_sections), in surveys and in all papers
    out["textless_top_sections"] = {}
    for scope, key in (("surveys", "surveys"), ("all_papers", "all")):
        c = counts.get(f"textless_top_sections_{key}") or {"top_sections": 0, "textless": 0}
        out["textless_top_sections"][scope] = dict(
            c, share=_rate(int(c["textless"]), int(c["top_sections"]))
        )
    out["textless_top_sections"]["measured"] = [
        dict(m, share=_rate(int(m["textless"]), int(m["top_sections"]))) for m in TEXTLESS_MEASURED
    ]
    return out


def input_provenance(ctx: ReduceContext) -> dict[str, Any]:
    """Input files (names only) and their revision, from the manifests of the current extract outputs."""
    keys = {p.stem for p in ctx.files("extract", "papers")}
    files = []
    revisions = set()
    for m in ctx.manifests("extract"):
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


def paper_provenance(ctx: ReduceContext) -> dict[str, Any]:
    """Synthetic, real or unknown: :func:`pipeline.corpus.provenance.summarize` over the manifests
    of the extract outputs this release read (an output without a manifest is unknown)."""
    papers = {p.stem: p for p in ctx.files("extract", "papers")}
    manifests = {}
    for m in ctx.manifests("extract"):
        if m.get("source_key") in papers:
            manifests[m["source_key"]] = m.get("counts")
    unlisted = sum(
        pq.ParquetFile(path).metadata.num_rows
        for key, path in papers.items()
        if key not in manifests
    )
    return summarize_provenance(manifests.values(), unlisted)


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


def upstream_sections(stages: Mapping[str, Stage], stage: str) -> list[str]:
    """Config sections of ``stage`` and of every stage it reads, transitively (sorted)."""
    seen: set[str] = set()
    sections: set[str] = set()
    todo = [stage]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        sections.update(stages[name].hashed_sections)
        todo.extend(stages[name].reads)
    return sorted(sections)


def file_entry(path: Path) -> dict[str, Any]:
    """sha256, size and (for Parquet) row count of a release file."""
    entry: dict[str, Any] = {"sha256": sha256_file(path), "bytes": path.stat().st_size}
    if path.suffix == ".parquet":
        entry["rows"] = pq.ParquetFile(path).metadata.num_rows
    return entry


# --------------------------------------------------------------------- the stage
# what split_counts reads of the rows
_LIGHT_COLUMNS = (S.SURVEY_ID, S.CANDIDATE_ID, S.LABEL, S.LABEL_REASON, S.SURVEY_PRIMARY_CATEGORY,
                  S.SURVEY_DATE, S.IN_DOMAIN, S.SURVEY_LICENSE, S.CANDIDATE_LICENSE)  # fmt: skip


def survey_batches(
    per_survey: pl.DataFrame,
    max_rows: int,
    aspect_per_survey: pl.DataFrame | None = None,
    max_aspect_rows: int = 1,
) -> list[pl.Series]:
    """``(survey_id, len)`` rows cut into consecutive batches of at most ``max_rows``
    reading-list rows and at most ``max_aspect_rows`` aspect rows (``aspect_per_survey``:
    ``(survey_id, len)``; a survey with more gets a batch of its own). A survey's aspect rows
    are about ten times its list, so a batch bounded by its list alone held the aspect rows of
    a whole split."""
    if aspect_per_survey is None or aspect_per_survey.height == 0:
        return id_batches(per_survey.select(S.SURVEY_ID, "len"), max_rows)
    # one integer weight: a batch is full when either count reaches its limit
    weights = per_survey.select(S.SURVEY_ID, "len").join(
        aspect_per_survey.select(S.SURVEY_ID, pl.col("len").alias("_aspect_len")),
        on=S.SURVEY_ID, how="left", maintain_order="left",
    ).select(
        S.SURVEY_ID,
        pl.max_horizontal(
            pl.col("len").cast(pl.Int64) * max_aspect_rows,
            pl.col("_aspect_len").fill_null(0).cast(pl.Int64) * max_rows,
        ).alias("_weight"),
    )  # fmt: skip
    return id_batches(weights, max_rows * max_aspect_rows)


def _write_split(
    ctx: ReduceContext, split: str, per_survey: pl.DataFrame
) -> dict[str, pl.DataFrame]:
    """Write one split's reading lists, candidates view and BEIR views, surveys in batches of
    at most ``ctx.limits.release_batch_rows`` rows and ``release_batch_aspect_rows`` aspect
    rows (in survey order, so every file has the rows, order and bytes of the whole split
    written at once), and its aspects and their view when it has any; return its light
    columns, the audit values of the surveys the audits sample, and what they sampled."""
    aspects = ctx.read("aspects", "aspects").filter(pl.col(S.SPLIT) == split)
    aspect_cands = ctx.read("aspects", "aspect_candidates")
    with_aspects = aspects.select(pl.len()).collect().item() > 0
    aspect_writers = (
        {
            "rows": RowGroupWriter(
                ctx.output(ASPECT_READING_LISTS_FILE.format(split=split)),
                S.ASPECT_READING_LISTS, ctx.cfg, f"{ASPECTS_DIR} {split}",
            ),
            "view": RowGroupWriter(
                ctx.output(ASPECT_CANDIDATES_FILE.format(split=split)),
                S.ASPECT_CANDIDATES_VIEW, ctx.cfg, f"{ASPECTS_DIR} candidates",
            ),
        }
        if with_aspects
        else {}
    )  # fmt: skip
    aspect_light, aspect_values, aspect_relative, aspect_hidden = [], [], [], []
    schemas = {"queries": S.BEIR_QUERIES, "corpus": S.BEIR_CORPUS, "qrels": S.BEIR_QRELS,
               "top_ranked": S.BEIR_TOP_RANKED}  # fmt: skip
    writers = {
        "rows": RowGroupWriter(
            ctx.output(READING_LISTS_FILE.format(split=split)), S.READING_LISTS, ctx.cfg, split
        ),
        "view": RowGroupWriter(
            ctx.output(CANDIDATES_FILE.format(split=split)), S.CANDIDATES_VIEW, ctx.cfg,
            "candidates",
        ),
        **{
            view: RowGroupWriter(ctx.output(beir_file(view, split)), schemas[view], ctx.cfg,
                                 beir_file(view, split).removesuffix(".parquet"))
            for view in ("queries", "qrels", "top_ranked")
        },
    }  # fmt: skip
    light, values, corpus, relative, texts = [], [], [], [], []
    # the audits read a bounded sample of whole surveys (pipeline.rules.audit_sample)
    cap = ctx.cfg.release.audit_sample_rows
    audited = sample_surveys(per_survey, cap)
    aspect_per_survey = (
        aspect_cands.filter(pl.col(S.SURVEY_ID).is_in(per_survey[S.SURVEY_ID].implode()))
        .group_by(S.SURVEY_ID)
        .len()
        .sort(S.SURVEY_ID)
        .collect(engine="streaming")
        if with_aspects
        else per_survey.clear()
    )
    aspect_audited = sample_surveys(aspect_per_survey, cap)
    batches = survey_batches(
        per_survey,
        ctx.limits.release_batch_rows,
        aspect_per_survey,
        ctx.limits.release_batch_aspect_rows,
    )
    for ids in steps(batches, f"release: {split} survey batches"):
        part = (
            reading_lists(ctx, ids)
            .filter(pl.col(S.SPLIT) == split)
            .drop(S.SPLIT)
            .collect(engine="streaming")
        )
        texts.append(text_counts(part))
        part = part.drop(TEXT_SOURCE)
        writers["rows"].write(part)
        view = survey_view = part.select(S.CANDIDATES_VIEW.names)
        writers["view"].write(view)
        sample = keep(part, audited)
        if sample.height:
            sample_view = sample.select(S.CANDIDATES_VIEW.names)
            audited_columns = sample.select(*S.CANDIDATES_VIEW.names, *S.POPULARITY_COLUMNS)
            values.append(feature_values(audited_columns, sample[S.LABEL]))
            relative.append(relative_feature_values(sample_view, sample[S.LABEL]))
        del sample
        light.append(part.select(_LIGHT_COLUMNS))
        beir = beir_views(part)
        for view in ("queries", "qrels", "top_ranked"):
            writers[view].write(beir[view])
        corpus.append(beir["corpus"])
        if with_aspects:
            rows = aspect_rows(aspects, aspect_cands, part)
            if rows.height:
                aspect_writers["rows"].write(rows)
                aspect_view = rows.select(S.ASPECT_CANDIDATES_VIEW.names)
                aspect_writers["view"].write(aspect_view)
                aspect_light.append(rows.select(_ASPECT_LIGHT_COLUMNS))
                rows = keep(rows, aspect_audited)
                if rows.height:
                    aspect_view = rows.select(
                        *S.ASPECT_CANDIDATES_VIEW.names, *S.POPULARITY_COLUMNS
                    )
                    aspect_values.append(aspect_feature_values(aspect_view, rows[S.LABEL]))
                    held = survey_view.join(
                        rows.select(S.SURVEY_ID).unique(), on=S.SURVEY_ID, how="semi"
                    )
                    aspect_relative.append(aspect_relative_values(held, rows))
                    aspect_hidden.append(aspect_judgment_values(rows, part))
            del rows
        del part, view, survey_view, beir
    for writer in [*writers.values(), *aspect_writers.values()]:
        writer.close()
    write_table(
        pl.concat(corpus).unique(S.BEIR_ID).sort(S.BEIR_ID),
        ctx.output(beir_file("corpus", split)),
        schemas["corpus"],
        ctx.cfg,
        beir_file("corpus", split).removesuffix(".parquet"),
    )
    return {
        "light": pl.concat(light),
        "audit": pl.concat(values),
        "relative": pl.concat(relative),
        "sample": sample_record(per_survey, audited, cap),
        "aspect_sample": sample_record(aspect_per_survey, aspect_audited, cap),
        "texts": pl.concat(texts).group_by(_TEXT, _POSITIVE).agg(pl.col("len").sum()),
        **(
            {
                "aspect_light": pl.concat(aspect_light),
                "aspect_audit": pl.concat(aspect_values),
                "aspect_relative": pl.concat(aspect_relative),
                "aspect_hidden": pl.concat(aspect_hidden),
            }
            if aspect_light
            else {}
        ),
    }


_ASPECT_LIGHT_COLUMNS = (S.ASPECT_ID, S.SURVEY_ID, S.CANDIDATE_ID, S.LABEL, S.NEGATIVE_KIND,
                         S.ASPECT_KIND, S.ASPECT_LEVEL, S.IN_DOMAIN)  # fmt: skip


def aspect_split_counts(rows: pl.DataFrame) -> dict[str, Any]:
    """Counts of one split's aspect rows: aspects, surveys, rows, positives and each
    negative kind, per aspect kind and level, and their spread per aspect."""
    per = rows.group_by(S.ASPECT_ID).agg(
        pl.col(S.ASPECT_KIND).first(),
        pl.col(S.ASPECT_LEVEL).first(),
        (pl.col(S.LABEL) >= 1).sum().alias("positives"),
        (pl.col(S.NEGATIVE_KIND) == S.NEGATIVE_KINDS[0]).sum().alias("in_survey_negatives"),
        (pl.col(S.NEGATIVE_KIND) == S.NEGATIVE_KINDS[1]).sum().alias("hard_negatives"),
    )

    def spread(column: str) -> dict[str, Any]:
        x = per[column]
        if not x.len():
            return {"min": None, "median": None, "mean": None, "max": None}
        return {"min": int(x.min()), "median": float(x.median()), "mean": round(float(x.mean()), 3),
                "max": int(x.max())}  # fmt: skip

    def by(column: str, names: tuple[str, ...]) -> dict[str, int]:
        got = dict(per.group_by(column).len().iter_rows())
        return {n: int(got.get(n, 0)) for n in names}

    labels = rows.group_by(S.LABEL).len()
    return {
        "aspects": per.height,
        "surveys": rows[S.SURVEY_ID].n_unique(),
        "rows": rows.height,
        "positives": int(per["positives"].sum()),
        "in_survey_negatives": int(per["in_survey_negatives"].sum()),
        "hard_negatives": int(per["hard_negatives"].sum()),
        "labels": {S.LABEL_NAMES[int(k)]: int(n) for k, n in labels.sort(S.LABEL).iter_rows()},
        "by_kind": by(S.ASPECT_KIND, S.ASPECT_KINDS),
        "by_level": by(S.ASPECT_LEVEL, S.ASPECT_LEVELS),
        "per_aspect": {
            c: spread(c) for c in ("positives", "in_survey_negatives", "hard_negatives")
        },
    }


_TEXT, _POSITIVE = "text", "positive"


def text_counts(rows: pl.DataFrame) -> pl.DataFrame:
    """``(text, positive, len)``: where the text reading-list rows show came from (their
    ``text_source``, :data:`pipeline.rules.described.TEXT_SOURCES`)."""
    return rows.group_by(
        pl.col(TEXT_SOURCE).alias(_TEXT), (pl.col(S.LABEL) >= 1).alias(_POSITIVE)
    ).len()


def text_summary(counts: pl.DataFrame) -> dict[str, Any]:
    """Rows per text source, positives and hard negatives apart, and each source's share."""
    total = int(counts["len"].sum())
    out: dict[str, Any] = {}
    for source in TEXT_SOURCES:
        rows = counts.filter(pl.col(_TEXT) == source)
        pos = int(rows.filter(pl.col(_POSITIVE))["len"].sum())
        neg = int(rows.filter(~pl.col(_POSITIVE))["len"].sum())
        out[source] = {"positives": pos, "negatives": neg, "share": _rate(pos + neg, total)}
    return out


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
        raise StageError(
            f"release: (survey_id, candidate_id) = ({survey!r}, {candidate!r}) appears {n} "
            f"times; {dup.height} pair(s) are duplicated, {int(dup['len'].sum()) - dup.height} "
            "extra row(s) in all. Every (survey, candidate) pair must appear once: check the "
            "split stage's candidates table"
        )


def aspect_audit_meta(
    ctx: ReduceContext,
    splits: dict[str, Any],
    leak: dict[str, Any],
    low: float,
    high: float,
) -> dict[str, Any]:
    """The ``aspects`` entry of the metadata: the aspects stage's counts, the released
    aspects per split, and their leak audit (visible features per aspect, per survey and
    pooled; the relative features; the reading-free probe on the aspects folder), with the
    judgment-side counts beside it."""
    stage = ctx.counts("aspects")
    flagged = _per_split(outside, leak["splits"], low, high, ASPECT_SCOPES)
    rel_flagged = _per_split(outside, leak["relative"], low, high, ASPECT_SCOPES)
    chance = _per_split(within_chance, leak["splits"], low, high, ASPECT_SCOPES)
    rel_chance = _per_split(within_chance, leak["relative"], low, high, ASPECT_SCOPES)
    probe = reading_free_probe(
        ctx.tmp_dir / ASPECTS_DIR, ctx.cfg.train, ctx.cfg.release.audit_sample_rows
    )
    problems = [
        f"a visible feature of the aspect view separates positives from negatives (AUC outside "
        f"[{low}, {high}]): " + "; ".join(f"{s}: {', '.join(b)}" for s, b in sorted(flagged.items()))
    ] if flagged else []  # fmt: skip
    if rel_flagged:
        problems.append(
            "a candidate's place in its aspect's list separates them: "
            + "; ".join(f"{s}: {', '.join(b)}" for s, b in sorted(rel_flagged.items()))
        )
    if probe.get("flagged"):
        problems.append("the reading-free probe beats BM25 on the aspects")
    return {
        "min_works": ctx.cfg.aspects.min_works,
        "stage": {k: v for k, v in stage.items() if k not in S.SPLIT_NAMES},
        "splits": {s: splits.get(s, aspect_split_counts(_EMPTY_ASPECTS)) for s in S.SPLIT_NAMES},
        "splits_written": [s for s in S.SPLIT_NAMES if s in splits],
        "leak_audit": {
            "bounds": [low, high],
            "scopes": list(ASPECT_SCOPES),
            "splits": leak["splits"],
            "outside_bounds": flagged,
            "outside_bounds_within_chance": chance,
            "relative": {
                "splits": leak["relative"],
                "outside_bounds": rel_flagged,
                "outside_bounds_within_chance": rel_chance,
            },
            "reading_free_probe": probe,
            "judgment_side": leak["judgment_side"],
            "sample": leak["sample"],
            "problems": problems,
            "passed": not problems,
        },
    }


def _per_split(
    check: Callable[..., list[str]],
    tables: dict[str, Any],
    low: float,
    high: float,
    scopes: tuple[str, ...] = ("pooled", "per_survey"),
) -> dict[str, list[str]]:
    """``check`` (``leak_audit.outside`` or ``within_chance``) of each split's audit table,
    for the splits where it finds something."""
    found = {s: check(tbl, low, high, scopes) for s, tbl in tables.items()}
    return {s: hits for s, hits in found.items() if hits}


_EMPTY_ASPECTS = pl.DataFrame(schema={c: S.polars_schema(S.ASPECT_READING_LISTS)[c]
                                      for c in _ASPECT_LIGHT_COLUMNS})  # fmt: skip


def build_release(ctx: ReduceContext) -> dict[str, Any]:
    """Write every release file; return per-split counts.

    Raises:
        RuntimeError: a (survey, candidate) pair appears twice (:func:`check_unique_pairs`).
    """
    cands = ctx.read("split", "candidates")
    check_unique_pairs(
        cands.select(S.SURVEY_ID, pl.col(S.WORK_ID).alias(S.CANDIDATE_ID)).collect(
            engine="streaming"
        )
    )
    surveys = ctx.read("split", "split_surveys").collect(engine="streaming")
    rcfg = ctx.cfg.release  # its values are checked where the config is made (config.validate)
    low, high = rcfg.leak_auc_bounds
    leak: dict[str, Any] = {}
    relative: dict[str, Any] = {}
    texts: dict[str, Any] = {}
    meta_splits: dict[str, Any] = {}
    present: list[str] = []
    aspect_splits: dict[str, Any] = {}
    aspect_leak: dict[str, Any] = {"splits": {}, "relative": {}, "judgment_side": {}, "sample": {}}
    samples: dict[str, Any] = {}
    full_text: dict[str, Any] = {}
    for split in S.SPLIT_NAMES:
        per_survey = (
            cands.filter(pl.col(S.SPLIT) == split)
            .group_by(S.SURVEY_ID)
            .len()
            .sort(S.SURVEY_ID)
            .collect(engine="streaming")
        )
        if per_survey.height == 0:
            empty = reading_lists(ctx, per_survey[S.SURVEY_ID]).drop(S.SPLIT, TEXT_SOURCE).collect()
            meta_splits[split] = split_counts(empty, surveys)
            continue
        present.append(split)
        written = _write_split(ctx, split, per_survey)
        full_text[split] = write_corpus_sections(ctx, split)
        meta_splits[split] = split_counts(written["light"], surveys)
        leak[split] = audit_values(written["audit"])
        relative[split] = relative_audit(written["relative"])
        texts[split] = text_summary(written["texts"])
        samples[split] = written["sample"]
        if "aspect_light" in written:
            aspect_splits[split] = aspect_split_counts(written["aspect_light"])
            aspect_leak["splits"][split] = aspect_audit(written["aspect_audit"])
            aspect_leak["relative"][split] = aspect_relative_audit(written["aspect_relative"])
            aspect_leak["judgment_side"][split] = aspect_audit(written["aspect_hidden"])
            aspect_leak["sample"][split] = written["aspect_sample"]
        del written  # the split's frames, before the next split's are built
    write_works_table(ctx)
    write_field_baselines(
        ctx.output(BIBLIOGRAPHY_BASELINES_FILE),
        ctx.cfg,
        scan_extract(ctx.files_by_table("extract"), "papers"),
        ctx.read("works", "cites"),
        ctx.read("works", "works"),
        cands,
        ctx.read("split", "split_surveys"),
    )
    files = {
        str(p.relative_to(ctx.tmp_dir)): file_entry(p)
        for p in sorted(ctx.tmp_dir.rglob("*.parquet"))
    }
    flagged = _per_split(outside, leak, low, high)
    relative_flagged = _per_split(outside, relative, low, high)
    probe = reading_free_probe(ctx.tmp_dir, ctx.cfg.train, rcfg.audit_sample_rows)
    problems = [
        f"a visible feature alone separates positives from hard negatives (AUC outside "
        f"[{low}, {high}]): " + "; ".join(f"{s}: {', '.join(b)}" for s, b in sorted(flagged.items()))
    ] if flagged else []  # fmt: skip
    if relative_flagged:
        problems.append(
            f"a candidate's place in its survey's list separates them (relative AUC outside "
            f"[{low}, {high}]): "
            + "; ".join(f"{s}: {', '.join(b)}" for s, b in sorted(relative_flagged.items()))
        )
    if probe.get("flagged"):
        problems.append(
            "the reading-free probe beats BM25: "
            + ", ".join(
                f"{m} {r[probe['probe']]} > {r[probe['reference']]}"
                for m, r in probe["metrics"].items()
                if r["beats"]
            )
        )
    # the aspects' audit has its own verdict (meta["aspects"]); either fails the build
    aspects_meta = aspect_audit_meta(ctx, aspect_splits, aspect_leak, low, high)
    every = problems + [f"aspects: {p}" for p in aspects_meta["leak_audit"]["problems"]]
    if every:
        if rcfg.leak_audit == "error":
            raise StageError(f"release: leak audit: {'; '.join(every)}")
        log.warning("release: LEAK AUDIT: %s", "; ".join(every))
    sections = upstream_sections(ctx.stages, ctx.stage.name)
    meta = {
        "dataset": ctx.cfg.release.dataset_name,
        "version": ctx.cfg.release.version,
        "code_version": __version__,
        "environment": writer_environment(),
        "input": input_provenance(ctx),
        "provenance": paper_provenance(ctx),
        # input files that could not be read to their end: not in this release
        "failed_inputs": [
            {k: f[k] for k in ("file", "reason", "lines_read")}
            for f in ctx.failed_inputs("extract")
        ],
        "config": {k: v for k, v in ctx.cfg.to_dict().items() if k in sections},
        "config_hash": ctx.cfg.section_hash(*sections),
        "splits": meta_splits,
        "splits_written": present,
        "totals": {
            k: sum(meta_splits[s][k] for s in S.SPLIT_NAMES)
            for k in ("surveys", "rows", "positives", "negatives")
        },
        "leakage": ctx.counts("split").get("leakage", {}),
        "leak_audit": {
            "bounds": [low, high],
            "splits": leak,
            "outside_bounds": flagged,
            "outside_bounds_within_chance": _per_split(within_chance, leak, low, high),
            "relative": {
                "splits": relative,
                "outside_bounds": relative_flagged,
                "outside_bounds_within_chance": _per_split(within_chance, relative, low, high),
            },
            "reading_free_probe": probe,
            "sample": samples,
            "passed": not problems,
        },
        "candidate_text": texts,
        # what the records say, never how this run got them (calls and cost: openalex/_summary.json)
        "openalex": {
            **{k: v for k, v in ctx.counts("openalex").items() if k != "lookups"},
            "abstracts": ctx.cfg.openalex.abstracts,
            "records_sha256": sha256_file(ctx.files("openalex", "records")[0]),
        },
        "negatives": ctx.counts("negatives"),
        "resolution": resolution(ctx),
        "works_resolution": ctx.counts("works").get("resolution", {}),
        "surveys_counts": {
            k: v
            for k, v in ctx.counts("surveys").items()
            if k.startswith("rejected") or k in ("kept", "candidates")
        },
        "roles": role_distribution(ctx),
        "aspects": aspects_meta,
        "corpus_sections": full_text,
        "files": files,
    }
    write_json(ctx.output(METADATA_FILE), meta)
    card = render_release_card(meta, present, ctx.tmp_dir)
    ctx.output(CARD_FILE).write_text(card, encoding="utf-8")
    return {
        **{f"{s}_surveys": meta_splits[s]["surveys"] for s in S.SPLIT_NAMES},
        **{f"{s}_rows": meta_splits[s]["rows"] for s in S.SPLIT_NAMES},
        # the tables, the metadata, the card and the figures it links: what was written
        "files": sum(
            1 for f in ctx.tmp_dir.rglob("*") if f.is_file() and not f.name.startswith("_")
        ),
        "input_revision": meta["input"]["revision"],
    }


STAGE = Stage(
    name="release",
    kind="reduce",
    reads=("extract", "works", "openalex", "surveys", "labels", "negatives", "split", "aspects"),
    config_sections=("release", "split", "negatives", "extract", "train", "aspects"),
    fn=build_release,
    help="release files: reading lists per split, MTEB/BEIR qrels/corpus/queries/top_ranked, metadata, dataset card",
)
