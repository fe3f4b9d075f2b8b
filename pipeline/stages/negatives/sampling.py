"""How hard negatives are drawn from the candidates: stable hashes, integer work keys,
windows, batches, slots and matching.

**Hashes.** :func:`id_hash` is stable across machines, Python and Polars versions: each
id is hashed once with SHA-1 (``hashlib``; first 4 bytes, big endian, of
``f"{seed}\\x1f{id}"``), and a pair (:func:`with_pair_hash`) mixes the two with the
MurmurHash3 32-bit finaliser written in integer arithmetic that never overflows
``UInt64`` (:func:`fmix32_expr`). Polars' own ``hash`` is not used: it is documented as
unstable across versions.

**Window.** A survey does not consider the whole pool of its category (that pairs every
survey with a pool growing with the corpus: 39M pairs at 300k papers). Of each pool
(A, B) it considers a window of about ``max(candidates_per_negative * k, 1000)`` works
that existed before it, ``k`` the negatives it wants (:func:`windows`): a cyclic run of
the pool in a per-work hash order, starting where the survey's hash falls. Which works
are in a window depends on ids only, never on a visible feature, so a window is a
uniform sample of the pool; its admissible pairs are the candidates
(``n_negative_candidates`` counts them). ``candidates_per_negative = 0`` considers the
whole pool.

**Matching.** Of the candidates, ``floor(negatives_per_positive * n_positives)`` are kept
(:func:`want_negatives`; a 1e-9 tolerance absorbs float error, e.g. ``0.29 * 100``), one
per slot of a positive (:func:`slots`), matched stratum by stratum (:data:`ROUNDS`,
:func:`match`). Within a group, candidates go pool A first, then in the order the
sampling strategy prefers (:mod:`pipeline.stages.negatives.strategies`), then by pair
hash; remaining ties (32-bit hash collisions) go by work id.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import polars as pl

from pipeline.core import schema as S
from pipeline.rules import visible as V
from pipeline.rules.fields import FIELD_CATEGORIES
from pipeline.rules.tables import id_batches
from pipeline.stages.negatives.rules import (
    AGE_COARSE,
    AGE_KNOWN,
    CITATIONS_COARSE,
    EXISTS_FROM,
    FIRST_CITED,
    POOL,
    SURVEYS_COARSE,
    exists_from,
    pool,
)

_U32 = 2**32
ID_HASH = "_id_hash"
_SURVEY_HASH = "_survey_hash"
PAIR_HASH = "_pair_hash"
_RANK = "_rank"
_ROW = "_pair_row"
_W_INDEX = "_work_index"
_POS_RANK = "_positive_rank"
_SLOT = "_slot"
_EXISTING = "_existing"
POOL_POSITION = "_pool_position"
_POOL_SIZE = "_pool_size"
_START = "_window_start"
_LEN = "_window_len"
# Smallest window (works of a pool that existed before the survey) a survey considers,
# whatever few negatives it wants: fixed, so the draw never depends on a setting but
# ``negatives.candidates_per_negative``.
WINDOW_FLOOR = 1_000
# Matching rounds: the columns a slot and its negative must share, finest first.
ROUNDS: tuple[tuple[str, ...], ...] = (
    V.STRATUM_COLUMNS,
    # popularity is what a metadata-only system learns first: keep it longest
    (V.TEXT_KIND, S.IN_DOMAIN, AGE_COARSE, V.CITATIONS_BIN, V.SURVEYS_BIN),
    (V.TEXT_KIND, S.IN_DOMAIN, V.CITATIONS_BIN, V.SURVEYS_BIN),
    (V.TEXT_KIND, S.IN_DOMAIN, AGE_KNOWN, CITATIONS_COARSE, SURVEYS_COARSE),
    (V.TEXT_KIND, CITATIONS_COARSE, SURVEYS_COARSE),
    (V.TEXT_KIND, S.IN_DOMAIN, AGE_KNOWN),
    (V.TEXT_KIND,),
    (),
)
ROUND_COLUMNS = sorted({c for keys in ROUNDS for c in keys})
# the work columns a pool entry's exists_from and in_domain are computed from (pool_order)
_ENTRY_DERIVED = (S.DATE_SOURCE, S.CANDIDATE_CATEGORIES, FIELD_CATEGORIES)
# what a pool entry carries besides its work (eligible_works' columns)
POOL_COLUMNS = (S.NEGATIVE_SOURCE, FIRST_CITED, S.KNOWN_DATE, S.EARLIEST_CITING_SURVEY_DATE)


# --------------------------------------------------------------------- stable hashing
def id_hash(seed: int, value: str) -> int:
    """First 4 bytes (big endian) of ``sha1(f"{seed}\\x1f{value}")``: a stable 32-bit hash."""
    return int.from_bytes(hashlib.sha1(f"{seed}\x1f{value}".encode()).digest()[:4], "big")


def fmix32_expr(x: pl.Expr) -> pl.Expr:
    """MurmurHash3's 32-bit finaliser of a ``UInt64`` expression holding 32-bit values."""
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
        {column: values, ID_HASH: [id_hash(seed, v) for v in values]},
        schema={column: pl.String, ID_HASH: pl.UInt64},
    )


