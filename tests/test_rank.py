"""Features, LightGBM training, --model-file, the leak probe and retrieval mode."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from pipeline.core.config import EvaluateConfig
from pipeline.core.release_files import beir_file
from pipeline.core.schema import CANDIDATES_VIEW, JUDGMENT_COLUMNS, SURVEY_DATE
from pipeline.evaluate import write_evaluation
from pipeline.evaluate.columns import (
    CANDIDATE_ID,
    EVAL_FILENAME,
    LABEL,
    SUBSET,
    SURVEY_ID,
    SYSTEM,
)
from pipeline.evaluate.report.markdown import render_report
from pipeline.evaluate.synthetic import synthetic_eval_set
from pipeline.evaluate.systems.learned import leak_probe
from pipeline.evaluate.systems.runs import RunError, RunWarning
from pipeline.rank import FeatureError, ModelError, compute_features, load_model, train_release
from pipeline.rank.features import FEATURE_SETS, FEATURES, METADATA_SET, TEXT
from tests.test_negatives import synthetic_release_dir
from tests.trec_reference import pytrec_eval_many

FAST = EvaluateConfig(bootstrap_samples=50, random_seeds=2)


@pytest.fixture
def release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return synthetic_release_dir(tmp_path_factory) / "release"


# ------------------------------------------------------------------ features
def test_features_read_no_judgment_column(release: Path) -> None:
    """Features of the full reading lists (every judgment column present, then scrambled)
    equal those of the answer-free view: no feature reads a judgment."""
    view = pl.read_parquet(release / "candidates" / "train.parquet")
    assert view.columns == CANDIDATES_VIEW.names
    lists = pl.read_parquet(release / "train_survey_reading_lists.parquet")
    assert JUDGMENT_COLUMNS & set(lists.columns)
    scrambled = lists.with_columns(
        pl.col(c).shuffle(seed=i)
        for i, c in enumerate(sorted(JUDGMENT_COLUMNS & set(lists.columns)))
    )
    expected = compute_features(view)
    assert compute_features(lists).equals(expected)
    assert compute_features(scrambled).equals(expected)
    with pytest.raises(FeatureError, match="missing candidates-view column"):
        compute_features(view.drop(SURVEY_DATE))


def test_features_of_a_survey_use_only_its_own_rows(release: Path) -> None:
    """A survey's features are the same computed alone: nothing from another survey
    (in particular a later one) reaches them; and changing every other survey's rows,
    dates included, changes nothing."""
    view = pl.read_parquet(release / "candidates" / "train.parquet")
    everything = compute_features(view)
    surveys = view.select(SURVEY_ID, SURVEY_DATE).unique().sort(SURVEY_DATE, SURVEY_ID)
    assert surveys.height >= 3
    for survey in surveys[SURVEY_ID].to_list():
        alone = compute_features(view.filter(pl.col(SURVEY_ID) == survey))
        assert alone.equals(everything.filter(pl.col(SURVEY_ID) == survey)), survey
    earliest = surveys[SURVEY_ID][0]
    others_changed = view.with_columns(
        pl.when(pl.col(SURVEY_ID) != earliest)
        .then(pl.col(c).shuffle(seed=1))
        .otherwise(pl.col(c))
        .alias(c)
        for c in CANDIDATES_VIEW.names
        if c not in (SURVEY_ID, CANDIDATE_ID)
    )
    assert (
        compute_features(others_changed)
        .filter(pl.col(SURVEY_ID) == earliest)
        .equals(everything.filter(pl.col(SURVEY_ID) == earliest))
    )


def test_metadata_set_has_no_text_feature() -> None:
    kinds = {f.name: f.kind for f in FEATURES}
    assert FEATURE_SETS[METADATA_SET]
    assert all(kinds[n] != TEXT for n in FEATURE_SETS[METADATA_SET])


# ------------------------------------------------------------------ training
def test_train_twice_gives_identical_bytes_and_model_file_reproduces_lgbm(
    release: Path, tmp_path: Path
) -> None:
    first = train_release(release, tmp_path / "a")
    second = train_release(release, tmp_path / "b")
    assert first.read_bytes() == second.read_bytes()
    assert first.with_suffix(".json").read_bytes() == second.with_suffix(".json").read_bytes()
    meta = json.loads(first.with_suffix(".json").read_text())
    assert meta["feature_set"] == "full" and meta["validation"]["surveys"]

    with pytest.warns(RunWarning, match="exactly the per-survey values of baseline lgbm"):
        results = write_evaluation(
            release, out_dir=tmp_path / "out", config=FAST, model_files=[first]
        )
    assert results["baselines"][:5] == ["random", "popularity", "bm25", "lgbm", "lgbm-metadata"]
    assert results["submitted"] == ["model"]
    per_survey = pl.read_parquet(tmp_path / "out" / "eval" / "per_survey.parquet")
    rows = {
        name: per_survey.filter(pl.col(SYSTEM) == name).drop(SYSTEM) for name in ("lgbm", "model")
    }
    assert rows["lgbm"].height > 0 and rows["lgbm"].equals(rows["model"])
    assert results["systems"]["lgbm"] == results["systems"]["model"]
    # the same model twice is named as such (make eval once compared lgbm with itself)
    assert results["same_as_baseline"] == {"model": "lgbm"}
    report = (tmp_path / "out" / "eval" / "report.md").read_text()
    assert "`model` gives exactly the per-survey values of baseline `lgbm`" in report
    assert "expected" not in report  # no hard-coded expectations


def test_model_file_needs_its_json(release: Path, tmp_path: Path) -> None:
    path = train_release(release, tmp_path)
    load_model(path)
    meta_file = path.with_suffix(".json")
    meta = json.loads(meta_file.read_text())
    meta_file.write_text(json.dumps(meta | {"feature_set_version": 0}))
    with pytest.raises(ModelError, match="feature_set_version 0"):
        load_model(path)
    meta_file.unlink()
    with pytest.raises(ModelError, match="no model.json"):
        load_model(path)


# ------------------------------------------------------------------ leak probe
def _overall(probe: float, bm25: float) -> dict:
    return {
        "lgbm-metadata": {"nDCG@10": {"mean": probe}, "hard_negative_auc": {"mean": 0.5}},
        "bm25": {"nDCG@10": {"mean": bm25}, "hard_negative_auc": {"mean": 0.6}},
    }


def test_leak_probe_flags_a_metadata_model_that_beats_bm25(release: Path, tmp_path: Path) -> None:
    assert leak_probe(_overall(0.4, 0.5))["flagged"] is False
    assert leak_probe(_overall(0.6, 0.5))["flagged"] is True
    results = write_evaluation(release, out_dir=tmp_path, config=FAST)
    flagged = results | {"leak_probe": leak_probe(_overall(0.6, 0.5))}
    assert "LEAK WARNING" in render_report(flagged)
    assert "LEAK WARNING" not in render_report(
        results | {"leak_probe": leak_probe(_overall(0.4, 0.5))}
    )


def test_leak_probe_counts_a_lead_only_beyond_chance(release: Path, tmp_path: Path) -> None:
    """The evaluation's probe takes the paired test of ``lgbm-metadata`` against ``bm25`` from
    the evaluation's own baseline tests, as the release's audit probe takes its own."""

    def tests(p: float) -> list[dict]:
        return [
            {"system": "lgbm-metadata", "baseline": "bm25", "metric": "nDCG@10", "p_value": p},
            {"system": "lgbm", "baseline": "bm25", "metric": "nDCG@10", "p_value": 0.001},
        ]

    within = leak_probe(_overall(0.6, 0.5), tests(0.30))
    assert within["flagged"] is False
    row = within["metrics"]["nDCG@10"]
    assert (row["beats"], row["beats_within_chance"], row["p_value"]) == (False, True, 0.30)
    assert leak_probe(_overall(0.6, 0.5), tests(0.01))["flagged"] is True
    assert leak_probe(_overall(0.6, 0.5), tests(float("nan")))["flagged"] is True  # no test
    results = write_evaluation(release, out_dir=tmp_path, config=FAST)
    text = render_report(results | {"leak_probe": within})
    assert "LEAK WARNING" not in text and "within chance" in text
    # the evaluation passes its tests: every probe metric carries the test's p-value
    probe = results["leak_probe"]
    if probe is not None:
        assert all("p_value" in row for row in probe["metrics"].values())


# ------------------------------------------------------------------ retrieval mode
@pytest.fixture
def corpus_release(tmp_path: Path) -> dict[str, Path]:
    """An eval set, a corpus of its candidates plus unjudged documents, and a full-corpus run."""
    eval_set = synthetic_eval_set(12, 15, seed=3)
    release = tmp_path / "release"
    (release / "corpus").mkdir(parents=True)
    eval_set.write_parquet(release / EVAL_FILENAME)
    docs = sorted(set(eval_set[CANDIDATE_ID].to_list()) | {f"extra:{i:03d}" for i in range(60)})
    pl.DataFrame({"_id": docs}).write_parquet(release / beir_file("corpus", "eval"))
    rng = np.random.default_rng(5)
    lines = []
    for survey in sorted(set(eval_set[SURVEY_ID].to_list())):
        scores = (rng.permutation(len(docs)) / len(docs) + 1).tolist()  # distinct per survey
        lines += [f"{survey} Q0 {d} 0 {s!r} full" for d, s in zip(docs, scores, strict=True)]
    run = tmp_path / "full.trec"
    run.write_text("\n".join(lines) + "\n")
    return {"release": release, "run": run, "eval_set": release / EVAL_FILENAME}


def test_full_corpus_run_without_retrieval_mode_names_the_flag(
    corpus_release: dict[str, Path], tmp_path: Path
) -> None:
    with pytest.raises(RunError, match="--mode retrieval"):
        write_evaluation(corpus_release["release"], runs=[corpus_release["run"]], out_dir=tmp_path)


def test_retrieval_mode_agrees_with_pytrec_eval(
    corpus_release: dict[str, Path], tmp_path: Path
) -> None:
    ks = FAST.ks
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a complete run: nothing dropped, no survey missing
        results = write_evaluation(
            corpus_release["release"],
            runs=[corpus_release["run"]],
            out_dir=tmp_path,
            config=FAST,
            mode="retrieval",
        )
    assert results["mode"] == "retrieval" and results["baselines"] == []
    ours = pl.read_parquet(tmp_path / "eval" / "per_survey.parquet").filter(
        (pl.col(SYSTEM) == "full") & (pl.col(SUBSET) == "ALL")
    )
    judged = pl.read_parquet(corpus_release["eval_set"])
    qrels: dict[str, dict[str, int]] = {}
    for survey, doc, label in judged.select(SURVEY_ID, CANDIDATE_ID, LABEL).iter_rows():
        qrels.setdefault(survey, {})[doc] = int(label)
    run: dict[str, dict[str, float]] = {}
    for line in corpus_release["run"].read_text().splitlines():
        survey, _, doc, _, score, _ = line.split()
        run.setdefault(survey, {})[doc] = float(score)
    cut = ",".join(map(str, ks))
    level1, level3 = pytrec_eval_many(
        qrels, run, [({f"ndcg_cut.{cut}", f"recall.{cut}", "map", "Rprec"}, 1), ({"recip_rank"}, 3)]
    )
    pairs = [(f"nDCG@{k}", f"ndcg_cut_{k}") for k in ks] + [(f"R@{k}", f"recall_{k}") for k in ks]
    pairs += [("AP", "map"), ("Rprec", "Rprec")]
    checked = 0
    for row in ours.iter_rows(named=True):
        for mine, theirs in pairs:
            if row[mine] is not None:
                assert row[mine] == pytest.approx(level1[row[SURVEY_ID]][theirs], abs=1e-9)
                checked += 1
        if row["RR(rel=3)"] is not None:
            assert row["RR(rel=3)"] == pytest.approx(level3[row[SURVEY_ID]]["recip_rank"], abs=1e-9)
    assert checked > 100


def test_retrieval_mode_rejects_documents_outside_the_corpus(
    corpus_release: dict[str, Path], tmp_path: Path
) -> None:
    bad = tmp_path / "bad.trec"
    first = corpus_release["run"].read_text().splitlines()[0].split()
    bad.write_text(f"{first[0]} Q0 nowhere:1 0 1.0 bad\n")
    with pytest.raises(RunError, match="not in the split's corpus"):
        write_evaluation(corpus_release["release"], runs=[bad], out_dir=tmp_path, mode="retrieval")
