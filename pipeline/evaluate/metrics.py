"""Metric registry and vectorised per-survey metric computation.

Every metric has a canonical name (``ndcg@10``, ``recall@10_tier>=3``, ...), lives in
one registry built by :func:`metric_registry` for the configured cutoffs, and
carries a ``doc`` that states its formula. Unknown names raise
:class:`UnknownMetricError`, whose message lists the registry's names.

Labels are the survey's judgments of each candidate: 0 = hard negative,
1 = background, 2 = tool/method, 3 = related work, 4 = essential
(``pipeline.schema.LABEL_NAMES``). "Relevant" means label >= 1 unless a metric says
otherwise. A tier in a name always carries its comparison: ``_tier>=3`` is label 3 or
4, ``_tier=3`` label 3 exactly (``recall@10_tier>=3`` vs ``recall@10_tier=3``).
:func:`metric_aliases` gives the trec_eval and ir_measures name of each metric that
has one (recorded in ``eval_results.json``).

Ranking rule (ties are deterministic and neutral): within a survey, candidates are
ordered by score descending; equal scores are ordered by the tie key
:func:`tie_key` of (survey_id, candidate_id) ascending, then by candidate_id
ascending (only reached if two tie keys are equal); judged candidates that a run
does not score (score null) come after every scored candidate, ordered among
themselves by the same two keys. The tie key is a pseudo-random permutation of a
survey's candidates that carries no information from the form of the ids (labels
correlate with the id type ``arxiv:`` / ``doi:`` / ``openalex:``, so ordering ties by
the id itself would not be neutral), and it is the same on every machine, Python
and Polars version and run (BLAKE2b and fixed 64-bit arithmetic; neither Python's
``hash()`` nor Polars' ``.hash()``). ``hard_negative_auc`` compares scores, not
ranks, so equal scores (and unscored candidates among themselves) count as half a
correctly ordered pair.

trec_eval orders equal scores by docid descending, so values agree with
trec_eval / pytrec_eval for runs without ties (within a survey) only.

Computation is one Polars query per call: group by survey, sort each group by the
rule above, explode back to one row per (survey, rank), derive rank-level columns
with window-free cumulative sums, then one ``group_by(survey).agg`` of filtered
sums from which each metric is a column expression. No Python loop over surveys.
Tie keys are computed only for the rows that share their survey and score with
another row: one BLAKE2b digest in Python per distinct id among them, combined in
Polars with wrapping UInt64 arithmetic.
"""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from types import MappingProxyType

import numpy as np
import polars as pl

from pipeline.config import EvaluateConfig
from pipeline.evaluate.columns import CANDIDATE_ID, LABEL, SCORE, SURVEY_ID

NEGATIVE_LABEL = 0
RELEVANT_LABEL = 1
TIER3_LABEL = 3
ESSENTIAL_LABEL = 4
TIERS = (1, 2, 3, 4)
FIXED_CUTOFF = 10  # essential_ndcg@10 and relevant_ndcg@10 use this cutoff whatever the config's ks

TIE_BREAKING = (
    "Within a survey, candidates are ranked by score descending. Equal scores are ordered by a "
    "tie key, a fixed pseudo-random function of (survey_id, candidate_id), ascending, then by "
    "candidate_id ascending (reached only if two tie keys are equal); so a tie carries no "
    "information from the ids (such as their arxiv:/doi:/openalex: prefix) and is broken the "
    "same way on every machine, version and run. tie_key = splitmix64(h(survey_id) XOR "
    "h(candidate_id)), where h(x) is the 8-byte BLAKE2b digest of the UTF-8 bytes of x read as a "
    "little-endian unsigned 64-bit integer and splitmix64(z) is z ^= z >> 30; z *= "
    "0xBF58476D1CE4E5B9; z ^= z >> 27; z *= 0x94D049BB133111EB; z ^= z >> 31 (modulo 2^64). "
    "Judged candidates missing from a run are ranked after all scored candidates, among "
    "themselves by the same tie key. trec_eval orders equal scores by docid descending, so "
    "agreement with trec_eval/pytrec_eval holds for runs without ties. hard_negative_auc "
    "compares scores, not ranks: a (positive, hard negative) pair with equal scores, or with "
    "both candidates missing from the run, counts 0.5."
)

