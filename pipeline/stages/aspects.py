"""Stage ``aspects`` (reduce): section-level reading lists, one query per topical section of a
survey.

What an aspect is. Every section occurrence of a released survey (``extract``'s ``sections``)
belongs to one *unit*:

* 2022 layout (hierarchy from ``sec_number``): a subsection (level 2) with every
  subsubsection and paragraph heading after it in the same top-level section; a top-level
  section's own text before its first subsection is its own unit, and a top-level section
  without subsections is one unit with everything under it. So "4.4 Convolutional Neural
  Network" with its "Methodology" and "Evaluation" subsubsections is one unit, whose parent
  heading is "Discussion".
* 2024 layout (no hierarchy; same-named headings merged by the publisher): each heading key
  is one unit. A key such as "Methodology" that a survey repeats under every reviewed tool is
  one unit holding the citations of all of them; it is kept as one aspect, and counted
  (``aspects_by_level.key``).

A unit is an *aspect* when it is part of the survey's core and cites at least
``aspects.min_works`` of the survey's released positives:

* core: the survey role of its section (:func:`pipeline.rules.roles.section_roles` with
  ``survey=True``, the role the labels use) is ``related_work`` - related-work headings, the
  topical core, discussion and open challenges, method/experiment sections after the core
  started - and its own heading is not an introduction, conclusion, back-matter, protocol or
  publisher placeholder heading;
* a top-level section's text before its first subsection is not an aspect (its subsections
  are), and neither is anything in an introduction, background, conclusion or appendix.

``aspect_kind`` is the role of the unit's own heading (:data:`pipeline.core.schema.ASPECT_KINDS`),
``aspect_level`` what the unit is in its layout (:data:`pipeline.core.schema.ASPECT_LEVELS`).
Aspects are ranked in paper order within their survey; ``aspect_id`` is the survey id, ``#``
and that rank (three digits).

Judgments. A mention of a bib entry in the unit that resolves to a positive of the survey
(tiers 1-4, after ``split``'s date check) makes that work a positive of the aspect, graded by
its mentions within the unit, with R = ``labels.essential_related_mentions``: label 4
(``R+ in section``) at R or more, label 3 (``in section``) below. Every other candidate of the
survey is a candidate of the aspect with label 0: the survey's other positives are
``in_survey`` negatives (the same expert, the same field, another sub-topic), its hard
negatives stay ``hard`` negatives (``negative_kind``, on the judgment side only). Every aspect
of a survey therefore ranks the same candidates, the survey's whole list: which lists hold a
candidate says nothing about its labels (the leak audit checks it, pipeline/rules/leak_audit.py).

Counts (``_SUCCESS.json``, then the card): aspects per split, kind and level, positives and
negatives per aspect, and what was not an aspect: core units under the minimum, units outside
the core, and the positives' mentions outside every aspect.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl

from pipeline.core import schema as S
from pipeline.engine.context import ReduceContext
from pipeline.engine.stage import Stage
from pipeline.rules.roles import PLACEHOLDER, PROTOCOL, normalize_expr, role_expr, section_roles
from pipeline.rules.tables import id_batches, scan_extract

IN_SURVEY, HARD = S.NEGATIVE_KINDS
SECTION_LEVEL, SUBSECTION_LEVEL, KEY_LEVEL = S.ASPECT_LEVELS
IN_SURVEY_REASON = "in-survey negative"
# roles of a unit's own heading that never make an aspect, whatever the section around it
EXCLUDED_OWN_ROLES = ("introduction", "conclusion", "back_matter")
_UNIT = "_unit"
_TOP_HEADING = "_top_heading"
_HAS_SUB = "_has_subsections"


def aspect_id_expr() -> pl.Expr:
    """``<survey_id>#<rank, three digits>``: sorts in paper order within a survey."""
    return pl.concat_str(
        [pl.col(S.SURVEY_ID), pl.lit("#"), pl.col(S.ASPECT_RANK).cast(pl.String).str.zfill(3)]
    )


