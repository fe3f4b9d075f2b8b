"""A candidate as a retrieval document: the text MTEB and BEIR read (its title and abstract
joined), the release's rule for works whose text cannot stand as a document, and MTEB's data
checks computed on the release's BEIR files.

The rule (:func:`excluded_works`). A candidate work is not put in a release (no reading-list
row, no corpus document, no aspect row) when the text it is shown with, title and abstract
joined (:func:`document_text`), is

* ``no_text``: shorter than :data:`MIN_TEXT_CHARS` characters (no title and no abstract:
  a reader, or a model, has nothing to rank it by), or
* ``duplicate_text``: equal, ignoring case and runs of whitespace, to the shown text of
  another candidate work of the same split (two ids that read the same: the same work under
  two ids that ``works`` did not merge, or a venue parsed as a title, ``annals of
  mathematics``). No copy is kept: a survey citing one could have the other as its hard
  negative, and a reader cannot tell which of them a survey cites. A split is where
  documents compete (its corpus, its surveys' lists): a text shared across the two splits
  ranks against itself nowhere, and is kept.

The rule drops positives and hard negatives alike, by what a reader sees; no text from
elsewhere (the raw bib string, which carries the citing paper's formatting) is put in their
place. A survey left without a positive is dropped with them (its query would score nothing).

MTEB's checks (:func:`mteb_checks`): its maintainers' rules for a retrieval task, computed as
MTEB's descriptive statistics and ``data_cleaning`` filters compute them
(:func:`pipeline.integrations.mteb.check` runs MTEB's own code; a test holds the two equal on
the demo release), so the release stage checks itself without MTEB installed: no text of
``MIN_TEXT_CHARS - 1`` characters or fewer, at most :data:`MAX_DUPLICATE_SHARE` duplicate
documents or queries (text compared after stripping surrounding whitespace), every qrels id
in the corpus and the queries, no query without a relevant (score above 0) document.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from pipeline.core import schema as S

MIN_TEXT_CHARS = 4  # MTEB's maintainers: no text of 3 characters or fewer
MAX_DUPLICATE_SHARE = 0.01  # at most 1% duplicate documents or queries
NO_TEXT, DUPLICATE_TEXT = "no_text", "duplicate_text"
EXCLUSION_REASONS = (NO_TEXT, DUPLICATE_TEXT)
REASON = "_text_exclusion"
_KEY = "_text_key"
_LENGTH = "_text_length"


def document_text(title: pl.Expr, text: pl.Expr) -> pl.Expr:
    """The string MTEB and BEIR read of a document: ``(title + " " + text).strip()``."""
    return pl.concat_str([title.fill_null(""), text.fill_null("")], separator=" ").str.strip_chars()


def text_key(text: pl.Expr) -> pl.Expr:
    """What two texts must share to read the same: case folded, whitespace runs as one space."""
    return text.str.to_lowercase().str.replace_all(r"\s+", " ").str.strip_chars()


def excluded_works(shown: pl.LazyFrame) -> pl.LazyFrame:
    """``(split, work_id, _text_exclusion)`` of the works of ``shown`` (``split``,
    ``work_id``, ``title``, ``abstract``: every candidate work of each split once, with the
    text it is shown with) that the release leaves out of that split (module docstring),
    sorted by split and work id."""
    # texts are grouped by a 64-bit hash of their key, never held whole: at the full corpus
    # the candidates' abstracts are gigabytes, and two distinct keys share a hash with odds
    # of about 1e-6 among ten million
    key = text_key(document_text(pl.col(S.TITLE), pl.col(S.ABSTRACT)))
    return (
        shown.select(S.SPLIT, S.WORK_ID, key.str.len_chars().alias(_LENGTH), key.hash().alias(_KEY))
        .with_columns(
            pl.when(pl.col(_LENGTH) < MIN_TEXT_CHARS)
            .then(pl.lit(NO_TEXT))
            .when(pl.len().over(S.SPLIT, _KEY) > 1)
            .then(pl.lit(DUPLICATE_TEXT))
            .alias(REASON)
        )
        .drop_nulls(REASON)
        .select(S.SPLIT, S.WORK_ID, REASON)
        .sort(S.SPLIT, S.WORK_ID)
    )


def _text_checks(texts: pl.LazyFrame) -> dict[str, Any]:
    """Counts of the one column ``_t`` of ``texts``; texts are told apart by a 64-bit hash of
    their stripped string (a collision among a few million texts has odds of about 1e-7),
    so a split's texts are never held whole."""
    text = pl.col("_t").fill_null("")
    stripped = text.str.strip_chars()
    got = texts.select(
        pl.len().alias("count"),
        stripped.hash().n_unique().alias("_unique"),
        (stripped.str.len_chars() < MIN_TEXT_CHARS).sum().alias("short_texts"),
        text.str.len_chars().min().alias("min_text_length"),
    ).collect(engine="streaming")
    n, unique = int(got["count"][0]), int(got["_unique"][0])
    duplicates = n - unique if n else 0
    return {
        "count": n,
        "duplicates": duplicates,
        "duplicate_share": round(duplicates / n, 6) if n else None,
        "short_texts": int(got["short_texts"][0] or 0),
        "min_text_length": None if not n else int(got["min_text_length"][0]),
    }


