"""Metric definitions: every metric's canonical name, aliases and what it measures.

Every metric has a canonical name, written as ir_measures writes the measure where
ir_measures has it (``nDCG@10``, ``R@10``, ``R(rel=3)@10``, ``RR(rel=3)``, ``AP``,
``Rprec``, ``nDCG(gains={1:0,2:0,3:0,4:1})@10``) and in our own words where it has none
(``hard_negative_auc``, ``recall@10_tier=2``). It lives in one registry built by
:func:`metric_registry` for the configured cutoffs and carries a ``doc`` that states its
formula. The previous names (``ndcg@10``, ``recall@10_tier>=3``, ``map``,
...) are aliases: :func:`resolve_metrics` accepts them and :func:`metric_aliases` lists
them. Unknown names raise :class:`UnknownMetricError`, whose message lists the
registry's names.

Labels are the survey's judgments of each candidate: 0 = hard negative,
1 = background, 2 = tool/method, 3 = related work, 4 = essential
(``pipeline.core.schema.LABEL_NAMES``). "Relevant" means label >= 1 unless a metric says
otherwise. A tier in a name always carries its comparison: ``_tier>=3`` is label 3 or
4, ``_tier=3`` label 3 exactly (``recall@10_tier>=3`` vs ``recall@10_tier=3``).
:func:`metric_aliases` gives each metric's previous name and its trec_eval name where it
has one (recorded in ``eval_results.json``).

A label of :data:`UNJUDGED_LABEL` (-1) marks a document a run retrieved that has no
judgment for the survey (retrieval mode): gain 0, not relevant, not a hard negative.

A metric is declared here as an expression over named per-survey aggregates
(:func:`n_label_ge`, ``_dcg@10``, ...); the ranking engine
(:mod:`pipeline.evaluate.scoring.compute`) ranks the candidates, computes those aggregates and
evaluates the expressions. Ties are broken by :mod:`pipeline.evaluate.scoring.ties`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from types import MappingProxyType

import polars as pl

from pipeline.core.config import EvaluateConfig
from pipeline.core.errors import PipelineError, UsageError

UNJUDGED_LABEL = -1  # a retrieved document without a judgment (retrieval mode only)
NEGATIVE_LABEL = 0
RELEVANT_LABEL = 1
TIER3_LABEL = 3
ESSENTIAL_LABEL = 4
TIERS = (1, 2, 3, 4)
FIXED_CUTOFF = 10  # the two binary-gain nDCGs use this cutoff whatever the config's ks


# ----------------------------------------------------------------- names
def ndcg_name(k: int) -> str:
    """``nDCG@k``: graded nDCG, as ir_measures writes it."""
    return f"nDCG@{k}"


def recall_name(k: int) -> str:
    """``R@k``: recall of label >= 1."""
    return f"R@{k}"


def recall_rel3_name(k: int) -> str:
    """``R(rel=3)@k``: recall of label >= 3."""
    return f"R(rel={TIER3_LABEL})@{k}"


def recall_tier_name(k: int, t: int) -> str:
    """``recall@k_tier=t``: recall of label == t (ir_measures has no such measure)."""
    return f"recall@{k}_tier={t}"


def auc_tier_name(t: int) -> str:
    """``hard_negative_auc_tier=t``."""
    return f"{HARD_NEGATIVE_AUC}_tier={t}"


def _gains_name(gains: Mapping[int, int], k: int) -> str:
    """nDCG with custom gains as ir_measures prints it (label 0 keeps gain 0 and is omitted)."""
    inner = ",".join(f"{label}:{gain}" for label, gain in sorted(gains.items()) if label)
    return f"nDCG(gains={{{inner}}})@{k}"


RR_REL3 = f"RR(rel={TIER3_LABEL})"
AP = "AP"
RPREC = "Rprec"
HARD_NEGATIVE_AUC = "hard_negative_auc"
# gain 1 for an essential candidate (label 4) only; gain 1 for label >= 3
ESSENTIAL_GAINS = {t: int(t == ESSENTIAL_LABEL) for t in TIERS}
TIER3_GAINS = {t: int(t >= TIER3_LABEL) for t in TIERS}
ESSENTIAL_NDCG = _gains_name(ESSENTIAL_GAINS, FIXED_CUTOFF)
TIER3_NDCG = _gains_name(TIER3_GAINS, FIXED_CUTOFF)

MAIN_METRICS = (
    ndcg_name(10),
    ndcg_name(20),
    recall_rel3_name(10),
    RR_REL3,
    AP,
    HARD_NEGATIVE_AUC,
    ESSENTIAL_NDCG,
    TIER3_NDCG,
)


class UnknownMetricError(PipelineError, ValueError):
    """A metric name that is not in the registry (the message lists the available names)."""


@dataclass(frozen=True, eq=False)
class Metric:
    """One registered metric.

    Attributes:
        name: canonical name, e.g. ``nDCG@10``.
        doc: the formula and the rule for excluding a survey.
        value: Polars expression over the per-survey aggregates; null when the
            survey is excluded from this metric.
        needs: names of the per-survey aggregates ``value`` reads.
        previous: the name this metric had before (an alias), if any.
        trec_eval: the trec_eval measure with the same value, if any.
        ir_measures: whether ``name`` is an ir_measures measure with the same value.
        recall_at: the cutoff K of a recall metric (it saturates at 1 when every
            ranked list is at most K long), else None.
    """

    name: str
    doc: str
    value: pl.Expr
    needs: tuple[str, ...]
    previous: str | None = None
    trec_eval: str | None = None
    ir_measures: bool = False
    recall_at: int | None = None


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
# "Ranked" below is the survey's ranking: every judged candidate in re-ranking mode
# (unscored ones last); in retrieval mode what the run retrieved, while R and the ideal
# DCG still count every judged candidate (trec_eval's rule; see
# :mod:`pipeline.evaluate.retrieval.mode`).
def _ndcg(k: int) -> Metric:
    """nDCG@{k} = DCG@{k} / IDCG@{k}, DCG@{k} = sum over ranks r <= {k} of label(r) / log2(r + 1).

    Gain is the label itself (0-4, linear, as trec_eval's ndcg_cut); IDCG@{k} is the
    DCG@{k} of all judged candidates of the survey sorted by label descending.
    A survey with no candidate of label >= 1 is excluded.
    """
    return Metric(
        ndcg_name(k),
        _doc(_ndcg, k=k),
        _where(n_label_ge(1), pl.col(f"_dcg@{k}") / pl.col(f"_idcg@{k}")),
        (n_label_ge(1), f"_dcg@{k}", f"_idcg@{k}"),
        previous=f"ndcg@{k}",
        trec_eval=f"ndcg_cut.{k}",
        ir_measures=True,
    )


def _recall(k: int) -> Metric:
    """R@{k} = |{{label >= 1}} in the top {k}| / |{{label >= 1}} among the survey's judged candidates|.

    A survey with no candidate of label >= 1 is excluded. A perfect ranking reaches
    min({k}, R) / R when the survey has R > {k} relevant candidates.
    """
    return Metric(
        recall_name(k),
        _doc(_recall, k=k),
        _ratio(f"_hits_ge1@{k}", n_label_ge(1)),
        (n_label_ge(1), f"_hits_ge1@{k}"),
        previous=f"recall@{k}",
        trec_eval=f"recall.{k}",
        ir_measures=True,
        recall_at=k,
    )


def _recall_tier3(k: int) -> Metric:
    """R(rel=3)@{k} = |{{label >= 3}} in the top {k}| / |{{label >= 3}} among the judged candidates|.

    Relevant = related work or essential (label 3 or 4). A survey with no such
    candidate is excluded.
    """
    return Metric(
        recall_rel3_name(k),
        _doc(_recall_tier3, k=k),
        _ratio(f"_hits_ge3@{k}", n_label_ge(3)),
        (n_label_ge(3), f"_hits_ge3@{k}"),
        previous=f"recall@{k}_tier>=3",
        trec_eval=f"-l 3 recall.{k}",
        ir_measures=True,
        recall_at=k,
    )


def _recall_tier_exact(k: int, t: int) -> Metric:
    """recall@{k}_tier={t} = |{{label == {t}}} in the top {k}| / |{{label == {t}}} among the judged candidates|.

    Recall restricted to tier {t} exactly (not "at least"; ir_measures has no such
    measure); a survey with no candidate of label {t} is excluded.
    """
    return Metric(
        recall_tier_name(k, t),
        _doc(_recall_tier_exact, k=k, t=t),
        _ratio(f"_hits_eq{t}@{k}", n_label_eq(t)),
        (n_label_eq(t), f"_hits_eq{t}@{k}"),
        recall_at=k,
    )


def _rr_tier3() -> Metric:
    """RR(rel=3) = 1 / (rank of the first ranked candidate with label >= 3), 0 when none is ranked.

    Averaged over surveys this is the mean reciprocal rank (trec_eval's recip_rank
    with relevance level 3). A survey with no candidate of label >= 3 is excluded.
    """
    return Metric(
        RR_REL3,
        _doc(_rr_tier3),
        _where(n_label_ge(3), (1.0 / pl.col("_first_rank_ge3").cast(pl.Float64)).fill_null(0.0)),
        (n_label_ge(3), "_first_rank_ge3"),
        previous="mrr_tier>=3",
        trec_eval="-l 3 recip_rank",
        ir_measures=True,
    )


def _ap() -> Metric:
    """AP = (sum over ranks r holding a candidate with label >= 1 of precision@r) / R.

    Binary relevance label >= 1; R = number of judged candidates with label >= 1
    (average precision as trec_eval's map; macro-averaged over surveys). A survey
    with R = 0 is excluded.
    """
    return Metric(
        AP,
        _doc(_ap),
        _ratio("_ap_sum", n_label_ge(1)),
        (n_label_ge(1), "_ap_sum"),
        previous="map",
        trec_eval="map",
        ir_measures=True,
    )


def _r_precision() -> Metric:
    """Rprec = |{{label >= 1}} in the top R| / R, R = number of judged candidates with label >= 1.

    As trec_eval's Rprec. A survey with R = 0 is excluded.
    """
    return Metric(
        RPREC,
        _doc(_r_precision),
        _ratio("_rprec_hits", n_label_ge(1)),
        (n_label_ge(1), "_rprec_hits"),
        previous="r_precision",
        trec_eval="Rprec",
        ir_measures=True,
    )


def _auc(n_positive: str, wins: str) -> pl.Expr:
    pairs = pl.col(n_positive).cast(pl.Float64) * pl.col(n_label_eq(NEGATIVE_LABEL)).cast(
        pl.Float64
    )
    return pl.when(pairs > 0).then(pl.col(wins) / pairs)


def _hard_negative_auc() -> Metric:
    """hard_negative_auc = (#pairs with s(p) > s(n) + 0.5 * #pairs with s(p) = s(n)) / (P * N).

    Pairs (p, n) of a positive (label >= 1) and a hard negative (label 0) of the
    same survey; s is the run's score, judged candidates missing from the run share
    the lowest score. P, N = numbers of positives and hard negatives. A survey with
    P = 0 or N = 0 is excluded. Documents without a judgment (retrieval mode) are
    neither.
    """
    return Metric(
        HARD_NEGATIVE_AUC,
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
        auc_tier_name(t),
        _doc(_hard_negative_auc_tier, t=t),
        _auc(n_label_eq(t), f"_auc_wins_eq{t}"),
        (n_label_eq(t), n_label_eq(NEGATIVE_LABEL), f"_auc_wins_eq{t}"),
    )


def _essential_ndcg() -> Metric:
    """{name} = DCG@{k} / IDCG@{k} with binary gain 1 for label == 4 (essential), else 0.

    DCG@{k} = sum over ranks r <= {k} holding an essential candidate of 1 / log2(r + 1);
    IDCG@{k} = sum over r <= min({k}, E) of 1 / log2(r + 1), E = number of essential
    candidates (ir_measures' nDCG with these gains). A survey with E = 0 is excluded.
    """
    k = FIXED_CUTOFF
    return Metric(
        ESSENTIAL_NDCG,
        _doc(_essential_ndcg, k=k, name=ESSENTIAL_NDCG),
        _where(
            n_label_eq(ESSENTIAL_LABEL),
            pl.col(f"_essential_dcg@{k}") / pl.col(f"_essential_idcg@{k}"),
        ),
        (n_label_eq(ESSENTIAL_LABEL), f"_essential_dcg@{k}", f"_essential_idcg@{k}"),
        previous=f"essential_ndcg@{k}",
        ir_measures=True,
    )


def _tier3_ndcg() -> Metric:
    """{name} = DCG@{k} / IDCG@{k} with binary gain 1 for label >= 3, else 0.

    DCG@{k} = sum over ranks r <= {k} holding a label >= 3 candidate of 1 / log2(r + 1);
    IDCG@{k} = sum over r <= min({k}, R3) of 1 / log2(r + 1), R3 = number of label >= 3
    candidates (ir_measures' nDCG with these gains). A survey with R3 = 0 is excluded.
    """
    k = FIXED_CUTOFF
    return Metric(
        TIER3_NDCG,
        _doc(_tier3_ndcg, k=k, name=TIER3_NDCG),
        _where(n_label_ge(3), pl.col(f"_tier3_dcg@{k}") / pl.col(f"_tier3_idcg@{k}")),
        (n_label_ge(3), f"_tier3_dcg@{k}", f"_tier3_idcg@{k}"),
        previous=f"relevant_ndcg@{k}",
        ir_measures=True,
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
    metrics += [_rr_tier3(), _ap(), _r_precision(), _hard_negative_auc()]
    metrics += [_hard_negative_auc_tier(t) for t in TIERS]
    metrics += [_essential_ndcg(), _tier3_ndcg()]
    return MappingProxyType({m.name: m for m in metrics})


def metric_registry(ks: Sequence[int] | None = None) -> Mapping[str, Metric]:
    """Every metric, by canonical name, for cutoffs ``ks`` (default ``EvaluateConfig().ks``).

    Args:
        ks: cutoffs K of ``nDCG@K``, ``R@K``, ``R(rel=3)@K`` and ``recall@K_tier=t``.

    Returns:
        Read-only mapping name -> :class:`Metric`, in a fixed order.

    Raises:
        ValueError: a cutoff is not a positive integer.
    """
    cutoffs = default_ks() if ks is None else tuple(ks)
    bad = [k for k in cutoffs if not isinstance(k, int) or isinstance(k, bool) or k < 1]
    if bad:
        raise UsageError(f"cutoffs must be positive integers, got {bad}")
    return _registry(tuple(sorted(set(cutoffs))))


def canonical_name(name: str, ks: Sequence[int] | None = None) -> str:
    """The canonical name of a metric given by its canonical name or an alias.

    Raises:
        UnknownMetricError: neither; the message lists the available names.
    """
    return resolve_metrics([name], ks)[0].name


def resolve_metrics(
    names: Iterable[str] | None = None, ks: Sequence[int] | None = None
) -> list[Metric]:
    """Metrics by canonical name or alias (a previous name); all of them when ``names`` is None.

    Raises:
        UnknownMetricError: a name is not in the registry; the message lists the available names.
    """
    registry = metric_registry(ks)
    if names is None:
        return list(registry.values())
    by_alias = {m.previous: m.name for m in registry.values() if m.previous}
    wanted = list(dict.fromkeys(by_alias.get(n, n) for n in names))
    unknown = [n for n in wanted if n not in registry]
    if unknown:
        # recall@K_tier3 and mrr_tier3 were renamed so that ">=" cannot be misread as "="
        renamed = [
            f"{n} is now {by_alias.get(n.removesuffix('_tier3') + '_tier>=3', '?')}"
            for n in unknown
            if n.endswith("_tier3")
        ]
        hint = f" ({'; '.join(renamed)})" if renamed else ""
        raise UnknownMetricError(
            f"unknown metric(s) {unknown}{hint}; available: {', '.join(registry)}"
        )
    return [registry[n] for n in wanted]


def metric_aliases(ks: Sequence[int] | None = None) -> dict[str, dict[str, str]]:
    """Previous name and trec_eval name of the metrics that have one, by canonical name.

    A canonical name with ``ir_measures`` true is an ir_measures measure with the same
    value: equal by test (``tests/test_evaluate_metrics.py``, ``tests/test_evaluate_retrieval.py``)
    on runs without ties; trec_eval breaks ties by docid descending, this module by its
    tie key.
    """
    out: dict[str, dict[str, str]] = {}
    for metric in metric_registry(ks).values():
        entry = {"previous": metric.previous, "trec_eval": metric.trec_eval}
        entry = {k: v for k, v in entry.items() if v}
        if metric.ir_measures:
            entry["ir_measures"] = metric.name
        if entry:
            out[metric.name] = entry
    return out


def main_metrics(ks: Sequence[int] | None = None) -> list[str]:
    """The headline metrics of the report that exist for cutoffs ``ks``."""
    registry = metric_registry(ks)
    return [m for m in MAIN_METRICS if m in registry]