MAIN_METRICS = (
    "ndcg@10",
    "ndcg@20",
    "recall@10_tier>=3",
    "mrr_tier>=3",
    "map",
    "hard_negative_auc",
    "essential_ndcg@10",
    "relevant_ndcg@10",
)

# Rank-level and aggregate helper columns; the leading underscore keeps them
# apart from any metric or input column.
_GROUP = "_survey_index"
_RANK = "_rank"
_DISC = "_discount"
_CUM_REL = "_relevant_so_far"
_AUC_WINS = "_negatives_beaten"
_TIE_KEY = "_tie_key"
_TIED = "_tied"
_SURVEY_HASH = "_survey_hash"
_CANDIDATE_HASH = "_candidate_hash"

# splitmix64 finaliser constants (Steele, Lea and Flood 2014; Vigna's splitmix64.c)
_MASK64 = (1 << 64) - 1
_MIX_MULTIPLIERS = (0xBF58476D1CE4E5B9, 0x94D049BB133111EB)
_MIX_SHIFTS = (30, 27, 31)


class UnknownMetricError(ValueError):
    """A metric name that is not in the registry (the message lists the available names)."""


@dataclass(frozen=True, eq=False)
class Metric:
    """One registered metric.

    Attributes:
        name: canonical name, e.g. ``ndcg@10``.
        doc: the formula and the rule for excluding a survey.
        value: Polars expression over the per-survey aggregates; null when the
            survey is excluded from this metric.
        needs: names of the per-survey aggregates ``value`` reads.
    """

    name: str
    doc: str
    value: pl.Expr
    needs: tuple[str, ...]


# ----------------------------------------------------------------- aggregates
def _n_ge(t: int) -> str:
    return f"_n_label_ge{t}"


def _n_eq(t: int) -> str:
    return f"_n_label_eq{t}"


def _aggregates(cutoffs: Sequence[int]) -> dict[str, pl.Expr]:
    """Per-survey aggregates over rank-ordered rows (evaluated inside ``group_by.agg``)."""
    label = pl.col(LABEL)
    rank = pl.col(_RANK)
    disc = pl.col(_DISC)
    aggs: dict[str, pl.Expr] = {}
    for t in TIERS:
        aggs[_n_ge(t)] = (label >= t).sum()
    for t in (NEGATIVE_LABEL, *TIERS):
        aggs[_n_eq(t)] = (label == t).sum()
    # ideal gain at rank r = number of tiers t whose count of labels >= t reaches r,
    # i.e. the label at rank r of the judgments sorted by label. Summing it in the
    # same order as the DCG makes a perfect ranking score exactly 1.0.
    ideal_gain = pl.sum_horizontal([(rank <= (label >= t).sum()).cast(pl.Float64) for t in TIERS])
    for k in cutoffs:
        top = rank <= k
        aggs[f"_dcg@{k}"] = (label.cast(pl.Float64) * disc).filter(top).sum()
        aggs[f"_idcg@{k}"] = (ideal_gain * disc).filter(top).sum()
        aggs[f"_hits_ge{RELEVANT_LABEL}@{k}"] = ((label >= RELEVANT_LABEL) & top).sum()
        aggs[f"_hits_ge{TIER3_LABEL}@{k}"] = ((label >= TIER3_LABEL) & top).sum()
        for t in TIERS:
            aggs[f"_hits_eq{t}@{k}"] = ((label == t) & top).sum()
    relevant = label >= RELEVANT_LABEL
    aggs["_ap_sum"] = (pl.col(_CUM_REL) / rank).filter(relevant).sum()
    aggs["_rprec_hits"] = (relevant & (rank <= relevant.sum())).sum()
    aggs["_first_rank_ge3"] = rank.filter(label >= TIER3_LABEL).min()
    aggs["_auc_wins_ge1"] = pl.col(_AUC_WINS).filter(relevant).sum()
    for t in TIERS:
        aggs[f"_auc_wins_eq{t}"] = pl.col(_AUC_WINS).filter(label == t).sum()
    k = FIXED_CUTOFF
    essential = label == ESSENTIAL_LABEL
    tier3 = label >= TIER3_LABEL
    aggs[f"_essential_dcg@{k}"] = disc.filter(essential & (rank <= k)).sum()
    aggs[f"_essential_idcg@{k}"] = disc.filter((rank <= essential.sum()) & (rank <= k)).sum()
    aggs[f"_tier3_dcg@{k}"] = disc.filter(tier3 & (rank <= k)).sum()
    aggs[f"_tier3_idcg@{k}"] = disc.filter((rank <= tier3.sum()) & (rank <= k)).sum()
    return aggs


