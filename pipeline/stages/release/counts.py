"""The release's counts, as the metadata records them: per split (surveys, rows, labels,
categories, years, licences), per split's aspects, where the shown texts came from, how many
bib entries resolved, and the section roles of the mentions."""

from __future__ import annotations

from typing import Any

import polars as pl

from pipeline.core import schema as S
from pipeline.engine.context import ReduceContext
from pipeline.rules.described import TEXT_SOURCE, TEXT_SOURCES
from pipeline.rules.roles import TEXTLESS_MEASURED

# what split_counts reads of the reading-list rows
LIGHT_COLUMNS = (
    S.SURVEY_ID,
    S.CANDIDATE_ID,
    S.LABEL,
    S.LABEL_REASON,
    S.SURVEY_PRIMARY_CATEGORY,
    S.SURVEY_DATE,
    S.IN_DOMAIN,
    S.SURVEY_LICENSE,
    S.CANDIDATE_LICENSE,
)
# what aspect_split_counts reads of the aspect rows
ASPECT_LIGHT_COLUMNS = (
    S.ASPECT_ID,
    S.SURVEY_ID,
    S.CANDIDATE_ID,
    S.LABEL,
    S.NEGATIVE_KIND,
    S.ASPECT_KIND,
    S.ASPECT_LEVEL,
    S.IN_DOMAIN,
)
# the aspect rows of a split without aspects
EMPTY_ASPECTS = pl.DataFrame(
    schema={c: S.polars_schema(S.ASPECT_READING_LISTS)[c] for c in ASPECT_LIGHT_COLUMNS}
)
TEXT, POSITIVE = "text", "positive"


def rate(num: int, den: int) -> float | None:
    """``num / den`` to six places, None when ``den`` is 0."""
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
        "label_reasons_frac": {str(k): rate(int(n), rows.height) for k, n in reasons.iter_rows()},
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
        "resolved_frac": rate(int(n_resolved), int(total)),
        "survey_bib_entries": int(s_total),
        "survey_bib_entries_resolved": int(s_resolved),
        "survey_resolved_frac": rate(int(s_resolved), int(s_total)),
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
            out[f"{key}_frac"] = {r: rate(int(n), total) for r, n in dist.items()}
    # numbered top-level sections without text of their own (2022 layout; see
    # pipeline.rules.roles.textless_top_sections), in surveys and in all papers
    out["textless_top_sections"] = {}
    for scope, key in (("surveys", "surveys"), ("all_papers", "all")):
        c = counts.get(f"textless_top_sections_{key}") or {"top_sections": 0, "textless": 0}
        out["textless_top_sections"][scope] = dict(
            c, share=rate(int(c["textless"]), int(c["top_sections"]))
        )
    out["textless_top_sections"]["measured"] = [
        dict(m, share=rate(int(m["textless"]), int(m["top_sections"]))) for m in TEXTLESS_MEASURED
    ]
    return out


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
        return {
            "min": int(x.min()),
            "median": float(x.median()),
            "mean": round(float(x.mean()), 3),
            "max": int(x.max()),
        }

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


def text_counts(rows: pl.DataFrame) -> pl.DataFrame:
    """``(text, positive, len)``: where the text reading-list rows show came from (their
    ``text_source``, :data:`pipeline.rules.described.TEXT_SOURCES`)."""
    return rows.group_by(
        pl.col(TEXT_SOURCE).alias(TEXT), (pl.col(S.LABEL) >= 1).alias(POSITIVE)
    ).len()


def text_summary(counts: pl.DataFrame) -> dict[str, Any]:
    """Rows per text source, positives and hard negatives apart, and each source's share."""
    total = int(counts["len"].sum())
    out: dict[str, Any] = {}
    for source in TEXT_SOURCES:
        rows = counts.filter(pl.col(TEXT) == source)
        pos = int(rows.filter(pl.col(POSITIVE))["len"].sum())
        neg = int(rows.filter(~pl.col(POSITIVE))["len"].sum())
        out[source] = {"positives": pos, "negatives": neg, "share": rate(pos + neg, total)}
    return out
