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

**Window.** A survey does not consider the whole pool of its category (that pairs every
survey with a pool growing with the corpus: 39M pairs at 300k papers). Of each pool
(A, B) it considers a window of about ``max(candidates_per_negative * k, 1000)`` works
that existed before it, ``k`` the negatives it wants (:func:`windows`): a cyclic run of
the pool in a per-work hash order, starting where the survey's hash falls. Which works
are in a window depends on ids only, never on a visible feature, so a window is a
uniform sample of the pool; the candidates above are the window's (``n_negative_candidates``
counts them). ``candidates_per_negative = 0`` considers the whole pool. With
``"hardest"``, every co-cited work (below) is considered too, in or out of the window.

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
import shutil
from pathlib import Path
from typing import Any

import polars as pl

from pipeline import aliases as W
from pipeline import schema as S
from pipeline import titles as T
from pipeline import visible as V
from pipeline.config import NEGATIVE_SAMPLINGS as SAMPLINGS
from pipeline.progress import steps
from pipeline.runner import ReduceContext, Stage
from pipeline.tables import id_batches, scan_extract, write_table
from pipeline.visible import (
    paper_citations,
    prior_tables,
    survey_citations,
    surveys_frame,
)

# Survey x pool pairs built at once. Not a setting: the output does not depend on it (and a
# setting would change the release's recorded config).
BATCH_PAIRS = 5_000_000
# fixed, so the same rows always give the same bytes whatever the config
_U32 = 2**32
_ID_HASH = "_id_hash"
_SURVEY_HASH = "_survey_hash"
_PAIR_HASH = "_pair_hash"
_RANK = "_rank"
_ROW = "_pair_row"
_W_INDEX = "_work_index"
_WANT = "_want"
_W_PAPER = V.WORK_PAPER
_FIRST_CITED = "_first_cited"
_FIRST_CITED_B = "_first_cited_in_category"
_POOL = "_pool"
_HARDNESS = "_hardness"
_OTHER = "_other_survey"
_OTHER_DATE = "_other_date"
_POS_RANK = "_positive_rank"
_SLOT = "_slot"
_AGE_COARSE = "_age_coarse"
_CITATIONS_COARSE = "_citations_coarse"
_AGE_KNOWN = "_age_known"
_SURVEYS_COARSE = "_surveys_coarse"
_EXISTS_FROM = "_exists_from"
_EXISTING = "_existing"
_I = "_pool_position"
_N = "_pool_size"
_START = "_window_start"
_LEN = "_window_len"
# Smallest window (works of a pool that existed before the survey) a survey considers,
# whatever few negatives it wants: fixed, so the draw never depends on a setting but
# ``negatives.candidates_per_negative``.
WINDOW_FLOOR = 1_000
AFTER_SURVEY = "_after_survey"
SOURCE_OWN, SOURCE_CITING_SURVEY, SOURCE_CITED_IN_CATEGORY = S.NEGATIVE_SOURCES
# Matching rounds: the columns a slot and its negative must share, finest first.
ROUNDS: tuple[tuple[str, ...], ...] = (
    V.STRATUM_COLUMNS,
    # popularity is what a metadata-only system learns first (issue 8): keep it longest
    (V.TEXT_KIND, S.IN_DOMAIN, _AGE_COARSE, V.CITATIONS_BIN, V.SURVEYS_BIN),
    (V.TEXT_KIND, S.IN_DOMAIN, V.CITATIONS_BIN, V.SURVEYS_BIN),
    (V.TEXT_KIND, S.IN_DOMAIN, _AGE_KNOWN, _CITATIONS_COARSE, _SURVEYS_COARSE),
    (V.TEXT_KIND, _CITATIONS_COARSE, _SURVEYS_COARSE),
    (V.TEXT_KIND, S.IN_DOMAIN, _AGE_KNOWN),
    (V.TEXT_KIND,),
    (),
)
ROUND_COLUMNS = sorted({c for keys in ROUNDS for c in keys})


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


# --------------------------------------------------------------------- integer work keys
def work_index(works: pl.DataFrame) -> pl.DataFrame:
    """``(work_id, _work_index)``: every work's position (``UInt32``) in work-id order.

    The batches join millions of pairs on the work; work ids are strings of 16-22 bytes
    (hashed and compared through a pointer), the index is an integer in the same order, so
    every sort and tie-break on ``work_id`` gives the same rows either way.
    """
    return works.select(S.WORK_ID).sort(S.WORK_ID).with_row_index(_W_INDEX)


def indexed(lf: pl.LazyFrame, index: pl.DataFrame) -> pl.LazyFrame:
    """``lf`` with ``work_id`` replaced by its :func:`work_index` (same column name and place);
    a row whose work is not in ``index`` is dropped (the caller checks where it matters)."""
    columns = lf.collect_schema().names()
    return (
        lf.join(index.lazy(), on=S.WORK_ID, how="inner")
        .drop(S.WORK_ID)
        .rename({_W_INDEX: S.WORK_ID})
        .select(columns)
    )


def unindexed(df: pl.DataFrame, index: pl.DataFrame) -> pl.DataFrame:
    """``df`` with its :func:`work_index` keys turned back into work ids (read by position:
    the index's row ``i`` is work ``i``)."""
    return df.with_columns(index.get_column(S.WORK_ID).gather(df.get_column(S.WORK_ID)))


def indexed_hashes(index: pl.DataFrame, keys: pl.LazyFrame, seed: int) -> pl.LazyFrame:
    """``(work_id, _id_hash)`` for the indexed works in ``keys``: :func:`id_hash` of the work id
    (the string, never its index), keyed by the index."""
    needed = keys.select(pl.col(S.WORK_ID).alias(_W_INDEX)).unique().collect(engine="streaming")
    ids = index.join(needed, on=_W_INDEX, how="semi")
    return pl.LazyFrame(
        {
            S.WORK_ID: ids[_W_INDEX],
            _ID_HASH: [id_hash(seed, v) for v in ids[S.WORK_ID].to_list()],
        },
        schema={S.WORK_ID: ids.schema[_W_INDEX], _ID_HASH: pl.UInt64},
    )