def _where(condition: str, value: pl.Expr) -> pl.Expr:
    return pl.when(pl.col(condition) > 0).then(value)


def _ratio(numerator: str, denominator: str) -> pl.Expr:
    return _where(denominator, pl.col(numerator).cast(pl.Float64) / pl.col(denominator))


def _doc(fn: Callable[..., Metric], **values: object) -> str:
    return inspect.cleandoc(fn.__doc__ or "").format(**values)


# ----------------------------------------------------------------- metric families
def _ndcg(k: int) -> Metric:
    """nDCG@{k} = DCG@{k} / IDCG@{k}, DCG@{k} = sum over ranks r <= {k} of label(r) / log2(r + 1).

    Gain is the label itself (0-4, linear, as trec_eval's ndcg_cut); IDCG@{k} is the
    DCG@{k} of all judged candidates of the survey sorted by label descending.
    A survey with no candidate of label >= 1 is excluded.
    """
    return Metric(
        f"ndcg@{k}",
        _doc(_ndcg, k=k),
        _where(_n_ge(1), pl.col(f"_dcg@{k}") / pl.col(f"_idcg@{k}")),
        (_n_ge(1), f"_dcg@{k}", f"_idcg@{k}"),
    )


def _recall(k: int) -> Metric:
    """recall@{k} = |{{label >= 1}} in the top {k}| / |{{label >= 1}} among the survey's judged candidates|.

    A survey with no candidate of label >= 1 is excluded. A perfect ranking reaches
    min({k}, R) / R when the survey has R > {k} relevant candidates.
    """
    return Metric(
        f"recall@{k}",
        _doc(_recall, k=k),
        _ratio(f"_hits_ge1@{k}", _n_ge(1)),
        (_n_ge(1), f"_hits_ge1@{k}"),
    )


def _recall_tier3(k: int) -> Metric:
    """recall@{k}_tier>=3 = |{{label >= 3}} in the top {k}| / |{{label >= 3}} among the judged candidates|.

    Relevant = related work or essential (label 3 or 4). A survey with no such
    candidate is excluded.
    """
    return Metric(
        f"recall@{k}_tier>=3",
        _doc(_recall_tier3, k=k),
        _ratio(f"_hits_ge3@{k}", _n_ge(3)),
        (_n_ge(3), f"_hits_ge3@{k}"),
    )


def _recall_tier_exact(k: int, t: int) -> Metric:
    """recall@{k}_tier={t} = |{{label == {t}}} in the top {k}| / |{{label == {t}}} among the judged candidates|.

    Recall restricted to tier {t} exactly (not "at least"); a survey with no
    candidate of label {t} is excluded.
    """
    return Metric(
        f"recall@{k}_tier={t}",
        _doc(_recall_tier_exact, k=k, t=t),
        _ratio(f"_hits_eq{t}@{k}", _n_eq(t)),
        (_n_eq(t), f"_hits_eq{t}@{k}"),
    )