def kind_expr(heading: pl.Expr, cfg: Any) -> pl.Expr:
    """The aspect kind of a heading: its own role, the topical core for every other role."""
    role = role_expr(heading, cfg)
    return (
        pl.when(role == "related_work")
        .then(pl.lit("related_work"))
        .when(role == "discussion")
        .then(pl.lit("discussion"))
        .when(role.is_in(["method", "experiment"]))
        .then(pl.lit("method"))
        .otherwise(pl.lit("topical"))
    )


def units(sections: pl.LazyFrame, cfg: Any) -> pl.LazyFrame:
    """Every section occurrence of the surveys with its unit (the module docstring) and, on the
    unit's own row, whether the unit can be an aspect.

    Returns:
        ``paper_id, section_index, _unit`` for every occurrence, and for the unit rows
        (``section_index == _unit``) ``aspect_heading, aspect_parent_heading, aspect_kind,
        aspect_level, _core``.
    """
    by_top = [S.PAPER_ID, S.TOP_INDEX]
    level = pl.col(S.LEVEL)
    last_subsection = (
        pl.when(level == 2)
        .then(pl.col(S.SECTION_INDEX))
        .forward_fill()
        .over(by_top, order_by=S.SECTION_INDEX)
    )
    unit = (
        pl.when(level <= 1)
        .then(pl.col(S.TOP_INDEX))
        .otherwise(pl.coalesce(last_subsection, pl.col(S.TOP_INDEX)))
    )
    roles = section_roles(sections, cfg.roles, survey=True)
    tops = sections.filter(pl.col(S.SECTION_INDEX) == pl.col(S.TOP_INDEX)).select(
        S.PAPER_ID, S.TOP_INDEX, pl.col(S.SECTION).alias(_TOP_HEADING)
    )
    norm = normalize_expr(pl.col(S.SECTION))
    own = role_expr(pl.col(S.SECTION), cfg.roles)
    is_top = pl.col(S.SECTION_INDEX) == pl.col(S.TOP_INDEX)
    core = (
        (pl.col(S.ROLE) == "related_work")
        & ~own.is_in(list(EXCLUDED_OWN_ROLES))
        & ~norm.str.contains(PROTOCOL)
        & ~norm.str.contains(PLACEHOLDER)
        # a top-level section's own text before its subsections: its subsections are the aspects
        & ~(is_top & pl.col(_HAS_SUB))
        & (norm != "")
    )
    return (
        sections.with_columns(unit.alias(_UNIT), (level == 2).any().over(by_top).alias(_HAS_SUB))
        .join(roles, on=[S.PAPER_ID, S.SECTION_INDEX], how="left")
        .join(tops, on=by_top, how="left")
        .with_columns(
            pl.col(S.SECTION).alias(S.ASPECT_HEADING),
            pl.when(is_top)
            .then(None)
            .otherwise(pl.col(_TOP_HEADING))
            .alias(S.ASPECT_PARENT_HEADING),
            kind_expr(pl.col(S.SECTION), cfg.roles).alias(S.ASPECT_KIND),
            pl.when(level == 0)
            .then(pl.lit(KEY_LEVEL))
            .when(is_top)
            .then(pl.lit(SECTION_LEVEL))
            .otherwise(pl.lit(SUBSECTION_LEVEL))
            .alias(S.ASPECT_LEVEL),
            core.fill_null(False).alias("_core"),
        )
        .select(
            S.PAPER_ID,
            S.SECTION_INDEX,
            _UNIT,
            S.ASPECT_HEADING,
            S.ASPECT_PARENT_HEADING,
            S.ASPECT_KIND,
            S.ASPECT_LEVEL,
            "_core",
        )
    )


