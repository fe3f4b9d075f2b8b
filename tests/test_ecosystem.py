"""One model, three evaluations: MTEB's own ``evaluate``, BEIR's
``DenseRetrievalExactSearch`` + ``EvaluateRetrieval``, and ``pipeline evaluate``, on the demo
release, give the same nDCG@10 in re-ranking and in retrieval mode.

The model is a deterministic numpy encoder (:class:`HashedWords`) shaped like a
SentenceTransformer (``encode(sentences, **kwargs)``), so the three tools read the release
the way each of them does, encode the strings each of them builds, and must agree: that
is what the release's ``corpus`` (abstract as ``text``) and ``queries`` (the survey's text)
are laid out for (:func:`pipeline.rules.text_match.paper_text`). Its vectors carry a small
component drawn from each text's sha256, so distinct texts never tie (ties are broken by
each tool's own rule). MTEB reports its means rounded to 5 decimals, so its numbers are
compared at 5e-6; BEIR's scores are compared unrounded, at 1e-6.

The tools are the ``dev`` extra's pins (``mteb-core``, ``beir``, ``sentence-transformers``
and the CPU build of torch that MTEB's data loaders need); without them the tests skip.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

from pipeline import api
from pipeline.core.config import Config, EvaluateConfig
from pipeline.core.release_files import CANDIDATES_FILE
from pipeline.evaluate.columns import CANDIDATE_ID, SURVEY_ID
from pipeline.evaluate.systems.models import model_texts

mteb = pytest.importorskip("mteb", reason="the dev extra's mteb-core is not installed")
pytest.importorskip("beir", reason="the dev extra's beir is not installed")
torch = pytest.importorskip("torch", reason="MTEB's data loaders need torch")

CONFIG = Config(evaluate=EvaluateConfig(bootstrap_samples=20, random_seeds=1))
WORDS, NOISE = 64, 16  # hashed-word dimensions, tie-breaking dimensions (after a constant)


class HashedWords:
    """A deterministic SentenceTransformer-like encoder: word counts hashed into 64
    dimensions, a constant one (so a text repeated, "title title", points elsewhere than
    the text once), and 16 small dimensions drawn from the text's sha256 (no two distinct
    texts tie)."""

    def __call__(self, texts: list[str]) -> np.ndarray:  # what --encoder calls
        return self.encode(texts)

    def encode(self, sentences: list[str], **kwargs: Any) -> Any:
        out = np.zeros((len(sentences), WORDS + 1 + NOISE))
        out[:, WORDS] = 1.0
        for row, text in enumerate(sentences):
            for word in text.lower().split():
                digest = hashlib.blake2b(word.encode(), digest_size=4).digest()
                out[row, int.from_bytes(digest, "little") % WORDS] += 1.0
            seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
            out[row, WORDS + 1 :] = 1e-3 * np.random.default_rng(seed).standard_normal(NOISE)
        return torch.tensor(out) if kwargs.get("convert_to_tensor") else out


hashed_words = HashedWords()  # `--encoder tests.test_ecosystem:hashed_words`


def _unit(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms == 0, 1.0, norms)


class MtebEncoder:
    """The same encoder as MTEB's EncoderProtocol asks for it: batches from MTEB's
    DataLoader in, vectors out, cosine similarity."""

    def __init__(self, model: HashedWords) -> None:
        from mteb.models.model_meta import ModelMeta

        self.model = model
        self.mteb_model_meta = ModelMeta.create_empty()

    def encode(self, inputs: Any, *, task_metadata: Any, hf_split: str, hf_subset: str,
               prompt_type: Any = None, **kwargs: Any) -> np.ndarray:  # fmt: skip
        return self.model.encode([text for batch in inputs for text in batch["text"]])

    def similarity(self, a: Any, b: Any) -> np.ndarray:
        return _unit(np.asarray(a)) @ _unit(np.asarray(b)).T

    def similarity_pairwise(self, a: Any, b: Any) -> np.ndarray:
        return np.einsum("ij,ij->i", _unit(np.asarray(a)), _unit(np.asarray(b)))


def mteb_task(release: Path, kind: str) -> Any:
    """The TaskMetadata a user needs to run MTEB on a release folder (or a Hub repo id as
    ``path``): ``Reranking`` ranks each survey's ``top_ranked`` candidates, ``Retrieval``
    the split's whole corpus."""
    from mteb.abstasks.retrieval import AbsTaskRetrieval
    from mteb.abstasks.task_metadata import TaskMetadata

    class SurveyReadingLists(AbsTaskRetrieval):
        metadata = TaskMetadata(
            name=f"SurveyReadingLists{kind}",
            type=kind,
            main_score="ndcg_at_10",
            description="Rank the works a computer-science survey cites (graded 1-4) above "
            "hard negatives, given the survey's title and abstract.",
            reference="https://huggingface.co/datasets/ines-besrour/unarxive_2024",
            dataset={"path": str(release), "revision": "local"},
            category="t2t",
            eval_splits=["test"],
            eval_langs=["eng-Latn"],
            date=("1991-01-01", "2024-12-31"),
            dialect=[],
            domains=["Academic"],
            task_subtypes=[],
            license="cc-by-sa-4.0",
            annotations_creators="derived",
            modalities=["text"],
            sample_creation="found",
            bibtex_citation="",
        )

        def load_data(self, *args: Any, **kwargs: Any) -> None:
            super().load_data(*args, **kwargs)
            if kind == "Retrieval":  # the whole corpus, not the candidate lists
                for split in self.dataset["default"].values():
                    split["top_ranked"] = None

    return SurveyReadingLists()


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("demo")
    api.demo(out, workers=1, config=CONFIG)
    return out / "release"