# --------------------------------------------------------------------- inputs
def works_frame(ctx: ReduceContext) -> pl.LazyFrame:
    """:func:`pipeline.visible.work_features` of every work."""
    return V.work_features(S.scan(ctx.upstream("works", "works"), S.WORKS))


def positive_pairs(ctx: ReduceContext, surveys: pl.LazyFrame, works: pl.LazyFrame) -> pl.LazyFrame:
    """Every labelled positive with its survey's columns, its work's features and
    ``_after_survey``: the work is dated on or after the survey's text date (an identifier or
    date error: such positives are dropped from the release, and counted)."""
    return (
        S.scan(ctx.upstream("labels", "labels"), S.LABELS)
        .filter(pl.col(S.LABEL) >= 1)
        .join(surveys, on=S.SURVEY_ID, how="inner")
        .join(works, on=S.WORK_ID, how="left")
        .with_columns(
            (pl.col(S.KNOWN_DATE) >= pl.col(S.SURVEY_DATE)).fill_null(False).alias(AFTER_SURVEY)
        )
    )


# --------------------------------------------------------------------- the pools
def eligible_works(
    ctx: ReduceContext, citations: pl.LazyFrame | None = None, part: V.WorkPart | None = None
) -> pl.LazyFrame:
    """``(work, category)`` pairs that pass the field rule for surveys of that primary category.

    Pool A (cited by a detected survey): ``own_category`` (a corpus paper whose own
    categories include the category) and ``citing_survey_category`` (not a corpus
    paper; a survey of the category cites it). Pool B (``cited_in_category``, wider,
    used after pool A within each stratum): any other work cited by a corpus paper of
    the category (a corpus paper again only when its own categories include it).
    ``_first_cited`` is the earliest first version date of a citing survey (pool A) or
    citing paper of the category (pool B): the existence rule of undated works.

    ``part``: only the works of that part (:func:`pipeline.visible.work_parts`; a work's rows
    depend on its own rows only).
    """
    works = S.scan(ctx.upstream("works", "works"), S.WORKS).select(
        S.WORK_ID, pl.col(S.PAPER_ID).alias(_W_PAPER), S.CATEGORIES, S.KNOWN_DATE
    )
    sc = survey_citations(ctx) if citations is None else citations
    if part is not None:
        works, sc = works.filter(part.where), sc.filter(part.where)
    by_survey = sc.group_by(S.WORK_ID).agg(
        pl.col(S.FIRST_VERSION_DATE).min().alias(S.EARLIEST_CITING_SURVEY_DATE)
    )
    by_survey_category = sc.select(S.WORK_ID, S.PRIMARY_CATEGORY).unique()
    by_paper_category = (
        paper_citations(ctx, part=part)
        .group_by(S.WORK_ID, S.PRIMARY_CATEGORY)
        .agg(pl.col(S.FIRST_VERSION_DATE).min().alias(_FIRST_CITED_B))
    )
    own_categories = (
        works.filter(pl.col(_W_PAPER).is_not_null())
        .select(S.WORK_ID, pl.col(S.CATEGORIES).alias(S.PRIMARY_CATEGORY))
        .explode(S.PRIMARY_CATEGORY)
        .drop_nulls(S.PRIMARY_CATEGORY)
        .unique()
    )
    field_a = (
        pl.concat(
            [
                own_categories.join(by_survey, on=S.WORK_ID, how="semi").with_columns(
                    pl.lit(SOURCE_OWN).alias(S.NEGATIVE_SOURCE)
                ),
                by_survey_category.join(
                    works.filter(pl.col(_W_PAPER).is_null()), on=S.WORK_ID, how="semi"
                ).with_columns(pl.lit(SOURCE_CITING_SURVEY).alias(S.NEGATIVE_SOURCE)),
            ]
        )
        .join(by_survey, on=S.WORK_ID, how="left")
        .rename({S.EARLIEST_CITING_SURVEY_DATE: _FIRST_CITED})
    )
    in_field_b = pl.concat(
        [
            by_paper_category.join(
                works.filter(pl.col(_W_PAPER).is_null()), on=S.WORK_ID, how="semi"
            ),
            by_paper_category.join(own_categories, on=[S.WORK_ID, S.PRIMARY_CATEGORY], how="semi"),
        ]
    )
    field_b = (
        in_field_b.join(field_a, on=[S.WORK_ID, S.PRIMARY_CATEGORY], how="anti")
        .rename({_FIRST_CITED_B: _FIRST_CITED})
        .with_columns(pl.lit(SOURCE_CITED_IN_CATEGORY).alias(S.NEGATIVE_SOURCE))
    )
    columns = [S.WORK_ID, S.PRIMARY_CATEGORY, S.NEGATIVE_SOURCE, _FIRST_CITED]
    return (
        pl.concat([field_a.select(columns), field_b.select(columns)])
        .join(works.select(S.WORK_ID, S.KNOWN_DATE), on=S.WORK_ID, how="left")
        .join(by_survey, on=S.WORK_ID, how="left")
    )


def _alias_hits(ctx: ReduceContext) -> pl.LazyFrame:
    """``(survey_id, work_id)`` where an alias of the work is an identifier of one of the
    survey's bib entries, or co-occurs with one in any bib entry or corpus paper.

    The co-occurrence links are ``works``' raw links (``links.parquet``, before junk
    identifiers lose theirs), so a work is excluded even when ``works`` resolved the
    survey's entry elsewhere. Only the surveys' own rows are read.
    """
    doi = pl.col(S.DOI).str.to_lowercase()
    survey_ids = surveys_frame(ctx).select(S.SURVEY_ID).collect(engine="streaming")[S.SURVEY_ID]
    refs = scan_extract(ctx, "references", survey_ids).select(
        S.PAPER_ID, S.REF_ID, S.ARXIV_ID, doi, S.OPENALEX_ID
    )
    own = (
        W.entry_aliases(refs)
        .select(pl.col(S.PAPER_ID).alias(S.SURVEY_ID), W.ALIAS)
        .unique()
        .collect(engine="streaming")
    )
    own_ids = own[W.ALIAS].unique()
    links = S.scan(ctx.upstream("works", "links"), S.LINKS)
    hop = pl.concat(
        [
            links.filter(pl.col(W.ALIAS).is_in(own_ids.implode())),
            links.filter(pl.col(W.OTHER).is_in(own_ids.implode())).select(
                pl.col(W.OTHER).alias(W.ALIAS), pl.col(W.ALIAS).alias(W.OTHER)
            ),
        ]
    ).unique()
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