@dataclass(frozen=True)
class CandidateRows:
    """The ``aspect_candidates`` rows of some surveys (:meth:`of`): every candidate of the
    survey in each of its aspects, with the aspect's judgment."""

    aspects: pl.DataFrame
    candidates: pl.LazyFrame
    cited: pl.DataFrame
    label: pl.Expr
    reason: pl.Expr
    negative_kind: pl.Expr

    def sizes(self) -> pl.DataFrame:
        """``(survey_id, rows)`` in survey order: how many rows each survey gives."""
        per_survey = self.candidates.group_by(S.SURVEY_ID).len().collect(engine="streaming")
        return (
            self.aspects.group_by(S.SURVEY_ID)
            .len()
            .rename({"len": "_aspects"})
            .join(per_survey, on=S.SURVEY_ID, how="inner")
            .select(S.SURVEY_ID, (pl.col("_aspects") * pl.col("len")).alias("rows"))
            .sort(S.SURVEY_ID)
        )

    def of(self, survey_ids: pl.Series) -> pl.DataFrame:
        """The rows of ``survey_ids``, sorted by (aspect_id, work_id)."""
        ids = survey_ids.implode()
        return (
            self.aspects.lazy()
            .filter(pl.col(S.SURVEY_ID).is_in(ids))
            .select(S.ASPECT_ID, S.SURVEY_ID, S.SPLIT)
            .join(
                self.candidates.filter(pl.col(S.SURVEY_ID).is_in(ids)).select(
                    S.SURVEY_ID, S.WORK_ID, pl.col(S.LABEL).alias("_survey_label")
                ),
                on=S.SURVEY_ID,
                how="inner",
            )
            .join(
                self.cited.lazy().select(S.ASPECT_ID, S.WORK_ID, S.N_MENTIONS),
                on=[S.ASPECT_ID, S.WORK_ID],
                how="left",
            )
            .with_columns(pl.col(S.N_MENTIONS).fill_null(0))
            .with_columns(
                self.label.alias(S.LABEL),
                self.reason.alias(S.LABEL_REASON),
                self.negative_kind.alias(S.NEGATIVE_KIND),
            )
            .select(S.ASPECT_CANDIDATES.names)
            .sort(S.ASPECT_ID, S.WORK_ID)
            .collect(engine="streaming")
        )


def aspect_tables(ctx: ReduceContext) -> tuple[pl.DataFrame, CandidateRows, dict[str, Any]]:
    """The aspects, their candidate rows (built survey batch by survey batch) and the counts
    of what was not an aspect."""
    cfg = ctx.cfg
    candidates = ctx.read("split", "candidates").select(S.SURVEY_ID, S.WORK_ID, S.LABEL, S.SPLIT)
    survey_ids = candidates.select(S.SURVEY_ID).unique().collect(engine="streaming")[S.SURVEY_ID]
    sections = scan_extract(ctx.files_by_table("extract"), "sections", survey_ids)
    unit_rows = units(sections, cfg).collect(engine="streaming")
    mentions = _positive_mentions(ctx, candidates, survey_ids, unit_rows)
    unit_info = unit_rows.filter(pl.col(S.SECTION_INDEX) == pl.col(_UNIT)).drop(S.SECTION_INDEX)
    per_unit = (
        mentions.group_by(S.PAPER_ID, _UNIT)
        .agg(pl.len().alias("_works"), pl.col(S.N_MENTIONS).sum().alias("_mentions"))
        .join(unit_info, on=[S.PAPER_ID, _UNIT], how="left")
        .with_columns(pl.col("_core").fill_null(False))
    )
    kept = per_unit.filter(pl.col("_core") & (pl.col("_works") >= cfg.aspects.min_works))
    aspects = _aspects_frame(kept, candidates)
    cited = mentions.rename({S.PAPER_ID: S.SURVEY_ID, _UNIT: S.SECTION_INDEX}).join(
        aspects.select(S.SURVEY_ID, S.SECTION_INDEX, S.ASPECT_ID),
        on=[S.SURVEY_ID, S.SECTION_INDEX],
        how="inner",
    )
    label, reason, negative_kind = _label_exprs(cfg.labels.essential_related_mentions)
    rows = CandidateRows(aspects, candidates, cited, label, reason, negative_kind)
    core_units = per_unit.filter(pl.col("_core"))
    counts = {
        "units_with_positives": per_unit.height,
        "core_units": core_units.height,
        "core_units_below_min_works": core_units.height - kept.height,
        "units_outside_core": per_unit.height - core_units.height,
        "positive_mentions": int(mentions[S.N_MENTIONS].sum() or 0),
        "positive_mentions_in_aspects": int(cited[S.N_MENTIONS].sum() or 0),
        "surveys": survey_ids.len(),
        "surveys_with_aspects": aspects[S.SURVEY_ID].n_unique(),
    }
    return aspects, rows, counts


