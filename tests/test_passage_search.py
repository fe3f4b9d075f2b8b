"""``evaluate --passages --mode retrieval`` in bounded memory (issue 51, item 4): the passages
encoded in batches to disk and scored chunk by chunk give the run that scoring every passage
at once gives.

A hand-made corpus and full-text view: documents with 1 to 12 sections (so a document's
passages sort by passage id as strings, ``#10`` before ``#2``), in a file order that is not
the corpus's, sections with no heading or no text, a section of a document outside the corpus,
and documents without full text (scored on title and abstract). The chunk sizes are lowered so
that documents span chunks, read batches and encoding batches, and query blocks leave a
remainder. The encoder gives vectors of sixteen entries of +-1/4 (unit length exactly), so
every cosine and every sum of them is exact: scores repeat (ties at the k-th document are
common) and the expected run is computed here, straightforwardly, without depending on the
order of a sum or on the BLAS: every (query, passage) cosine, each document's score by its
rule, then each query's k best by the evaluation's tie rule.
"""

from __future__ import annotations

import hashlib
import sys
import textwrap
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from pipeline.core.files import sha256_file
from pipeline.evaluate import passages as P
from pipeline.evaluate.retrieval import passage_search, passage_units
from pipeline.evaluate.retrieval.corpus_vectors import Corpus
from pipeline.evaluate.scoring.ties import tie_key
from pipeline.evaluate.systems import full_text
from pipeline.evaluate.systems.models import ModelSpec

ENCODER = '''
"""Sixteen entries of +-1/4 from the text's BLAKE2b digest: unit length exactly, float32."""
import hashlib

import numpy as np


def encode(texts):
    out = np.empty((len(texts), 16), dtype=np.float32)
    for row, text in enumerate(texts):
        bits = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=2).digest(), "little")
        out[row] = [0.25 if bits >> i & 1 else -0.25 for i in range(16)]
    return out
'''
MAX_CHARS = 12  # shorter than most texts here: the cut is exercised


def _signs(text: str) -> np.ndarray:
    bits = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=2).digest(), "little")
    return np.array([0.25 if bits >> i & 1 else -0.25 for i in range(16)])


def _words(rng: np.random.Generator, n: int) -> str:
    return " ".join(rng.choice(["graph", "neural", "survey", "retrieval", "text"], size=n))


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Corpus, Path, pl.DataFrame]:
    """The corpus, its sections file and an eval set of five surveys; the encoder module."""
    (tmp_path / "sign_encoder.py").write_text(textwrap.dedent(ENCODER), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "sign_encoder", raising=False)
    rng = np.random.default_rng(51)
    ids = [f"arxiv:{i:04d}" for i in range(40)]
    corpus = pl.DataFrame(
        {
            "_id": ids,
            "title": [_words(rng, 2) for _ in ids],
            "text": [_words(rng, int(rng.integers(0, 5))) for _ in ids],
        }
    )
    corpus.write_parquet(tmp_path / "corpus.parquet")
    with_text = [ids[i] for i in rng.permutation(40)[:26]] + ["arxiv:9999"]  # not in the corpus
    rows = []
    for doc in with_text:
        n = 12 if doc in with_text[:3] else int(rng.integers(1, 8))
        for order in rng.permutation(n):  # a document's rows together, in any order
            heading = None if rng.random() < 0.2 else _words(rng, 1)
            text = None if rng.random() < 0.1 else _words(rng, int(rng.integers(1, 6)))
            rows.append((doc, int(order), heading, text))
    sections = pl.DataFrame(
        rows,
        schema={"corpus-id": pl.String, "section_order": pl.Int32, "heading": pl.String,
                "text": pl.String},
        orient="row",
    )  # fmt: skip
    sections.write_parquet(tmp_path / "sections.parquet")
    eval_set = pl.DataFrame(
        {
            "survey_id": [f"s{i}" for i in range(5)],
            "survey_title": [_words(rng, 2) for _ in range(5)],
            "survey_abstract": [_words(rng, 3) for _ in range(5)],
        }
    )
    path = tmp_path / "corpus.parquet"
    return Corpus(path, corpus["_id"], sha256_file(path)), tmp_path / "sections.parquet", eval_set


