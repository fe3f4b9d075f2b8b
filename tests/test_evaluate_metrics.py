"""Metrics: hand-computed values, agreement with pytrec_eval, baseline sanity, statistics."""

from __future__ import annotations

import hashlib
from math import log2

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.core.config import EvaluateConfig
from pipeline.evaluate import (
    UnknownMetricError,
    metric_registry,
    per_survey_metrics,
    resolve_metrics,
    tie_key,
)
from pipeline.evaluate.columns import CANDIDATE_ID, LABEL, SCORE, SUBSET, SURVEY_ID
from pipeline.evaluate.scoring.measures import metric_aliases
from pipeline.evaluate.scoring.stats import bootstrap_means, paired_test, rng_for
from pipeline.evaluate.scoring.subsets import SUBSET_ALL
from pipeline.evaluate.scoring.ties import tie_keys
from pipeline.evaluate.synthetic import synthetic_eval_set
from pipeline.evaluate.systems.baseline_values import baseline_per_survey
from tests.trec_reference import pytrec_eval_many

KS = (1, 3, 5)


def d(rank: int) -> float:
    """The discount 1 / log2(rank + 1)."""
    return 1 / log2(rank + 1)


# ------------------------------------------------------------------ tie keys
def reference_tie_key(survey_id: str, candidate_id: str) -> int:
    """The documented tie key, written out again here from its definition.

    tie_key = splitmix64(h(survey_id) XOR h(candidate_id)); h(x) = the 8-byte
    BLAKE2b digest of x's UTF-8 bytes read as a little-endian unsigned 64-bit
    integer; splitmix64's finaliser in arithmetic modulo 2**64. Equal scores rank
    by this key ascending, then by candidate_id.
    """

    def h(x: str) -> int:
        return int.from_bytes(hashlib.blake2b(x.encode("utf-8"), digest_size=8).digest(), "little")

    mask = (1 << 64) - 1
    z = h(survey_id) ^ h(candidate_id)
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
    return z ^ (z >> 31)


def tie_order(survey_id: str, candidate_ids: str) -> str:
    """The order in which equal-score candidates of a survey are ranked."""
    return "".join(sorted(candidate_ids, key=lambda c: (reference_tie_key(survey_id, c), c)))


# Pinned values: the key must not change across machines, Python or Polars
# versions, or runs (a change would silently reorder every tie of a published run).
GOLDEN_TIE_KEYS = {
    ("s1", "c"): 0x499CF5114DC0294B,
    ("s1", "d"): 0x0F7149455E426199,
    ("s1", "e"): 0xADD9C50695A1DCCB,
    ("s1", "f"): 0xC1801EEE0DA92630,
    ("s3", "a"): 0x147C82DA4EF4606F,
    ("s3", "b"): 0x9EA739896820479D,
    ("s1", "a"): 0x1E22D04130302DDF,
    ("s1", "b"): 0xA015207312BEFF2B,
}


def test_tie_key_is_the_documented_function_and_pinned() -> None:
    pairs = pl.DataFrame(
        list(GOLDEN_TIE_KEYS), schema={SURVEY_ID: pl.String, CANDIDATE_ID: pl.String}, orient="row"
    )
    assert tie_keys(pairs).to_list() == list(GOLDEN_TIE_KEYS.values())
    for (survey, candidate), key in GOLDEN_TIE_KEYS.items():
        assert reference_tie_key(survey, candidate) == key
        assert tie_key(survey, candidate) == key


@settings(max_examples=50, deadline=None, database=None)
@given(st.lists(st.tuples(st.text(max_size=12), st.text(max_size=20)), min_size=1, max_size=30))
def test_vectorised_tie_keys_match_the_reference(pairs: list[tuple[str, str]]) -> None:
    frame = pl.DataFrame(
        pairs, schema={SURVEY_ID: pl.String, CANDIDATE_ID: pl.String}, orient="row"
    )
    assert tie_keys(frame).to_list() == [reference_tie_key(s, c) for s, c in pairs]


