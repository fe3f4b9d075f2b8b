"""What may be a hard negative of a survey: the pools, the exclusions, the existence rule.

A work ``W`` is a hard-negative candidate of survey ``S`` when all of these hold:

* **cited elsewhere, not by S**: at least one other detected survey cites ``W``, and
  ``S`` cites ``W`` under none of its identifiers: no bib entry of ``S`` resolves to
  ``W``'s work id (``cites``), ``W`` is not a labelled positive of ``S`` nor ``S``
  itself, and no alias of ``W`` is an identifier of a bib entry of ``S`` or *one hop
  away* from one: carried together with it by any bib entry (or corpus paper) of the
  whole corpus. The hop uses the raw co-occurrence links, including those ``works``
  dropped as junk, so a work that ``works`` did not merge with the entry's
  identifier (e.g. ``S`` cites ``doi:X``; another paper's entry carries ``doi:X``
  and ``arxiv:Y``) is never a negative of ``S``. Identifiers are spelled as
  ``works`` spells aliases (its prefixes, lower-cased DOIs, its arXiv DataCite DOI
  rule). Nor is ``W`` a negative when one of its title keys is a segment key of a raw
  bib string of ``S`` (:func:`title_hits`).
* **same field**: ``W`` is a corpus paper whose own arXiv categories include ``S``'s
  primary category (``negative_source = "own_category"``), or at least one survey
  citing ``W`` has ``S``'s primary category (``"citing_survey_category"``), whatever
  ``W``'s own categories. Surveys cite corpus papers of other fields; were those never
  negatives, a candidate with categories none of which is ``S``'s would be a positive.
  These two are pool A; pool B (``"cited_in_category"``) is the wider set of works cited by a
  corpus paper of the category (:func:`eligible_works`).
* **existed before S**: ``W``'s ``known_date`` is strictly before ``S``'s first
  version date; when ``W`` has no known date, a survey first posted strictly before
  ``S`` cites it. For an arXiv work outside the corpus, ``works`` knows only the
  month of its id (``known_date`` is the 1st), so the month's last day must precede
  ``S``. A known date on or after ``S``'s date vetoes ``W`` even when an
  earlier survey cites it (conflicting dates are not trusted), so no negative is
  ever dated after its survey. A survey without a first version date gets none.

Counts (output columns ``n_citing_surveys``, ``n_citing_surveys_same_category``):
*other* detected surveys citing ``W`` whose first version date is strictly before
``S``'s (all of them, and those with ``S``'s primary category); ``S`` never counts
itself and nothing posted on or after ``S``'s date counts
(:func:`pipeline.rules.visible.with_prior_counts`, also used by ``split`` for the positives).
The field and date rules above still use every citing survey.
"""

from __future__ import annotations

import polars as pl

from pipeline.core import schema as S
from pipeline.engine.context import ReduceContext
from pipeline.rules import aliases as A
from pipeline.rules import titles as T
from pipeline.rules import visible as V
from pipeline.rules.described import described_works
from pipeline.rules.fields import FIELD_CATEGORIES, with_field_categories
from pipeline.rules.tables import scan_extract
from pipeline.rules.visible import paper_citations, surveys_frame

SOURCE_OWN, SOURCE_CITING_SURVEY, SOURCE_CITED_IN_CATEGORY = S.NEGATIVE_SOURCES
# a positive dated on or after its survey (an identifier or date error): dropped, counted
AFTER_SURVEY = "_after_survey"
# earliest first version date of a citing survey (pool A) or citing paper of the category
# (pool B): when an undated work exists from
FIRST_CITED = "_first_cited"
_FIRST_CITED_B = "_first_cited_in_category"
# a pool entry's exists_from(), when the entry carries it (sampling.pool_order)
EXISTS_FROM = "_exists_from"
# 0: pool A (cited by a detected survey), 1: pool B (wider); pool A is drawn first
POOL = "_pool"
# coarser strata, for the later matching rounds (pipeline.stages.negatives.sampling.ROUNDS)
AGE_COARSE = "_age_coarse"
CITATIONS_COARSE = "_citations_coarse"
AGE_KNOWN = "_age_known"
SURVEYS_COARSE = "_surveys_coarse"