def _mrr_tier3() -> Metric:
    """mrr_tier>=3 = 1 / (rank of the first candidate with label >= 3).

    Averaged over surveys this is the mean reciprocal rank (trec_eval's recip_rank
    with relevance level 3). A survey with no candidate of label >= 3 is excluded.
    """
    return Metric(
        "mrr_tier>=3",
        _doc(_mrr_tier3),
        _where(_n_ge(3), 1.0 / pl.col("_first_rank_ge3").cast(pl.Float64)),
        (_n_ge(3), "_first_rank_ge3"),
    )


def _map() -> Metric:
    """map = (sum over ranks r holding a candidate with label >= 1 of precision@r) / R.

    Binary relevance label >= 1; R = number of judged candidates with label >= 1
    (average precision as trec_eval's map; macro-averaged over surveys). A survey
    with R = 0 is excluded.
    """
    return Metric("map", _doc(_map), _ratio("_ap_sum", _n_ge(1)), (_n_ge(1), "_ap_sum"))


def _r_precision() -> Metric:
    """r_precision = |{{label >= 1}} in the top R| / R, R = number of judged candidates with label >= 1.

    As trec_eval's Rprec. A survey with R = 0 is excluded.
    """
    return Metric(
        "r_precision",
        _doc(_r_precision),
        _ratio("_rprec_hits", _n_ge(1)),
        (_n_ge(1), "_rprec_hits"),
    )


def _auc(n_positive: str, wins: str) -> pl.Expr:
    pairs = pl.col(n_positive).cast(pl.Float64) * pl.col(_n_eq(NEGATIVE_LABEL)).cast(pl.Float64)
    return pl.when(pairs > 0).then(pl.col(wins) / pairs)


def _hard_negative_auc() -> Metric:
    """hard_negative_auc = (#pairs with s(p) > s(n) + 0.5 * #pairs with s(p) = s(n)) / (P * N).

    Pairs (p, n) of a positive (label >= 1) and a hard negative (label 0) of the
    same survey; s is the run's score, candidates missing from the run share the
    lowest score. P, N = numbers of positives and hard negatives. A survey with
    P = 0 or N = 0 is excluded.
    """
    return Metric(
        "hard_negative_auc",
        _doc(_hard_negative_auc),
        _auc(_n_ge(1), "_auc_wins_ge1"),
        (_n_ge(1), _n_eq(NEGATIVE_LABEL), "_auc_wins_ge1"),
    )


def _hard_negative_auc_tier(t: int) -> Metric:
    """hard_negative_auc_tier={t} = hard_negative_auc with positives restricted to label == {t}.

    (#pairs with s(p) > s(n) + 0.5 * #pairs with s(p) = s(n)) / (P{t} * N) over pairs
    of a label-{t} candidate p and a hard negative n (label 0); missing candidates
    share the lowest score. A survey with P{t} = 0 or N = 0 is excluded.
    """
    return Metric(
        f"hard_negative_auc_tier={t}",
        _doc(_hard_negative_auc_tier, t=t),
        _auc(_n_eq(t), f"_auc_wins_eq{t}"),
        (_n_eq(t), _n_eq(NEGATIVE_LABEL), f"_auc_wins_eq{t}"),
    )


def _essential_ndcg() -> Metric:
    """essential_ndcg@{k} = DCG@{k} / IDCG@{k} with binary gain 1 for label == 4 (essential), else 0.

    DCG@{k} = sum over ranks r <= {k} holding an essential candidate of 1 / log2(r + 1);
    IDCG@{k} = sum over r <= min({k}, E) of 1 / log2(r + 1), E = number of essential
    candidates. A survey with E = 0 is excluded.
    """
    k = FIXED_CUTOFF
    return Metric(
        f"essential_ndcg@{k}",
        _doc(_essential_ndcg, k=k),
        _where(
            _n_eq(ESSENTIAL_LABEL), pl.col(f"_essential_dcg@{k}") / pl.col(f"_essential_idcg@{k}")
        ),
        (_n_eq(ESSENTIAL_LABEL), f"_essential_dcg@{k}", f"_essential_idcg@{k}"),
    )


