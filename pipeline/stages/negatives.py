"""Stage ``negatives`` (reduce): hard negatives for every survey.

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
  rule).
* **same field**: when ``W`` is a corpus paper, its own arXiv categories include
  ``S``'s primary category (``negative_source = "own_category"``); when it is not, at
  least one survey citing ``W`` has ``S``'s primary category
  (``"citing_survey_category"``). A corpus paper outside ``S``'s category is not
  rescued by the second rule: its own categories are the better evidence.
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
itself and nothing posted on or after ``S``'s date counts (:func:`with_prior_counts`,
also used by ``split`` for the positives). The field and date rules above still use
every citing survey as the issue defines them.

Of the candidates, ``floor(negatives_per_positive * n_positives)`` are kept (a 1e-9
tolerance absorbs float error, e.g. ``0.29 * 100``). Order: ``negative_sampling =
"hash"`` sorts by :func:`pair_hash` of ``(seed, S, W)``; ``"hardest"`` first by the
prior-only same-category count above (descending: no survey posted after ``S``
decides), then by the hash. Remaining ties (32-bit hash collisions) go by work id.

:func:`pair_hash` is stable across machines, Python and Polars versions: each id is
hashed once with SHA-1 (``hashlib``; first 4 bytes, big endian, of
``f"{seed}\\x1f{id}"``), and a pair mixes the two with the MurmurHash3 32-bit
finaliser written in integer arithmetic that never overflows ``UInt64``. Polars'
own ``hash`` is not used: it is documented as unstable across versions.

Outputs: ``negatives.parquet`` (``schema.NEGATIVES``, sorted by survey then work) and
``negative_surveys.parquet`` (``schema.NEGATIVE_SURVEYS``): every survey, with
``has_negatives`` false when it got none (it stays in the benchmark, flagged).
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

import polars as pl

from pipeline import schema as S
from pipeline.config import NegativesConfig
from pipeline.runner import ReduceContext, Stage, register
from pipeline.stages import works as W
from pipeline.stages.common import scan_extract, write_table

SAMPLINGS = ("hash", "hardest")
# fixed, so the same rows always give the same bytes whatever the config
_U32 = 2**32
_ID_HASH = "_id_hash"
_SURVEY_HASH = "_survey_hash"
_PAIR_HASH = "_pair_hash"
_RANK = "_rank"
_WANT = "_want"
_W_PAPER = "_work_paper_id"
_CITED_ON = "_cited_on"
_N_BEFORE = "_n_before"
_N_SAME_BEFORE = "_n_same_before"


# --------------------------------------------------------------------- stable hashing
def id_hash(seed: int, value: str) -> int:
    """First 4 bytes (big endian) of ``sha1(f"{seed}\\x1f{value}")``: a stable 32-bit hash."""
    return int.from_bytes(hashlib.sha1(f"{seed}\x1f{value}".encode()).digest()[:4], "big")


def _fmix32(x: int) -> int:
    x ^= x >> 16
    x = (x * 0x85EBCA6B) % _U32
    x ^= x >> 13
    x = (x * 0xC2B2AE35) % _U32
    return x ^ (x >> 16)


def pair_hash(seed: int, survey_id: str, work_id: str) -> int:
    """Reference implementation of the pair hash the stage computes in Polars."""
    return _fmix32(id_hash(seed, survey_id) ^ id_hash(seed, work_id))


def _fmix32_expr(x: pl.Expr) -> pl.Expr:
    # Right shifts as floor division; every product is < 2**32 * 2**32, so UInt64 never wraps.
    x = x.xor(x // 2**16)
    x = (x * 0x85EBCA6B) % _U32
    x = x.xor(x // 2**13)
    x = (x * 0xC2B2AE35) % _U32
    return x.xor(x // 2**16)


def id_hash_frame(ids: pl.LazyFrame, column: str, seed: int) -> pl.LazyFrame:
    """``(column, _id_hash)`` for the distinct non-null ids of ``ids`` (hashed in Python)."""
    values = (
        ids.select(pl.col(column))
        .drop_nulls()
        .unique()
        .collect(engine="streaming")[column]
        .to_list()
    )
    return pl.LazyFrame(
        {column: values, _ID_HASH: [id_hash(seed, v) for v in values]},
        schema={column: pl.String, _ID_HASH: pl.UInt64},
    )


def want_negatives(n_positives: pl.Expr, per_positive: float) -> pl.Expr:
    """``floor(per_positive * n_positives)`` with a 1e-9 tolerance for float error."""
    return (n_positives.cast(pl.Float64) * per_positive + 1e-9).floor().cast(pl.Int64)


# --------------------------------------------------------------------- the query
def surveys_frame(ctx: ReduceContext) -> pl.LazyFrame:
    """``(survey_id, primary_category, first_version_date)`` of every detected survey."""
    return S.scan(ctx.upstream("surveys", "surveys"), S.SURVEYS).select(
        pl.col(S.PAPER_ID).alias(S.SURVEY_ID), S.PRIMARY_CATEGORY, S.FIRST_VERSION_DATE
    )


def survey_citations(ctx: ReduceContext) -> pl.LazyFrame:
    """Distinct ``(survey_id, work_id, primary_category, first_version_date)``: what each survey cites."""
    cites = (
        S.scan(ctx.upstream("works", "cites"), S.CITES)
        .filter(pl.col(S.WORK_ID).is_not_null())
        .select(pl.col(S.PAPER_ID).alias(S.SURVEY_ID), S.WORK_ID)
        .unique()
    )
    return cites.join(surveys_frame(ctx), on=S.SURVEY_ID, how="inner")


def citing_survey_stats(ctx: ReduceContext) -> tuple[pl.LazyFrame, pl.LazyFrame]:
    """Per work: (n_citing_surveys, earliest citing survey date); per (work, category): n same category.

    Counts over every detected survey, whatever its date: what the eligibility rules
    use. The counts released with a (survey, work) pair are :func:`with_prior_counts`.
    """
    sc = survey_citations(ctx)
    per_work = sc.group_by(S.WORK_ID).agg(
        pl.len().cast(pl.Int64).alias(S.N_CITING_SURVEYS),
        pl.col(S.FIRST_VERSION_DATE).min().alias(S.EARLIEST_CITING_SURVEY_DATE),
    )
    per_work_category = sc.group_by(S.WORK_ID, S.PRIMARY_CATEGORY).agg(
        pl.len().cast(pl.Int64).alias(S.N_CITING_SURVEYS_SAME_CATEGORY)
    )
    return per_work, per_work_category


def prior_count_tables(sc: pl.LazyFrame) -> tuple[pl.LazyFrame, pl.LazyFrame]:
    """Running counts of citing surveys by date, for :func:`with_prior_counts`.

    Args:
        sc: :func:`survey_citations` (distinct survey, work, category, date).

    Returns:
        ``(work_id, _cited_on, _n_before)``: surveys citing the work first posted on or
        before ``_cited_on``; and the same per ``(work_id, primary_category)``
        (``_n_same_before``). Both sorted by ``_cited_on``; undated surveys never count.
    """

    def running(keys: list[str], name: str) -> pl.LazyFrame:
        return (
            sc.drop_nulls(S.FIRST_VERSION_DATE)
            .group_by(*keys, S.FIRST_VERSION_DATE)
            .agg(pl.len().cast(pl.Int64).alias(name))
            .with_columns(pl.col(name).cum_sum().over(keys, order_by=S.FIRST_VERSION_DATE))
            .select(*keys, pl.col(S.FIRST_VERSION_DATE).alias(_CITED_ON), name)
            .sort(_CITED_ON, *keys)
        )

    return (
        running([S.WORK_ID], _N_BEFORE),
        running([S.WORK_ID, S.PRIMARY_CATEGORY], _N_SAME_BEFORE),
    )


def with_prior_counts(
    pairs: pl.LazyFrame, tables: tuple[pl.LazyFrame, pl.LazyFrame], date: str
) -> pl.LazyFrame:
    """``pairs`` with ``n_citing_surveys`` and ``n_citing_surveys_same_category`` added.

    Both count the detected surveys citing the pair's work whose first version date
    is strictly before the pair's survey date (column ``date``); the second only
    those with the survey's ``primary_category``. The survey itself never counts
    (its own date is not before itself), nor does any later survey; an undated
    survey gets 0. Row order is not kept.
    """
    per_work, per_category = tables
    return (
        pairs.sort(date, nulls_last=False)
        .join_asof(
            per_work,
            left_on=date,
            right_on=_CITED_ON,
            by=S.WORK_ID,
            strategy="backward",
            allow_exact_matches=False,
            check_sortedness=False,
        )
        .drop(_CITED_ON)
        .join_asof(
            per_category,
            left_on=date,
            right_on=_CITED_ON,
            by=[S.WORK_ID, S.PRIMARY_CATEGORY],
            strategy="backward",
            allow_exact_matches=False,
            check_sortedness=False,
        )
        .drop(_CITED_ON)
        .with_columns(
            pl.col(_N_BEFORE).fill_null(0).alias(S.N_CITING_SURVEYS),
            pl.col(_N_SAME_BEFORE).fill_null(0).alias(S.N_CITING_SURVEYS_SAME_CATEGORY),
        )
        .drop(_N_BEFORE, _N_SAME_BEFORE)
    )


def _alias_hits(ctx: ReduceContext) -> pl.LazyFrame:
    """``(survey_id, work_id)`` where an alias of the work is an identifier of one of the
    survey's bib entries, or co-occurs with one in any bib entry or corpus paper.

    The co-occurrence links are ``works``' raw links (:func:`pipeline.stages.works._links`,
    before junk identifiers lose theirs), so a work is excluded even when ``works``
    resolved the survey's entry elsewhere.
    """
    doi = pl.col(S.DOI).str.to_lowercase()
    refs = scan_extract(ctx, "references").select(
        S.PAPER_ID, S.REF_ID, S.ARXIV_ID, doi, S.OPENALEX_ID
    )
    entry_aliases = W._entry_aliases(refs)
    paper_aliases = W._paper_aliases(scan_extract(ctx, "papers").select(S.PAPER_ID, doi))
    own = (
        entry_aliases.join(
            surveys_frame(ctx).select(pl.col(S.SURVEY_ID).alias(S.PAPER_ID)),
            on=S.PAPER_ID,
            how="semi",
        )
        .select(pl.col(S.PAPER_ID).alias(S.SURVEY_ID), W.ALIAS)
        .unique()
        .collect(engine="streaming")
    )
    own_ids = own.lazy().select(W.ALIAS).unique()
    links = W._links(entry_aliases, paper_aliases)
    hop = (
        pl.concat(
            [
                links,
                links.select(pl.col(W.OTHER).alias(W.ALIAS), pl.col(W.ALIAS).alias(W.OTHER)),
            ]
        )
        .join(own_ids, on=W.ALIAS, how="semi")
        .unique()
    )
    near = pl.concat(
        [
            own.lazy(),
            own.lazy()
            .join(hop, on=W.ALIAS, how="inner")
            .select(S.SURVEY_ID, pl.col(W.OTHER).alias(W.ALIAS)),
        ]
    ).unique()
    aliases = (
        S.scan(ctx.upstream("works", "works"), S.WORKS)
        .select(S.WORK_ID, pl.col(S.ALIASES).alias(W.ALIAS))
        .explode(W.ALIAS)
        .drop_nulls(W.ALIAS)
    )
    return near.join(aliases, on=W.ALIAS, how="inner").select(S.SURVEY_ID, S.WORK_ID).unique()


def latest_possible_date() -> pl.Expr:
    """Latest date a work may really have: its ``known_date``, or the month's last day when
    that date is only the month of an arXiv id (a work outside the corpus)."""
    month_only = pl.col(_W_PAPER).is_null() & pl.col(S.WORK_ID).str.starts_with(W.ARXIV_PREFIX)
    return (
        pl.when(month_only)
        .then(pl.col(S.KNOWN_DATE).dt.month_end())
        .otherwise(pl.col(S.KNOWN_DATE))
    )


def eligible_works(ctx: ReduceContext) -> pl.LazyFrame:
    """``(work, category)`` pairs that pass the field rule for surveys of that primary category.

    Each row carries what the other rules and the output need: the work's corpus
    paper id, known date, earliest citing survey date and ``negative_source``. (The
    released counts are prior-only and per survey: :func:`with_prior_counts`.)
    """
    per_work, per_work_category = citing_survey_stats(ctx)
    works = S.scan(ctx.upstream("works", "works"), S.WORKS).select(
        S.WORK_ID, pl.col(S.PAPER_ID).alias(_W_PAPER), S.CATEGORIES, S.KNOWN_DATE
    )
    cited = works.join(per_work, on=S.WORK_ID, how="inner")
    own = (
        cited.filter(pl.col(_W_PAPER).is_not_null())
        .explode(S.CATEGORIES)
        .drop_nulls(S.CATEGORIES)
        .rename({S.CATEGORIES: S.PRIMARY_CATEGORY})
        .unique([S.WORK_ID, S.PRIMARY_CATEGORY])
        .with_columns(pl.lit(S.NEGATIVE_SOURCES[0]).alias(S.NEGATIVE_SOURCE))
    )
    by_citing = (
        cited.filter(pl.col(_W_PAPER).is_null())
        .drop(S.CATEGORIES)
        .join(per_work_category.select(S.WORK_ID, S.PRIMARY_CATEGORY), on=S.WORK_ID, how="inner")
        .with_columns(pl.lit(S.NEGATIVE_SOURCES[1]).alias(S.NEGATIVE_SOURCE))
    )
    columns = [
        S.WORK_ID,
        _W_PAPER,
        S.PRIMARY_CATEGORY,
        S.KNOWN_DATE,
        S.EARLIEST_CITING_SURVEY_DATE,
        S.NEGATIVE_SOURCE,
    ]
    return pl.concat([own.select(columns), by_citing.select(columns)])


def excluded_pairs(ctx: ReduceContext) -> pl.LazyFrame:
    """``(survey_id, work_id)`` a survey cites: resolved entries, labelled positives, alias hits."""
    return pl.concat(
        [
            survey_citations(ctx).select(S.SURVEY_ID, S.WORK_ID),
            S.scan(ctx.upstream("labels", "labels"), S.LABELS).select(S.SURVEY_ID, S.WORK_ID),
            _alias_hits(ctx),
        ]
    ).unique()


def candidate_pairs(
    surveys: pl.LazyFrame,
    eligible: pl.LazyFrame,
    excluded: pl.LazyFrame,
    prior: tuple[pl.LazyFrame, pl.LazyFrame],
) -> pl.LazyFrame:
    """Admissible (survey, work) pairs of ``surveys`` (columns of :func:`surveys_frame`),
    with their prior-only citing-survey counts (``prior``: :func:`prior_count_tables`)."""
    survey_date = pl.col(S.FIRST_VERSION_DATE)
    pairs = (
        surveys.filter(survey_date.is_not_null())
        .join(eligible, on=S.PRIMARY_CATEGORY, how="inner")
        .filter(pl.col(_W_PAPER).is_null() | (pl.col(_W_PAPER) != pl.col(S.SURVEY_ID)))
        .filter(
            pl.when(pl.col(S.KNOWN_DATE).is_not_null())
            .then(latest_possible_date() < survey_date)
            .otherwise(pl.col(S.EARLIEST_CITING_SURVEY_DATE) < survey_date)
        )
        .join(excluded, on=[S.SURVEY_ID, S.WORK_ID], how="anti")
    )
    return with_prior_counts(pairs, prior, S.FIRST_VERSION_DATE)


def negative_candidates(ctx: ReduceContext) -> pl.LazyFrame:
    """Every admissible (survey, work) pair with its source and citing-survey counts (not sampled)."""
    return candidate_pairs(
        surveys_frame(ctx),
        eligible_works(ctx),
        excluded_pairs(ctx),
        prior_count_tables(survey_citations(ctx)),
    )


def sample(pairs: pl.LazyFrame, hashes: pl.LazyFrame, ncfg: NegativesConfig) -> pl.LazyFrame:
    """The chosen negatives among ``pairs`` (which carry ``n_positives`` and ``_survey_hash``)."""
    order: list[pl.Expr] = [pl.col(_PAIR_HASH), pl.col(S.WORK_ID)]
    if ncfg.negative_sampling == "hardest":  # prior-only counts: nothing after the survey
        order.insert(0, -pl.col(S.N_CITING_SURVEYS_SAME_CATEGORY))
    return (
        pairs.join(hashes, on=S.WORK_ID, how="left")
        .with_columns(_fmix32_expr(pl.col(_SURVEY_HASH).xor(pl.col(_ID_HASH))).alias(_PAIR_HASH))
        .with_columns(
            want_negatives(pl.col(S.N_POSITIVES), ncfg.negatives_per_positive).alias(_WANT),
            pl.int_range(pl.len()).over(S.SURVEY_ID, order_by=order).alias(_RANK),
        )
        .filter(pl.col(_RANK) < pl.col(_WANT))
        .with_columns(pl.lit(0, pl.Int8).alias(S.LABEL))
        .select(S.NEGATIVES.names)
    )


def build_negatives(ctx: ReduceContext) -> dict[str, Any]:
    """Sample the hard negatives; write both outputs; return the stage counts.

    Candidate pairs are built and sampled ``negatives.survey_batch_size`` surveys at
    a time (a survey's pairs only depend on itself), which bounds memory: the pairs
    of all surveys of a large category do not fit in memory on the full corpus.

    Raises:
        ValueError: a ``negatives`` setting is out of range (names it and the choices).
    """
    ncfg = ctx.cfg.negatives
    if ncfg.negative_sampling not in SAMPLINGS:
        raise ValueError(
            f"negatives.negative_sampling={ncfg.negative_sampling!r}; available: {list(SAMPLINGS)}"
        )
    if not math.isfinite(ncfg.negatives_per_positive) or ncfg.negatives_per_positive < 0:
        raise ValueError(
            f"negatives.negatives_per_positive={ncfg.negatives_per_positive}: need a finite value >= 0"
        )
    if ncfg.survey_batch_size < 1:
        raise ValueError(f"negatives.survey_batch_size={ncfg.survey_batch_size}: need >= 1")

    n_positives = (
        S.scan(ctx.upstream("labels", "labels"), S.LABELS)
        .filter(pl.col(S.LABEL) >= 1)
        .group_by(S.SURVEY_ID)
        .agg(pl.len().cast(pl.Int64).alias(S.N_POSITIVES))
    )
    surveys = (
        surveys_frame(ctx)
        .join(n_positives, on=S.SURVEY_ID, how="left")
        .with_columns(pl.col(S.N_POSITIVES).fill_null(0))
        .sort(S.SURVEY_ID)
        .collect(engine="streaming")
    )
    eligible = eligible_works(ctx).collect(engine="streaming").lazy()
    excluded = excluded_pairs(ctx).collect(engine="streaming").lazy()
    before, before_same = pl.collect_all(
        prior_count_tables(survey_citations(ctx)), engine="streaming"
    )
    prior = (before.lazy(), before_same.lazy())
    work_hashes = id_hash_frame(eligible, S.WORK_ID, ncfg.seed)
    survey_hashes = id_hash_frame(surveys.lazy(), S.SURVEY_ID, ncfg.seed).rename(
        {_ID_HASH: _SURVEY_HASH}
    )
    with_hash = surveys.lazy().join(survey_hashes, on=S.SURVEY_ID, how="left").collect()

    chosen, n_candidates = [], []
    for offset in range(0, with_hash.height, ncfg.survey_batch_size):
        batch = with_hash.slice(offset, ncfg.survey_batch_size).lazy()
        pairs = candidate_pairs(batch, eligible, excluded, prior).collect(engine="streaming").lazy()
        got, counts = pl.collect_all(
            [
                sample(pairs, work_hashes, ncfg),
                pairs.group_by(S.SURVEY_ID).agg(
                    pl.len().cast(pl.Int64).alias(S.N_NEGATIVE_CANDIDATES)
                ),
            ],
            engine="streaming",
        )
        chosen.append(got)
        n_candidates.append(counts)
    negatives = (
        pl.concat(chosen, how="vertical").sort(S.SURVEY_ID, S.WORK_ID)
        if chosen
        else pl.DataFrame(schema=S.polars_schema(S.NEGATIVES))
    )
    candidates_per_survey = (
        pl.concat(n_candidates)
        if n_candidates
        else pl.DataFrame(schema={S.SURVEY_ID: pl.String, S.N_NEGATIVE_CANDIDATES: pl.Int64})
    )
    per_survey = (
        surveys.lazy()
        .join(candidates_per_survey.lazy(), on=S.SURVEY_ID, how="left")
        .join(
            negatives.lazy()
            .group_by(S.SURVEY_ID)
            .agg(pl.len().cast(pl.Int64).alias(S.N_NEGATIVES)),
            on=S.SURVEY_ID,
            how="left",
        )
        .with_columns(pl.col(S.N_NEGATIVE_CANDIDATES, S.N_NEGATIVES).fill_null(0))
        .with_columns((pl.col(S.N_NEGATIVES) > 0).alias(S.HAS_NEGATIVES))
        .select(S.NEGATIVE_SURVEYS.names)
        .sort(S.SURVEY_ID)
        .collect()
    )
    write_table(negatives, ctx.output("negatives.parquet"), S.NEGATIVES, ctx.cfg, "negatives")
    write_table(
        per_survey,
        ctx.output("negative_surveys.parquet"),
        S.NEGATIVE_SURVEYS,
        ctx.cfg,
        "negative_surveys",
    )

    wanted = want_negatives(pl.col(S.N_POSITIVES), ncfg.negatives_per_positive)
    by_source = negatives.group_by(S.NEGATIVE_SOURCE).len().sort(S.NEGATIVE_SOURCE)
    return {
        "surveys": per_survey.height,
        "surveys_with_negatives": int(per_survey[S.HAS_NEGATIVES].sum()),
        "surveys_without_negatives": int((~per_survey[S.HAS_NEGATIVES]).sum()),
        "surveys_short_of_negatives": int(per_survey.filter(pl.col(S.N_NEGATIVES) < wanted).height),
        "surveys_without_date": int(per_survey[S.FIRST_VERSION_DATE].null_count()),
        "positives": int(per_survey[S.N_POSITIVES].sum()),
        "negative_candidates": int(per_survey[S.N_NEGATIVE_CANDIDATES].sum()),
        "negatives": negatives.height,
        "negatives_by_source": {s: 0 for s in S.NEGATIVE_SOURCES}
        | dict(
            zip(by_source[S.NEGATIVE_SOURCE].to_list(), by_source["len"].to_list(), strict=True)
        ),
        "negative_sampling": ncfg.negative_sampling,
    }


STAGE = register(
    Stage(
        name="negatives",
        kind="reduce",
        reads=("extract", "works", "surveys", "labels"),
        config_sections=("negatives", "extract"),
        fn=build_negatives,
        help="hard negatives per survey: cited by other same-field surveys, never by the survey, older than it",
    )
)