# --------------------------------------------------------------------- inputs
def works_frame(ctx: ReduceContext, fields: pl.LazyFrame | None) -> pl.LazyFrame:
    """:func:`pipeline.rules.visible.work_features` of every work, as the release shows it
    (:func:`pipeline.rules.described.described_works`), with the categories its OpenAlex
    subfield gives it (``fields``: :func:`pipeline.rules.fields.fields_of`; None: off)."""
    features = V.work_features(
        described_works(ctx.read("works", "works"), ctx.read("openalex", "records"))
    )
    return with_field_categories(features, fields)


def positive_pairs(ctx: ReduceContext, surveys: pl.LazyFrame, works: pl.LazyFrame) -> pl.LazyFrame:
    """Every labelled positive with its survey's columns, its work's features and
    ``_after_survey``: the work is dated on or after the survey's text date (an identifier or
    date error: such positives are dropped from the release, and counted)."""
    return (
        ctx.read("labels", "labels")
        .filter(pl.col(S.LABEL) >= 1)
        .join(surveys, on=S.SURVEY_ID, how="inner")
        .join(works, on=S.WORK_ID, how="left")
        .with_columns(
            (pl.col(S.KNOWN_DATE) >= pl.col(S.SURVEY_DATE)).fill_null(False).alias(AFTER_SURVEY)
        )
    )