def _relevant_ndcg() -> Metric:
    """relevant_ndcg@{k} = DCG@{k} / IDCG@{k} with binary gain 1 for label >= 3, else 0.

    DCG@{k} = sum over ranks r <= {k} holding a label >= 3 candidate of 1 / log2(r + 1);
    IDCG@{k} = sum over r <= min({k}, R3) of 1 / log2(r + 1), R3 = number of label >= 3
    candidates. A survey with R3 = 0 is excluded.
    """
    k = FIXED_CUTOFF
    return Metric(
        f"relevant_ndcg@{k}",
        _doc(_relevant_ndcg, k=k),
        _where(_n_ge(3), pl.col(f"_tier3_dcg@{k}") / pl.col(f"_tier3_idcg@{k}")),
        (_n_ge(3), f"_tier3_dcg@{k}", f"_tier3_idcg@{k}"),
    )


# ----------------------------------------------------------------- registry
def _default_ks() -> tuple[int, ...]:
    return tuple(EvaluateConfig().ks)


@lru_cache(maxsize=16)
def _registry(ks: tuple[int, ...]) -> Mapping[str, Metric]:
    metrics: list[Metric] = [_ndcg(k) for k in ks]
    metrics += [_recall(k) for k in ks]
    metrics += [_recall_tier3(k) for k in ks]
    metrics += [_recall_tier_exact(k, t) for k in ks for t in TIERS]
    metrics += [_mrr_tier3(), _map(), _r_precision(), _hard_negative_auc()]
    metrics += [_hard_negative_auc_tier(t) for t in TIERS]
    metrics += [_essential_ndcg(), _relevant_ndcg()]
    return MappingProxyType({m.name: m for m in metrics})


def metric_registry(ks: Sequence[int] | None = None) -> Mapping[str, Metric]:
    """Every metric, by canonical name, for cutoffs ``ks`` (default ``EvaluateConfig().ks``).

    Args:
        ks: cutoffs K of ``ndcg@K``, ``recall@K``, ``recall@K_tier>=3`` and ``recall@K_tier=t``.

    Returns:
        Read-only mapping name -> :class:`Metric`, in a fixed order.

    Raises:
        ValueError: a cutoff is not a positive integer.
    """
    cutoffs = _default_ks() if ks is None else tuple(ks)
    bad = [k for k in cutoffs if not isinstance(k, int) or isinstance(k, bool) or k < 1]
    if bad:
        raise ValueError(f"cutoffs must be positive integers, got {bad}")
    return _registry(tuple(sorted(set(cutoffs))))


def resolve_metrics(
    names: Iterable[str] | None = None, ks: Sequence[int] | None = None
) -> list[Metric]:
    """Metrics by canonical name; all of them when ``names`` is None.

    Raises:
        UnknownMetricError: a name is not in the registry; the message lists the available names.
    """
    registry = metric_registry(ks)
    if names is None:
        return list(registry.values())
    wanted = list(dict.fromkeys(names))
    unknown = [n for n in wanted if n not in registry]
    if unknown:
        # recall@K_tier3 and mrr_tier3 were renamed so that ">=" cannot be misread as "="
        renamed = [
            f"{n} is now {n.removesuffix('_tier3')}_tier>=3"
            for n in unknown
            if n.endswith("_tier3")
        ]
        hint = f" ({'; '.join(renamed)})" if renamed else ""
        raise UnknownMetricError(
            f"unknown metric(s) {unknown}{hint}; available: {', '.join(registry)}"
        )
    return [registry[n] for n in wanted]


