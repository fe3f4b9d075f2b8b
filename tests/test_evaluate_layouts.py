"""The release as the field's loaders read it: MTEB's retrieval/re-ranking layout and BEIR's.

Each loader's contract is replicated with ``datasets`` and ``pytrec_eval`` (what MTEB's
``RetrievalDatasetLoader`` and BEIR's ``HFDataLoader``/``GenericDataLoader`` and
``EvaluateRetrieval`` call), so these run on a clean install. Where ``mteb`` or ``beir``
is installed, the same release goes through their own loaders and evaluation too. A
trivial model's scores are evaluated both ways and the re-ranking numbers must be equal.
"""

from __future__ import annotations

import csv
import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from pipeline import api
from pipeline.core.config import Config, EvaluateConfig
from pipeline.core.release_files import BEIR_VIEWS
from tests.test_negatives import synthetic_release_dir
from tests.trec_reference import pytrec_eval

KS = (1, 3, 5, 10, 20, 100)  # MTEB's cutoffs (1000 aside)
CONFIG = Config(evaluate=EvaluateConfig(bootstrap_samples=20, random_seeds=1, ks=KS))


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return synthetic_release_dir(tmp_path_factory) / "release"


def trivial_score(query_id: str, doc_id: str) -> float:
    """A fixed pseudo-random score, exact in float32 (trec_eval compares in single precision)."""
    digest = hashlib.blake2b(f"{query_id}\0{doc_id}".encode(), digest_size=4).digest()
    return (int.from_bytes(digest, "little") % 2**24) / 2**24


def _results(top_ranked: dict[str, list[str]]) -> dict[str, dict[str, float]]:
    results = {q: {d: trivial_score(q, d) for d in docs} for q, docs in top_ranked.items()}
    for q, scores in results.items():  # no ties: every number below is tie-free
        assert len(set(scores.values())) == len(scores), q
    return results


def _ours(release: Path, results: dict[str, dict[str, float]]) -> dict[str, float]:
    out = api.evaluate_scores(results, release, name="trivial", config=CONFIG)
    return {name: stat["mean"] for name, stat in out.results["systems"]["trivial"].items() if stat}


def _pytrec(qrels: dict, results: dict) -> dict[str, float]:
    """MTEB's and BEIR's scoring: pytrec_eval over the queries, averaged."""
    cuts = ",".join(map(str, KS))
    measures = {f"ndcg_cut.{cuts}", f"map_cut.{cuts}", f"recall.{cuts}"}
    per_query = pytrec_eval(qrels, results, measures)
    keys = next(iter(per_query.values())).keys()
    return {k: float(np.mean([v[k] for v in per_query.values()])) for k in keys}


def _load_mteb_contract(release: Path, cache: Path) -> dict:
    """What MTEB's RetrievalDatasetLoader(hf_repo=release, split="test").load() does."""
    from datasets import (
        Features,
        Sequence,
        Value,
        get_dataset_config_names,
        get_dataset_split_names,
        load_dataset,
    )

    configs = get_dataset_config_names(str(release))
    assert {"corpus", "queries", "top_ranked"} <= set(configs)
    qrels_config = "default" if "default" in configs else "qrels"  # MTEB's fallback
    assert qrels_config == "qrels"

    def split(config: str):
        names = get_dataset_split_names(str(release), config_name=config)
        assert "test" in names and "train" in names, (config, names)
        return load_dataset(str(release), config, split="test", cache_dir=str(cache))

    corpus = split("corpus").cast_column("_id", Value("string")).rename_column("_id", "id")
    queries = split("queries").cast_column("_id", Value("string")).rename_column("_id", "id")
    qrels_ds = (
        split(qrels_config)
        .select_columns(["query-id", "corpus-id", "score"])
        .cast(
            Features(
                {"query-id": Value("string"), "corpus-id": Value("string"), "score": Value("int32")}
            )
        )
    )
    qrels: dict[str, dict[str, int]] = {}
    for row in qrels_ds:
        qrels.setdefault(row["query-id"], {})[row["corpus-id"]] = row["score"]
    top_ds = split("top_ranked").cast(
        Features({"query-id": Value("string"), "corpus-ids": Sequence(Value("string"))})
    )
    top_ranked = dict(zip(top_ds["query-id"], top_ds["corpus-ids"], strict=True))
    return {"corpus": corpus, "queries": queries, "qrels": qrels, "top_ranked": top_ranked}