def _ours_rerank(release: Path, tmp_path: Path) -> float:
    """``pipeline evaluate --encoder`` on the release (what the CLI runs)."""
    result = api.evaluate(
        release, out=tmp_path / "eval", encoders=[("tests.test_ecosystem:hashed_words", "hashed")], config=CONFIG,
        learned=False, cache=False,
    )  # fmt: skip
    return result.results["systems"]["hashed"]["nDCG@10"]["mean"]


def _ours_scores(release: Path, scores: dict[str, dict[str, float]], mode: str) -> float:
    result = api.evaluate_scores(scores, release, name="hashed", mode=mode, config=CONFIG)
    return result.results["systems"]["hashed"]["nDCG@10"]["mean"]


def _retrieval_scores(release: Path) -> dict[str, dict[str, float]]:
    """Cosine of every eval survey with every document of the split's corpus, computed
    here from the texts the evaluation reads."""
    view = pl.read_parquet(release / CANDIDATES_FILE.format(split="eval"))
    texts = model_texts(view.sort(SURVEY_ID, CANDIDATE_ID))
    queries = dict(texts.select(SURVEY_ID, "_query_text").unique().iter_rows())
    docs = dict(texts.select(CANDIDATE_ID, "_candidate_text").unique().iter_rows())
    model = HashedWords()
    doc_ids = sorted(docs)
    doc_matrix = _unit(model.encode([docs[d] for d in doc_ids]))
    query_ids = sorted(queries)
    cosines = _unit(model.encode([queries[q] for q in query_ids])) @ doc_matrix.T
    return {q: dict(zip(doc_ids, map(float, row), strict=True)) for q, row in zip(query_ids, cosines, strict=True)}  # fmt: skip


def _mteb_ndcg10(release: Path, kind: str) -> float:
    result = mteb.evaluate(
        MtebEncoder(HashedWords()), mteb_task(release, kind), cache=None,
        show_progress_bar=False, encode_kwargs={"batch_size": 64},
    )  # fmt: skip
    (task,) = result.task_results
    return task.scores["test"][0]["ndcg_at_10"]


def _beir(
    release: Path, tmp_path: Path, top_k: int | None = None, model_path: Path | None = None
) -> tuple[dict, dict, dict]:
    """The release as BEIR's GenericDataLoader reads ``export --format beir``, searched with
    DenseRetrievalExactSearch (cosine; the whole corpus unless ``top_k``), with
    :class:`HashedWords` or the sentence-transformers model folder ``model_path``."""
    from beir.datasets.data_loader import GenericDataLoader
    from beir.retrieval.models import SentenceBERT
    from beir.retrieval.search.dense import DenseRetrievalExactSearch

    folder = tmp_path / "beir"
    api.export(release, folder, format="beir")
    corpus, queries, qrels = GenericDataLoader(str(folder)).load(split="test")
    if model_path is None:
        model = SentenceBERT()  # no model_path: the encoder below, not one loaded by name
        model.q_model = model.doc_model = HashedWords()
    else:
        model = SentenceBERT(str(model_path))
    search = DenseRetrievalExactSearch(model, batch_size=64)
    results = search.search(corpus, queries, top_k=top_k or len(corpus), score_function="cos_sim")
    return results, qrels, corpus