def test_constant_run_is_neutral_to_the_id_form() -> None:
    # Relevant candidates are arxiv: ids, hard negatives doi: ids. Ordering ties by
    # candidate_id would put every relevant one first (nDCG@10 = 1); the tie key
    # must make a constant score no better than a random one.
    rng = np.random.default_rng(4)
    rows = []
    for s in range(400):
        labels = rng.choice(5, size=30, p=[0.6, 0.1, 0.1, 0.1, 0.1])
        rows += [
            (f"q{s}", f"{'arxiv' if label else 'doi'}:{s}.{j}", int(label), 0.0)
            for j, label in enumerate(labels)
        ]
    frame = pl.DataFrame(
        rows,
        schema={SURVEY_ID: pl.String, CANDIDATE_ID: pl.String, LABEL: pl.Int8, SCORE: pl.Float64},
        orient="row",
    )
    names = ["nDCG@10", "AP", "hard_negative_auc"]
    constant = per_survey_metrics(frame, names, ks=(10,))
    randoms = [
        per_survey_metrics(
            frame.with_columns(pl.Series(SCORE, np.random.default_rng(seed).random(frame.height))),
            names,
            ks=(10,),
        )
        for seed in range(100, 105)  # not 4: those uniforms drew the labels
    ]
    for name in ("nDCG@10", "AP"):
        expected = np.mean([r[name].mean() for r in randoms])
        assert abs(constant[name].mean() - expected) < 0.03, name
    assert constant["hard_negative_auc"].drop_nulls().unique().to_list() == [0.5]
    # and the order of the same candidates differs from survey to survey
    firsts = {tie_order(f"q{s}", "abcdefgh")[0] for s in range(40)}
    assert len(firsts) > 3


# s1: b(0.9, L0) then c(0.5, L3) and d(0.5, L1) tied, a(0.2, L4), then missing
#     e(L0) and f(L2). Ties rank by the tie key: tie_order("s1", "cd") == "dc", so d
#     comes before c (not candidate_id order); e and f have no score -> ranked
#     last, tie_order("s1", "ef") == "ef". Ranking: b d c a e f.
# s2: only hard negatives -> excluded from every metric.
# s3: a(0.3, L0) b(0.3, L1) tie -> tie_order("s3", "ab") == "ab": a first.
TINY = pl.DataFrame(
    {
        SURVEY_ID: ["s1"] * 6 + ["s2"] * 2 + ["s3"] * 2,
        CANDIDATE_ID: ["a", "b", "c", "d", "e", "f", "x", "y", "b", "a"],
        LABEL: [4, 0, 3, 1, 0, 2, 0, 0, 1, 0],
        SCORE: [0.2, 0.9, 0.5, 0.5, None, None, 0.4, 0.1, 0.3, 0.3],
    }
)

