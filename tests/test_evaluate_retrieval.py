"""Retrieval mode has trec_eval's semantics: tested against ir_measures on top-k runs.

A survey's ranking is what the run retrieved; a judged candidate it did not retrieve
counts in R (recall, AP, Rprec) and in the ideal DCG, nowhere else. ir_measures (its
pytrec_eval provider, i.e. trec_eval) computes every metric the report prints that it
has, on top-10, top-100 and full-corpus runs, per survey, to 1e-9. trec_eval compares
scores in single precision, so the runs' scores are distinct as float32 (no ties).
"""

from __future__ import annotations

import itertools
import warnings
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from pipeline.core.config import EvaluateConfig
from pipeline.core.release_files import beir_file
from pipeline.evaluate import write_evaluation
from pipeline.evaluate.columns import (
    CANDIDATE_ID,
    EVAL_FILENAME,
    LABEL,
    SCORE,
    SUBSET,
    SURVEY_ID,
    SYSTEM,
)
from pipeline.evaluate.retrieval.mode import RETRIEVAL_KS
from pipeline.evaluate.scoring.compute import per_survey_metrics
from pipeline.evaluate.scoring.measures import UNJUDGED_LABEL, main_metrics, metric_registry
from pipeline.evaluate.synthetic import synthetic_eval_set
from tests.trec_reference import ir_measures_calc

ir_measures = pytest.importorskip("ir_measures")

CONFIG = EvaluateConfig(bootstrap_samples=20, random_seeds=1)
DEPTHS = (10, 100, None)  # None: the whole corpus
N_EXTRA = 150  # unjudged documents in the corpus


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """An eval set of 30 surveys x 40 candidates, its corpus with unjudged documents, and
    a run of every depth with scores distinct in float32."""
    root = tmp_path_factory.mktemp("retrieval")
    eval_set = synthetic_eval_set(30, 40, seed=21, label_probs=(0.4, 0.15, 0.15, 0.15, 0.15))
    release = root / "release"
    (release / "corpus").mkdir(parents=True)
    eval_set.write_parquet(release / EVAL_FILENAME)
    docs = sorted(
        set(eval_set[CANDIDATE_ID].to_list()) | {f"extra:{i:04d}" for i in range(N_EXTRA)}
    )
    pl.DataFrame({"_id": docs}).write_parquet(release / beir_file("corpus", "eval"))
    judged = {
        s: dict(zip(g[CANDIDATE_ID].to_list(), g[LABEL].to_list(), strict=True))
        for (s,), g in eval_set.group_by(SURVEY_ID, maintain_order=True)
    }
    rng = np.random.default_rng(8)
    runs: dict[int | None, Path] = {}
    scored: dict[int | None, dict[str, dict[str, float]]] = {}
    for depth in DEPTHS:
        lines, by_survey = [], {}
        for survey in sorted(judged):
            # a run that favours relevant candidates a little, so that depth matters
            boost = np.array([judged[survey].get(d, 0) * 0.15 for d in docs])
            order = np.argsort(-(rng.random(len(docs)) + boost), kind="stable")[:depth]
            scores = {docs[j]: (len(order) - r) / len(order) for r, j in enumerate(order)}
            by_survey[survey] = scores
            lines += [
                f"{survey} Q0 {d} {r + 1} {v!r} top" for r, (d, v) in enumerate(scores.items())
            ]
        path = root / f"top{depth or 'all'}.trec"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        runs[depth], scored[depth] = path, by_survey
    return {"release": release, "judged": judged, "runs": runs, "scored": scored, "root": root}


def _ours(corpus: dict, depth: int | None, tmp_path: Path) -> tuple[pl.DataFrame, dict]:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # every survey has rows; nothing is dropped
        results = write_evaluation(
            corpus["release"],
            runs=[corpus["runs"][depth]],
            out_dir=tmp_path,
            config=CONFIG,
            mode="retrieval",
        )
    per_survey = pl.read_parquet(tmp_path / "eval" / "per_survey.parquet").filter(
        (pl.col(SYSTEM) == "top") & (pl.col(SUBSET) == "ALL")
    )
    return per_survey, results


def _theirs(names: list[str], qrels: dict, run: dict) -> dict[tuple[str, str], float]:
    return ir_measures_calc(names, qrels, run)  # in its own interpreter: see trec_reference