def _beir_ndcg10(qrels: dict, results: dict) -> float:
    from beir.retrieval.evaluation import EvaluateRetrieval

    ndcg, _map, _recall, _precision = EvaluateRetrieval.evaluate(qrels, results, [10])
    return ndcg["NDCG@10"]


def test_mteb_beir_and_pipeline_agree_in_reranking_mode(
    release: Path, tmp_path: Path, offline: Path
) -> None:
    ours = _ours_rerank(release, tmp_path)
    assert _mteb_ndcg10(release, "Reranking") == pytest.approx(ours, abs=5e-6)
    # BEIR re-ranks with a bi-encoder by keeping each survey's candidates of its search
    results, qrels, _ = _beir(release, tmp_path)
    top_ranked = pl.read_parquet(release / "top_ranked" / "test.parquet")
    candidates = {q: set(docs) for q, docs in top_ranked.iter_rows()}
    reranked = {q: {d: s for d, s in r.items() if d in candidates[q]} for q, r in results.items()}
    assert _ours_scores(release, reranked, "rerank") == pytest.approx(ours, abs=1e-12)
    assert _beir_ndcg10(qrels, reranked) == pytest.approx(ours, abs=5e-6)  # BEIR rounds too
    from tests.trec_reference import pytrec_eval

    per_query = pytrec_eval(qrels, reranked, {"ndcg_cut.10"})
    unrounded = float(np.mean([v["ndcg_cut_10"] for v in per_query.values()]))
    assert unrounded == pytest.approx(ours, abs=1e-6)


def test_mteb_beir_and_pipeline_agree_in_retrieval_mode(
    release: Path, tmp_path: Path, offline: Path
) -> None:
    ours = _ours_scores(release, _retrieval_scores(release), "retrieval")
    assert _mteb_ndcg10(release, "Retrieval") == pytest.approx(ours, abs=5e-6)
    results, qrels, corpus = _beir(release, tmp_path)
    assert _ours_scores(release, results, "retrieval") == pytest.approx(ours, abs=1e-12)
    assert _beir_ndcg10(qrels, results) == pytest.approx(ours, abs=5e-6)
    from tests.trec_reference import pytrec_eval

    per_query = pytrec_eval(qrels, results, {"ndcg_cut.10"})
    unrounded = float(np.mean([v["ndcg_cut_10"] for v in per_query.values()]))
    assert unrounded == pytest.approx(ours, abs=1e-6)
    # a document without an abstract is its title alone for every tool, never "title title"
    bare = [d for d in corpus.values() if d["text"] == ""]
    assert bare and all(d["title"] for d in bare)


# ------------------------------------------- retrieval mode with a model, against BEIR
BEIR_MEASURES = {"ndcg_cut.10": "NDCG@10", "recall.100": "Recall@100", "map_cut.100": "MAP@100"}


def _ranked_as_beir(results: dict) -> dict:
    """BEIR's results with each query's documents scored by their rank in BEIR's float64
    order, so that pytrec_eval (which EvaluateRetrieval calls) ranks them as BEIR did.

    pytrec_eval reads scores as 32-bit floats: two cosines 2e-8 apart become a tie, ordered
    by docid descending (on the demo, a label-4 document and an unjudged one at rank 48 of
    a survey; MAP@100 moved by 2.5e-6). Documents with the same text (the demo has a few)
    tie exactly in float64 too, and each tool breaks such a tie by its own rule: here by
    the project's documented one (:func:`pipeline.evaluate.scoring.ties.tie_key`), the rule the
    evaluation applies to every run."""
    from pipeline.evaluate.scoring.ties import tie_key

    def order(query: str, item: tuple[str, float]) -> tuple[float, int, str]:
        return (-item[1], tie_key(query, item[0]), item[0])

    return {
        query: {
            doc: float(len(scores) - rank)
            for rank, (doc, _) in enumerate(sorted(scores.items(), key=lambda i: order(query, i)))
        }
        for query, scores in results.items()
    }


def _beir_reference(qrels: dict, results: dict) -> dict[str, tuple[float, float]]:
    """BEIR's EvaluateRetrieval (rounded to 5 decimals) and the same measures unrounded
    (pytrec_eval, which EvaluateRetrieval calls), by BEIR's name, of BEIR's ranking
    (:func:`_ranked_as_beir`)."""
    from beir.retrieval.evaluation import EvaluateRetrieval

    from tests.trec_reference import pytrec_eval

    results = _ranked_as_beir(results)
    ndcg, map_, recall, _ = EvaluateRetrieval.evaluate(qrels, results, [10, 100])
    rounded = {**ndcg, **map_, **recall}
    per_query = pytrec_eval(qrels, results, set(BEIR_MEASURES))
    return {
        name: (rounded[name], float(np.mean([v[m.replace(".", "_")] for v in per_query.values()])))
        for m, name in BEIR_MEASURES.items()
    }