def metric_aliases(ks: Sequence[int] | None = None) -> dict[str, dict[str, str]]:
    """trec_eval and ir_measures names of the metrics that have one, by canonical name.

    Equal by test (``tests/test_evaluate_metrics.py`` against pytrec_eval) on runs
    without ties; trec_eval breaks ties by docid descending, this module by its tie key.
    """
    registry = metric_registry(ks)
    aliases: dict[str, dict[str, str]] = {}
    for name in registry:
        if name.startswith("ndcg@"):
            k = name.split("@")[1]
            aliases[name] = {"trec_eval": f"ndcg_cut.{k}", "ir_measures": f"nDCG@{k}"}
        elif name.startswith("recall@") and "_tier" not in name:
            k = name.split("@")[1]
            aliases[name] = {"trec_eval": f"recall.{k}", "ir_measures": f"R@{k}"}
        elif name.startswith("recall@") and name.endswith("_tier>=3"):
            k = name.split("@")[1].split("_")[0]
            aliases[name] = {"trec_eval": f"-l 3 recall.{k}", "ir_measures": f"R(rel=3)@{k}"}
    aliases["mrr_tier>=3"] = {"trec_eval": "-l 3 recip_rank", "ir_measures": "RR(rel=3)"}
    aliases["map"] = {"trec_eval": "map", "ir_measures": "AP"}
    aliases["r_precision"] = {"trec_eval": "Rprec", "ir_measures": "Rprec"}
    return aliases


def main_metrics(ks: Sequence[int] | None = None) -> list[str]:
    """The headline metrics of the report that exist for cutoffs ``ks``."""
    registry = metric_registry(ks)
    return [m for m in MAIN_METRICS if m in registry]