def survey_title_keys(ctx: ReduceContext) -> pl.LazyFrame:
    """``(survey_id, title_key)``: every segment key of every raw bib string of every survey
    (:mod:`pipeline.titles`), with or without identifiers.

    Only the surveys' rows are read, once (``segment_keys`` reads its input three times):
    reading every reference of the corpus made this the stage's peak (6.8 GB at 300k papers).
    """
    survey_ids = surveys_frame(ctx).select(S.SURVEY_ID).collect(engine="streaming")[S.SURVEY_ID]
    raw = (
        scan_extract(ctx, "references", survey_ids)
        .select(S.PAPER_ID, S.REF_ID, S.RAW)
        .drop_nulls(S.RAW)
        .collect(engine="streaming")
    )
    return (
        T.segment_keys(raw.lazy(), S.RAW, [S.PAPER_ID, S.REF_ID])
        .select(pl.col(S.PAPER_ID).alias(S.SURVEY_ID), T.KEY)
        .unique()
    )


def title_hits(
    ctx: ReduceContext,
    survey_keys: pl.LazyFrame | None = None,
    pairs: pl.LazyFrame | None = None,
    keys: pl.LazyFrame | None = None,
) -> pl.LazyFrame:
    """``(survey_id, work_id)`` where a title key of the work equals a segment key of any raw
    bib string of the survey (``survey_keys``: :func:`survey_title_keys`).

    ``pairs``: only these ``(survey_id, work_id)`` pairs are looked at (a batch's window).
    The hits then cost the pairs times the works' keys: joining the surveys' keys with every
    work's keys instead grows with the square of the corpus wherever a key names many
    works (a venue taken for a title; 7 GB at 1M bench papers).

    ``keys``: the works' title keys (``works``' ``title_keys`` table), when the caller holds
    them already (e.g. with integer work keys: :func:`work_index`).
    """
    survey_keys = survey_title_keys(ctx) if survey_keys is None else survey_keys
    if keys is None:
        keys = S.scan(ctx.upstream("works", "title_keys"), S.TITLE_KEYS)
    if pairs is None:
        hits = survey_keys.join(keys, on=T.KEY, how="inner")
    else:
        hits = (
            pairs.select(S.SURVEY_ID, S.WORK_ID)
            .join(keys, on=S.WORK_ID, how="inner")
            .join(survey_keys, on=[S.SURVEY_ID, T.KEY], how="semi")
        )
    return hits.select(S.SURVEY_ID, S.WORK_ID).unique()


def cited_pairs(ctx: ReduceContext, citations: pl.LazyFrame | None = None) -> pl.LazyFrame:
    """``(survey_id, work_id)`` a survey cites by identifier: resolved entries, labelled
    positives, alias hits (not title hits: :func:`title_hits`). ``citations``:
    :func:`survey_citations`, when the caller holds it already."""
    sc = survey_citations(ctx) if citations is None else citations
    return pl.concat(
        [
            sc.select(S.SURVEY_ID, S.WORK_ID),
            S.scan(ctx.upstream("labels", "labels"), S.LABELS).select(S.SURVEY_ID, S.WORK_ID),
            _alias_hits(ctx),
        ]
    ).unique()


def excluded_pairs(ctx: ReduceContext, citations: pl.LazyFrame | None = None) -> pl.LazyFrame:
    """``(survey_id, work_id)`` a survey cites: :func:`cited_pairs` and :func:`title_hits`.
    ``citations``: :func:`survey_citations`, when the caller holds it already."""
    return pl.concat([cited_pairs(ctx, citations), title_hits(ctx)]).unique()


def candidate_pairs(
    surveys: pl.LazyFrame,
    eligible: pl.LazyFrame,
    excluded: pl.LazyFrame,
    works: pl.LazyFrame,
    prior: dict[str, pl.LazyFrame],
    window: pl.LazyFrame | None = None,
) -> pl.LazyFrame:
    """Admissible (survey, work) pairs of ``surveys`` (columns of :func:`surveys_frame`), with
    their visible features, prior counts and strata (:mod:`pipeline.visible`).

    Existence: the work's latest possible date is strictly before the survey's text date;
    an undated work needs an earlier first citation (``_first_cited``). A known date on or
    after the survey vetoes the work even when something earlier cites it.

    ``window``: ``(survey_id, work_id)`` pairs to consider (:func:`window_pairs`); ``None``
    considers the whole pool of each survey's category.
    """
    survey_date = pl.col(S.SURVEY_DATE)
    dated = surveys.filter(survey_date.is_not_null())
    pooled = (
        dated.join(eligible, on=S.PRIMARY_CATEGORY, how="inner")
        if window is None
        else dated.join(window, on=S.SURVEY_ID, how="inner").join(
            eligible, on=[S.PRIMARY_CATEGORY, S.WORK_ID], how="inner"
        )
    )
    pooled = pooled.join(works.drop(S.KNOWN_DATE), on=S.WORK_ID, how="left")
    return admissible(pooled, excluded, prior)


def admissible(
    pooled: pl.LazyFrame, excluded: pl.LazyFrame, prior: dict[str, pl.LazyFrame]
) -> pl.LazyFrame:
    """Of ``pooled`` (survey x pool pairs with the survey's, the pool's and the work's
    columns), the pairs that pass the rules after the field rule (not the survey itself,
    existence, not cited: ``excluded``), with prior counts and strata
    (:func:`candidate_pairs`)."""
    pairs = (
        pooled.filter(pl.col(_W_PAPER).is_null() | (pl.col(_W_PAPER) != pl.col(S.SURVEY_ID)))
        .filter(existed_before(pl.col(S.SURVEY_DATE)))
        .join(excluded, on=[S.SURVEY_ID, S.WORK_ID], how="anti")
    )
    return with_strata(pairs, prior, cites_it=False)