def mteb_checks(queries: pl.LazyFrame, corpus: pl.LazyFrame, qrels: pl.LazyFrame) -> dict[str, Any]:
    """MTEB's data checks of one retrieval split (its BEIR ``queries``, ``corpus`` and
    ``qrels``): per side the count, duplicate texts (after stripping), texts shorter than
    :data:`MIN_TEXT_CHARS` and the shortest length; the qrels' ids missing from the corpus or
    the queries and the queries without a relevant document; ``problems`` (empty: passed)
    and ``passed``."""
    sides = {
        "documents": _text_checks(
            corpus.select(document_text(pl.col(S.BEIR_TITLE), pl.col(S.BEIR_TEXT)).alias("_t"))
        ),
        "queries": _text_checks(queries.select(pl.col(S.BEIR_TEXT).alias("_t"))),
    }
    judged = qrels.group_by(S.BEIR_QUERY_ID).agg((pl.col(S.BEIR_SCORE) != 0).any().alias("_rel"))
    missing = lambda ids, side, key: (  # noqa: E731
        ids.join(side.select(pl.col(S.BEIR_ID).alias(key)), on=key, how="anti")
        .select(pl.len())
        .collect(engine="streaming")
        .item()
    )
    qrel_checks = {
        "missing_corpus_ids": missing(
            qrels.select(S.BEIR_CORPUS_ID).unique(), corpus, S.BEIR_CORPUS_ID
        ),
        "missing_query_ids": missing(judged.select(S.BEIR_QUERY_ID), queries, S.BEIR_QUERY_ID),
        "queries_without_relevant": judged.filter(~pl.col("_rel"))
        .select(pl.len())
        .collect(engine="streaming")
        .item(),
    }
    problems: list[str] = []
    for side, got in sides.items():
        n = got["count"]
        if not n:
            problems.append(f"empty split: no {side}")
            continue
        if got["duplicates"] > MAX_DUPLICATE_SHARE * n:
            problems.append(
                f"{side}: {got['duplicates']:,} duplicate texts of {n:,} "
                f"({got['duplicates'] / n:.2%}, MTEB allows {MAX_DUPLICATE_SHARE:.0%})"
            )
        if got["short_texts"]:
            problems.append(
                f"{side}: {got['short_texts']:,} texts of {MIN_TEXT_CHARS - 1} characters or "
                f"fewer (shortest {got['min_text_length']})"
            )
    for key, n in qrel_checks.items():
        if n:
            problems.append(f"qrels: {n:,} {key.replace('_', ' ')}")
    return {**sides, "qrels": qrel_checks, "problems": problems, "passed": not problems}
