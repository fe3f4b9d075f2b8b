"""Full-text systems (issue 51, items 3 and 5): ``evaluate --passages`` and ``--passage-run``
on the demo release's ``corpus_sections``.

Every expected number is computed here, from the release's files alone: a deterministic toy
encoder's cosine of each query and passage (heading and text, cut as the report says), a
document's score its passages' maximum (or the mean of its best k), title and abstract for a
document without full text; then pytrec_eval (trec_eval) on that run with the release's qrels.
The evaluator's per-survey values must equal it, in re-ranking and in retrieval mode. The
passage corpus of ``export --passages`` is read by BEIR's own GenericDataLoader, and a run over
its passage ids, aggregated by the evaluator, gives the numbers of the same computation.
"""

from __future__ import annotations

import io
import json
import re
import shutil
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from pipeline import api
from pipeline.core.config import Config, EvaluateConfig
from pipeline.core.errors import UsageError
from pipeline.evaluate.systems.runs import RunError
from tests.trec_reference import pytrec_eval

CONFIG = Config(evaluate=EvaluateConfig(bootstrap_samples=20, random_seeds=1))
CHARS = 300  # shorter than many demo sections, so the cut is exercised
# measure as the evaluator names it -> as pytrec_eval does
MEASURES = {"nDCG@10": "ndcg_cut_10", "AP": "map", "R@20": "recall_20"}
ENCODER = '''
"""A toy encoder: each word a fixed pseudo-random direction, a text the sum of its words."""
import hashlib

import numpy as np

_WORDS = {}


def _word(word):
    if word not in _WORDS:
        seed = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "little")
        _WORDS[word] = np.random.default_rng(seed).standard_normal(16)
    return _WORDS[word]


def encode(texts):
    out = np.zeros((len(texts), 16))
    for row, text in enumerate(texts):
        for word in text.lower().split():
            out[row] += _word(word)
    return out
'''


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("demo")
    api.demo(out, papers=400, workers=1)
    return out / "release"


@pytest.fixture
def toy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[list[str]], np.ndarray]:
    """``toy_encoder.py`` in the current directory, as a user would have it; its ``encode``."""
    (tmp_path / "toy_encoder.py").write_text(textwrap.dedent(ENCODER), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "toy_encoder", raising=False)
    import toy_encoder

    return toy_encoder.encode


# ------------------------------------------------------------------ the test's own computation
def _unit(encode: Callable[[list[str]], np.ndarray], texts: list[str]) -> np.ndarray:
    matrix = np.asarray(encode(texts), dtype=np.float64)
    return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)


def _aggregate(scores: list[float], rule: str) -> float:
    if rule == "max":
        return max(scores)
    k = int(rule.removeprefix("mean-top-"))
    return float(np.mean(sorted(scores, reverse=True)[:k]))


def _units(release: Path) -> dict[str, list[str]]:
    """Each corpus document's texts as an encoder reads them: its sections' (heading and text,
    cut to CHARS), or its title and abstract when it has no full text."""
    sections = pl.read_parquet(release / "corpus_sections" / "test.parquet")
    units: dict[str, list[str]] = {}
    for doc, heading, text in sections.select("corpus-id", "heading", "text").iter_rows():
        units.setdefault(doc, []).append(f"{heading or ''} {text or ''}".strip()[:CHARS])
    corpus = pl.read_parquet(release / "corpus" / "test.parquet")
    for doc, title, abstract in corpus.select("_id", "title", "text").iter_rows():
        units.setdefault(doc, [f"{title} {abstract}".strip()])
    return units


def _queries(release: Path) -> dict[str, str]:
    return dict(pl.read_parquet(release / "queries" / "test.parquet").select("_id", "text").rows())


def _qrels(release: Path) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    table = pl.read_parquet(release / "qrels" / "test.parquet")
    for query, doc, score in table.select("query-id", "corpus-id", "score").iter_rows():
        qrels.setdefault(query, {})[doc] = int(score)
    return qrels