# --------------------------------------------------------------------- the pools
def eligible_works(
    ctx: ReduceContext,
    citations: pl.LazyFrame,
    part: V.WorkPart | None = None,
    fields: pl.LazyFrame | None = None,
) -> pl.LazyFrame:
    """``(work, category)`` pairs that pass the field rule for surveys of that primary category.

    Pool A (cited by a detected survey): ``own_category`` (a corpus paper whose own
    categories include the category) and ``citing_survey_category`` (any other work a
    survey of the category cites, corpus papers of other categories included). Pool B (``cited_in_category``, wider,
    used after pool A within each stratum): any other work cited by a corpus paper of
    the category (a corpus paper again only when its own categories include it).
    ``_first_cited`` is the earliest first version date of a citing survey (pool A) or
    citing paper of the category (pool B): the existence rule of undated works.

    ``citations``: :func:`pipeline.rules.visible.survey_citations`. ``part``: only the works of
    that part (:func:`pipeline.rules.visible.work_parts`; a work's rows depend on its own rows
    only). ``fields``: the categories a work without a corpus paper takes from its OpenAlex
    subfield (:func:`pipeline.rules.fields.fields_of`; None: off); such a work is an
    ``own_category`` entry of them, as a corpus paper of the category is.
    """
    works = ctx.read("works", "works").select(
        S.WORK_ID, pl.col(S.PAPER_ID).alias(V.WORK_PAPER), S.CATEGORIES, S.KNOWN_DATE
    )
    sc = citations
    if part is not None:
        works, sc = works.filter(part.where), sc.filter(part.where)
    by_survey = sc.group_by(S.WORK_ID).agg(
        pl.col(S.FIRST_VERSION_DATE).min().alias(S.EARLIEST_CITING_SURVEY_DATE)
    )
    by_survey_category = sc.select(S.WORK_ID, S.PRIMARY_CATEGORY).unique()
    by_paper_category = (
        paper_citations(
            scan_extract(ctx.files_by_table("extract"), "papers"),
            ctx.read("works", "cites") if part is None else part.cites,
        )
        .group_by(S.WORK_ID, S.PRIMARY_CATEGORY)
        .agg(pl.col(S.FIRST_VERSION_DATE).min().alias(_FIRST_CITED_B))
    )
    own_categories = (
        works.filter(pl.col(V.WORK_PAPER).is_not_null())
        .select(S.WORK_ID, pl.col(S.CATEGORIES).alias(S.PRIMARY_CATEGORY))
        .explode(S.PRIMARY_CATEGORY)
        .drop_nulls(S.PRIMARY_CATEGORY)
        .unique()
    )
    own_fields = own_categories
    if fields is not None:
        by_subfield = (
            fields.select(S.WORK_ID, pl.col(FIELD_CATEGORIES).alias(S.PRIMARY_CATEGORY))
            .explode(S.PRIMARY_CATEGORY)
            .drop_nulls(S.PRIMARY_CATEGORY)
        )
        if part is not None:
            by_subfield = by_subfield.filter(part.where)
        own_fields = pl.concat([own_categories, by_subfield])
    field_a = (
        pl.concat(
            [
                own_fields.join(by_survey, on=S.WORK_ID, how="semi").with_columns(
                    pl.lit(SOURCE_OWN).alias(S.NEGATIVE_SOURCE)
                ),
                # a corpus paper of another field too: surveys cite such papers, and without
                # negatives like them, categories without the survey's own mark a positive
                by_survey_category.join(
                    own_fields, on=[S.WORK_ID, S.PRIMARY_CATEGORY], how="anti"
                ).with_columns(pl.lit(SOURCE_CITING_SURVEY).alias(S.NEGATIVE_SOURCE)),
            ]
        )
        .join(by_survey, on=S.WORK_ID, how="left")
        .rename({S.EARLIEST_CITING_SURVEY_DATE: FIRST_CITED})
    )
    in_field_b = pl.concat(
        [
            by_paper_category.join(
                works.filter(pl.col(V.WORK_PAPER).is_null()), on=S.WORK_ID, how="semi"
            ),
            by_paper_category.join(own_categories, on=[S.WORK_ID, S.PRIMARY_CATEGORY], how="semi"),
        ]
    )
    field_b = (
        in_field_b.join(field_a, on=[S.WORK_ID, S.PRIMARY_CATEGORY], how="anti")
        .rename({_FIRST_CITED_B: FIRST_CITED})
        .with_columns(pl.lit(SOURCE_CITED_IN_CATEGORY).alias(S.NEGATIVE_SOURCE))
    )
    columns = [S.WORK_ID, S.PRIMARY_CATEGORY, S.NEGATIVE_SOURCE, FIRST_CITED]
    return (
        pl.concat([field_a.select(columns), field_b.select(columns)])
        .join(works.select(S.WORK_ID, S.KNOWN_DATE), on=S.WORK_ID, how="left")
        .join(by_survey, on=S.WORK_ID, how="left")
    )


def pool() -> pl.Expr:
    """``_pool`` of a pool entry: 0 in pool A, 1 in pool B (``cited_in_category``)."""
    return (pl.col(S.NEGATIVE_SOURCE) == SOURCE_CITED_IN_CATEGORY).cast(pl.Int8).alias(POOL)