EXPECTED = {
    "s1": {
        "nDCG@1": 0.0,
        "nDCG@3": (1 * d(2) + 3 * d(3)) / (4 + 3 * d(2) + 2 * d(3)),
        "nDCG@5": (1 * d(2) + 3 * d(3) + 4 * d(4)) / (4 + 3 * d(2) + 2 * d(3) + 1 * d(4)),
        "R@1": 0.0,
        "R@3": 2 / 4,
        "R@5": 3 / 4,
        "R(rel=3)@1": 0.0,
        "R(rel=3)@3": 1 / 2,
        "R(rel=3)@5": 2 / 2,
        "recall@1_tier=1": 0.0,
        "recall@3_tier=1": 1.0,
        "recall@5_tier=1": 1.0,
        "recall@5_tier=2": 0.0,  # f is missing from the run: rank 6
        "recall@3_tier=3": 1.0,
        "recall@3_tier=4": 0.0,
        "recall@5_tier=4": 1.0,
        "RR(rel=3)": 1 / 3,  # c, the first label >= 3, is at rank 3
        "AP": (1 / 2 + 2 / 3 + 3 / 4 + 4 / 6) / 4,
        "Rprec": 3 / 4,
        # scores, not ranks: positives d, c, a beat e and lose to b; f ties e (both
        # missing) and loses to b
        "hard_negative_auc": (1 + 1 + 1 + 0.5) / (4 * 2),
        "hard_negative_auc_tier=1": 1 / 2,
        "hard_negative_auc_tier=2": 0.5 / 2,
        "hard_negative_auc_tier=3": 1 / 2,
        "hard_negative_auc_tier=4": 1 / 2,
        "nDCG(gains={1:0,2:0,3:0,4:1})@10": d(4) / d(1),
        "nDCG(gains={1:0,2:0,3:1,4:1})@10": (d(3) + d(4)) / (d(1) + d(2)),
    },
    "s2": {},  # everything excluded
    "s3": {
        "nDCG@1": 0.0,
        "nDCG@3": d(2) / 1,
        "R@1": 0.0,
        "R@3": 1.0,
        "recall@1_tier=1": 0.0,
        "recall@3_tier=1": 1.0,
        "AP": (1 / 2) / 1,
        "Rprec": 0.0,
        "hard_negative_auc": 0.5,
        "hard_negative_auc_tier=1": 0.5,
    },
}


def test_hand_computed_values_and_exclusions() -> None:
    # the tie orders the expected values were computed with
    assert (tie_order("s1", "cd"), tie_order("s1", "ef"), tie_order("s3", "ab")) == (
        "dc",
        "ef",
        "ab",
    )
    result = per_survey_metrics(TINY, ks=KS)
    assert result[SURVEY_ID].to_list() == ["s1", "s2", "s3"]
    rows = {row[SURVEY_ID]: row for row in result.iter_rows(named=True)}
    for survey, expected in EXPECTED.items():
        for name, value in expected.items():
            assert rows[survey][name] == pytest.approx(value, abs=1e-12), (survey, name)
    # s2 has no positive at all: excluded everywhere
    assert all(rows["s2"][m] is None for m in metric_registry(KS))
    # s3 has no label >= 3, no label 4, no tier 2-4
    for name in (
        "RR(rel=3)",
        "R(rel=3)@3",
        "nDCG(gains={1:0,2:0,3:0,4:1})@10",
        "nDCG(gains={1:0,2:0,3:1,4:1})@10",
    ):
        assert rows["s3"][name] is None
    for t in (2, 3, 4):
        assert rows["s3"][f"recall@3_tier={t}"] is None
        assert rows["s3"][f"hard_negative_auc_tier={t}"] is None


def test_n_counts_and_macro_means_skip_excluded_surveys() -> None:
    names = [
        "nDCG@3",
        "RR(rel=3)",
        "nDCG(gains={1:0,2:0,3:0,4:1})@10",
        "hard_negative_auc",
        "recall@3_tier=2",
    ]
    result = per_survey_metrics(TINY, names, ks=KS)
    summary = bootstrap_means(result.select(names).to_numpy(), 20, rng_for(1, "t"))
    assert summary.n.tolist() == [2, 1, 1, 2, 1]
    ndcg3 = (EXPECTED["s1"]["nDCG@3"] + EXPECTED["s3"]["nDCG@3"]) / 2
    assert summary.mean[0] == pytest.approx(ndcg3, abs=1e-12)
    assert summary.mean[1] == pytest.approx(EXPECTED["s1"]["RR(rel=3)"])  # s3 has no label >= 3
    assert summary.mean[3] == pytest.approx((0.4375 + 0.5) / 2)


def test_tie_rule_does_not_depend_on_row_order() -> None:
    shuffled = TINY.sample(fraction=1.0, shuffle=True, seed=3)
    assert per_survey_metrics(shuffled, ks=KS).equals(per_survey_metrics(TINY, ks=KS))