def _aspects(release: Path) -> tuple[dict[str, str], dict[str, dict[str, int]]]:
    """Each eval aspect's query and its judged documents (label), from the aspects folder: the
    query is the aspect's heading, its parent heading and the survey's title (the empty ones
    left out) joined by " — ", then the survey's abstract, as the docs give it."""
    table = pl.read_parquet(release / "aspects" / "eval_survey_reading_lists.parquet")
    queries: dict[str, str] = {}
    qrels: dict[str, dict[str, int]] = {}
    columns = ("aspect_id", "aspect_heading", "aspect_parent_heading", "survey_title",
               "survey_abstract", "candidate_id", "label")  # fmt: skip
    for aspect, heading, parent, title, abstract, doc, label in table.select(columns).iter_rows():
        parts = [p.strip() for p in (heading, parent, title) if p and p.strip()]
        queries[aspect] = f"{' — '.join(parts)} {abstract or ''}".strip()
        qrels.setdefault(aspect, {})[doc] = int(label)
    return queries, qrels


def _document_run(
    release: Path,
    encode: Callable,
    rule: str,
    docs_of: Callable[[str], list[str]],
    queries: dict[str, str] | None = None,
) -> dict[str, dict[str, float]]:
    """Each query's score of each of ``docs_of(query)``, from its units' cosines by ``rule``
    (the queries: the release's, unless given)."""
    units, queries = _units(release), queries or _queries(release)
    texts = sorted({t for ts in units.values() for t in ts})
    vectors = dict(zip(texts, _unit(encode, texts), strict=True))
    query_ids = sorted(queries)
    query_vectors = dict(
        zip(query_ids, _unit(encode, [queries[q] for q in query_ids]), strict=True)
    )
    run: dict[str, dict[str, float]] = {}
    for query in query_ids:
        q = query_vectors[query]
        run[query] = {
            doc: _aggregate([float(q @ vectors[t]) for t in units[doc]], rule)
            for doc in docs_of(query)
        }
    return run


def _top(run: dict[str, dict[str, float]], k: int) -> dict[str, dict[str, float]]:
    out = {}
    for query, scores in run.items():
        ranked = sorted(scores.items(), key=lambda item: -item[1])
        assert k >= len(ranked) or ranked[k - 1][1] != ranked[k][1], query  # no tie at the cut
        out[query] = dict(ranked[:k])
    return out


def _tie_free(run: dict[str, dict[str, float]]) -> None:
    """trec_eval orders ties its own way and compares in single precision: no ties here."""
    for query, scores in run.items():
        values = np.asarray(list(scores.values()), dtype=np.float32)
        assert len(set(values.tolist())) == len(values), query


def _expected(
    release: Path, run: dict[str, dict[str, float]], qrels: dict | None = None
) -> dict[str, dict[str, float]]:
    _tie_free(run)
    return pytrec_eval(qrels or _qrels(release), run, {"ndcg_cut.10", "map", "recall.20"})


def _ours(result: api.EvalResult, system: str) -> dict[str, dict[str, float]]:
    rows = result.per_survey.filter((pl.col("system") == system) & (pl.col("subset") == "ALL"))
    return {row["survey_id"]: row for row in rows.iter_rows(named=True)}


def _assert_equal(ours: dict, expected: dict) -> None:
    assert set(ours) == set(expected)
    for query, values in expected.items():
        for name, theirs in MEASURES.items():
            assert ours[query][name] == pytest.approx(values[theirs], abs=1e-9), (query, name)


# ------------------------------------------------------------------ the tests
@pytest.mark.parametrize("rule", ["max", "mean-top-3"])
def test_passage_encoder_reranking_equals_pytrec_eval(release: Path, toy, rule: str) -> None:
    judged = {q: set(d) for q, d in _qrels(release).items()}
    expected = _expected(release, _document_run(release, toy, rule, lambda q: sorted(judged[q])))
    result = api.evaluate(
        release, out=Path("out"), encoders=[("toy_encoder:encode", "full")], passages=True,
        passage_aggregation=rule, passage_chars=CHARS, config=CONFIG, learned=False,
    )  # fmt: skip
    _assert_equal(_ours(result, "full"), expected)
    facts = result.results["models"]["full"]["passages"]
    assert facts["aggregation"] == rule and facts["passage_chars"] == CHARS
    assert result.results["full_text"] == {"aggregation": rule, "passage_chars": CHARS}
    documents = {d for ds in judged.values() for d in ds}
    with_text = set(pl.read_parquet(release / "corpus_sections" / "test.parquet")["corpus-id"])
    assert facts["documents_with_full_text"] == len(documents & with_text) > 0
    assert facts["documents_without_full_text"] == len(documents - with_text) > 0
    report = (Path("out") / "report.md").read_text(encoding="utf-8")
    assert f"by `{rule}`" in report and f"cut to {CHARS} characters" in report


