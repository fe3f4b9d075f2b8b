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
"""

from __future__ import annotations

import polars as pl

from pipeline.core import schema as S

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