# --------------------------------------------------------------------- exclusions
def _alias_hits(ctx: ReduceContext) -> pl.LazyFrame:
    """``(survey_id, work_id)`` where an alias of the work is an identifier of one of the
    survey's bib entries, or co-occurs with one in any bib entry or corpus paper.

    The co-occurrence links are ``works``' raw links (``links.parquet``, before junk
    identifiers lose theirs), so a work is excluded even when ``works`` resolved the
    survey's entry elsewhere. Only the surveys' own rows are read.
    """
    doi = pl.col(S.DOI).str.to_lowercase()
    survey_ids = (
        surveys_frame(ctx.read("surveys", "surveys"))
        .select(S.SURVEY_ID)
        .collect(engine="streaming")[S.SURVEY_ID]
    )
    refs = scan_extract(ctx.files_by_table("extract"), "references", survey_ids).select(
        S.PAPER_ID, S.REF_ID, S.ARXIV_ID, doi, S.OPENALEX_ID
    )
    own = (
        A.entry_aliases(refs)
        .select(pl.col(S.PAPER_ID).alias(S.SURVEY_ID), A.ALIAS)
        .unique()
        .collect(engine="streaming")
    )
    own_ids = own[A.ALIAS].unique()
    links = ctx.read("works", "links")
    hop = pl.concat(
        [
            links.filter(pl.col(A.ALIAS).is_in(own_ids.implode())),
            links.filter(pl.col(A.OTHER).is_in(own_ids.implode())).select(
                pl.col(A.OTHER).alias(A.ALIAS), pl.col(A.ALIAS).alias(A.OTHER)
            ),
        ]
    ).unique()
    near = pl.concat(
        [
            own.lazy(),
            own.lazy()
            .join(hop, on=A.ALIAS, how="inner")
            .select(S.SURVEY_ID, pl.col(A.OTHER).alias(A.ALIAS)),
        ]
    ).unique()
    aliases = (
        ctx.read("works", "works")
        .select(S.WORK_ID, pl.col(S.ALIASES).alias(A.ALIAS))
        .explode(A.ALIAS)
        .drop_nulls(A.ALIAS)
    )
    return near.join(aliases, on=A.ALIAS, how="inner").select(S.SURVEY_ID, S.WORK_ID).unique()


def cited_pairs(ctx: ReduceContext, citations: pl.LazyFrame) -> pl.LazyFrame:
    """``(survey_id, work_id)`` a survey cites by identifier: resolved entries (``citations``:
    :func:`pipeline.rules.visible.survey_citations`), labelled positives, alias hits (not title
    hits: :func:`title_hits`)."""
    return pl.concat(
        [
            citations.select(S.SURVEY_ID, S.WORK_ID),
            ctx.read("labels", "labels").select(S.SURVEY_ID, S.WORK_ID),
            _alias_hits(ctx),
        ]
    ).unique()


def survey_title_keys(ctx: ReduceContext) -> pl.LazyFrame:
    """``(survey_id, title_key)``: every segment key of every raw bib string of every survey
    (:mod:`pipeline.rules.titles`), with or without identifiers.

    Only the surveys' rows are read, once (``segment_keys`` reads its input three times):
    every reference of the corpus would make this the stage's peak (6.8 GB at 300k papers).
    Keys are computed once per distinct raw string (surveys cite many works in the words
    other surveys use).
    """
    survey_ids = (
        surveys_frame(ctx.read("surveys", "surveys"))
        .select(S.SURVEY_ID)
        .collect(engine="streaming")[S.SURVEY_ID]
    )
    raw = (
        scan_extract(ctx.files_by_table("extract"), "references", survey_ids)
        .select(S.PAPER_ID, S.REF_ID, S.RAW)
        .drop_nulls(S.RAW)
        .collect(engine="streaming")
    )
    return (
        T.segment_keys_per_string(raw, S.RAW, [S.PAPER_ID, S.REF_ID])
        .select(pl.col(S.PAPER_ID).alias(S.SURVEY_ID), T.KEY)
        .unique()
    )


def title_hits(survey_keys: pl.LazyFrame, pairs: pl.LazyFrame, keys: pl.LazyFrame) -> pl.LazyFrame:
    """Of ``pairs`` (``(survey_id, work_id)``, a batch's window), those where a title key of
    the work (``keys``: ``works``' ``title_keys`` table) equals a segment key of any raw bib
    string of the survey (``survey_keys``: :func:`survey_title_keys`).

    The hits cost the pairs times the works' keys: joining the surveys' keys with every
    work's keys instead grows with the square of the corpus wherever a key names many
    works (a venue taken for a title; 7 GB at 1M bench papers).
    """
    # only the works' keys some survey of the batch has: the pairs then join few keys
    keys = keys.join(survey_keys.select(T.KEY).unique(), on=T.KEY, how="semi")
    return (
        pairs.select(S.SURVEY_ID, S.WORK_ID)
        .join(keys, on=S.WORK_ID, how="inner")
        .join(survey_keys, on=[S.SURVEY_ID, T.KEY], how="semi")
        .select(S.SURVEY_ID, S.WORK_ID)
        .unique()
    )