def test_passage_encoder_retrieval_equals_pytrec_eval(release: Path, toy) -> None:
    corpus = pl.read_parquet(release / "corpus" / "test.parquet")["_id"].to_list()
    top_k = 50
    full = _document_run(release, toy, "max", lambda q: corpus)
    expected = _expected(release, _top(full, top_k))
    result = api.evaluate(
        release, out=Path("out"), encoders=[("toy_encoder:encode", "full")], passages=True,
        passage_chars=CHARS, mode="retrieval", top_k=top_k, config=CONFIG, learned=False,
    )  # fmt: skip
    _assert_equal(_ours(result, "full"), expected)
    facts = result.results["models"]["full"]
    assert facts["top_k"] == top_k and facts["passages"]["corpus_documents"] == len(corpus)


def test_passage_encoder_retrieval_with_aspects_equals_pytrec_eval(release: Path, toy) -> None:
    # PRISM's aspect-to-section protocol: each aspect's query against every section of the
    # split's corpus (the aspects folder has no corpus of its own: the release's)
    corpus = pl.read_parquet(release / "corpus" / "test.parquet")["_id"].to_list()
    queries, qrels = _aspects(release)
    top_k = 50
    full = _document_run(release, toy, "max", lambda q: corpus, queries)
    expected = _expected(release, _top(full, top_k), qrels)
    result = api.evaluate(
        release, out=Path("out"), encoders=[("toy_encoder:encode", "full")], passages=True,
        passage_chars=CHARS, mode="retrieval", task="aspects", top_k=top_k, config=CONFIG,
        learned=False,
    )  # fmt: skip
    assert result.results["task"] == "aspects" and len(expected) == len(queries) > 1
    _assert_equal(_ours(result, "full"), expected)
    facts = result.results["models"]["full"]
    assert facts["top_k"] == top_k and facts["passages"]["corpus_documents"] == len(corpus)
    assert facts["passages"]["documents_with_full_text"] > 0


def test_beir_loads_the_passage_corpus_and_a_passage_run_aggregates(release: Path, toy) -> None:
    from beir.datasets.data_loader import GenericDataLoader

    out = api.export(release, Path("beir"), passages=True)
    corpus, queries, qrels = GenericDataLoader(str(Path("beir") / "passages")).load(split="test")
    mapping = pl.read_csv(Path("beir") / "passages" / "mapping.tsv", separator="\t")
    assert len(corpus) == mapping.height == out.files["passages/corpus.jsonl"]
    assert set(corpus) == set(mapping["passage-id"])
    sections = pl.read_parquet(release / "corpus_sections" / "test.parquet")
    some = sections.row(0, named=True)
    passage = f"{some['corpus-id']}#{some['section_order']}"  # the separator is "#"
    assert corpus[passage] == {"title": some["heading"], "text": some["text"]}
    documents = pl.read_parquet(release / "corpus" / "test.parquet")["_id"]
    assert set(mapping["corpus-id"]) == set(documents)  # every document can be retrieved
    # a passage run, as a BEIR retriever would write it (BEIR joins title and text)
    ids = sorted(corpus)
    vectors = _unit(toy, [f"{corpus[p]['title']} {corpus[p]['text']}".strip() for p in ids])
    query_ids = sorted(queries)
    query_vectors = _unit(toy, [queries[q] for q in query_ids])
    scores = query_vectors @ vectors.T
    with Path("passages.trec").open("w", encoding="utf-8") as f:
        for i, query in enumerate(query_ids):
            for j, p in enumerate(ids):
                f.write(f"{query} Q0 {p} {j + 1} {float(scores[i, j])!r} mine\n")
    doc_of = dict(mapping.select("passage-id", "corpus-id").rows())
    by_doc: dict[str, dict[str, list[float]]] = {}
    for i, query in enumerate(query_ids):
        for j, p in enumerate(ids):
            by_doc.setdefault(query, {}).setdefault(doc_of[p], []).append(float(scores[i, j]))
    rule = "mean-top-2"
    run = {q: {d: _aggregate(s, rule) for d, s in docs.items()} for q, docs in by_doc.items()}
    expected = _expected(release, run)
    result = api.evaluate(
        release, out=Path("out"), passage_runs=["passages.trec"], passage_aggregation=rule,
        mode="retrieval", config=CONFIG, learned=False,
    )  # fmt: skip
    _assert_equal(_ours(result, "mine"), expected)
    facts = result.results["models"]["mine"]["passages"]
    assert facts["aggregation"] == rule and facts["documents_scored"] == sum(
        len(v) for v in run.values()
    )
    assert facts["pairs_fallback"] > 0  # documents without full text: their #abstract passage