def _ours_retrieval(release: Path, tmp_path: Path, top_k: int, **model: Any) -> dict:
    # one cache for both depths (each run has its own --out): the corpus is encoded once
    result = api.evaluate(
        release, out=tmp_path / f"top{top_k}", mode="retrieval", top_k=top_k, config=CONFIG,
        cache_dir=tmp_path / "cache", **model,
    )  # fmt: skip
    return result.results


def _assert_equals_beir(reference: dict, top1000: dict, top100: dict, name: str) -> None:
    ours = {
        "NDCG@10": top1000["systems"][name]["nDCG@10"]["mean"],
        "Recall@100": top1000["systems"][name]["R@100"]["mean"],
        # trec_eval's map_cut.100 is the AP of the top 100: the run of --top-k 100
        "MAP@100": top100["systems"][name]["AP"]["mean"],
    }
    for measure, (rounded, unrounded) in reference.items():
        assert ours[measure] == pytest.approx(unrounded, abs=1e-6), measure
        assert ours[measure] == pytest.approx(rounded, abs=5e-6), measure


def test_retrieval_mode_with_an_encoder_equals_beir_exact_search(
    release: Path, tmp_path: Path, offline: Path
) -> None:
    """``evaluate --mode retrieval --encoder`` (its own corpus encoding and exact top-k
    search) gives BEIR's nDCG@10, R@100 and MAP@100 of DenseRetrievalExactSearch."""
    results, qrels, corpus = _beir(release, tmp_path, top_k=1000)
    assert len(corpus) > 1000  # the cut at k matters
    reference = _beir_reference(qrels, results)
    encoder = {"encoders": [("tests.test_ecosystem:hashed_words", "hashed")]}
    top1000 = _ours_retrieval(release, tmp_path, 1000, **encoder)
    top100 = _ours_retrieval(release, tmp_path, 100, **encoder)
    _assert_equals_beir(reference, top1000, top100, "hashed")
    facts = top1000["models"]["hashed"]
    assert facts["corpus_documents"] == len(corpus) and facts["top_k"] == 1000
    assert top1000["runs"]["hashed"]["rows"] == 1000 * top1000["n_surveys"]
    # the corpus was encoded once: the second evaluation read every batch from the cache
    assert top100["models"]["hashed"]["batches_encoded"] == 0
    assert top100["models"]["hashed"]["batches_reused"] == facts["batches_encoded"] > 0
    assert "bm25" in top1000["baselines"]  # the whole-corpus baseline in the same report


def _static_model(folder: Path, release: Path) -> Path:
    """A sentence-transformers model folder made here (no download): static word
    embeddings, one random 32-d vector per word of the demo corpus, mean-pooled."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import StaticEmbedding
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace

    corpus = pl.read_parquet(release / "corpus" / "test.parquet")
    words = sorted(
        {w for t in corpus["title"].to_list() + corpus["text"].to_list() for w in t.lower().split()}
    )
    tokenizer = Tokenizer(WordLevel({"[UNK]": 0, **{w: i + 1 for i, w in enumerate(words)}}, unk_token="[UNK]"))  # fmt: skip
    tokenizer.pre_tokenizer = Whitespace()
    weights = np.random.default_rng(7).standard_normal((len(words) + 1, 32)).astype(np.float32)
    module = StaticEmbedding(tokenizer, embedding_weights=weights)
    SentenceTransformer(modules=[module]).save(str(folder))
    return folder


def test_retrieval_mode_with_a_sentence_transformer_equals_beir(
    release: Path, tmp_path: Path, offline: Path
) -> None:
    """The same with a sentence-transformers model folder, which BEIR loads itself."""
    folder = _static_model(tmp_path / "static-model", release)
    results, qrels, _ = _beir(release, tmp_path, top_k=1000, model_path=folder)
    reference = _beir_reference(qrels, results)
    model = {"sentence_transformers": [(folder, "static")]}
    top1000 = _ours_retrieval(release, tmp_path, 1000, **model)
    top100 = _ours_retrieval(release, tmp_path, 100, **model)
    _assert_equals_beir(reference, top1000, top100, "static")


# ------------------------------------------- the user's own index: Qdrant's local mode
def _qdrant_collection(folder: Path, release: Path, name: str, ghosts: int = 0) -> None:
    """A collection in qdrant-client's local mode (on disk) holding the corpus's vectors by
    :class:`HashedWords`, each point's document id in payload ``_id``; ``ghosts`` more points
    carry ids that are not in the corpus and the surveys' own vectors (so they rank first)."""
    from qdrant_client import QdrantClient, models

    corpus = pl.read_parquet(release / "corpus" / "test.parquet")
    texts = [f"{t} {a}".strip() for t, a in zip(corpus["title"], corpus["text"], strict=True)]
    vectors = HashedWords().encode(texts)
    queries = pl.read_parquet(release / "queries" / "test.parquet").sort("_id")
    payloads = [{"_id": d} for d in corpus["_id"].to_list()]
    if ghosts:
        vectors = np.vstack([vectors, HashedWords().encode(queries["text"].to_list()[:ghosts])])
        payloads += [{"_id": f"elsewhere:{i}"} for i in range(ghosts)]
    client = QdrantClient(path=str(folder))
    try:
        client.create_collection(
            name, vectors_config=models.VectorParams(size=vectors.shape[1], distance=models.Distance.COSINE)
        )  # fmt: skip
        client.upload_collection(name, vectors=vectors.tolist(), payload=payloads, ids=list(range(len(payloads))))  # fmt: skip
    finally:
        client.close()