def survey_hash_frame(surveys: pl.LazyFrame, seed: int) -> pl.LazyFrame:
    """``(survey_id, _survey_hash)``: :func:`id_hash` of every survey id."""
    return id_hash_frame(surveys, S.SURVEY_ID, seed).rename({ID_HASH: _SURVEY_HASH})


def with_pair_hash(
    lf: pl.LazyFrame, work_hashes: pl.LazyFrame, survey_hashes: pl.LazyFrame
) -> pl.LazyFrame:
    """``lf`` with its pairs' hash ``_pair_hash``: ``fmix32(h(survey) xor h(work))`` of the
    survey's (``survey_hashes``: :func:`survey_hash_frame`) and the work's :func:`id_hash`
    (``work_hashes``: :func:`indexed_hashes`, joined unless ``lf`` carries ``_id_hash``)."""
    if ID_HASH not in lf.collect_schema().names():
        lf = lf.join(work_hashes, on=S.WORK_ID, how="left")
    return (
        lf.join(survey_hashes, on=S.SURVEY_ID, how="left")
        .with_columns(fmix32_expr(pl.col(_SURVEY_HASH).xor(pl.col(ID_HASH))).alias(PAIR_HASH))
        .drop(_SURVEY_HASH, ID_HASH)
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
            ID_HASH: [id_hash(seed, v) for v in ids[S.WORK_ID].to_list()],
        },
        schema={S.WORK_ID: ids.schema[_W_INDEX], ID_HASH: pl.UInt64},
    )