@pytest.mark.parametrize("depth", DEPTHS)
def test_every_reported_metric_equals_ir_measures(corpus: dict, depth, tmp_path: Path) -> None:
    ours, results = _ours(corpus, depth, tmp_path)
    registry = metric_registry(results["ks"])
    assert set(RETRIEVAL_KS) <= set(results["ks"])  # the seeds' cutoffs, 300 included
    # every metric ir_measures has: the headline's and every cutoff of nDCG@K and R@K
    names = [name for name, metric in registry.items() if metric.ir_measures]
    assert set(main_metrics(results["ks"])) - {"hard_negative_auc"} <= set(names)
    assert {f"nDCG@{k}" for k in RETRIEVAL_KS} | {f"R@{k}" for k in RETRIEVAL_KS} <= set(names)
    measures = [ir_measures.parse_measure(name) for name in names]
    assert [str(m) for m in measures] == names  # written as ir_measures writes them
    theirs = _theirs(names, corpus["judged"], corpus["scored"][depth])
    checked = 0
    for row in ours.iter_rows(named=True):
        for name in names:
            if row[name] is None:  # no relevant candidate at that level: excluded here
                continue
            assert row[name] == pytest.approx(theirs[(row[SURVEY_ID], name)], abs=1e-9), (
                depth,
                name,
                row[SURVEY_ID],
            )
            checked += 1
    assert checked >= 30 * len(names) * 0.9
    # the tier-exact recalls are ir_measures' R on the qrels of that tier alone
    for t in (1, 2, 3, 4):
        tier_qrels = {
            s: {d: int(v == t) for d, v in j.items()} for s, j in corpus["judged"].items()
        }
        tier = _theirs(["R@10"], tier_qrels, corpus["scored"][depth])
        for survey, value in ours.select(SURVEY_ID, f"recall@10_tier={t}").iter_rows():
            if value is not None:
                assert value == pytest.approx(tier[(survey, "R@10")], abs=1e-9)


@pytest.mark.parametrize("depth", DEPTHS)
def test_hard_negative_auc_compares_judged_pairs_only(corpus: dict, depth, tmp_path: Path) -> None:
    """Positives against judged hard negatives, the ones not retrieved at the lowest score;
    unjudged documents are neither (brute force over the pairs)."""
    ours, _ = _ours(corpus, depth, tmp_path)
    for survey, value in ours.select(SURVEY_ID, "hard_negative_auc").iter_rows():
        judged, scores = corpus["judged"][survey], corpus["scored"][depth][survey]
        score = {d: scores.get(d, float("-inf")) for d in judged}
        pos = [d for d, v in judged.items() if v >= 1]
        neg = [d for d, v in judged.items() if v == 0]
        wins = sum(
            1.0 if score[p] > score[n] else 0.5 if score[p] == score[n] else 0.0
            for p, n in itertools.product(pos, neg)
        )
        assert value == pytest.approx(wins / (len(pos) * len(neg)), abs=1e-12)


def test_depth_changes_recall_and_ap_as_trec_eval_does(corpus: dict, tmp_path: Path) -> None:
    """A top-10 run cannot reach the AP of the same ranking to the end: the relevant
    candidates it did not retrieve no longer sit at ranks 11, 12, ... (the old rule)."""
    top10, _ = _ours(corpus, 10, tmp_path / "10")
    full, _ = _ours(corpus, None, tmp_path / "all")
    assert top10["AP"].mean() < full["AP"].mean()
    assert (top10["R@300"] == top10["R@10"]).all()  # nothing retrieved below rank 10


def test_hand_computed_ranking_of_what_was_retrieved() -> None:
    """Relevant a (4) and b (1), hard negative n; the run retrieved x (unjudged) then a."""
    frame = pl.DataFrame(
        {
            SURVEY_ID: ["s"] * 4,
            CANDIDATE_ID: ["a", "b", "n", "x"],
            LABEL: [4, 1, 0, UNJUDGED_LABEL],
            SCORE: [0.5, None, None, 0.9],
        }
    )
    row = per_survey_metrics(
        frame, ["AP", "R@1", "R@2", "nDCG@2", "RR(rel=3)", "Rprec"], ks=(1, 2), ranked="scored"
    ).row(0, named=True)
    d2 = 1 / np.log2(3)
    assert row["AP"] == pytest.approx((1 / 2) / 2)  # b is not at rank 3: it is not ranked
    assert row["R@1"] == 0 and row["R@2"] == pytest.approx(1 / 2)
    assert row["nDCG@2"] == pytest.approx(4 * d2 / (4 + 1 * d2))  # ideal: a then b
    assert row["RR(rel=3)"] == pytest.approx(1 / 2)
    assert row["Rprec"] == pytest.approx(1 / 2)
    # re-ranking mode ranks every judged candidate: unscored b comes after the scored a, n
    judged = frame.filter(pl.col(LABEL) >= 0).with_columns(
        pl.when(pl.col(CANDIDATE_ID) == "n").then(0.1).otherwise(pl.col(SCORE)).alias(SCORE)
    )
    rerank = per_survey_metrics(judged, ["AP"], ks=(1, 2))
    assert rerank["AP"][0] == pytest.approx((1 / 1 + 2 / 3) / 2)


