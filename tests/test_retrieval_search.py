"""Retrieval mode with a model: exact top-k search by the tie rule, in bounded chunks, and
the corpus's encoding resumed after ``kill -9``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from pipeline import api
from pipeline.core.config import Config, EvaluateConfig
from pipeline.core.release_files import EVAL_FILE, beir_file
from pipeline.evaluate.columns import CANDIDATE_ID, SCORE, SURVEY_ID
from pipeline.evaluate.examples import hashed_words
from pipeline.evaluate.retrieval.corpus_vectors import BATCHES_DIR, VECTORS_DIR, VECTORS_FILE
from pipeline.evaluate.retrieval.exact import DocOrder, exact_top_k, unit_rows
from pipeline.evaluate.scoring.ties import tie_key
from pipeline.evaluate.synthetic import synthetic_eval_set

CONFIG = Config(evaluate=EvaluateConfig(bootstrap_samples=20, random_seeds=1))
LOG_ENV = "TEST_ENCODER_LOG"  # where logged_encoder appends the texts of each call
SLEEP_ENV = "TEST_ENCODER_SLEEP"


def logged_encoder(texts: list[str]) -> np.ndarray:
    """:func:`hashed_words`, appending each call's texts to ``$TEST_ENCODER_LOG`` (one
    JSON line a call) and sleeping ``$TEST_ENCODER_SLEEP`` seconds, so a test can kill it."""
    time.sleep(float(os.environ.get(SLEEP_ENV, "0")))
    with open(os.environ[LOG_ENV], "a", encoding="utf-8") as log:
        log.write(json.dumps(texts) + "\n")
    return hashed_words(texts)


# ------------------------------------------------------------------ exact search
def _by_the_rule(
    queries: np.ndarray, query_ids: list[str], docs: np.ndarray, ids: list[str], k: int
):
    """Each query's first k documents by score, tie key, id: the whole matrix at once."""
    scores = unit_rows(queries) @ unit_rows(docs).T
    out = {}
    for q, query in enumerate(query_ids):
        order = sorted(range(len(ids)), key=lambda j: (-scores[q, j], tie_key(query, ids[j]), ids[j]))  # fmt: skip
        out[query] = [ids[j] for j in order[:k]]
    return out


def _npy(path: Path, matrix: np.ndarray) -> Path:
    np.save(path, matrix)
    return path


@pytest.mark.parametrize("chunk_rows", [1, 7, 64, 1000])
def test_chunked_search_keeps_the_tie_rules_top_k(tmp_path: Path, chunk_rows: int) -> None:
    rng = np.random.default_rng(3)
    # 40 distinct directions, each repeated: many documents tie exactly, across chunks
    docs = np.repeat(rng.standard_normal((40, 6)), 5, axis=0)[rng.permutation(200)]
    docs[:3] = 0.0  # zero vectors score 0
    ids = [
        f"{prefix}:{i:03d}" for i, prefix in zip(range(200), ["arxiv", "doi"] * 100, strict=True)
    ]
    queries = rng.standard_normal((9, 6))
    query_ids = [f"S{i}" for i in range(9)]
    order = DocOrder.of(pl.Series(ids))
    for k in (1, 12, 37, 200, 500):
        found = exact_top_k(queries, query_ids, _npy(tmp_path / "v.npy", docs), order, k,
                            chunk_rows=chunk_rows, query_block=4)  # fmt: skip
        expected = _by_the_rule(queries, query_ids, docs, ids, k)
        for query in query_ids:
            rows = found.filter(pl.col(SURVEY_ID) == query)
            assert sorted(rows[CANDIDATE_ID].to_list()) == sorted(expected[query]), (query, k)
            assert rows.height == min(k, 200)
        assert found[SCORE].dtype == pl.Float64


# ------------------------------------------------------------------ resumable encoding
def _release(root: Path) -> Path:
    """An eval set of 6 surveys x 10 candidates and a corpus of those plus 140 unjudged
    documents with texts."""
    eval_set = synthetic_eval_set(6, 10, seed=4)
    release = root / "release"
    (release / "corpus").mkdir(parents=True)
    eval_set.write_parquet(release / EVAL_FILE)
    judged = eval_set.select(
        pl.col(CANDIDATE_ID).alias("_id"),
        pl.col("candidate_title").alias("title"),
        pl.col("candidate_abstract").fill_null("").alias("text"),
    ).unique("_id", keep="first")
    words = ["graph", "neural", "survey", "retrieval", "kernel", "vision", "speech", "robot"]
    rng = np.random.default_rng(9)
    extra = pl.DataFrame(
        {
            "_id": [f"extra:{i:04d}" for i in range(140)],
            "title": [" ".join(rng.choice(words, 4)) for _ in range(140)],
            "text": [" ".join(rng.choice(words, 12)) for _ in range(140)],
        }
    )
    pl.concat([judged, extra]).sort("_id").write_parquet(release / beir_file("corpus", "eval"))
    return release