def test_mteb_layout_contract_and_reranking_numbers(release: Path, offline: Path) -> None:
    data = _load_mteb_contract(release, offline)
    assert set(data["top_ranked"]) == set(data["qrels"]) == set(data["queries"]["id"])
    corpus_ids = set(data["corpus"]["id"])
    for query, docs in data["top_ranked"].items():
        assert set(docs) == set(data["qrels"][query]) and set(docs) <= corpus_ids
    theirs = _pytrec(data["qrels"], _results(data["top_ranked"]))
    ours = _ours(release, _results(data["top_ranked"]))
    for k in KS:
        assert ours[f"nDCG@{k}"] == pytest.approx(theirs[f"ndcg_cut_{k}"], abs=1e-9)
        assert ours[f"R@{k}"] == pytest.approx(theirs[f"recall_{k}"], abs=1e-9)
    assert ours["AP"] == pytest.approx(theirs[f"map_cut_{max(KS)}"], abs=1e-9)  # lists < 100


def test_beir_hf_loader_takes_the_eval_split_first(release: Path, offline: Path) -> None:
    """BEIR's HFDataLoader takes the first split of corpus and queries, and qrels[split]
    of the repo's default config."""
    from datasets import load_dataset

    corpus = load_dataset(str(release), "corpus", cache_dir=str(offline))
    queries = load_dataset(str(release), "queries", cache_dir=str(offline))
    qrels = load_dataset(str(release), cache_dir=str(offline))  # the default config
    assert next(iter(corpus)) == next(iter(queries)) == "test"
    assert set(qrels["test"].column_names) == {"query-id", "corpus-id", "score"}
    test_queries = set(next(iter(queries.values()))["_id"])
    assert test_queries == set(qrels["test"]["query-id"])
    assert set(qrels["test"]["corpus-id"]) <= set(next(iter(corpus.values()))["_id"])


