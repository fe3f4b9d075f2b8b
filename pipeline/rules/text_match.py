"""Text matching shared by the ``bm25`` baseline (:mod:`pipeline.evaluate.systems.baselines`) and
the rankers' text features (:mod:`pipeline.rank.features`): tokens, the candidate's text
and BM25 per survey.

BM25 is the ``bm25s`` library's (Lucene variant, k1 = 1.5, b = 0.75) of each candidate's
text against the survey's title + abstract; per survey, :class:`BlockIndex` computes the same
bits for the query's tokens alone, without building a ``bm25s`` index. The text a model reads for a paper, survey or
candidate, is :func:`paper_text` (for a work outside the corpus the title is the one parsed
from the bib strings citing it; never a citing paper's raw string, whose style tells who
cited it). Tokens are lowercase ``\\w+`` runs; the vocabulary is numbered in sorted order
so scores do not depend on hash seeds.
"""

from __future__ import annotations

import logging
import math
from collections import OrderedDict

import numpy as np
import polars as pl

from pipeline.core.schema import (
    CANDIDATE_ABSTRACT,
    CANDIDATE_TITLE,
    SURVEY_ABSTRACT,
    SURVEY_TITLE,
)

TOKEN_PATTERN = r"\w+"


def _text(*parts: pl.Expr) -> pl.Expr:
    return pl.concat_str([p.fill_null("") for p in parts], separator=" ")


def tokenize(texts: pl.Expr) -> pl.Expr:
    """Lowercase word tokens (``\\w+`` runs) of a string expression, as a list."""
    return texts.str.to_lowercase().str.extract_all(TOKEN_PATTERN)


class BM25Index:
    """BM25 (:mod:`bm25s`, Lucene variant, float64) over a list of token lists; the
    vocabulary is numbered in sorted order, so scores do not depend on hash seeds."""

    def __init__(self, docs: list[list[str]]) -> None:
        import bm25s  # the index library is only needed for BM25

        # bm25s sets its logger to DEBUG on import and logs every index build
        logging.getLogger("bm25s").setLevel(logging.WARNING)
        self.size = len(docs)
        self.vocabulary = {t: i for i, t in enumerate(sorted({t for doc in docs for t in doc}))}
        self.retriever = bm25s.BM25(dtype="float64")
        self.retriever.index(
            ([[self.vocabulary[t] for t in doc] for doc in docs], self.vocabulary),
            show_progress=False,
        )

    def scores(self, query: list[str]) -> np.ndarray:
        """BM25 of every document against ``query`` (zeros when no query token is known)."""
        query_ids = [self.vocabulary[t] for t in query if t in self.vocabulary]
        if not query_ids:
            return np.zeros(self.size)
        return np.asarray(self.retriever.get_scores(query_ids), dtype=np.float64)


def survey_query_tokens() -> pl.Expr:
    """Tokens of the survey's title + abstract (the BM25 query)."""
    return tokenize(_text(pl.col(SURVEY_TITLE), pl.col(SURVEY_ABSTRACT)))


def paper_text(title: pl.Expr, abstract: pl.Expr) -> pl.Expr:
    """The one string a model reads for a paper: ``title + " " + abstract`` with the
    whitespace at its ends stripped, so the title alone when there is no abstract.

    It is the string BEIR and MTEB build from a document ``{"title", "text"}``
    (``(title + " " + text).strip()``), which is why the release's ``corpus`` holds the
    abstract as ``text`` (``''`` when there is none) and its ``queries`` hold this string
    as ``text``: the evaluation here, BEIR and MTEB encode the same strings.
    """
    return _text(title, abstract).str.strip_chars()


def survey_text() -> pl.Expr:
    """The survey's text: :func:`paper_text` of its title and abstract (the query)."""
    return paper_text(pl.col(SURVEY_TITLE), pl.col(SURVEY_ABSTRACT))


def candidate_text() -> pl.Expr:
    """The candidate's text: :func:`paper_text` of its title and abstract."""
    return paper_text(pl.col(CANDIDATE_TITLE), pl.col(CANDIDATE_ABSTRACT))


def candidate_text_tokens() -> pl.Expr:
    """Tokens of :func:`candidate_text`."""
    return tokenize(candidate_text())


def token_count(texts: pl.Expr) -> pl.Expr:
    """How many tokens :func:`tokenize` finds in a string expression, without building them."""
    return texts.str.to_lowercase().str.count_matches(TOKEN_PATTERN)


BM25_K1, BM25_B = 1.5, 0.75  # bm25s's defaults, which BM25Index uses


