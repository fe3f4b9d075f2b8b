"""An aspect as a query: how the rankers, the evaluation and the reading-free probe read the
release's ``aspects`` folder (what an aspect is: :mod:`pipeline.stages.aspects`).

The query of an aspect is its heading, its parent heading where the layout keeps one (the
2022 hierarchy), and the survey's title and abstract; never the section's body text, which
names the answers. Every reader that ranks per query keys rows by ``survey_id`` and reads the
query from ``survey_title`` and ``survey_abstract`` (BM25, the rankers' features, encoders):
:func:`as_queries` hands them an aspects table in that form, so the same code scores both
tasks.
"""

from __future__ import annotations

import polars as pl

from pipeline.core import schema as S

# between the parts of an aspect's query title
QUERY_SEPARATOR = " — "
# what an aspects table adds to a reader's columns so that :func:`as_queries` can apply
QUERY_COLUMNS = (S.ASPECT_ID, S.ASPECT_HEADING, S.ASPECT_PARENT_HEADING)


def query_title_expr() -> pl.Expr:
    """The aspect's heading, its parent heading and the survey's title, the empty ones left out."""
    parts = [
        pl.col(c).fill_null("").str.strip_chars()
        for c in (S.ASPECT_HEADING, S.ASPECT_PARENT_HEADING, S.SURVEY_TITLE)
    ]
    return (
        pl.concat_list(parts)
        .list.eval(pl.element().filter(pl.element() != ""))
        .list.join(QUERY_SEPARATOR)
    )


def is_aspects(columns: list[str] | pl.Schema) -> bool:
    """Whether a table (its column names or schema) is an aspects table."""
    return S.ASPECT_ID in list(columns)


def present_query_columns(columns: list[str] | pl.Schema) -> list[str]:
    """The :data:`QUERY_COLUMNS` a table has (none for a table of whole surveys)."""
    names = list(columns)
    return [c for c in QUERY_COLUMNS if c in names]


def as_queries(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` keyed by query: for an aspects table, ``survey_id`` becomes the aspect id and
    ``survey_title`` the aspect's query title (:func:`query_title_expr`, when the headings are
    there); a table of whole surveys is returned as it is."""
    if not is_aspects(frame.columns):
        return frame
    out = frame
    if S.ASPECT_HEADING in frame.columns and S.SURVEY_TITLE in frame.columns:
        out = out.with_columns(query_title_expr().alias(S.SURVEY_TITLE))
    return out.with_columns(pl.col(S.ASPECT_ID).alias(S.SURVEY_ID))