def _generic_contract(folder: Path, split: str = "test") -> tuple[dict, dict, dict]:
    """What BEIR's GenericDataLoader(folder).load(split) reads."""
    corpus, queries, qrels = {}, {}, {}
    for line in (folder / "corpus.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        corpus[row.get("_id")] = {"text": row.get("text"), "title": row.get("title")}
    for line in (folder / "queries.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        queries[row.get("_id")] = row.get("text")
    with (folder / "qrels" / f"{split}.tsv").open(encoding="utf-8") as f:
        reader = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_MINIMAL)
        next(reader)
        for query, doc, score in reader:
            qrels.setdefault(query, {})[doc] = int(score)
    return corpus, {q: queries[q] for q in qrels}, qrels


def test_export_beir_is_what_generic_data_loader_reads(release: Path, tmp_path: Path) -> None:
    import polars as pl

    out = api.export(release, tmp_path / "beir")
    assert set(out.files) == {"corpus.jsonl", "queries.jsonl", "qrels/test.tsv", "top_ranked.jsonl"}
    corpus, queries, qrels = _generic_contract(tmp_path / "beir")
    release_qrels = pl.read_parquet(release / "qrels" / "test.parquet")
    assert (
        sum(len(v) for v in qrels.values()) == release_qrels.height == out.files["qrels/test.tsv"]
    )
    assert set(corpus) == set(pl.read_parquet(release / "corpus" / "test.parquet")["_id"])
    assert set(queries) == set(release_qrels["query-id"])
    top = [json.loads(x) for x in (tmp_path / "beir" / "top_ranked.jsonl").read_text().splitlines()]
    top_ranked = {row["query-id"]: row["corpus-ids"] for row in top}
    theirs = _pytrec(qrels, _results(top_ranked))
    ours = _ours(release, _results(top_ranked))
    assert ours["nDCG@10"] == pytest.approx(theirs["ndcg_cut_10"], abs=1e-9)
    # the same release gives the same bytes; the train split goes to its own folder
    again = api.export(release, tmp_path / "again")
    for name in again.files:
        assert (tmp_path / "beir" / name).read_bytes() == (tmp_path / "again" / name).read_bytes()
    train = api.export(release, tmp_path / "train", split="train")
    assert "qrels/train.tsv" in train.files
    with pytest.raises(ValueError, match="--format 'trec'"):
        api.export(release, tmp_path / "x", format="trec")


def test_export_cli(release: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from pipeline.cli import main

    assert (
        main(
            ["export", "--format", "beir", "--out", str(tmp_path / "b"), "--release", str(release)]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "corpus.jsonl" in printed and "qrels/test.tsv" in printed


# ------------------------------------------------------------------ with the libraries themselves
def test_mteb_own_loader_reads_the_release(release: Path, offline: Path) -> None:
    pytest.importorskip("mteb")
    from mteb.abstasks.retrieval_dataset_loaders import RetrievalDatasetLoader

    data = RetrievalDatasetLoader(hf_repo=str(release), revision=None, split="test").load()
    assert data["top_ranked"] is not None
    contract = _load_mteb_contract(release, offline)
    assert data["relevant_docs"] == contract["qrels"]
    assert {q: list(d) for q, d in data["top_ranked"].items()} == contract["top_ranked"]
    assert set(data["corpus"]["id"]) == set(contract["corpus"]["id"])


def test_mteb_reranking_task_gives_our_numbers(release: Path, offline: Path) -> None:
    """MTEB's own re-ranking evaluation of a trivial search model equals ours."""
    pytest.importorskip("mteb")
    from mteb.abstasks.retrieval import AbsTaskRetrieval
    from mteb.abstasks.task_metadata import TaskMetadata

    class SurveyReadingLists(AbsTaskRetrieval):
        metadata = TaskMetadata(
            name="SurveyReadingListsReranking",
            description="Re-rank each survey's judged candidates.",
            reference="https://huggingface.co/datasets/OWNER/survey-reading-lists",
            dataset={"path": str(release), "revision": "local"},
            type="Reranking",
            category="t2t",
            modalities=["text"],
            eval_splits=["test"],
            eval_langs=["eng-Latn"],
            main_score="ndcg_at_10",
            date=("2023-01-01", "2025-12-31"),
            domains=["Academic"],
            task_subtypes=[],
            license="cc-by-sa-4.0",
            annotations_creators="derived",
            dialect=[],
            sample_creation="found",
            bibtex_citation="",
        )

    class TrivialSearch:
        """An MTEB SearchProtocol model: the fixed pseudo-random score of each pair."""

        mteb_model_meta = None

        def index(self, corpus, **kwargs) -> None:
            self.ids = list(corpus["id"])

        def search(self, queries, *, top_k, top_ranked=None, **kwargs):
            return {q: {d: trivial_score(q, d) for d in top_ranked[q]} for q in queries["id"]}

    task = SurveyReadingLists()
    task.load_data()
    scores = task.evaluate(TrivialSearch(), split="test", encode_kwargs={})["default"]
    top_ranked = {q: list(d) for q, d in task.dataset["default"]["test"]["top_ranked"].items()}
    ours = _ours(release, _results(top_ranked))
    for k in (1, 3, 5, 10, 20, 100):
        assert ours[f"nDCG@{k}"] == pytest.approx(scores[f"ndcg_at_{k}"], abs=1e-5)
        assert ours[f"R@{k}"] == pytest.approx(scores[f"recall_at_{k}"], abs=1e-5)


def test_beir_own_loaders_and_evaluation(release: Path, tmp_path: Path, offline: Path) -> None:
    pytest.importorskip("beir")
    from beir.datasets.data_loader import GenericDataLoader
    from beir.datasets.data_loader_hf import HFDataLoader
    from beir.retrieval.evaluation import EvaluateRetrieval

    api.export(release, tmp_path / "beir")
    corpus, queries, qrels = GenericDataLoader(str(tmp_path / "beir")).load(split="test")
    assert (corpus, queries, qrels) == _generic_contract(tmp_path / "beir")
    hf = HFDataLoader(hf_repo=str(release), hf_repo_qrels=str(release), streaming=False)
    hf_corpus, hf_queries, hf_qrels = hf.load(split="test")
    assert set(hf_corpus["id"]) == set(corpus) and set(hf_queries["id"]) == set(queries)
    assert hf_qrels == qrels
    top = [json.loads(x) for x in (tmp_path / "beir" / "top_ranked.jsonl").read_text().splitlines()]
    results = _results({row["query-id"]: row["corpus-ids"] for row in top})
    ndcg, _map, recall, _ = EvaluateRetrieval.evaluate(qrels, results, [1, 3, 5, 10, 100])
    ours = _ours(release, results)
    for k in (1, 3, 5, 10, 100):
        assert ours[f"nDCG@{k}"] == pytest.approx(ndcg[f"NDCG@{k}"], abs=1e-5)  # BEIR rounds to 5
        assert ours[f"R@{k}"] == pytest.approx(recall[f"Recall@{k}"], abs=1e-5)


def test_every_retrieval_view_is_a_config(release: Path) -> None:
    card = (release / "README.md").read_text(encoding="utf-8")
    for view in BEIR_VIEWS:
        assert f"- config_name: {view}\n" in card