def test_a_survey_without_rows_scores_zero(corpus: dict, tmp_path: Path) -> None:
    """trec_eval -c: a survey the run has no row for counts, with nothing retrieved."""
    lines = corpus["runs"][100].read_text().splitlines()
    first = lines[0].split()[0]
    partial = tmp_path / "partial.trec"
    partial.write_text("\n".join(x for x in lines if not x.startswith(f"{first} ")) + "\n")
    with pytest.warns(UserWarning, match="no row for 1 of 30"):
        write_evaluation(
            corpus["release"], runs=[partial], out_dir=tmp_path, config=CONFIG, mode="retrieval"
        )
    row = (
        pl.read_parquet(tmp_path / "eval" / "per_survey.parquet")
        .filter((pl.col(SURVEY_ID) == first) & (pl.col(SUBSET) == "ALL"))
        .row(0, named=True)
    )
    assert row["AP"] == 0 and row["nDCG@10"] == 0 and row["R@100"] == 0


def test_judged_coverage_of_the_top_10_and_100(tmp_path: Path) -> None:
    """Judged@10 and Judged@100 per system: a constructed run whose shares are known, in
    the results and the report, equal to ir_measures' Judged@k per survey."""
    eval_set = synthetic_eval_set(3, 30, seed=4)
    release = tmp_path / "release"
    (release / "corpus").mkdir(parents=True)
    eval_set.write_parquet(release / EVAL_FILENAME)
    extra = [f"extra:{i:04d}" for i in range(200)]
    docs = sorted(set(eval_set[CANDIDATE_ID].to_list()) | set(extra))
    pl.DataFrame({"_id": docs}).write_parquet(release / beir_file("corpus", "eval"))
    first, second, third = sorted(eval_set[SURVEY_ID].unique().to_list())
    judged = {s: sorted(eval_set.filter(pl.col(SURVEY_ID) == s)[CANDIDATE_ID].to_list())
              for s in (first, second)}  # fmt: skip
    # first: 120 documents, its top 10 holds 4 judged, ranks 11-100 hold 16 more (20 of 100)
    ranking = [*judged[first][:4], *extra[:6], *judged[first][4:20], *extra[6:80], *extra[80:100]]
    assert len(ranking) == 120 and len(set(ranking)) == 120
    # second: 5 documents, all judged (its top 10 and top 100 are those 5); third: no row
    rows = [(first, d, 1000.0 - r) for r, d in enumerate(ranking)]
    rows += [(second, d, 10.0 - r) for r, d in enumerate(judged[second][:5])]
    run = tmp_path / "run.trec"
    run.write_text("".join(f"{s} Q0 {d} {i + 1} {v!r} mine\n" for i, (s, d, v) in enumerate(rows)))
    with pytest.warns(UserWarning, match="no row for 1 of 3"):
        results = write_evaluation(release, runs=[run], out_dir=tmp_path, config=CONFIG,
                                   mode="retrieval")  # fmt: skip
    shares = results["judged_coverage"]["mine"]
    expected = {"Judged@10": (4 / 10 + 1 + 0) / 3, "Judged@100": (20 / 100 + 1 + 0) / 3}
    assert shares == pytest.approx(expected, abs=1e-12)
    assert "Judged@k" in results["judged_coverage_doc"]
    report = (tmp_path / "eval" / "report.md").read_text()
    section = report[report.index("## Judged coverage") :]
    assert f"| mine | {shares['Judged@10']:.3f} | {shares['Judged@100']:.3f} |" in section
    # ir_measures' Judged@k on the same run and qrels
    qrels = [ir_measures.Qrel(s, c, int(v)) for s, c, v in
             eval_set.select(SURVEY_ID, CANDIDATE_ID, LABEL).iter_rows()]  # fmt: skip
    scored = [ir_measures.ScoredDoc(s, d, v) for s, d, v in rows]
    theirs = ir_measures.calc_aggregate(
        [ir_measures.parse_measure("Judged@10"), ir_measures.parse_measure("Judged@100")],
        qrels, scored,
    )  # fmt: skip
    assert {str(m): v for m, v in theirs.items()} == pytest.approx(expected, abs=1e-12)