def test_qdrant_local_mode_gives_the_numbers_of_exact_search(
    release: Path, tmp_path: Path, offline: Path
) -> None:
    pytest.importorskip("qdrant_client", reason="the dev extra's qdrant-client is not installed")
    folder = tmp_path / "qdrant"
    _qdrant_collection(folder, release, "papers")
    _qdrant_collection(folder, release, "with-ghosts", ghosts=3)
    encoder = {"encoders": [("tests.test_ecosystem:hashed_words", "hashed")]}
    exact = _ours_retrieval(release, tmp_path / "exact", 1000, **encoder)["systems"]["hashed"]
    for collection in ("papers", "with-ghosts"):
        results = _ours_retrieval(
            release, tmp_path / collection, 1000, qdrant=str(folder), collection=collection,
            **encoder,
        )  # fmt: skip
        facts = results["models"]["hashed"]
        assert (
            facts["index"] == "qdrant" and facts["points_returned"] == 1000 * results["n_surveys"]
        )
        ours = results["systems"]["hashed"]
        metrics = (
            ("nDCG@10", "R@100") if collection == "with-ghosts" else ("nDCG@10", "R@100", "AP")
        )
        for metric in metrics:
            assert ours[metric]["mean"] == pytest.approx(exact[metric]["mean"], abs=1e-6), metric
    # the 3 points outside the corpus are in every survey's top 1000 (of 1260 points), the
    # first for their own: counted, never scored
    n_outside = 3 * results["n_surveys"]
    assert facts["points_outside_corpus"] == n_outside
    assert sorted(facts["outside_corpus_examples"]) == ["elsewhere:0", "elsewhere:1", "elsewhere:2"]
    assert results["runs"]["hashed"]["rows"] == 1000 * results["n_surveys"] - n_outside


def test_qdrant_with_query_vectors_from_a_file(
    release: Path, tmp_path: Path, offline: Path
) -> None:
    """A model that cannot run here: its survey vectors in Parquet (``_id``, ``vector``)."""
    pytest.importorskip("qdrant_client", reason="the dev extra's qdrant-client is not installed")
    folder = tmp_path / "qdrant"
    _qdrant_collection(folder, release, "papers")
    queries = pl.read_parquet(release / "queries" / "test.parquet")
    vectors = HashedWords().encode(queries["text"].to_list())
    path = tmp_path / "queries.parquet"
    pl.DataFrame({"_id": queries["_id"], "vector": vectors.tolist()}).write_parquet(path)
    from_file = _ours_retrieval(release, tmp_path / "file", 100, qdrant=str(folder), collection="papers", query_vectors=path)  # fmt: skip
    encoded = _ours_retrieval(release, tmp_path / "enc", 100, qdrant=str(folder), collection="papers",
                              encoders=[("tests.test_ecosystem:hashed_words", "hashed")])  # fmt: skip
    for metric in ("nDCG@10", "R@100", "AP"):
        assert from_file["systems"]["papers"][metric]["mean"] == pytest.approx(
            encoded["systems"]["hashed"][metric]["mean"], abs=1e-12
        )
    assert from_file["models"]["papers"]["queries"] == "--query-vectors queries.parquet"
