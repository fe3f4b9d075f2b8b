"""Full-text scoring (issue 51): the release's ``corpus_sections`` as a passage corpus, and a
document's score from its passages' scores.

* :func:`passage_corpus`: one passage per section, ``_id`` = the document id, ``#`` and the
  section order (``arxiv:2101.00001#3``), with ``corpus-id`` mapping it back to its document:
  a BEIR or MTEB passage retriever runs on it as on ``corpus``.
* :func:`document_scores`: a document's score from its passages' scores, by
  :data:`AGGREGATIONS`: ``max`` (its best passage) or ``mean-top-k`` (the mean of its ``k``
  best passages, of all of them when it has fewer), the two rules DAPFAM compares.
* :func:`with_fallback`: documents without full text keep their title-and-abstract score;
  the number of such (query, document) pairs is returned for the report.
* :class:`PassageOptions`: the rule and the passage truncation ``evaluate --passages`` takes;
  :func:`passage_texts`: what an encoder reads of a section.
* :func:`passage_map` and :func:`passage_corpus_with_fallback`: the passage corpus of
  ``export --passages``, with one ``<doc>#abstract`` passage (title and abstract) for each
  document without full text, and the table that maps a passage run back to documents.

The systems that use them: :mod:`pipeline.evaluate.systems.full_text`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from pipeline.core import schema as S
from pipeline.core.errors import UsageError
from pipeline.core.release_files import FULL_TEXT_VIEW, view_of_eval_file
from pipeline.engine.workdir import release_file_schema
from pipeline.rules.text_match import paper_text

AGGREGATIONS = ("max", "mean-top-k")
PASSAGE_SEPARATOR = "#"
QUERY = "query_id"
DOCUMENT = "doc_id"
PASSAGE = "passage_id"
SCORE = "score"


def passage_id_expr() -> pl.Expr:
    """The passage id of a ``corpus_sections`` row: document id, ``#``, section order."""
    return pl.concat_str(
        [
            pl.col(S.BEIR_CORPUS_ID),
            pl.lit(PASSAGE_SEPARATOR),
            pl.col(S.SECTION_ORDER).cast(pl.String),
        ]
    )


def passage_corpus(sections: pl.LazyFrame) -> pl.LazyFrame:
    """``corpus_sections`` rows as a BEIR passage corpus: ``_id``, ``title`` (the heading),
    ``text``, and ``corpus-id`` (the document the passage belongs to)."""
    return sections.select(
        passage_id_expr().alias(S.BEIR_ID),
        pl.col(S.HEADING).alias(S.BEIR_TITLE),
        pl.col(S.SECTION_TEXT).alias(S.BEIR_TEXT),
        pl.col(S.BEIR_CORPUS_ID),
    )


def document_scores(passages: pl.LazyFrame, aggregation: str, k: int = 3) -> pl.LazyFrame:
    """``(query_id, doc_id, score)`` from ``(query_id, doc_id, score)`` rows, one per scored
    passage.

    Raises:
        ValueError: an aggregation not in :data:`AGGREGATIONS`, or ``k`` < 1.
    """
    if aggregation not in AGGREGATIONS:
        raise ValueError(f"passage aggregation {aggregation!r}: one of {', '.join(AGGREGATIONS)}")
    if k < 1:
        raise ValueError(f"mean-top-k: k must be at least 1, not {k}")
    score = pl.col(SCORE).cast(pl.Float64)
    agg = score.max() if aggregation == "max" else score.top_k(k).mean()
    return passages.group_by(QUERY, DOCUMENT).agg(agg.alias(SCORE)).sort(QUERY, DOCUMENT)