# --------------------------------------------------------------------- windows
def pool_order(eligible: pl.LazyFrame, works: pl.LazyFrame, hashes: pl.LazyFrame) -> pl.DataFrame:
    """Every pool (a primary category's pool A or pool B) in a per-work hash order:
    ``(primary_category, _pool, _pool_position, work_id, _exists_from, *POOL_COLUMNS)`` sorted
    by category, pool and position, the 0-based position in the order ``(id_hash(seed,
    work), work_id)`` (``hashes``: ``(work_id, _id_hash)`` of every work of ``eligible``,
    :func:`indexed_hashes`). ``_exists_from`` is the date the existence rule compares with
    (:func:`pipeline.stages.negatives.rules.exists_from`; null: never admissible);
    :data:`POOL_COLUMNS` are ``eligible``'s (:func:`window_rows` reads them by position), and
    ``in_domain`` the work's for a survey of the category (:func:`pipeline.rules.visible.in_domain_expr`)."""
    work_columns = [
        S.WORK_ID,
        S.DATE_SOURCE,
        V.WORK_PAPER,
        S.CANDIDATE_CATEGORIES,
        FIELD_CATEGORIES,
    ]
    return (
        eligible.join(works.select(work_columns), on=S.WORK_ID, how="left")
        .join(hashes, on=S.WORK_ID, how="left")
        .with_columns(
            pool(), exists_from().alias(EXISTS_FROM), V.in_domain_expr().alias(S.IN_DOMAIN)
        )
        .with_columns(
            pl.int_range(pl.len())
            .over([S.PRIMARY_CATEGORY, POOL], order_by=[ID_HASH, S.WORK_ID])
            .cast(pl.Int64)
            .alias(POOL_POSITION)
        )
        .select(
            S.PRIMARY_CATEGORY,
            POOL,
            POOL_POSITION,
            S.WORK_ID,
            EXISTS_FROM,
            S.IN_DOMAIN,
            *POOL_COLUMNS,
        )
        .sort(S.PRIMARY_CATEGORY, POOL, POOL_POSITION)
        .collect(engine="streaming")
    )