def existed_before(date: pl.Expr) -> pl.Expr:
    """The existence rule: the work's latest possible date (or, undated, its first citation
    ``_first_cited``) is strictly before ``date``."""
    return (
        pl.when(pl.col(S.KNOWN_DATE).is_not_null())
        .then(V.latest_possible_date() < date)
        .otherwise(pl.col(_FIRST_CITED) < date)
    )


def with_strata(
    pairs: pl.LazyFrame, prior: dict[str, pl.LazyFrame], cites_it: bool
) -> pl.LazyFrame:
    """``pairs`` with prior counts, ``in_domain`` and every stratum column.

    ``cites_it``: the pairs are positives (the survey cites the work; it never counts itself).
    """
    return (
        V.with_prior_counts(pairs, prior, pl.lit(cites_it))
        .with_columns(V.in_domain_expr().alias(S.IN_DOMAIN))
        .with_columns(V.stratum_columns())
        .with_columns(
            (pl.col(V.AGE_BIN) // 2).alias(_AGE_COARSE),
            ((pl.col(V.CITATIONS_BIN) + 1) // 2).alias(_CITATIONS_COARSE),
            (pl.col(V.AGE_BIN) >= 0).alias(_AGE_KNOWN),
            ((pl.col(V.SURVEYS_BIN) + 1) // 2).alias(_SURVEYS_COARSE),
        )
    )


def negative_candidates(ctx: ReduceContext) -> pl.LazyFrame:
    """Every admissible (survey, work) pair with its source, counts and strata (not sampled)."""
    works = works_frame(ctx)
    return candidate_pairs(
        surveys_frame(ctx), eligible_works(ctx), excluded_pairs(ctx), works, prior_tables(ctx)
    )


# --------------------------------------------------------------------- hardness
def co_citation(batch: pl.LazyFrame, positives: pl.LazyFrame, sc: pl.LazyFrame) -> pl.LazyFrame:
    """``(survey_id, work_id, _hardness)``: how many surveys first posted before the survey
    cite the work *and* at least one of the survey's positives (co-citation as seen before
    the survey; what ``hardest`` orders by within a stratum)."""
    earlier = sc.select(
        pl.col(S.SURVEY_ID).alias(_OTHER),
        S.WORK_ID,
        pl.col(S.FIRST_VERSION_DATE).alias(_OTHER_DATE),
    )
    neighbours = (
        positives.select(S.SURVEY_ID, S.WORK_ID)
        .join(earlier, on=S.WORK_ID, how="inner")
        .join(batch.select(S.SURVEY_ID, S.SURVEY_DATE), on=S.SURVEY_ID, how="inner")
        .filter(
            (pl.col(_OTHER_DATE) < pl.col(S.SURVEY_DATE)) & (pl.col(_OTHER) != pl.col(S.SURVEY_ID))
        )
        .select(S.SURVEY_ID, _OTHER)
        .unique()
    )
    return (
        neighbours.join(earlier.select(_OTHER, S.WORK_ID), on=_OTHER, how="inner")
        .group_by(S.SURVEY_ID, S.WORK_ID)
        .agg(pl.len().cast(pl.Int64).alias(_HARDNESS))
    )


# --------------------------------------------------------------------- windows
def pool_order(eligible: pl.LazyFrame, works: pl.LazyFrame, hashes: pl.LazyFrame) -> pl.DataFrame:
    """Every pool (a primary category's pool A or pool B) in a per-work hash order:
    ``(primary_category, _pool, _i, work_id, _exists_from, *POOL_COLUMNS)`` sorted by
    category, pool and ``_i``, the 0-based position in the order ``(id_hash(seed, work),
    work_id)`` (``hashes``: ``(work_id, _id_hash)`` of every work of ``eligible``,
    :func:`id_hash_frame`). ``_exists_from`` is the date the existence rule compares with
    (null: never admissible); :data:`POOL_COLUMNS` are ``eligible``'s (:func:`window_rows`
    reads them by position)."""
    return (
        eligible.join(works.select(S.WORK_ID, S.DATE_SOURCE), on=S.WORK_ID, how="left")
        .join(hashes, on=S.WORK_ID, how="left")
        .with_columns(
            (pl.col(S.NEGATIVE_SOURCE) == SOURCE_CITED_IN_CATEGORY).cast(pl.Int8).alias(_POOL),
            pl.when(pl.col(S.KNOWN_DATE).is_not_null())
            .then(V.latest_possible_date())
            .otherwise(pl.col(_FIRST_CITED))
            .alias(_EXISTS_FROM),
        )
        .with_columns(
            pl.int_range(pl.len())
            .over([S.PRIMARY_CATEGORY, _POOL], order_by=[_ID_HASH, S.WORK_ID])
            .cast(pl.Int64)
            .alias(_I)
        )
        .select(S.PRIMARY_CATEGORY, _POOL, _I, S.WORK_ID, _EXISTS_FROM, *POOL_COLUMNS)
        .sort(S.PRIMARY_CATEGORY, _POOL, _I)
        .collect(engine="streaming")
    )


# what a pool entry carries besides its work (eligible_works' columns)
POOL_COLUMNS = (S.NEGATIVE_SOURCE, _FIRST_CITED, S.KNOWN_DATE, S.EARLIEST_CITING_SURVEY_DATE)


def windows(
    surveys: pl.DataFrame, order: pl.DataFrame, wanted: pl.Expr, per_negative: int, seed: int
) -> pl.DataFrame:
    """Per survey and pool of its category, the window of the pool it considers:
    ``(survey_id, primary_category, _pool, _start, _len, _n)``.

    A survey wanting ``k`` negatives considers, of each pool, about
    ``size = max(per_negative * k, WINDOW_FLOOR)`` works that existed before it: of the
    ``e`` works of the pool that do (``n`` in all), the ``ceil(size * n / e)`` consecutive
    ones (cyclically) from position ``floor(h * n / 2**32)`` of the pool's hash order, ``h``
    the survey's id hash; the whole pool when ``size >= e``, and every pool when
    ``per_negative`` is 0. The window depends on ids only, never on a visible feature.
    """
    counts = order.group_by(S.PRIMARY_CATEGORY, _POOL).agg(pl.len().cast(pl.Int64).alias(_N))
    dated = (
        order.drop_nulls(_EXISTS_FROM)
        .group_by(S.PRIMARY_CATEGORY, _POOL, _EXISTS_FROM)
        .agg(pl.len().cast(pl.Int64).alias(_EXISTING))
        .with_columns(
            pl.col(_EXISTING).cum_sum().over([S.PRIMARY_CATEGORY, _POOL], order_by=_EXISTS_FROM)
        )
        .sort(_EXISTS_FROM)
    )
    size = pl.max_horizontal(wanted * per_negative, pl.lit(WINDOW_FLOOR)).cast(pl.Int64)
    n, e = pl.col(_N), pl.col(_EXISTING).fill_null(0)
    return (
        surveys.filter(pl.col(S.SURVEY_DATE).is_not_null())
        .select(S.SURVEY_ID, S.PRIMARY_CATEGORY, S.SURVEY_DATE, size.alias("_size"))
        .join(counts, on=S.PRIMARY_CATEGORY, how="inner")
        .sort(S.SURVEY_DATE)
        .join_asof(
            dated,
            left_on=S.SURVEY_DATE,
            right_on=_EXISTS_FROM,
            by=[S.PRIMARY_CATEGORY, _POOL],
            strategy="backward",
            allow_exact_matches=False,
            check_sortedness=False,
        )
        .join(
            id_hash_frame(surveys.lazy(), S.SURVEY_ID, seed).collect().rename({_ID_HASH: "_h"}),
            on=S.SURVEY_ID,
            how="left",
        )
        .select(
            S.SURVEY_ID,
            S.PRIMARY_CATEGORY,
            _POOL,
            (pl.col("_h") * n // _U32).cast(pl.Int64).alias(_START),
            pl.when(e == 0)
            .then(0)
            .when((per_negative == 0) | (pl.col("_size") >= e))
            .then(n)
            .otherwise(pl.min_horizontal(n, (pl.col("_size") * n + e - 1) // e))
            .cast(pl.Int64)
            .alias(_LEN),
            n,
        )
        .sort(S.SURVEY_ID, _POOL)
    )


def window_pairs(survey_windows: pl.DataFrame, order: pl.DataFrame) -> pl.LazyFrame:
    """``(survey_id, work_id)`` of every window in ``survey_windows`` (:func:`windows`)."""
    return (
        survey_windows.lazy()
        .filter(pl.col(_LEN) > 0)
        .with_columns(pl.int_ranges(0, pl.col(_LEN), dtype=pl.Int64).alias(_I))
        .explode(_I)
        .with_columns(((pl.col(_START) + pl.col(_I)) % pl.col(_N)).alias(_I))
        .join(order.lazy(), on=[S.PRIMARY_CATEGORY, _POOL, _I], how="inner")
        .select(S.SURVEY_ID, S.WORK_ID)
    )


def window_rows(
    survey_windows: pl.DataFrame, order: pl.DataFrame, works: pl.DataFrame
) -> pl.DataFrame:
    """The pairs of :func:`window_pairs` with what :func:`candidate_pairs` joins onto them:
    the pool entry's :data:`POOL_COLUMNS` and the work's row of ``works`` (every column but
    ``work_id`` and ``known_date``), read by position instead of joined.

    ``order`` (:func:`pool_order`) is sorted by pool and position, so a window's entries are
    rows ``first row of the pool + (start + j) % n``; ``works`` holds one row per work
    index, in index order (:func:`work_index`), so a work's row is its index. A batch
    then costs its pairs, not the size of the pools and works tables it reads from.
    """
    firsts = (
        order.select(S.PRIMARY_CATEGORY, _POOL, _I)
        .with_row_index("_first")
        .filter(pl.col(_I) == 0)
        .drop(_I)
    )
    at = (
        survey_windows.lazy()
        .filter(pl.col(_LEN) > 0)
        .join(firsts.lazy(), on=[S.PRIMARY_CATEGORY, _POOL], how="inner")
        .with_columns(pl.int_ranges(0, pl.col(_LEN), dtype=pl.Int64).alias(_I))
        .explode(_I)
        .select(
            S.SURVEY_ID,
            (pl.col("_first") + (pl.col(_START) + pl.col(_I)) % pl.col(_N)).alias("_at"),
        )
        .collect()
    )
    entries = order.select(pl.col(S.WORK_ID, *POOL_COLUMNS).gather(at["_at"]))
    features = works.drop(S.WORK_ID, S.KNOWN_DATE).select(pl.all().gather(entries[S.WORK_ID]))
    return pl.concat([at.select(S.SURVEY_ID), entries, features], how="horizontal")


# --------------------------------------------------------------------- batches
def survey_batches(
    surveys: pl.DataFrame, pairs_per_survey: pl.DataFrame, max_surveys: int, max_pairs: int
) -> list[pl.Series]:
    """Survey ids cut into consecutive batches (in ``surveys`` order) of at most ``max_surveys``
    surveys and at most ``max_pairs`` pairs (``pairs_per_survey``: ``(survey_id, _len)``, the
    pairs a survey's windows hold, before the date and exclusion rules); a survey with more
    gets a batch of its own. Each survey's pairs depend on itself only, so the output does
    not depend on the cut."""
    sizes = (
        surveys.select(S.SURVEY_ID)
        .with_row_index("_row")
        .join(pairs_per_survey, on=S.SURVEY_ID, how="left")
        .sort("_row")
        .select(S.SURVEY_ID, pl.col(_LEN).fill_null(0))
    )
    return id_batches(sizes, max_pairs, max_surveys)


# --------------------------------------------------------------------- matching
def slots(positives: pl.DataFrame, per_positive: float) -> pl.DataFrame:
    """One row per negative wanted: ``floor(per_positive * n)`` per survey, spread over its
    positives in pair-hash order (positive ``i`` gets ``floor(r(i+1)) - floor(ri)`` slots), each
    slot carrying that positive's strata."""
    i = pl.int_range(pl.len()).over(S.SURVEY_ID, order_by=[_PAIR_HASH, S.WORK_ID])
    upto = lambda k: (k.cast(pl.Float64) * per_positive + 1e-9).floor().cast(pl.Int64)  # noqa: E731
    return (
        positives.with_columns(i.alias(_POS_RANK))
        .with_columns((upto(pl.col(_POS_RANK) + 1) - upto(pl.col(_POS_RANK))).alias("_n"))
        .filter(pl.col("_n") > 0)
        .with_columns(pl.int_ranges(0, pl.col("_n")).alias(_SLOT))
        .explode(_SLOT)
        .select(S.SURVEY_ID, _POS_RANK, _SLOT, *ROUND_COLUMNS)
    )


def match(slots_df: pl.DataFrame, pairs: pl.DataFrame, hardest: bool) -> pl.DataFrame:
    """Assign every slot a distinct candidate of its survey, stratum by stratum.

    Round ``k`` matches the slots still open with the candidates still free that agree on
    :data:`ROUNDS` ``[k]`` (round 0: every stratum column; later rounds relax the strata,
    the last one only keeps the survey). Within a round and group, slots go in positive
    order and candidates in the order: pool A before pool B, then (``hardest``) most
    co-cited first, then pair hash, then work id. Returns the chosen candidate rows with
    ``match_round``.
    """
    order = [pl.col(_POOL)]
    if hardest:
        order.append(-pl.col(_HARDNESS))
    order += [pl.col(_PAIR_HASH), pl.col(S.WORK_ID)]
    # a pair's row number: what a round takes is dropped by it, not by (survey, work) strings
    open_slots, free = slots_df, pairs.with_row_index(_ROW)
    chosen = []
    for k, keys in enumerate(ROUNDS):
        if open_slots.height == 0 or free.height == 0:
            break
        group = [S.SURVEY_ID, *keys]
        s = open_slots.with_columns(
            pl.int_range(pl.len()).over(group, order_by=[_POS_RANK, _SLOT]).alias(_RANK)
        )
        f = free.with_columns(pl.int_range(pl.len()).over(group, order_by=order).alias(_RANK))
        got = s.select(*group, _RANK, _POS_RANK, _SLOT).join(f, on=[*group, _RANK], how="inner")
        chosen.append(got.with_columns(pl.lit(k, pl.Int8).alias(S.MATCH_ROUND)))
        open_slots = open_slots.join(
            got.select(S.SURVEY_ID, _POS_RANK, _SLOT),
            on=[S.SURVEY_ID, _POS_RANK, _SLOT],
            how="anti",
        )
        # only the surveys with open slots rank their candidates again (a survey's ranks
        # depend on its own rows only): after round 0, most surveys are done
        free = free.join(got.select(_ROW), on=_ROW, how="anti").join(
            open_slots.select(S.SURVEY_ID).unique(), on=S.SURVEY_ID, how="semi"
        )
    if not chosen:
        return pairs.head(0).with_columns(pl.lit(0, pl.Int8).alias(S.MATCH_ROUND))
    return pl.concat(
        [c.drop(_RANK, _POS_RANK, _SLOT, _ROW) for c in chosen], how="diagonal_relaxed"
    )


def build_negatives(ctx: ReduceContext) -> dict[str, Any]:
    """Draw the matched hard negatives; write both outputs; return the stage counts.

    Candidate pairs are those of each survey's windows (:func:`windows`), built and matched
    in batches of surveys (:func:`survey_batches`: ``negatives.survey_batch_size`` surveys,
    :data:`BATCH_PAIRS` window pairs; a survey's pairs only depend on itself), which bounds
    memory. A batch costs its pairs, not the corpus: works are integer keys
    (:func:`work_index`), window pairs read their pool entry and work by position
    (:func:`window_rows`), and batches run in survey-date order, each reading the
    prior-count rows of its own dates plus each work's last row before them
    (:func:`pipeline.visible.prior_rows_between`, :func:`pipeline.visible.last_prior_rows`).

    Raises:
        ValueError: a ``negatives`` setting is out of range (names it and the choices).
    """
    scratch = ctx.tmp_dir / "_scratch"
    try:
        return _build_negatives(ctx, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _build_negatives(ctx: ReduceContext, scratch: Path) -> dict[str, Any]:
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
    hardest = ncfg.negative_sampling == "hardest"

    works_by_id = works_frame(ctx).collect(engine="streaming")
    surveys_all = surveys_frame(ctx).sort(S.SURVEY_ID).collect(engine="streaming")
    # what every survey cites: read once, used by the prior counts, the pools, the
    # exclusions and the co-citation hardness
    sc_by_id = survey_citations(ctx).collect(engine="streaming")
    # From here on a work is its integer index (work_index): the batches join millions of
    # pairs on it. What is written to scratch is indexed as it is written.
    index = work_index(works_by_id)
    works = indexed(works_by_id.lazy(), index).collect().lazy()
    sc = indexed(sc_by_id.lazy(), index).collect().lazy()
    parts = V.work_parts(ctx, scratch / "cites")
    corpus_prior = V.corpus_prior_counts(
        ctx, scratch / "prior", parts, rekey=lambda lf: indexed(lf, index)
    )
    positives_by_id = positive_pairs(ctx, surveys_all.lazy(), works_by_id.lazy()).collect(
        engine="streaming"
    )
    del works_by_id
    positives = indexed(positives_by_id.lazy(), index).collect()
    if positives.height != positives_by_id.height:
        raise ValueError(
            f"labels: {positives_by_id.height - positives.height} positives name a work "
            "missing from works' table; rerun works and labels"
        )
    del positives_by_id
    # the running counts of the works it needs only: the positives' here, each batch's window's
    # below (a join_asof reads its whole right side, once per batch)
    positives_all = with_strata(
        positives.lazy(),
        prior_tables(ctx, sc, works=positives.lazy(), corpus=corpus_prior),
        cites_it=True,
    ).collect(engine="streaming")
    del positives
    per_survey_pos = positives_all.group_by(S.SURVEY_ID).agg(
        (~pl.col(AFTER_SURVEY)).sum().cast(pl.Int64).alias(S.N_POSITIVES),
        pl.col(AFTER_SURVEY).sum().cast(pl.Int64).alias(S.N_POSITIVES_AFTER_SURVEY),
    )
    surveys = surveys_all.join(per_survey_pos, on=S.SURVEY_ID, how="left").with_columns(
        pl.col(S.N_POSITIVES, S.N_POSITIVES_AFTER_SURVEY).fill_null(0)
    )
    valid = positives_all.filter(~pl.col(AFTER_SURVEY))
    del positives_all
    # the pools, part by part (their group-by over every citation of the corpus peaked at
    # 4 GB over the stage's baseline at 1M papers), written to scratch and read per batch
    for i, work_part in enumerate(parts):
        part = scratch / "eligible" / f"{i:05d}.parquet"
        part.parent.mkdir(parents=True, exist_ok=True)
        indexed(eligible_works(ctx, sc_by_id.lazy(), work_part), index).collect(
            engine="streaming"
        ).write_parquet(part)
    eligible = pl.scan_parquet(sorted((scratch / "eligible").glob("*.parquet")))
    # the exclusions by identifier, whole; the title hits per batch, within its window
    cited = indexed(cited_pairs(ctx, sc_by_id.lazy()), index).collect(engine="streaming").lazy()
    del sc_by_id
    indexed(S.scan(ctx.upstream("works", "title_keys"), S.TITLE_KEYS), index).sink_parquet(
        scratch / "title_keys.parquet"
    )
    work_keys = pl.scan_parquet(scratch / "title_keys.parquet")
    survey_keys = survey_title_keys(ctx).collect(engine="streaming")
    work_hashes = indexed_hashes(
        index, pl.concat([eligible.select(S.WORK_ID), valid.lazy().select(S.WORK_ID)]), ncfg.seed
    )
    survey_hashes = id_hash_frame(surveys.lazy(), S.SURVEY_ID, ncfg.seed).rename(
        {_ID_HASH: _SURVEY_HASH}
    )

    def hashed(lf: pl.LazyFrame) -> pl.LazyFrame:
        """``lf`` with its pairs' hash (the work's hash joined, unless ``lf`` carries it)."""
        if _ID_HASH not in lf.collect_schema().names():
            lf = lf.join(work_hashes, on=S.WORK_ID, how="left")
        return (
            lf.join(survey_hashes, on=S.SURVEY_ID, how="left")
            .with_columns(
                _fmix32_expr(pl.col(_SURVEY_HASH).xor(pl.col(_ID_HASH))).alias(_PAIR_HASH)
            )
            .drop(_SURVEY_HASH, _ID_HASH)
        )

    wanted = want_negatives(pl.col(S.N_POSITIVES), ncfg.negatives_per_positive)
    order = pool_order(eligible, works, work_hashes)
    survey_windows = windows(surveys, order, wanted, ncfg.candidates_per_negative, ncfg.seed)
    pairs_per_survey = survey_windows.group_by(S.SURVEY_ID).agg(pl.col(_LEN).sum())
    # one row per work index, in index order, with its hash: what window_rows reads by position
    work_rows = works.join(work_hashes, on=S.WORK_ID, how="left").sort(S.WORK_ID).collect()
    if work_rows.height != index.height:
        raise AssertionError(f"{work_rows.height} work rows for {index.height} works")

    chosen: list[Path] = []
    n_candidates: list[Path] = []
    # Batches in survey-date order (a survey's rows depend on itself only, so the order and
    # cut do not change the output). Each batch reads the corpus count rows dated within its
    # own dates, plus each work's last row before them (`base`, carried from batch to batch):
    # the whole table (60M rows at 2.3M papers) per batch made the stage grow with the
    # square of the corpus.
    by_date = surveys.sort(S.SURVEY_DATE, S.SURVEY_ID, nulls_last=True)
    batches = survey_batches(by_date, pairs_per_survey, ncfg.survey_batch_size, BATCH_PAIRS)
    spans = [
        by_date.filter(pl.col(S.SURVEY_ID).is_in(b.implode()))
        .select(pl.col(S.SURVEY_DATE).min().alias("lo"), pl.col(S.SURVEY_DATE).max().alias("hi"))
        .row(0)
        for b in batches
    ]
    starts = [lo for lo, _ in spans if lo is not None]
    base = V.last_prior_rows(
        V.prior_rows_between(corpus_prior, None, starts[0]) if starts else corpus_prior.head(0)
    ).collect()
    for k, batch_ids in enumerate(steps(batches, "negatives: survey batches")):
        lo, hi = spans[k]
        if lo is not None:
            rows = V.prior_rows_between(corpus_prior, lo, hi).collect()
            table = pl.concat([base, rows])
        batch = surveys.filter(pl.col(S.SURVEY_ID).is_in(batch_ids.implode())).lazy()
        pos = hashed(valid.lazy().join(batch.select(S.SURVEY_ID), on=S.SURVEY_ID, how="semi"))
        batch_windows = survey_windows.filter(pl.col(S.SURVEY_ID).is_in(batch_ids.implode()))
        if hardest:
            # every co-cited work is considered, in or out of the window
            hardness = co_citation(batch, pos, sc).collect(engine="streaming").lazy()
            window = pl.concat(
                [window_pairs(batch_windows, order), hardness.select(S.SURVEY_ID, S.WORK_ID)]
            ).unique()
            window = window.collect(engine="streaming").lazy()
        else:
            gathered = window_rows(batch_windows, order, work_rows).lazy()
            window = gathered.select(S.SURVEY_ID, S.WORK_ID)
        batch_keys = survey_keys.filter(pl.col(S.SURVEY_ID).is_in(batch_ids.implode())).lazy()
        excluded = pl.concat(
            [
                cited.filter(pl.col(S.SURVEY_ID).is_in(batch_ids.implode())),
                title_hits(ctx, batch_keys, window, work_keys),
            ]
        )
        batch_prior = prior_tables(
            ctx, sc, works=window, corpus=(table if lo is not None else base.head(0)).lazy()
        )
        if hardest:
            pairs = hashed(candidate_pairs(batch, eligible, excluded, works, batch_prior, window))
        else:
            pooled = batch.filter(pl.col(S.SURVEY_DATE).is_not_null()).join(
                gathered, on=S.SURVEY_ID, how="inner"
            )
            pairs = hashed(admissible(pooled, excluded, batch_prior))
        pairs = pairs.with_columns(
            (pl.col(S.NEGATIVE_SOURCE) == SOURCE_CITED_IN_CATEGORY).cast(pl.Int8).alias(_POOL)
        )
        if hardest:
            pairs = pairs.join(hardness, on=[S.SURVEY_ID, S.WORK_ID], how="left").with_columns(
                pl.col(_HARDNESS).fill_null(0)
            )
        pos_df, pairs_df = pl.collect_all([pos, pairs], engine="streaming")
        got = match(slots(pos_df, ncfg.negatives_per_positive), pairs_df, hardest)
        # each batch's rows go to scratch files: kept in memory, their strings (views into the
        # batch's buffers) held every batch's pairs alive, 0.6 GB a batch at 1M papers
        part = scratch / "chosen" / f"{len(chosen):05d}.parquet"
        part.parent.mkdir(parents=True, exist_ok=True)
        unindexed(got, index).with_columns(pl.lit(0, pl.Int8).alias(S.LABEL)).select(
            S.NEGATIVES.names
        ).write_parquet(part)
        chosen.append(part)
        part = scratch / "candidates" / f"{len(n_candidates):05d}.parquet"
        part.parent.mkdir(parents=True, exist_ok=True)
        pairs_df.group_by(S.SURVEY_ID).agg(
            pl.len().cast(pl.Int64).alias(S.N_NEGATIVE_CANDIDATES)
        ).write_parquet(part)
        n_candidates.append(part)
        del pos_df, pairs_df, got
        later = [d for d, _ in spans[k + 1 :] if d is not None]
        if lo is not None and later:
            # each work's last row before the next batch's first date
            more = V.prior_rows_between(corpus_prior, hi, later[0]).collect()
            base = V.last_prior_rows(pl.concat([table, more]).lazy()).collect()
            del table, rows, more
    negatives = (
        pl.read_parquet(chosen).sort(S.SURVEY_ID, S.WORK_ID)
        if chosen
        else pl.DataFrame(schema=S.polars_schema(S.NEGATIVES))
    )
    candidates_per_survey = (
        pl.read_parquet(n_candidates)
        if n_candidates
        else pl.DataFrame(schema={S.SURVEY_ID: pl.String, S.N_NEGATIVE_CANDIDATES: pl.Int64})
    )
    per_survey = (
        surveys.lazy()
        .join(candidates_per_survey.lazy(), on=S.SURVEY_ID, how="left")
        .join(
            negatives.lazy()
            .group_by(S.SURVEY_ID)
            .agg(
                pl.len().cast(pl.Int64).alias(S.N_NEGATIVES),
                (pl.col(S.MATCH_ROUND) == 0).sum().cast(pl.Int64).alias(S.N_MATCHED_EXACT),
            ),
            on=S.SURVEY_ID,
            how="left",
        )
        .with_columns(
            pl.col(S.N_NEGATIVE_CANDIDATES, S.N_NEGATIVES, S.N_MATCHED_EXACT).fill_null(0)
        )
        .with_columns(
            (pl.col(S.N_NEGATIVES) > 0).alias(S.HAS_NEGATIVES),
            (wanted - pl.col(S.N_NEGATIVES)).alias(S.N_SHORTFALL),
        )
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

    def by(column: str, names: tuple[Any, ...]) -> dict[str, int]:
        got = negatives.group_by(column).len()
        return {str(k): 0 for k in names} | {str(k): int(n) for k, n in got.iter_rows()}

    return {
        "surveys": per_survey.height,
        "surveys_with_negatives": int(per_survey[S.HAS_NEGATIVES].sum()),
        "surveys_without_negatives": int((~per_survey[S.HAS_NEGATIVES]).sum()),
        "surveys_short_of_negatives": int((per_survey[S.N_SHORTFALL] > 0).sum()),
        "surveys_without_date": int(per_survey[S.SURVEY_DATE].null_count()),
        "positives": int(per_survey[S.N_POSITIVES].sum()),
        "positives_dated_after_survey_dropped": int(per_survey[S.N_POSITIVES_AFTER_SURVEY].sum()),
        "negative_candidates": int(per_survey[S.N_NEGATIVE_CANDIDATES].sum()),
        "negatives": negatives.height,
        "negatives_wanted": int(per_survey[S.N_NEGATIVES].sum() + per_survey[S.N_SHORTFALL].sum()),
        "shortfall": int(per_survey[S.N_SHORTFALL].sum()),
        "negatives_by_source": by(S.NEGATIVE_SOURCE, S.NEGATIVE_SOURCES),
        "negatives_by_match_round": by(S.MATCH_ROUND, tuple(range(len(ROUNDS)))),
        "match_rounds": {str(k): list(keys) or ["survey only"] for k, keys in enumerate(ROUNDS)},
        "negative_sampling": ncfg.negative_sampling,
    }


STAGE = Stage(
    name="negatives",
    kind="reduce",
    reads=("extract", "works", "surveys", "labels"),
    config_sections=("negatives", "extract"),
    fn=build_negatives,
    help="hard negatives per survey, matched to its positives on everything visible",
)