# ----------------------------------------------------------------- tie keys
def id_hash64(value: str) -> int:
    """h(value): the 8-byte BLAKE2b digest of the UTF-8 bytes of ``value``, little-endian."""
    digest = hashlib.blake2b(value.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little")


def splitmix64(z: int) -> int:
    """The splitmix64 finaliser of a 64-bit unsigned integer (arithmetic modulo 2**64)."""
    (m1, m2), (s1, s2, s3) = _MIX_MULTIPLIERS, _MIX_SHIFTS
    z ^= z >> s1
    z = (z * m1) & _MASK64
    z ^= z >> s2
    z = (z * m2) & _MASK64
    return z ^ (z >> s3)


def tie_key(survey_id: str, candidate_id: str) -> int:
    """The tie key of a (survey, candidate) pair: splitmix64(h(survey_id) XOR h(candidate_id)).

    Equal scores within a survey are ordered by this key ascending (then by
    candidate_id). It depends on the two ids only, through BLAKE2b and fixed 64-bit
    arithmetic, so it is the same on every machine, Python and Polars version and
    run. This is the scalar reference; ranking uses the vectorised :func:`tie_keys`.
    """
    return splitmix64(id_hash64(survey_id) ^ id_hash64(candidate_id))


def _hash_ids(ids: pl.Series, column: str) -> pl.DataFrame:
    """``ids`` (distinct strings) with h(id) (see :func:`id_hash64`) as UInt64 column ``column``."""
    blake2b = hashlib.blake2b
    digests = b"".join([blake2b(v.encode("utf-8"), digest_size=8).digest() for v in ids.to_list()])
    # "<u8": the 8 digest bytes read as a little-endian uint64 on any machine, as id_hash64
    hashes = np.frombuffer(digests, dtype="<u8").astype(np.uint64)
    return pl.DataFrame({ids.name: ids, column: pl.Series(hashes, dtype=pl.UInt64)})


def _splitmix64_expr(z: pl.Expr) -> pl.Expr:
    """:func:`splitmix64` on a UInt64 expression (Polars UInt64 arithmetic wraps)."""
    (m1, m2), (s1, s2, s3) = _MIX_MULTIPLIERS, _MIX_SHIFTS

    def shifted(x: pl.Expr, bits: int) -> pl.Expr:  # logical right shift
        return x // pl.lit(1 << bits, dtype=pl.UInt64)

    z = (z ^ shifted(z, s1)) * pl.lit(m1, dtype=pl.UInt64)
    z = (z ^ shifted(z, s2)) * pl.lit(m2, dtype=pl.UInt64)
    return z ^ shifted(z, s3)


def _unique(frame: pl.DataFrame, column: str) -> pl.Series:
    # the lazy engine's unique ran about twice as fast as Series.unique in bench/bench_eval.py
    return frame.lazy().select(pl.col(column).unique()).collect().to_series()


def _add_tie_keys(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` (with ``survey_id``, ``candidate_id``) plus ``_tie_key``; row order NOT kept.

    One BLAKE2b digest in Python per distinct survey id and per distinct candidate
    id, joined onto the rows and mixed with wrapping UInt64 arithmetic in Polars.
    """
    surveys = _hash_ids(_unique(frame, SURVEY_ID), _SURVEY_HASH)
    candidates = _hash_ids(_unique(frame, CANDIDATE_ID), _CANDIDATE_HASH)
    return (
        frame.lazy()
        # no maintain_order: the ranking sorts by its keys anyway, and keeping the
        # order doubled the cost of the candidate join
        .join(surveys.lazy(), on=SURVEY_ID, how="left")
        .join(candidates.lazy(), on=CANDIDATE_ID, how="left")
        .with_columns(
            _splitmix64_expr(pl.col(_SURVEY_HASH) ^ pl.col(_CANDIDATE_HASH)).alias(_TIE_KEY)
        )
        .drop(_SURVEY_HASH, _CANDIDATE_HASH)
        .collect()
    )


def tie_keys(pairs: pl.DataFrame) -> pl.Series:
    """:func:`tie_key` of every (``survey_id``, ``candidate_id``) row of ``pairs``, in row order.

    The vectorised computation the ranking uses, as a UInt64 Series.
    """
    row = "_row"
    return (
        _add_tie_keys(pairs.select(SURVEY_ID, CANDIDATE_ID).with_row_index(row))
        .sort(row)[_TIE_KEY]
        .rename("tie_key")
    )


def _with_tie_keys(frame: pl.DataFrame) -> tuple[pl.DataFrame, bool]:
    """``frame`` with a ``_tie_key`` column, and whether any score is tied within a survey.

    The key only matters between rows of equal score in the same survey, so it is
    computed for those rows alone (0 elsewhere): a run without ties pays for one
    duplicate check. Row order is not kept.
    """
    tied = pl.col(SCORE).is_duplicated().over(SURVEY_ID)
    flagged = frame.with_columns(tied.alias(_TIED))
    if not flagged[_TIED].any():
        return frame.with_columns(pl.lit(0, dtype=pl.UInt64).alias(_TIE_KEY)), False
    ties = _add_tie_keys(flagged.filter(pl.col(_TIED)))
    rest = flagged.filter(~pl.col(_TIED)).with_columns(pl.lit(0, dtype=pl.UInt64).alias(_TIE_KEY))
    return pl.concat([ties, rest]).drop(_TIED), True


# ----------------------------------------------------------------- computation
def _rank_rows(judged: pl.DataFrame) -> pl.LazyFrame:
    """One row per (survey, rank) in ranking order with rank-level helper columns."""
    survey = pl.col(_GROUP)
    score = pl.col(SCORE)
    label = pl.col(LABEL)
    first = survey.ne_missing(survey.shift(1))
    last = survey.ne_missing(survey.shift(-1))
    row = pl.int_range(pl.len(), dtype=pl.Int64)
    relevant = (label >= RELEVANT_LABEL).cast(pl.Int64)
    negative = (label == NEGATIVE_LABEL).cast(pl.Int64)
    frame = judged.select(
        pl.col(SURVEY_ID),
        pl.col(CANDIDATE_ID),
        label.cast(pl.Int8),
        # Missing candidates get -inf: below every (finite) score and tied among themselves.
        score.cast(pl.Float64).fill_null(float("-inf")),
    )
    frame, has_ties = _with_tie_keys(frame)
    # Without ties the score alone fixes the order; skipping the other keys saves a
    # multi-key (string) sort in the common case of distinct scores.
    order = (
        pl.col(LABEL, SCORE).sort_by(
            [SCORE, _TIE_KEY, CANDIDATE_ID], descending=[True, False, False]
        )
        if has_ties
        else pl.col(LABEL, SCORE).sort_by(SCORE, descending=True)
    )
    ordered = (
        frame.lazy()
        .group_by(SURVEY_ID)
        .agg(order)
        .sort(SURVEY_ID)
        .with_row_index(_GROUP)
        .explode([LABEL, SCORE])
    )
    # Cumulative sums run over the whole frame; subtracting the value carried from
    # the survey's first row turns them into within-survey counts without a window.
    with_counts = ordered.with_columns(
        _first=first,
        _last=last,
        _tie_first=first | score.ne_missing(score.shift(1)),
        _tie_last=last | score.ne_missing(score.shift(-1)),
        _row=row,
        _rel_cum=relevant.cum_sum(),
        _neg_cum=negative.cum_sum(),
    )
    rel_cum, neg_cum = pl.col("_rel_cum"), pl.col("_neg_cum")
    negatives_through_tie = pl.when(pl.col("_tie_last")).then(neg_cum).backward_fill()
    negatives_before_tie = pl.when(pl.col("_tie_first")).then(neg_cum - negative).forward_fill()
    negatives_in_survey = pl.when(pl.col("_last")).then(neg_cum).backward_fill()
    return with_counts.with_columns(
        (pl.col("_row") - pl.when(pl.col("_first")).then(pl.col("_row")).forward_fill() + 1).alias(
            _RANK
        ),
        (rel_cum - pl.when(pl.col("_first")).then(rel_cum - relevant).forward_fill()).alias(
            _CUM_REL
        ),
        # hard negatives scored strictly lower, plus half of those tied
        (
            (negatives_in_survey - negatives_through_tie).cast(pl.Float64)
            + 0.5 * (negatives_through_tie - negatives_before_tie).cast(pl.Float64)
        ).alias(_AUC_WINS),
    ).with_columns((1.0 / (pl.col(_RANK) + 1).cast(pl.Float64).log(2)).alias(_DISC))


def per_survey_metrics(
    judged: pl.DataFrame | pl.LazyFrame,
    metrics: Iterable[str] | None = None,
    ks: Sequence[int] | None = None,
) -> pl.DataFrame:
    """Every requested metric for every survey of ``judged``.

    Candidates are ranked by the module's tie rule: score descending, then
    :func:`tie_key` of (survey_id, candidate_id) ascending, then candidate_id
    ascending; unscored candidates last, ordered among themselves the same way.

    Args:
        judged: one row per (survey, judged candidate) with ``survey_id``,
            ``candidate_id``, ``label`` (0-4) and ``score`` (finite float, null =
            candidate missing from the run); (survey_id, candidate_id) unique.
        metrics: canonical metric names (see :func:`metric_registry`); all when None.
        ks: cutoffs for the K-indexed metrics; ``EvaluateConfig().ks`` when None.

    Returns:
        One row per survey, sorted by ``survey_id``: ``survey_id`` then one Float64
        column per metric, in registry order; null where the survey is excluded
        from that metric for lack of the labels it needs.

    Raises:
        UnknownMetricError: a metric name is not in the registry.
    """
    chosen = resolve_metrics(metrics, ks)
    cutoffs = sorted({*(_default_ks() if ks is None else ks), FIXED_CUTOFF})
    aggregates = _aggregates(cutoffs)
    needed = dict.fromkeys(name for m in chosen for name in m.needs)
    frame = judged.collect() if isinstance(judged, pl.LazyFrame) else judged
    return (
        _rank_rows(frame)
        .group_by(_GROUP)
        .agg(pl.col(SURVEY_ID).first(), *[aggregates[name].alias(name) for name in needed])
        .select(pl.col(SURVEY_ID), *[m.value.cast(pl.Float64).alias(m.name) for m in chosen])
        .sort(SURVEY_ID)
        # Sorting within surveys needs all rows at once; the in-memory engine ran this
        # query faster than the streaming one in bench/bench_eval.py.
        .collect(engine="in-memory")
    )