def windows(
    surveys: pl.DataFrame, order: pl.DataFrame, wanted: pl.Expr, per_negative: int, seed: int
) -> pl.DataFrame:
    """Per survey and pool of its category, the window of the pool it considers:
    ``(survey_id, primary_category, _pool, _window_start, _window_len, _pool_size)``.

    A survey wanting ``k`` negatives considers, of each pool, about
    ``size = max(per_negative * k, WINDOW_FLOOR)`` works that existed before it: of the
    ``e`` works of the pool that do (``n`` in all), the ``ceil(size * n / e)`` consecutive
    ones (cyclically) from position ``floor(h * n / 2**32)`` of the pool's hash order, ``h``
    the survey's id hash; the whole pool when ``size >= e``, and every pool when
    ``per_negative`` is 0. The window depends on ids only, never on a visible feature.
    """
    counts = order.group_by(S.PRIMARY_CATEGORY, POOL).agg(pl.len().cast(pl.Int64).alias(_POOL_SIZE))
    dated = (
        order.drop_nulls(EXISTS_FROM)
        .group_by(S.PRIMARY_CATEGORY, POOL, EXISTS_FROM)
        .agg(pl.len().cast(pl.Int64).alias(_EXISTING))
        .with_columns(
            pl.col(_EXISTING).cum_sum().over([S.PRIMARY_CATEGORY, POOL], order_by=EXISTS_FROM)
        )
        .sort(EXISTS_FROM)
    )
    size = pl.max_horizontal(wanted * per_negative, pl.lit(WINDOW_FLOOR)).cast(pl.Int64)
    n, e = pl.col(_POOL_SIZE), pl.col(_EXISTING).fill_null(0)
    return (
        surveys.filter(pl.col(S.SURVEY_DATE).is_not_null())
        .select(S.SURVEY_ID, S.PRIMARY_CATEGORY, S.SURVEY_DATE, size.alias("_size"))
        .join(counts, on=S.PRIMARY_CATEGORY, how="inner")
        .sort(S.SURVEY_DATE)
        .join_asof(
            dated,
            left_on=S.SURVEY_DATE,
            right_on=EXISTS_FROM,
            by=[S.PRIMARY_CATEGORY, POOL],
            strategy="backward",
            allow_exact_matches=False,
            check_sortedness=False,
        )
        .join(
            id_hash_frame(surveys.lazy(), S.SURVEY_ID, seed).collect().rename({ID_HASH: "_h"}),
            on=S.SURVEY_ID,
            how="left",
        )
        .select(
            S.SURVEY_ID,
            S.PRIMARY_CATEGORY,
            POOL,
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
        .sort(S.SURVEY_ID, POOL)
    )


def window_pairs(survey_windows: pl.DataFrame, order: pl.DataFrame) -> pl.LazyFrame:
    """``(survey_id, work_id)`` of every window in ``survey_windows`` (:func:`windows`)."""
    return (
        survey_windows.lazy()
        .filter(pl.col(_LEN) > 0)
        .with_columns(pl.int_ranges(0, pl.col(_LEN), dtype=pl.Int64).alias(POOL_POSITION))
        .explode(POOL_POSITION)
        .with_columns(
            ((pl.col(_START) + pl.col(POOL_POSITION)) % pl.col(_POOL_SIZE)).alias(POOL_POSITION)
        )
        .join(order.lazy(), on=[S.PRIMARY_CATEGORY, POOL, POOL_POSITION], how="inner")
        .select(S.SURVEY_ID, S.WORK_ID)
    )


def window_rows(
    survey_windows: pl.DataFrame, order: pl.DataFrame, works: pl.DataFrame
) -> pl.DataFrame:
    """The pairs of :func:`window_pairs` with what
    :func:`pipeline.stages.negatives.rules.candidate_pairs` joins onto them: the pool entry's
    :data:`POOL_COLUMNS`, ``_exists_from`` and ``in_domain``, and the work's row of ``works``
    (every column but ``work_id``, ``known_date`` and those the entry's two are computed
    from), read by position instead of joined.

    ``order`` (:func:`pool_order`) is sorted by pool and position, so a window's entries are
    rows ``first row of the pool + (start + j) % n``; ``works`` holds one row per work
    index, in index order (:func:`work_index`), so a work's row is its index. A batch
    then costs its pairs, not the size of the pools and works tables it reads from.
    """
    firsts = (
        order.select(S.PRIMARY_CATEGORY, POOL, POOL_POSITION)
        .with_row_index("_first")
        .filter(pl.col(POOL_POSITION) == 0)
        .drop(POOL_POSITION)
    )
    at = (
        survey_windows.lazy()
        .filter(pl.col(_LEN) > 0)
        .join(firsts.lazy(), on=[S.PRIMARY_CATEGORY, POOL], how="inner")
        .with_columns(pl.int_ranges(0, pl.col(_LEN), dtype=pl.Int64).alias(POOL_POSITION))
        .explode(POOL_POSITION)
        .select(
            S.SURVEY_ID,
            (
                pl.col("_first") + (pl.col(_START) + pl.col(POOL_POSITION)) % pl.col(_POOL_SIZE)
            ).alias("_at"),
        )
        .collect()
    )
    entries = order.select(
        pl.col(S.WORK_ID, EXISTS_FROM, S.IN_DOMAIN, *POOL_COLUMNS).gather(at["_at"])
    )
    # what the entry carries already (its date, in_domain) is not read again per pair
    features = works.drop(S.WORK_ID, S.KNOWN_DATE, *_ENTRY_DERIVED, strict=False).select(
        pl.all().gather(entries[S.WORK_ID])
    )
    return pl.concat([at.select(S.SURVEY_ID), entries, features], how="horizontal")


# --------------------------------------------------------------------- batches
def survey_batches(
    surveys: pl.DataFrame, survey_windows: pl.DataFrame, max_surveys: int, max_pairs: int
) -> list[pl.Series]:
    """Survey ids cut into consecutive batches (in ``surveys`` order) of at most ``max_surveys``
    surveys and at most ``max_pairs`` pairs (the pairs a survey's windows hold,
    ``survey_windows``: :func:`windows`, before the date and exclusion rules); a survey with
    more gets a batch of its own. Each survey's pairs depend on itself only, so the output
    does not depend on the cut."""
    pairs_per_survey = survey_windows.group_by(S.SURVEY_ID).agg(pl.col(_LEN).sum())
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
    i = pl.int_range(pl.len()).over(S.SURVEY_ID, order_by=[PAIR_HASH, S.WORK_ID])
    upto = lambda k: (k.cast(pl.Float64) * per_positive + 1e-9).floor().cast(pl.Int64)  # noqa: E731
    return (
        positives.with_columns(i.alias(_POS_RANK))
        .with_columns((upto(pl.col(_POS_RANK) + 1) - upto(pl.col(_POS_RANK))).alias("_n"))
        .filter(pl.col("_n") > 0)
        .with_columns(pl.int_ranges(0, pl.col("_n")).alias(_SLOT))
        .explode(_SLOT)
        .select(S.SURVEY_ID, _POS_RANK, _SLOT, *ROUND_COLUMNS)
    )


def match(
    slots_df: pl.DataFrame, pairs: pl.DataFrame, prefer: Sequence[pl.Expr] = ()
) -> pl.DataFrame:
    """Assign every slot a distinct candidate of its survey, stratum by stratum.

    Round ``k`` matches the slots still open with the candidates still free that agree on
    :data:`ROUNDS` ``[k]`` (round 0: every stratum column; later rounds relax the strata,
    the last one only keeps the survey). Within a round and group, slots go in positive
    order and candidates in the order: pool A before pool B, then ``prefer`` (the sampling
    strategy's, e.g. most co-cited first), then pair hash, then work id. Returns the chosen
    candidate rows with ``match_round``.
    """
    order = [pl.col(POOL), *prefer, pl.col(PAIR_HASH), pl.col(S.WORK_ID)]
    keys = [S.SURVEY_ID, *ROUND_COLUMNS]
    by = list(dict.fromkeys(name for e in order for name in e.meta.root_names()))
    # the rounds rank and join narrow frames of integer codes; the chosen rows are read from
    # ``pairs`` by row number at the end: ranking the wide pairs with their string keys held
    # 3.6 GB over the batch at 300k papers. A survey without slots takes no candidate.
    open_slots = slots_df.select(_POS_RANK, _SLOT, *keys)
    free = (
        pairs.select(*keys, *(c for c in by if c not in keys))
        .with_row_index(_ROW)
        .join(open_slots.select(S.SURVEY_ID).unique(), on=S.SURVEY_ID, how="semi")
    )
    for column in keys:
        if open_slots.schema[column] == pl.String:
            open_slots, free = _coded(open_slots, free, column)
    chosen = []
    for k, keys_k in enumerate(ROUNDS):
        if open_slots.height == 0 or free.height == 0:
            break
        group = [S.SURVEY_ID, *keys_k]
        s = open_slots.with_columns(
            pl.int_range(pl.len()).over(group, order_by=[_POS_RANK, _SLOT]).alias(_RANK)
        )
        # only the candidates of a group with open slots can be taken: the others are not
        # ranked (a group's ranks depend on its own rows; a null key matches nothing either way)
        f = free.join(s.select(group).unique(), on=group, how="semi").with_columns(
            pl.int_range(pl.len()).over(group, order_by=order).alias(_RANK)
        )
        got = s.select(*group, _RANK, _POS_RANK, _SLOT).join(
            f.select(*group, _RANK, _ROW), on=[*group, _RANK], how="inner"
        )
        chosen.append(got.select(_ROW, pl.lit(k, pl.Int8).alias(S.MATCH_ROUND)))
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
    rows = pl.concat(chosen)
    return pairs.select(pl.all().gather(rows[_ROW])).with_columns(rows[S.MATCH_ROUND])


def _coded(
    slots_df: pl.DataFrame, pairs: pl.DataFrame, column: str
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Both frames with the string ``column`` replaced by one integer code per value (the
    same in both; null stays null, so it still matches nothing in a join)."""
    values = pl.concat([slots_df[column], pairs[column]]).drop_nulls().unique()
    codes = pl.int_range(values.len(), dtype=pl.UInt32, eager=True)
    code = pl.col(column).replace_strict(values, codes, return_dtype=pl.UInt32)
    return slots_df.with_columns(code), pairs.with_columns(code)