def _positive_mentions(
    ctx: ReduceContext, candidates: pl.LazyFrame, survey_ids: pl.Series, unit_rows: pl.DataFrame
) -> pl.DataFrame:
    """Every mention of a survey positive, with its unit: ``(paper_id, unit, work_id,
    n_mentions)``."""
    cites = (
        ctx.read("works", "cites")
        .filter(pl.col(S.PAPER_ID).is_in(survey_ids.implode()))
        .drop_nulls(S.WORK_ID)
        .select(S.PAPER_ID, S.REF_ID, S.WORK_ID)
    )
    positives = candidates.filter(pl.col(S.LABEL) >= 1).select(
        pl.col(S.SURVEY_ID).alias(S.PAPER_ID), S.WORK_ID
    )
    return (
        scan_extract(ctx.files_by_table("extract"), "mentions", survey_ids)
        .select(S.PAPER_ID, S.REF_ID, S.SECTION_INDEX, S.N_MENTIONS)
        .join(cites, on=[S.PAPER_ID, S.REF_ID], how="inner")
        .join(positives, on=[S.PAPER_ID, S.WORK_ID], how="semi")
        .join(
            unit_rows.lazy().select(S.PAPER_ID, S.SECTION_INDEX, _UNIT),
            on=[S.PAPER_ID, S.SECTION_INDEX],
            how="left",
        )
        .group_by(S.PAPER_ID, _UNIT, S.WORK_ID)
        .agg(pl.col(S.N_MENTIONS).sum().cast(pl.Int64))
        .collect(engine="streaming")
    )


def _aspects_frame(kept: pl.DataFrame, candidates: pl.LazyFrame) -> pl.DataFrame:
    """``schema.ASPECTS``: the kept units, ranked within their survey, with their split and
    counts."""
    survey_split = candidates.select(S.SURVEY_ID, S.SPLIT).unique().collect(engine="streaming")
    per_survey = candidates.group_by(S.SURVEY_ID).agg(
        (pl.col(S.LABEL) >= 1).sum().cast(pl.Int64).alias("_survey_positives"),
        (pl.col(S.LABEL) == 0).sum().cast(pl.Int64).alias(S.N_HARD_NEGATIVES),
    )
    return (
        kept.rename({S.PAPER_ID: S.SURVEY_ID, _UNIT: S.SECTION_INDEX})
        .sort(S.SURVEY_ID, S.SECTION_INDEX)
        .with_columns(
            pl.int_range(1, pl.len() + 1, dtype=pl.Int32).over(S.SURVEY_ID).alias(S.ASPECT_RANK),
            pl.len().over(S.SURVEY_ID).cast(pl.Int32).alias(S.N_ASPECTS),
        )
        .with_columns(aspect_id_expr().alias(S.ASPECT_ID))
        .join(survey_split, on=S.SURVEY_ID, how="left")
        .join(per_survey.collect(engine="streaming"), on=S.SURVEY_ID, how="left")
        .with_columns(
            pl.col("_works").cast(pl.Int64).alias(S.N_POSITIVES),
            (pl.col("_survey_positives") - pl.col("_works")).alias(S.N_IN_SURVEY_NEGATIVES),
            pl.col("_mentions").cast(pl.Int64).alias(S.N_MENTIONS),
        )
        .select(S.ASPECTS.names)
        .sort(S.ASPECT_ID)
    )