def test_aspects_are_the_queries_with_aspects_task(release: Path, toy) -> None:
    result = api.evaluate(
        release, out=Path("aspects"), encoders=["toy_encoder:encode"], passages=True,
        task="aspects", config=CONFIG, learned=False,
    )  # fmt: skip
    assert result.results["task"] == "aspects"
    aspects = pl.read_parquet(release / "aspects" / "eval_survey_reading_lists.parquet")
    assert result.results["n_surveys"] == aspects["aspect_id"].n_unique()
    assert result.results["models"]["encode"]["passages"]["documents_with_full_text"] > 0


def test_passage_options_are_checked(release: Path, toy) -> None:
    with pytest.raises(UsageError, match="--passage-aggregation 'median'"):
        api.evaluate(release, out=Path("o"), encoders=["toy_encoder:encode"], passages=True,
                     passage_aggregation="median", learned=False)  # fmt: skip
    with pytest.raises(UsageError, match="--passages needs an --encoder"):
        api.evaluate(release, out=Path("o"), passages=True, learned=False)
    survey = pl.read_parquet(release / "queries" / "test.parquet")["_id"][0]
    Path("bad.trec").write_text(f"{survey} Q0 nowhere#7 1 0.5 bad\n", encoding="utf-8")
    with pytest.raises(RunError, match="'nowhere#7' is not in the passage corpus"):
        api.evaluate(release, out=Path("o"), passage_runs=["bad.trec"], learned=False)


@pytest.mark.parametrize("mode", ["rerank", "retrieval"])
def test_a_damaged_sections_file_is_one_error_naming_it(
    release: Path, toy, tmp_path: Path, mode: str
) -> None:
    # the view is checked where it is found: its record first, then Parquet and its columns
    copy = tmp_path / "release"
    shutil.copytree(release, copy)
    path = copy / "corpus_sections" / "test.parquet"
    good = path.read_bytes()

    def fails(match: str) -> None:
        with pytest.raises(UsageError, match=match):
            api.evaluate(copy, out=tmp_path / "o", encoders=["toy_encoder:encode"], passages=True,
                         mode=mode, top_k=5, config=CONFIG, learned=False)  # fmt: skip
        assert not (tmp_path / "o").exists()

    path.write_bytes(good[: len(good) // 2])
    fails(f"{re.escape(str(path))} has sha256 .* changed after the release stage wrote it")
    for name in ("_SUCCESS.json", "eval_metadata.json"):  # a release without its records
        record = json.loads((copy / name).read_text(encoding="utf-8"))
        record["files"] = {k: v for k, v in record["files"].items() if "corpus_sections" not in k}
        (copy / name).write_text(json.dumps(record), encoding="utf-8")
    for damaged in (good[: len(good) // 2], b"\x89\xff\x00binary" * 50, b""):
        path.write_bytes(damaged)
        fails(f"{re.escape(str(path))}: not a readable Parquet file")
    pl.read_parquet(io.BytesIO(good)).with_columns(pl.col("text").str.len_chars()).write_parquet(
        path
    )
    fails(f"{re.escape(str(path))}: not a corpus_sections file: columns {{'text': 'UInt32'}}")
