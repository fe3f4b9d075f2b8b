"""Stage ``labels`` (reduce): a relevance tier for every (survey, resolved cited work) pair.

Mentions. A survey's mentions of a work are the cite spans (plus heading markers)
of every bib entry of the survey that resolves to that work, summed. Each mention
takes the role of its section, resolved from the paper's structure (the ``sections``
table; :func:`pipeline.rules.roles.section_roles`); inside a survey the topical core (role
``other``) is counted as ``related_work`` when ``roles.survey_core_is_related_work`` is
set (the default). The per-role columns
``n_introduction`` ... ``n_other`` therefore *partition* ``n_mentions``: with the
default config ``n_other`` is always 0 and ``n_related_work`` = mentions under
related-work headings + mentions under topical headings; with the option off they
are reported separately and only real related-work headings count as related work.
Mentions of bib entries without an identifier belong to no work and are dropped
(counted as ``survey_mentions_unresolved``).

Tier (``label``), with T = ``labels.essential_total_mentions`` (3) and
R = ``labels.essential_related_mentions`` (2):

* 4 (essential): ``n_mentions >= T`` or ``n_related_work >= R``;
* 3 (related work): else ``n_related_work >= 1``, or a work the survey lists but never
  cites in its running text (``n_mentions = 0``);
* 2 (tool/method): else ``n_method + n_experiment >= 1``;
* 1 (background): everything else: cited in the text, but only in the introduction,
  background, conclusion, back matter or appendices.

A listed work without an in-text mention is cited where unarXive keeps no cite span: in a
table or a figure caption, which in a survey is where the reviewed works are compared. On
21 real CS surveys checked against their published text (issue 47), every such work of six
of them (175 of 175) was cited only in a table or a caption, so it belongs to the curated
core, not to the background.

``label_reason`` names the rule that gave the tier (:func:`reason_expr`):
"3+ mentions", "2+ in related work" (tier 4; the total rule is named first when both
hold), "related work" (3), "listed outside the text" (3: in the bibliography, never cited
in the running text), "method/experiment" (2), "introduction/background only" (1: cited
only in introduction, background, conclusion, back matter or appendices). The numbers
follow ``labels.essential_total_mentions`` and ``labels.essential_related_mentions``.

Tier 0 (hard negative) is added by the ``negatives`` stage, never here.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from pipeline.core import schema as S
from pipeline.engine.context import ReduceContext
from pipeline.engine.stage import Stage
from pipeline.rules.roles import OTHER, role_distribution, section_roles, textless_top_sections
from pipeline.rules.tables import scan_extract

# label_reason of a work in the survey's bibliography that no cite span of its text names
LISTED_OUTSIDE_TEXT = "listed outside the text"


def _n(role: str) -> str:
    return f"n_{role}"


def tier_expr(total_min: int, related_min: int) -> pl.Expr:
    """The tier of a row with ``n_mentions`` and the per-role counts (see module docstring)."""
    related = pl.col(_n("related_work"))
    return (
        pl.when((pl.col(S.N_MENTIONS) >= total_min) | (related >= related_min))
        .then(4)
        .when(related >= 1)
        .then(3)
        .when(pl.col(S.N_MENTIONS) == 0)
        .then(3)
        .when(pl.col(_n("method")) + pl.col(_n("experiment")) >= 1)
        .then(2)
        .otherwise(1)
        .cast(pl.Int8)
    )


def reason_expr(total_min: int, related_min: int) -> pl.Expr:
    """Which rule gave a row its tier (see the module docstring)."""
    related = pl.col(_n("related_work"))
    return (
        pl.when(pl.col(S.N_MENTIONS) >= total_min)
        .then(pl.lit(f"{total_min}+ mentions"))
        .when(related >= related_min)
        .then(pl.lit(f"{related_min}+ in related work"))
        .when(related >= 1)
        .then(pl.lit("related work"))
        .when(pl.col(S.N_MENTIONS) == 0)
        .then(pl.lit(LISTED_OUTSIDE_TEXT))
        .when(pl.col(_n("method")) + pl.col(_n("experiment")) >= 1)
        .then(pl.lit("method/experiment"))
        .otherwise(pl.lit("introduction/background only"))
    )


def build_labels(ctx: ReduceContext) -> dict[str, Any]:
    """Label every (survey, resolved work) pair; write ``labels.parquet``."""
    rcfg, lcfg = ctx.cfg.roles, ctx.cfg.labels
    surveys = ctx.read("surveys", "surveys").select(S.PAPER_ID)
    # the surveys' rows are picked as the files are read (a filter, not a semi-join:
    # that read and held every mention, 1.0 GB at 300k papers, measured)
    survey_ids = surveys.collect()[S.PAPER_ID]
    survey_cites = (
        ctx.read("works", "cites")
        .filter(pl.col(S.PAPER_ID).is_in(survey_ids.implode()))
        .drop_nulls(S.WORK_ID)
    )
    columns = (S.PAPER_ID, S.REF_ID, S.SECTION_INDEX, S.N_MENTIONS)
    extract = ctx.files_by_table("extract")
    mentions = scan_extract(extract, "mentions").select(*columns)
    sections = scan_extract(extract, "sections")
    survey_mentions = scan_extract(extract, "mentions", survey_ids).select(*columns)
    survey_sections = scan_extract(extract, "sections", survey_ids)
    roles = section_roles(survey_sections, rcfg, survey=True)
    per_work = (
        survey_mentions.join(roles, on=[S.PAPER_ID, S.SECTION_INDEX], how="left")
        .with_columns(pl.col(S.ROLE).fill_null(OTHER))
        .join(survey_cites, on=[S.PAPER_ID, S.REF_ID], how="inner")
        .group_by(S.PAPER_ID, S.WORK_ID)
        .agg(
            pl.col(S.N_MENTIONS).filter(pl.col(S.ROLE) == r).sum().cast(pl.Int64).alias(_n(r))
            for r in S.ROLES
        )
    )
    role_cols = list(S.ROLE_COUNT_COLUMNS)
    labels = (
        survey_cites.select(S.PAPER_ID, S.WORK_ID)
        .unique()
        .join(per_work, on=[S.PAPER_ID, S.WORK_ID], how="left")
        .with_columns(pl.col(role_cols).fill_null(0))
        .with_columns(pl.sum_horizontal(role_cols).cast(pl.Int64).alias(S.N_MENTIONS))
        .with_columns(
            tier_expr(lcfg.essential_total_mentions, lcfg.essential_related_mentions).alias(
                S.LABEL
            ),
            reason_expr(lcfg.essential_total_mentions, lcfg.essential_related_mentions).alias(
                S.LABEL_REASON
            ),
        )
        .rename({S.PAPER_ID: S.SURVEY_ID})
        .select(*S.LABELS.names)
        .sort(S.SURVEY_ID, S.WORK_ID)
        .collect(engine="streaming")
    )
    ctx.write("labels", labels)

    survey_total = int(survey_mentions.select(pl.col(S.N_MENTIONS).sum()).collect().item() or 0)
    tiers = labels.group_by(S.LABEL).len()
    tier_counts = dict(zip(tiers[S.LABEL].to_list(), tiers["len"].to_list(), strict=True))
    reasons = labels.group_by(S.LABEL_REASON).len().sort(S.LABEL_REASON)
    return {
        "surveys": int(surveys.select(pl.len()).collect().item()),
        "surveys_with_labels": labels[S.SURVEY_ID].n_unique(),
        "pairs": labels.height,
        "labels": {
            S.LABEL_NAMES[t]: int(tier_counts.get(t, 0)) for t in sorted(S.LABEL_NAMES) if t > 0
        },
        "label_reasons": dict(
            zip(reasons[S.LABEL_REASON].to_list(), reasons["len"].to_list(), strict=True)
        ),
        "pairs_without_mentions": int((labels[S.N_MENTIONS] == 0).sum()),
        "survey_mentions_total": survey_total,
        "survey_mentions_labelled": int(labels[S.N_MENTIONS].sum()),
        "survey_mentions_unresolved": survey_total - int(labels[S.N_MENTIONS].sum()),
        "role_distribution_surveys": role_distribution(survey_mentions, survey_sections, rcfg),
        "role_distribution_surveys_labelled": {r: int(labels[_n(r)].sum()) for r in S.ROLES},
        "role_distribution_all": role_distribution(mentions, sections, rcfg),
        "textless_top_sections_surveys": textless_top_sections(survey_sections),
        "textless_top_sections_all": textless_top_sections(sections),
    }


STAGE = Stage(
    name="labels",
    kind="reduce",
    reads=("extract", "works", "surveys"),
    config_sections=("works", "surveys", "roles", "labels"),
    fn=build_labels,
    outputs=(("labels", S.LABELS),),
    help="relevance tiers 1-4 for every (survey, cited work) pair from where the survey cites it",
)
