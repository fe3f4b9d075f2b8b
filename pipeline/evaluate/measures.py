"""Metric definitions: every metric's canonical name, aliases and what it measures.

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

A metric is declared here as an expression over named per-survey aggregates
(:func:`n_label_ge`, ``_dcg@10``, ...); the ranking engine
(:mod:`pipeline.evaluate.metrics`) ranks the candidates, computes those aggregates and
evaluates the expressions. Ties are broken by :mod:`pipeline.evaluate.ties`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from types import MappingProxyType

import polars as pl

from pipeline.config import EvaluateConfig

NEGATIVE_LABEL = 0
RELEVANT_LABEL = 1
TIER3_LABEL = 3
ESSENTIAL_LABEL = 4
TIERS = (1, 2, 3, 4)
FIXED_CUTOFF = 10  # essential_ndcg@10 and relevant_ndcg@10 use this cutoff whatever the config's ks

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


# ----------------------------------------------------------------- aggregate names
def n_label_ge(t: int) -> str:
    """Name of the per-survey aggregate: number of judged candidates with label >= t."""
    return f"_n_label_ge{t}"


def n_label_eq(t: int) -> str:
    """Name of the per-survey aggregate: number of judged candidates with label == t."""
    return f"_n_label_eq{t}"


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
        _where(n_label_ge(1), pl.col(f"_dcg@{k}") / pl.col(f"_idcg@{k}")),
        (n_label_ge(1), f"_dcg@{k}", f"_idcg@{k}"),
    )


def _recall(k: int) -> Metric:
    """recall@{k} = |{{label >= 1}} in the top {k}| / |{{label >= 1}} among the survey's judged candidates|.

    A survey with no candidate of label >= 1 is excluded. A perfect ranking reaches
    min({k}, R) / R when the survey has R > {k} relevant candidates.
    """
    return Metric(
        f"recall@{k}",
        _doc(_recall, k=k),
        _ratio(f"_hits_ge1@{k}", n_label_ge(1)),
        (n_label_ge(1), f"_hits_ge1@{k}"),
    )


def _recall_tier3(k: int) -> Metric:
    """recall@{k}_tier>=3 = |{{label >= 3}} in the top {k}| / |{{label >= 3}} among the judged candidates|.

    Relevant = related work or essential (label 3 or 4). A survey with no such
    candidate is excluded.
    """
    return Metric(
        f"recall@{k}_tier>=3",
        _doc(_recall_tier3, k=k),
        _ratio(f"_hits_ge3@{k}", n_label_ge(3)),
        (n_label_ge(3), f"_hits_ge3@{k}"),
    )


def _recall_tier_exact(k: int, t: int) -> Metric:
    """recall@{k}_tier={t} = |{{label == {t}}} in the top {k}| / |{{label == {t}}} among the judged candidates|.

    Recall restricted to tier {t} exactly (not "at least"); a survey with no
    candidate of label {t} is excluded.
    """
    return Metric(
        f"recall@{k}_tier={t}",
        _doc(_recall_tier_exact, k=k, t=t),
        _ratio(f"_hits_eq{t}@{k}", n_label_eq(t)),
        (n_label_eq(t), f"_hits_eq{t}@{k}"),
    )


def _mrr_tier3() -> Metric:
    """mrr_tier>=3 = 1 / (rank of the first candidate with label >= 3).

    Averaged over surveys this is the mean reciprocal rank (trec_eval's recip_rank
    with relevance level 3). A survey with no candidate of label >= 3 is excluded.
    """
    return Metric(
        "mrr_tier>=3",
        _doc(_mrr_tier3),
        _where(n_label_ge(3), 1.0 / pl.col("_first_rank_ge3").cast(pl.Float64)),
        (n_label_ge(3), "_first_rank_ge3"),
    )


def _map() -> Metric:
    """map = (sum over ranks r holding a candidate with label >= 1 of precision@r) / R.

    Binary relevance label >= 1; R = number of judged candidates with label >= 1
    (average precision as trec_eval's map; macro-averaged over surveys). A survey
    with R = 0 is excluded.
    """
    return Metric("map", _doc(_map), _ratio("_ap_sum", n_label_ge(1)), (n_label_ge(1), "_ap_sum"))


def _r_precision() -> Metric:
    """r_precision = |{{label >= 1}} in the top R| / R, R = number of judged candidates with label >= 1.

    As trec_eval's Rprec. A survey with R = 0 is excluded.
    """
    return Metric(
        "r_precision",
        _doc(_r_precision),
        _ratio("_rprec_hits", n_label_ge(1)),
        (n_label_ge(1), "_rprec_hits"),
    )


def _auc(n_positive: str, wins: str) -> pl.Expr:
    pairs = pl.col(n_positive).cast(pl.Float64) * pl.col(n_label_eq(NEGATIVE_LABEL)).cast(
        pl.Float64
    )
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
        _auc(n_label_ge(1), "_auc_wins_ge1"),
        (n_label_ge(1), n_label_eq(NEGATIVE_LABEL), "_auc_wins_ge1"),
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
        _auc(n_label_eq(t), f"_auc_wins_eq{t}"),
        (n_label_eq(t), n_label_eq(NEGATIVE_LABEL), f"_auc_wins_eq{t}"),
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
            n_label_eq(ESSENTIAL_LABEL),
            pl.col(f"_essential_dcg@{k}") / pl.col(f"_essential_idcg@{k}"),
        ),
        (n_label_eq(ESSENTIAL_LABEL), f"_essential_dcg@{k}", f"_essential_idcg@{k}"),
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
        _where(n_label_ge(3), pl.col(f"_tier3_dcg@{k}") / pl.col(f"_tier3_idcg@{k}")),
        (n_label_ge(3), f"_tier3_dcg@{k}", f"_tier3_idcg@{k}"),
    )


# ----------------------------------------------------------------- registry
def default_ks() -> tuple[int, ...]:
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
    cutoffs = default_ks() if ks is None else tuple(ks)
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