def with_fallback(documents: pl.LazyFrame, fallback: pl.LazyFrame) -> tuple[pl.DataFrame, int]:
    """Every ``(query_id, doc_id)`` of ``fallback`` (the title-and-abstract scores) with its
    passage-aggregated score from ``documents`` where it has one, else its fallback score;
    and how many pairs fell back."""
    joined = (
        fallback.join(
            documents.select(QUERY, DOCUMENT, pl.col(SCORE).alias("_passages")),
            on=[QUERY, DOCUMENT],
            how="left",
        )
        .with_columns(pl.col("_passages").is_null().alias("_fallback"))
        .with_columns(pl.coalesce("_passages", pl.col(SCORE).cast(pl.Float64)).alias(SCORE))
        .sort(QUERY, DOCUMENT)
        .collect()
    )
    return joined.select(QUERY, DOCUMENT, SCORE), int(joined["_fallback"].sum())


# ----------------------------------------------------------------- options and the view
DEFAULT_K = 3
DEFAULT_PASSAGE_CHARS = 2048  # about 512 tokens of English: a BERT-size encoder's context
FALLBACK_ORDER = S.ABSTRACT  # a document without full text: one passage, its title and abstract


@dataclass(frozen=True)
class PassageOptions:
    """How a full-text system makes a document's score (``evaluate --passages``).

    Attributes:
        aggregation: ``max`` or ``mean-top-k`` (:data:`AGGREGATIONS`).
        k: the ``k`` of ``mean-top-k``.
        max_chars: each passage's text is cut to this many characters before an encoder
            reads it (0: not cut); the encoder may cut it further to its own context.
    """

    aggregation: str = "max"
    k: int = DEFAULT_K
    max_chars: int = DEFAULT_PASSAGE_CHARS

    def __post_init__(self) -> None:
        if self.aggregation not in AGGREGATIONS:
            raise UsageError(
                f"--passage-aggregation {self.aggregation!r}: max or mean-top-K (e.g. mean-top-3)"
            )
        if self.k < 1:
            raise UsageError(f"--passage-aggregation mean-top-{self.k}: K must be at least 1")
        if self.max_chars < 0:
            raise UsageError(f"--passage-chars {self.max_chars}: need 0 (no cut) or more")

    @classmethod
    def parse(cls, rule: str, max_chars: int = DEFAULT_PASSAGE_CHARS) -> PassageOptions:
        """``max``, ``mean-top-k`` (k = 3) or ``mean-top-K`` (``mean-top-5``) as options."""
        if rule.startswith("mean-top-") and rule[len("mean-top-") :].isdigit():
            return cls("mean-top-k", int(rule[len("mean-top-") :]), max_chars)
        return cls(rule, DEFAULT_K, max_chars)

    @property
    def rule(self) -> str:
        """The aggregation as the report names it: ``max`` or ``mean-top-3``."""
        return self.aggregation if self.aggregation == "max" else f"mean-top-{self.k}"

    def facts(self) -> dict[str, Any]:
        return {"aggregation": self.rule, "passage_chars": self.max_chars}


# what every reader of the view reads, and the type it reads it as
SECTION_COLUMNS = {
    S.BEIR_CORPUS_ID: pl.String,
    S.SECTION_ORDER: pl.Int32,
    S.HEADING: pl.String,
    S.SECTION_TEXT: pl.String,
}


def sections_path(eval_path: Path, split: str = "eval") -> Path | None:
    """``corpus_sections/<split>.parquet`` of the release the eval file belongs to (beside it,
    or one folder up for the aspects folder's eval file), or None when the release has none.

    Raises:
        UsageError: the file differs from the release's record, is not Parquet, or lacks a
            column of :data:`SECTION_COLUMNS` in its type (one line naming the file, before
            anything reads or encodes it).
    """
    path = view_of_eval_file(eval_path, FULL_TEXT_VIEW, split)
    if path is None:
        return None
    schema = release_file_schema(path, UsageError)
    wrong = {c: str(schema.get(c)) for c, t in SECTION_COLUMNS.items() if schema.get(c) != t}
    if wrong:
        want = {c: str(t) for c, t in SECTION_COLUMNS.items()}
        raise UsageError(f"{path}: not a {FULL_TEXT_VIEW} file: columns {wrong}, want {want}")
    return path