@settings(max_examples=40, deadline=None, database=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 4), st.sampled_from([0.0, 0.5, 1.0, None])),
        min_size=1,
        max_size=12,
    ),
    st.randoms(use_true_random=False),
)
def test_row_order_invariance_with_ties(rows: list[tuple[int, float | None]], rnd) -> None:
    frame = pl.DataFrame(
        {
            SURVEY_ID: ["q"] * len(rows),
            CANDIDATE_ID: [f"c{i:02d}" for i in range(len(rows))],
            LABEL: [label for label, _ in rows],
            SCORE: [score for _, score in rows],
        },
        schema={SURVEY_ID: pl.String, CANDIDATE_ID: pl.String, LABEL: pl.Int8, SCORE: pl.Float64},
    )
    order = list(range(len(rows)))
    rnd.shuffle(order)
    assert per_survey_metrics(frame[order], ks=KS).equals(per_survey_metrics(frame, ks=KS))


def test_unknown_metric_lists_the_registry() -> None:
    with pytest.raises(UnknownMetricError) as info:
        per_survey_metrics(TINY, ["nDCG@7", "AP"], ks=KS)
    message = str(info.value)
    assert "nDCG@7" in message
    for name in metric_registry(KS):
        assert name in message


def test_registry_names_and_docs() -> None:
    registry = metric_registry(EvaluateConfig().ks)
    for k in EvaluateConfig().ks:
        for name in (f"nDCG@{k}", f"R@{k}", f"R(rel=3)@{k}", f"recall@{k}_tier=4"):
            assert name in registry
    for name in ("RR(rel=3)", "AP", "Rprec", "hard_negative_auc"):
        assert name in registry
    for name in ("nDCG(gains={1:0,2:0,3:0,4:1})@10", "nDCG(gains={1:0,2:0,3:1,4:1})@10"):
        assert name in registry
    for metric in registry.values():
        assert "=" in metric.doc and "exclude" in metric.doc.lower(), metric.name
    assert [m.name for m in resolve_metrics(["AP", "nDCG@5"])] == ["AP", "nDCG@5"]
    # the previous names are aliases
    assert [m.name for m in resolve_metrics(["map", "ndcg@5", "mrr_tier>=3"])] == [
        "AP",
        "nDCG@5",
        "RR(rel=3)",
    ]


# ------------------------------------------------------------------ pytrec_eval
def _random_judgments(seed: int, n_surveys: int) -> pl.DataFrame:
    """Random labels; scores distinct per survey even in float32.

    trec_eval keeps scores as 32-bit floats and orders ties by docid descending
    (we use the tie key), so agreement holds for runs without ties: the scores
    here are float32-distinct within each survey.
    """
    rng = np.random.default_rng(seed)
    parts = []
    for s in range(n_surveys):
        n = int(rng.integers(1, 130))
        labels = rng.choice(5, size=n, p=[0.45, 0.2, 0.15, 0.1, 0.1])
        parts.append(
            pl.DataFrame(
                {
                    SURVEY_ID: [f"q{s:03d}"] * n,
                    CANDIDATE_ID: [f"d{j:04d}" for j in rng.permutation(5000)[:n]],
                    LABEL: labels,
                    SCORE: rng.permutation(n) / n + rng.integers(-2, 3),
                }
            )
        )
    return pl.concat(parts)


def _trec(frame: pl.DataFrame, *evaluations: tuple[set[str], int]) -> list[dict]:
    """pytrec_eval's per-query values for each (measures, relevance level)."""
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    for survey, candidate, label, score in frame.select(
        SURVEY_ID, CANDIDATE_ID, LABEL, SCORE
    ).iter_rows():
        qrels.setdefault(survey, {})[candidate] = int(label)
        run.setdefault(survey, {})[candidate] = float(score)
    return pytrec_eval_many(qrels, run, list(evaluations))