class BlockIndex:
    """The BM25 of :class:`BM25Index` (``bm25s``, Lucene variant, float64) over one small
    list of documents, computed for the query's tokens only: ``bm25s`` builds its index over
    every token of every document in Python loops, which was most of the probe's time.

    The same float64 operations in the same order, so the same bits (tested):

    * idf = ``math.log(1 + (N - df + 0.5) / (df + 0.5))`` (N documents, df holding the token);
    * a document's part of a token = ``idf * (tf / (k1 * ((1 - b) + b * len / avg_len) + tf))``,
      ``avg_len`` the mean token count (``np.mean`` of the integer lengths);
    * its score = 0.0 plus the parts of the query's tokens in query order, a repeated token
      each time (``bm25s`` adds one query token's column at a time; a document without the
      token gains exactly 0.0).
    """

    def __init__(self, docs: pl.Series) -> None:
        self.size = docs.len()
        self.lengths = docs.list.len().fill_null(0).to_numpy().astype(np.int64)
        self.avg_len = self.lengths.mean() if self.size else 0.0
        # every token of every document, in order, and the document it is in
        self.tokens = docs.explode().drop_nulls()
        self.rows = np.repeat(np.arange(self.size), self.lengths)

    def scores(self, query: list[str]) -> np.ndarray:
        """BM25 of every document against ``query`` (zeros when no query token is known)."""
        n = self.size
        terms = list(dict.fromkeys(query))
        if not terms or not len(self.tokens):
            return np.zeros(n)
        term = self.tokens.replace_strict(
            terms, list(range(len(terms))), default=-1, return_dtype=pl.Int64
        ).to_numpy()
        found = term >= 0
        tf = np.zeros((len(terms), n))  # whole counts: exact
        np.add.at(tf, (term[found], self.rows[found]), 1.0)
        held = tf > 0
        doc_freq = held.sum(axis=1).tolist()
        if not any(doc_freq):
            return np.zeros(n)
        idf = np.array(
            [math.log(1 + (n - d + 0.5) / (d + 0.5)) if d else 0.0 for d in doc_freq],
            dtype=np.float64,
        )
        with np.errstate(divide="ignore", invalid="ignore"):
            tfc = tf / (BM25_K1 * ((1 - BM25_B) + BM25_B * self.lengths / self.avg_len) + tf)
        parts = np.where(held, idf[:, None] * tfc, 0.0)
        out = np.zeros(n)
        position = {t: i for i, t in enumerate(terms)}
        for t in query:
            out += parts[position[t]]
        return out


def survey_blocks(survey_ids: pl.Series) -> tuple[np.ndarray, np.ndarray]:
    """``(starts, stops)``: the row ranges of each survey's block (rows of a survey contiguous)."""
    starts = np.flatnonzero(survey_ids.ne_missing(survey_ids.shift(1)).to_numpy())
    return starts, np.append(starts[1:], survey_ids.len())


def bm25_by_survey(survey_ids: pl.Series, queries: pl.Series, docs: pl.Series) -> np.ndarray:
    """BM25 of each row's doc tokens against its query tokens, one index per survey.

    Args:
        survey_ids: one id per row, rows of a survey contiguous.
        queries: token lists; the first row of each survey's block is its query.
        docs: token lists, one per row.
    """
    starts, _ = survey_blocks(survey_ids)
    return bm25_by_block(survey_ids, queries.gather(starts).to_list(), docs)


def bm25_by_block(survey_ids: pl.Series, queries: list[list[str]], docs: pl.Series) -> np.ndarray:
    """:func:`bm25_by_survey` with one query per survey block, in block order (a caller that
    tokenizes each survey's query once, not once per row).

    Blocks holding the same documents in the same order (the aspects of one survey list the
    same candidates, each with its own query) share one index: built once, it scores each
    block's query, with the same scores as an index of its own. Building the index was most
    of the aspects' probe."""
    starts, stops = survey_blocks(survey_ids)
    scores = np.zeros(survey_ids.len())
    row_hashes = docs.hash().to_numpy()  # to find equal blocks; equality is then checked
    recent: OrderedDict[bytes, list[tuple[int, int, BlockIndex]]] = OrderedDict()
    for query, start, stop in zip(queries, starts.tolist(), stops.tolist(), strict=True):
        block = docs[start:stop]
        key = row_hashes[start:stop].tobytes()
        index = next(
            (idx for s0, e0, idx in recent.get(key, ()) if block.equals(docs[s0:e0])), None
        )
        if index is None:
            # One small index per survey: BM25's idf is over that survey's candidates.
            index = BlockIndex(block)
            recent.setdefault(key, []).append((start, stop, index))
        recent.move_to_end(key)
        if len(recent) > _SHARED_INDEXES:
            recent.popitem(last=False)
        scores[start:stop] = index.scores(query)
    return scores


# indexes kept for reuse: a survey's aspects are contiguous (sorted by aspect id), so the
# lists they share are seen close together
_SHARED_INDEXES = 32