# --------------------------------------------------------------------- admissible pairs
def exists_from() -> pl.Expr:
    """The date a work exists from, for the existence rule: its latest possible date when it
    has a known date, else its first citation ``_first_cited`` (null: never admissible)."""
    return (
        pl.when(pl.col(S.KNOWN_DATE).is_not_null())
        .then(V.latest_possible_date())
        .otherwise(pl.col(FIRST_CITED))
    )


def candidate_pairs(
    surveys: pl.LazyFrame,
    eligible: pl.LazyFrame,
    excluded: pl.LazyFrame,
    works: pl.LazyFrame,
    prior: dict[str, pl.LazyFrame],
    window: pl.LazyFrame,
) -> pl.LazyFrame:
    """Admissible (survey, work) pairs of ``window`` (``(survey_id, work_id)`` pairs to
    consider; ``surveys``: columns of :func:`pipeline.rules.visible.surveys_frame`), joined with
    their pool entry (``eligible``: :func:`eligible_works`) and work (``works``), with
    their visible features, prior counts and strata (:func:`admissible`)."""
    pooled = (
        surveys.filter(pl.col(S.SURVEY_DATE).is_not_null())
        .join(window, on=S.SURVEY_ID, how="inner")
        .join(eligible, on=[S.PRIMARY_CATEGORY, S.WORK_ID], how="inner")
        .join(works.drop(S.KNOWN_DATE), on=S.WORK_ID, how="left")
    )
    return admissible(pooled, excluded, prior)


def admissible(
    pooled: pl.LazyFrame, excluded: pl.LazyFrame, prior: dict[str, pl.LazyFrame]
) -> pl.LazyFrame:
    """Of ``pooled`` (survey x pool pairs with the survey's, the pool's and the work's
    columns), the pairs that pass the rules after the field rule (not the survey itself,
    existence, not cited: ``excluded``), with prior counts and strata (:func:`with_strata`).

    Existence: the work's latest possible date is strictly before the survey's text date;
    an undated work needs an earlier first citation (``_first_cited``). A known date on or
    after the survey vetoes the work even when something earlier cites it.
    """
    paper = pl.col(V.WORK_PAPER)
    # a window's entries carry their date and in_domain, computed once per pool entry
    # (sampling.pool_order): per pair, they cost a string and a list column gathered each
    has = pooled.collect_schema().names()
    exists = pl.col(EXISTS_FROM) if EXISTS_FROM in has else exists_from()
    pairs = (
        pooled.filter(paper.is_null() | (paper != pl.col(S.SURVEY_ID)))
        .filter(exists < pl.col(S.SURVEY_DATE))
        .join(excluded, on=[S.SURVEY_ID, S.WORK_ID], how="anti")
    )
    return with_strata(pairs, prior, cites_it=False)


def with_strata(
    pairs: pl.LazyFrame, prior: dict[str, pl.LazyFrame], cites_it: bool
) -> pl.LazyFrame:
    """``pairs`` with prior counts, ``in_domain`` and every stratum column.

    ``cites_it``: the pairs are positives (the survey cites the work; it never counts itself).
    ``in_domain`` is kept when ``pairs`` carry it already.
    """
    counted = V.with_prior_counts(pairs, prior, pl.lit(cites_it))
    if S.IN_DOMAIN not in pairs.collect_schema().names():
        counted = counted.with_columns(V.in_domain_expr().alias(S.IN_DOMAIN))
    return counted.with_columns(V.stratum_columns()).with_columns(
        (pl.col(V.AGE_BIN) // 2).alias(AGE_COARSE),
        ((pl.col(V.CITATIONS_BIN) + 1) // 2).alias(CITATIONS_COARSE),
        (pl.col(V.AGE_BIN) >= 0).alias(AGE_KNOWN),
        ((pl.col(V.SURVEYS_BIN) + 1) // 2).alias(SURVEYS_COARSE),
    )