def _assert_agrees(ours: pl.DataFrame, theirs: dict, pairs: list[tuple[str, str]]) -> None:
    for row in ours.iter_rows(named=True):
        for mine, other in pairs:
            if row[mine] is None:
                # excluded surveys are those trec_eval scores 0 for lack of relevant ones
                assert theirs[row[SURVEY_ID]][other] == 0.0
            else:
                assert row[mine] == pytest.approx(theirs[row[SURVEY_ID]][other], abs=1e-9), (
                    row[SURVEY_ID],
                    mine,
                )


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_agrees_with_pytrec_eval(seed: int) -> None:
    ks = EvaluateConfig().ks
    frame = _random_judgments(seed, 40)
    ours = per_survey_metrics(frame, ks=ks)
    cut = ",".join(map(str, ks))
    level1, level3 = _trec(
        frame,
        ({f"ndcg_cut.{cut}", f"recall.{cut}", "map", "Rprec"}, 1),
        ({"recip_rank", f"recall.{cut}"}, 3),
    )
    pairs1 = [(f"nDCG@{k}", f"ndcg_cut_{k}") for k in ks] + [(f"R@{k}", f"recall_{k}") for k in ks]
    _assert_agrees(ours, level1, pairs1 + [("AP", "map"), ("Rprec", "Rprec")])
    _assert_agrees(
        ours,
        level3,
        [("RR(rel=3)", "recip_rank")] + [(f"R(rel=3)@{k}", f"recall_{k}") for k in ks],
    )


@settings(max_examples=30, deadline=None, database=None)
@given(st.lists(st.integers(0, 4), min_size=1, max_size=25), st.randoms(use_true_random=False))
def test_agrees_with_pytrec_eval_property(labels: list[int], rnd) -> None:
    order = list(range(len(labels)))
    rnd.shuffle(order)
    frame = pl.DataFrame(
        {
            SURVEY_ID: ["q"] * len(labels),
            CANDIDATE_ID: [f"d{i:02d}" for i in range(len(labels))],
            LABEL: labels,
            SCORE: [float(o) for o in order],
        }
    )
    ks = (1, 2, 5, 10)
    ours = per_survey_metrics(frame, ks=ks)
    level1, level3 = _trec(
        frame, ({"ndcg_cut.1,2,5,10", "recall.1,2,5,10", "map", "Rprec"}, 1), ({"recip_rank"}, 3)
    )
    pairs = [(f"nDCG@{k}", f"ndcg_cut_{k}") for k in ks] + [(f"R@{k}", f"recall_{k}") for k in ks]
    _assert_agrees(ours, level1, pairs + [("AP", "map"), ("Rprec", "Rprec")])
    _assert_agrees(ours, level3, [("RR(rel=3)", "recip_rank")])


# ------------------------------------------------------------------ baselines
@pytest.fixture(scope="module")
def synthetic_eval() -> pl.DataFrame:
    return synthetic_eval_set(300, 40, seed=5).sort(SURVEY_ID, CANDIDATE_ID)