def _expected(
    corpus: Corpus, sections: Path, eval_set: pl.DataFrame, rule: str, k: int
) -> tuple[dict[tuple[str, str], float], int]:
    """Every passage scored, each document aggregated, each query's k best by the tie rule;
    and how many queries have a document left out at the k-th best score (a tie at the cut)."""
    texts: dict[str, list[str]] = {}
    for doc, heading, text in (
        pl.read_parquet(sections).select("corpus-id", "heading", "text").iter_rows()
    ):
        texts.setdefault(doc, []).append(f"{heading or ''} {text or ''}".strip()[:MAX_CHARS])
    titles = pl.read_parquet(corpus.path)
    for doc, title, abstract in titles.select("_id", "title", "text").iter_rows():
        texts.setdefault(doc, [f"{title} {abstract}".strip()])
    top = int(rule.removeprefix("mean-top-")) if rule != "max" else 1
    run = {}
    ties_at_cut = 0
    for survey, title, abstract in eval_set.iter_rows():
        query = _signs(f"{title} {abstract}".strip())
        scores = {}
        for doc in corpus.ids:
            cosines = sorted((float(query @ _signs(t)) for t in texts[doc]), reverse=True)
            scores[doc] = max(cosines) if rule == "max" else sum(cosines[:top]) / len(cosines[:top])
        ranked = sorted(scores, key=lambda d: (-scores[d], tie_key(survey, d), d))
        run.update({(survey, doc): scores[doc] for doc in ranked[:k]})
        ties_at_cut += k < len(ranked) and scores[ranked[k - 1]] == scores[ranked[k]]
    return run, ties_at_cut


@pytest.mark.parametrize("rule", ["max", "mean-top-3"])
@pytest.mark.parametrize("k", [4, 1000])
def test_chunked_passages_give_the_full_computation_s_run(
    files: tuple[Corpus, Path, pl.DataFrame], monkeypatch: pytest.MonkeyPatch, rule: str, k: int
) -> None:
    corpus, sections, eval_set = files
    monkeypatch.setattr(passage_search, "CHUNK_ROWS", 3)
    monkeypatch.setattr(passage_search, "QUERY_BLOCK", 2)
    monkeypatch.setattr(passage_units, "READ_ROWS", 4)
    options = P.PassageOptions.parse(rule, MAX_CHARS)
    spec = ModelSpec("encoder", "sign_encoder:encode")
    run, facts = full_text.encoder_retrieval(
        spec, eval_set, corpus, sections, options, Path("cache"), 5, k
    )
    got = {(s, d): v for s, d, v in run.scores.select("survey_id", "candidate_id", "score").rows()}
    expected, ties_at_cut = _expected(corpus, sections, eval_set, rule, k)
    assert ties_at_cut >= (2 if k == 4 else 0)  # the tie rule decides who is kept
    assert len(got) == run.scores.height == len(expected) == 5 * min(k, 40)
    assert got == expected
    passages = facts["passages"]
    n_sections = pl.read_parquet(sections).filter(pl.col("corpus-id") != "arxiv:9999").height
    assert passages["documents_with_full_text"] == 26
    assert passages["documents_without_full_text"] == 14
    assert passages["passages_scored"] == n_sections + 14
    if rule != "max":
        return
    # a second run reads the passages' vectors from the cache: the same run
    again, _ = full_text.encoder_retrieval(
        spec, eval_set, corpus, sections, options, Path("cache"), 5, k
    )
    assert again.scores.equals(run.scores)


def test_a_document_s_sections_apart_are_an_error(
    files: tuple[Corpus, Path, pl.DataFrame],
) -> None:
    corpus, sections, _ = files
    rows = pl.read_parquet(sections)
    pl.concat([rows, rows.head(1)]).write_parquet(sections)
    with pytest.raises(full_text.UsageError, match="are not together"):
        passage_units.passage_units(corpus, sections, 0)


@pytest.mark.parametrize("rule", ["max", "mean-top-1", "mean-top-3", "mean-top-5"])
def test_chunk_aggregation_is_the_one_rule_bit_for_bit(rule: str) -> None:
    # real-valued scores, some repeated and some -0.0: a mean's last bit depends on its sum's
    # order, so numpy's shortcuts must give Polars' document_scores' values exactly
    rng = np.random.default_rng(7)
    counts = rng.integers(1, 8, size=200)
    counts[rng.random(200) < 0.6] = 1
    scores = rng.standard_normal((5, int(counts.sum())))
    scores[:, ::7] = np.round(scores[:, ::7], 1)
    scores[scores == 0] = -0.0
    docs = np.repeat(np.arange(len(counts)), counts)
    frame = pl.DataFrame(
        {
            P.QUERY: np.repeat(np.arange(5), scores.shape[1]),
            P.DOCUMENT: np.tile(docs, 5),
            P.SCORE: scores.ravel(),
        }
    )
    options = P.PassageOptions.parse(rule)
    expected = P.document_scores(frame.lazy(), options.aggregation, options.k).collect()
    got = passage_search.aggregate(scores, counts, options)
    assert got.shape == (5, len(counts))
    assert got.ravel().tobytes() == expected[P.SCORE].to_numpy().tobytes()