def _evaluate_argv(release: Path, out: Path) -> list[str]:
    return [
        sys.executable, "-m", "pipeline", "evaluate", "--release", str(release), "--mode",
        "retrieval", "--encoder", "tests.test_retrieval_search:logged_encoder", "--batch-size",
        "8", "--top-k", "50", "--no-learned", "--out", str(out),
    ]  # fmt: skip


def _logged(path: Path) -> list[list[str]]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_kill_minus_9_while_encoding_then_rerun_encodes_only_the_missing_batches(
    tmp_path: Path,
) -> None:
    release = _release(tmp_path)
    corpus_size = pl.read_parquet(release / beir_file("corpus", "eval")).height
    n_batches = -(-corpus_size // 8)
    vectors = tmp_path / "out" / "cache" / VECTORS_DIR  # the cache of --out
    env = {**os.environ, LOG_ENV: str(tmp_path / "first.log"), SLEEP_ENV: "0.3",
           "PYTHONPATH": str(Path(__file__).resolve().parents[1])}  # fmt: skip
    process = subprocess.Popen(_evaluate_argv(release, tmp_path / "out"), env=env, cwd=tmp_path,
                               stderr=subprocess.PIPE)  # fmt: skip
    deadline = time.monotonic() + 120
    batches: list[Path] = []
    while time.monotonic() < deadline and len(batches) < 4:
        batches = sorted(vectors.glob(f"*/{BATCHES_DIR}/*.npy"))
        time.sleep(0.05)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    assert process.returncode == -signal.SIGKILL, process.stderr.read() if process.stderr else ""
    done = sorted(vectors.glob(f"*/{BATCHES_DIR}/*.npy"))
    assert 4 <= len(done) < n_batches
    assert not list(vectors.glob(f"*/{VECTORS_FILE}"))
    first_texts = {t for call in _logged(tmp_path / "first.log") for t in call}

    os.environ[LOG_ENV] = str(tmp_path / "second.log")
    try:
        result = api.evaluate(release, out=tmp_path / "out", mode="retrieval", top_k=50,
                              encoders=["tests.test_retrieval_search:logged_encoder"],
                              batch_size=8, learned=False, config=CONFIG)  # fmt: skip
    finally:
        del os.environ[LOG_ENV]
    facts = result.results["models"]["logged_encoder"]
    assert facts["batches_reused"] == len(done)
    assert facts["batches_encoded"] == n_batches - len(done)
    second_calls = _logged(tmp_path / "second.log")
    assert len(second_calls) == n_batches - len(done)  # the queries came from the cache
    # a batch on disk before the kill is not encoded again
    from pipeline.evaluate.retrieval.corpus_vectors import load_corpus

    corpus = load_corpus(release / EVAL_FILE)
    assert corpus is not None
    on_disk = {t for start, texts in corpus.batches(8) for t in texts
               if f"{start:012d}.npy" in {p.name for p in done}}  # fmt: skip
    assert on_disk <= first_texts
    assert not on_disk & {t for call in second_calls for t in call} - _repeated(corpus, on_disk)
    # the resumed vectors are those of one uninterrupted encoding
    (resumed,) = vectors.glob(f"*/{VECTORS_FILE}")
    assert not list(vectors.glob(f"*/{BATCHES_DIR}"))
    texts = [t for _, batch in corpus.batches(8) for t in batch]
    assert np.array_equal(np.load(resumed), hashed_words(texts))


def _repeated(corpus, on_disk: set[str]) -> set[str]:
    """Texts of batches on disk that also occur in a batch that was not (the same text twice
    in the corpus is encoded once per row)."""
    rows: dict[str, int] = {}
    for _, batch in corpus.batches(8):
        for text in batch:
            rows[text] = rows.get(text, 0) + 1
    return {t for t in on_disk if rows[t] > 1}


# ------------------------------------------------------------------ bm25 and scorers
def _bm25_full_run(release: Path, path: Path) -> Path:
    """A TREC run of BM25 (the library's, as the baseline computes it) of every corpus
    document against every eval survey, written here from the texts."""
    from pipeline.evaluate.evalset import load_eval_set
    from pipeline.evaluate.retrieval.model_runs import surveys
    from pipeline.rules.text_match import BM25Index, paper_text, tokenize

    corpus = pl.read_parquet(release / beir_file("corpus", "eval"))
    docs = corpus.select(tokenize(paper_text(pl.col("title"), pl.col("text")))).to_series()
    index = BM25Index(docs.to_list())
    queries = surveys(load_eval_set(release / EVAL_FILE))
    lines = []
    for survey, text in queries.iter_rows():
        tokens = pl.select(tokenize(pl.lit(text))).item().to_list()
        for doc, score in zip(corpus["_id"].to_list(), index.scores(tokens), strict=True):
            lines.append(f"{survey} Q0 {doc} 0 {float(score)!r} full")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_bm25_baseline_and_scorers_over_the_whole_corpus(tmp_path: Path) -> None:
    release = _release(tmp_path)
    full = _bm25_full_run(release, tmp_path / "bm25.trec")
    result = api.evaluate(
        release, out=tmp_path / "a", mode="retrieval", top_k=30, runs=[full],
        scorers=["pipeline.evaluate.examples:word_overlap"], learned=False, config=CONFIG,
    ).results  # fmt: skip
    assert result["baselines"] == ["bm25"]
    assert result["learned_baselines"]["bm25"]["top_k"] == 30
    # the baseline's top 30 is the top 30 of the same scores over the whole corpus
    for metric in ("nDCG@10", "nDCG@20", "R@20"):
        assert result["systems"]["bm25"][metric]["mean"] == pytest.approx(
            result["systems"]["full"][metric]["mean"], abs=1e-12
        )
    scorer = result["models"]["word_overlap"]
    assert scorer["first_stage"] == "bm25" and scorer["pairs_scored"] == 30 * result["n_surveys"]
    # a run file or the command's encoder as the first stage
    run_first = api.evaluate(
        release, out=tmp_path / "b", mode="retrieval", top_k=5, first_stage=str(full),
        scorers=["pipeline.evaluate.examples:word_overlap"], learned=False, config=CONFIG,
    ).results  # fmt: skip
    assert run_first["models"]["word_overlap"]["first_stage"] == "full"
    assert run_first["runs"]["word_overlap"]["rows"] == 5 * run_first["n_surveys"]
    encoder_first = api.evaluate(
        release, out=tmp_path / "c", mode="retrieval", top_k=5, first_stage="encoder",
        encoders=["pipeline.evaluate.examples:hashed_words"],
        scorers=["pipeline.evaluate.examples:word_overlap"], learned=False, config=CONFIG,
    ).results  # fmt: skip
    assert encoder_first["models"]["word_overlap"]["first_stage"] == "hashed_words"


def test_faiss_index_reports_its_recall_against_exact_and_is_cached(tmp_path: Path) -> None:
    pytest.importorskip("faiss", reason="the [ann] extra's faiss-cpu is not installed")
    release = _release(tmp_path)

    def run(index: str, out: str) -> dict:
        return api.evaluate(
            release, out=tmp_path / out, mode="retrieval", top_k=20, index=index,
            cache_dir=tmp_path / "cache",
            encoders=["pipeline.evaluate.examples:hashed_words"], learned=False, config=CONFIG,
        ).results["models"]["hashed_words"]  # fmt: skip

    exact, first, second = run("exact", "a"), run("faiss", "b"), run("faiss", "c")
    assert exact["index"] == "exact" and "ann_recall@20" not in exact
    assert first["index"] == "faiss" and first["index_built"] and not second["index_built"]
    assert 0.9 <= first["ann_recall@20"] <= 1.0
    assert second["ann_recall@20"] == first["ann_recall@20"]
    (index_file,) = (tmp_path / "cache" / VECTORS_DIR).glob("*/faiss-*.index")
    assert (index_file.parent / VECTORS_FILE).is_file()


def test_dense_baseline_retrieves_over_the_corpus_where_it_can_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The [dense] extra's baseline as an encoder over the whole corpus (here its encoder is
    stood in for by :func:`hashed_words`: no test loads the real model)."""
    release = _release(tmp_path)
    monkeypatch.setattr("pipeline.evaluate.systems.baseline_values.dense_unavailable", lambda: None)
    monkeypatch.setattr("pipeline.evaluate.systems.dense.encode", hashed_words)
    with pytest.warns(UserWarning, match="exactly the per-survey values of baseline dense"):
        result = api.evaluate(
            release, out=tmp_path / "a", mode="retrieval", top_k=20, config=CONFIG,
            encoders=[("pipeline.evaluate.examples:hashed_words", "mine")],
        ).results  # fmt: skip
    assert result["baselines"] == ["bm25", "dense"]
    assert result["learned_baselines"]["dense"]["index"] == "exact"
    assert result["systems"]["dense"]["nDCG@10"] == result["systems"]["mine"]["nDCG@10"]


def test_an_unreachable_qdrant_server_is_one_line_and_its_api_key_is_never_printed(
    tmp_path: Path,
) -> None:
    pytest.importorskip("qdrant_client", reason="the [qdrant] extra is not installed")
    release = _release(tmp_path)
    secret = "key-that-must-not-show-0123456789"
    env = {**os.environ, "QDRANT_API_KEY": secret, "NO_PROXY": "*"}
    argv = [sys.executable, "-m", "pipeline", "evaluate", "--release", str(release), "--mode",
            "retrieval", "--qdrant", "http://127.0.0.1:9", "--collection", "papers",
            "--encoder", "pipeline.evaluate.examples:hashed_words", "--no-learned",
            "--out", str(tmp_path / "out")]  # fmt: skip
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "cannot be reached" in proc.stderr
    assert secret not in proc.stdout + proc.stderr