def test_oracle_reaches_every_bound(synthetic_eval: pl.DataFrame) -> None:
    config = EvaluateConfig(bootstrap_samples=10, random_seeds=2)
    oracle = baseline_per_survey(synthetic_eval, "oracle", config).filter(
        pl.col(SUBSET) == SUBSET_ALL
    )
    counts = synthetic_eval.group_by(SURVEY_ID).agg(
        *[(pl.col(LABEL) == t).sum().alias(f"eq{t}") for t in range(5)],
        *[(pl.col(LABEL) >= t).sum().alias(f"ge{t}") for t in range(1, 6)],
    )
    table = oracle.join(counts, on=SURVEY_ID)
    registry = metric_registry(config.ks)
    more_than_k = 0
    for row in table.iter_rows(named=True):
        for name, metric in registry.items():
            value = row[name]
            if value is None:
                continue
            if metric.recall_at:
                k = metric.recall_at
                if name == f"R(rel=3)@{k}":
                    total, above = row["ge3"], 0
                elif "_tier=" in name:
                    t = int(name.rsplit("=", 1)[1])
                    total, above = row[f"eq{t}"], row[f"ge{t + 1}"]
                else:
                    total, above = row["ge1"], 0
                # a perfect ranking puts `above` better candidates first
                expected = min(max(k - above, 0), total) / total
                more_than_k += expected < 1
                assert value == pytest.approx(expected, abs=1e-12), (name, row[SURVEY_ID])
            else:
                assert value == pytest.approx(1.0, abs=1e-12), (name, row[SURVEY_ID])
    assert more_than_k > 0  # the min(K, R) / R rule was exercised
    assert (table["ge1"] > 5).any()
    assert table["nDCG@10"].min() == 1.0  # exactly, not just approximately


def test_random_hard_negative_auc_is_half(synthetic_eval: pl.DataFrame) -> None:
    config = EvaluateConfig(random_seeds=10)
    random = baseline_per_survey(synthetic_eval, "random", config).filter(
        pl.col(SUBSET) == SUBSET_ALL
    )
    assert random.height == 300
    assert abs(random["hard_negative_auc"].mean() - 0.5) < 0.02


def test_random_baseline_is_deterministic(synthetic_eval: pl.DataFrame) -> None:
    config = EvaluateConfig(random_seeds=3)
    small = synthetic_eval.filter(pl.col(SURVEY_ID) < "S000020")
    assert baseline_per_survey(small, "random", config).equals(
        baseline_per_survey(small, "random", config)
    )


# ------------------------------------------------------------------ statistics
def test_bootstrap_interval_brackets_the_mean_and_is_seeded() -> None:
    values = np.random.default_rng(0).random((200, 3))
    values[::7, 1] = np.nan
    first = bootstrap_means(values, 300, rng_for(7, "ALL"))
    again = bootstrap_means(values, 300, rng_for(7, "ALL"))
    assert np.array_equal(first.ci_low, again.ci_low)
    assert np.all(first.ci_low < first.mean) and np.all(first.mean < first.ci_high)
    assert first.n.tolist() == [200, 200 - len(range(0, 200, 7)), 200]


def test_paired_test_detects_a_shift_and_not_an_identity() -> None:
    rng = np.random.default_rng(1)
    base = rng.random((150, 2))
    better = base + np.array([0.05, 0.0]) + rng.normal(0, 0.01, (150, 2)) * np.array([1, 0])
    result = paired_test(better, base, 500, rng_for(7, "paired"))
    assert result.p_value[0] < 0.01
    assert result.ci_low[0] > 0
    assert result.diff[1] == 0.0 and result.p_value[1] == 1.0


# ------------------------------------------------------------------ names
def test_tier_names_carry_their_comparison() -> None:
    """`R(rel=3)@10` (label 3 or 4) and `recall@10_tier=3` (label 3) cannot be confused."""
    registry = metric_registry((10,))
    tiered = [n for n in registry if "_tier" in n]
    assert tiered and all("_tier>=" in n or "_tier=" in n for n in tiered)
    assert "R(rel=3)@10" in registry and "recall@10_tier=3" in registry
    assert "label >= 3" in registry["R(rel=3)@10"].doc
    assert "label == 3" in registry["recall@10_tier=3"].doc
    with pytest.raises(UnknownMetricError, match=r"recall@10_tier3 is now R\(rel=3\)@10"):
        resolve_metrics(["recall@10_tier3"], ks=(10,))
    aliases = metric_aliases((10,))
    assert aliases["R(rel=3)@10"]["ir_measures"] == "R(rel=3)@10"
    assert aliases["RR(rel=3)"]["trec_eval"] == "-l 3 recip_rank"
    assert set(aliases) <= set(registry)