def passage_text_expr(max_chars: int) -> pl.Expr:
    """The text an encoder reads of a ``corpus_sections`` row: heading and text
    (:func:`~pipeline.rules.text_match.paper_text`), cut to ``max_chars`` (0: not cut)."""
    text = paper_text(pl.col(S.HEADING).fill_null(""), pl.col(S.SECTION_TEXT).fill_null(""))
    return text.str.slice(0, max_chars) if max_chars else text


def passage_texts(sections: pl.LazyFrame, max_chars: int) -> pl.LazyFrame:
    """``passage_id``, ``doc_id`` and the text an encoder reads of each section
    (:func:`passage_text_expr`), by document then passage id (a document's passages in the
    order a ``mean-top-k`` score sums them)."""
    return sections.select(
        passage_id_expr().alias(PASSAGE),
        pl.col(S.BEIR_CORPUS_ID).alias(DOCUMENT),
        passage_text_expr(max_chars).alias(S.BEIR_TEXT),
    ).sort(DOCUMENT, PASSAGE)


def fallback_id_expr(doc: pl.Expr) -> pl.Expr:
    """The passage id of a document's title and abstract: ``<doc>#abstract``."""
    return pl.concat_str([doc, pl.lit(PASSAGE_SEPARATOR + FALLBACK_ORDER)])


def passage_map(sections: pl.LazyFrame, corpus: pl.LazyFrame) -> pl.LazyFrame:
    """Every passage of the passage corpus and its document: ``_id``, ``corpus-id`` and
    ``section_order`` (null for the title-and-abstract passage of a document without full
    text, ``<doc>#abstract``)."""
    with_text = sections.select(
        passage_id_expr().alias(S.BEIR_ID), pl.col(S.BEIR_CORPUS_ID), pl.col(S.SECTION_ORDER)
    )
    others = corpus.select(pl.col(S.BEIR_ID).alias(S.BEIR_CORPUS_ID)).join(
        sections.select(S.BEIR_CORPUS_ID).unique(), on=S.BEIR_CORPUS_ID, how="anti"
    )
    fallback = others.select(
        fallback_id_expr(pl.col(S.BEIR_CORPUS_ID)).alias(S.BEIR_ID),
        pl.col(S.BEIR_CORPUS_ID),
        pl.lit(None, dtype=pl.Int32).alias(S.SECTION_ORDER),
    )
    return pl.concat([with_text, fallback]).sort(S.BEIR_CORPUS_ID, S.SECTION_ORDER, nulls_last=True)


def passage_corpus_with_fallback(sections: pl.LazyFrame, corpus: pl.LazyFrame) -> pl.LazyFrame:
    """:func:`passage_corpus` plus one passage per document without full text (its title as
    ``title``, its abstract as ``text``, ``_id`` = ``<doc>#abstract``), ordered by document
    then section: every document of the split is retrievable, as the evaluator's fallback
    scores it."""
    order = "_order"
    with_text = passage_corpus(sections.sort(S.BEIR_CORPUS_ID, S.SECTION_ORDER)).with_columns(
        pl.int_range(pl.len()).over(S.BEIR_CORPUS_ID).alias(order)
    )
    fallback = corpus.join(
        sections.select(S.BEIR_CORPUS_ID).unique(),
        left_on=S.BEIR_ID,
        right_on=S.BEIR_CORPUS_ID,
        how="anti",
    ).select(
        fallback_id_expr(pl.col(S.BEIR_ID)).alias(S.BEIR_ID),
        pl.col(S.BEIR_TITLE),
        pl.col(S.BEIR_TEXT),
        pl.col(S.BEIR_ID).alias(S.BEIR_CORPUS_ID),
        pl.lit(-1, dtype=pl.Int64).alias(order),
    )
    return (
        pl.concat([with_text.with_columns(pl.col(order).cast(pl.Int64)), fallback])
        .sort(S.BEIR_CORPUS_ID, order)
        .drop(order)
    )