def _label_exprs(related_min: int) -> tuple[pl.Expr, pl.Expr, pl.Expr]:
    """An aspect candidate's label, reason and negative kind, from its mentions in the unit
    and its label in the survey."""
    label = (
        pl.when(pl.col(S.N_MENTIONS) >= related_min)
        .then(4)
        .when(pl.col(S.N_MENTIONS) >= 1)
        .then(3)
        .otherwise(0)
        .cast(pl.Int8)
    )
    reason = (
        pl.when(pl.col(S.N_MENTIONS) >= related_min)
        .then(pl.lit(f"{related_min}+ in section"))
        .when(pl.col(S.N_MENTIONS) >= 1)
        .then(pl.lit("in section"))
        .when(pl.col("_survey_label") >= 1)
        .then(pl.lit(IN_SURVEY_REASON))
        .otherwise(pl.lit(S.HARD_NEGATIVE_REASON))
    )
    negative_kind = (
        pl.when(pl.col(S.N_MENTIONS) >= 1)
        .then(None)
        .when(pl.col("_survey_label") >= 1)
        .then(pl.lit(IN_SURVEY))
        .otherwise(pl.lit(HARD))
    )
    return label, reason, negative_kind


def summary(aspects: pl.DataFrame) -> dict[str, Any]:
    """Aspects per kind and level, and positives / negatives per aspect (min, median, mean,
    max), of one split's aspects."""

    def spread(column: str) -> dict[str, float | int | None]:
        x = aspects[column]
        if not x.len():
            return {"min": None, "median": None, "mean": None, "max": None, "total": 0}
        return {"min": int(x.min()), "median": float(x.median()), "mean": round(float(x.mean()), 3),
                "max": int(x.max()), "total": int(x.sum())}  # fmt: skip

    def by(column: str, names: tuple[str, ...]) -> dict[str, int]:
        got = dict(aspects.group_by(column).len().iter_rows())
        return {n: int(got.get(n, 0)) for n in names}

    return {
        "aspects": aspects.height,
        "surveys": aspects[S.SURVEY_ID].n_unique(),
        "by_kind": by(S.ASPECT_KIND, S.ASPECT_KINDS),
        "by_level": by(S.ASPECT_LEVEL, S.ASPECT_LEVELS),
        "positives": spread(S.N_POSITIVES),
        "in_survey_negatives": spread(S.N_IN_SURVEY_NEGATIVES),
        "hard_negatives": spread(S.N_HARD_NEGATIVES),
    }


def build_aspects(ctx: ReduceContext) -> dict[str, Any]:
    """Write ``aspects.parquet`` and ``aspect_candidates.parquet``; return the counts."""
    aspects, rows, counts = aspect_tables(ctx)
    ctx.write("aspects", aspects)
    writer = ctx.writer("aspect_candidates")
    # the batches bound memory, not the output: their survey order is the file's order
    # (aspect ids begin with their survey id)
    for ids in id_batches(rows.sizes(), ctx.limits.aspects_batch_rows):
        writer.write(rows.of(ids))
    written = writer.close()
    return {
        **counts,
        "min_works": ctx.cfg.aspects.min_works,
        "rows": written,
        **{s: summary(aspects.filter(pl.col(S.SPLIT) == s)) for s in S.SPLIT_NAMES},
    }


STAGE = Stage(
    name="aspects",
    kind="reduce",
    reads=("extract", "works", "split"),
    config_sections=("aspects", "roles", "labels"),
    fn=build_aspects,
    outputs=(("aspects", S.ASPECTS), ("aspect_candidates", S.ASPECT_CANDIDATES)),
    help="section-level reading lists: one query per topical section of a survey",
)
