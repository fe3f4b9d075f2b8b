"""The field of a work without arXiv categories: its OpenAlex subfield (``[negatives]
subfield_as_field``). One owner for the rule; ``negatives`` (pools and strata) and ``release``
(the ``in_domain`` column) read it here.

A corpus paper's field is its arXiv categories. A work without a corpus record (outside
arXiv, or an arXiv work outside the corpus) has none, so it can never be in-domain, and it
joins a survey's pool only when a survey or paper of the survey's category cites it. With the
rule on, such a work has the fields whose subfield its OpenAlex record names:

* **the subfields of a category** (:func:`category_subfields`): of the corpus papers that list
  the category and have an OpenAlex record with a subfield (looked up by their arXiv DOI), the
  subfields that hold at least ``subfield_min_share`` of them, when at least
  ``subfield_min_papers`` such papers exist. Learnt from the corpus's own papers, never from
  labels: which works a survey lists plays no part.
* **the categories of a work** (:func:`subfield_categories`): a work without a corpus paper
  whose record's subfield is a subfield of category ``c`` has ``c`` among its
  ``field_categories``; it is then in-domain for surveys of ``c``
  (:func:`pipeline.rules.visible.in_domain_expr`) and an ``own_category`` pool entry of ``c``
  when a detected survey cites it (:func:`pipeline.stages.negatives.rules.eligible_works`),
  as a corpus paper of ``c`` would be. Every other rule stays as it is.
"""

from __future__ import annotations

import polars as pl

from pipeline.core import schema as S
from pipeline.core.config import Config

# the categories a work's OpenAlex subfield gives it (null: a corpus paper, no record, or off)
FIELD_CATEGORIES = "_field_categories"
_N = "_papers"


def category_subfields(
    works: pl.LazyFrame, records: pl.LazyFrame, min_share: float, min_papers: int
) -> pl.LazyFrame:
    """``(primary_category, oa_subfield)``: each arXiv category's subfields (module docstring).
    ``works``: the ``works`` stage's table; ``records``: the ``openalex`` stage's."""
    papers = (
        works.filter(pl.col(S.PAPER_ID).is_not_null())
        .select(S.WORK_ID, pl.col(S.CATEGORIES).alias(S.PRIMARY_CATEGORY))
        .join(
            records.filter(pl.col(S.OA_FOUND) & pl.col(S.OA_SUBFIELD).is_not_null()).select(
                S.WORK_ID, S.OA_SUBFIELD
            ),
            on=S.WORK_ID,
            how="inner",
        )
        .explode(S.PRIMARY_CATEGORY)
        .drop_nulls(S.PRIMARY_CATEGORY)
        .unique([S.WORK_ID, S.PRIMARY_CATEGORY])
    )
    return (
        papers.group_by(S.PRIMARY_CATEGORY, S.OA_SUBFIELD)
        .agg(pl.len().alias(_N))
        .with_columns(pl.col(_N).sum().over(S.PRIMARY_CATEGORY).alias("_all"))
        .filter((pl.col("_all") >= min_papers) & (pl.col(_N) >= pl.lit(min_share) * pl.col("_all")))
        .select(S.PRIMARY_CATEGORY, S.OA_SUBFIELD)
        .sort(S.PRIMARY_CATEGORY, S.OA_SUBFIELD)
    )


def subfield_categories(
    works: pl.LazyFrame, records: pl.LazyFrame, min_share: float, min_papers: int
) -> pl.LazyFrame:
    """``(work_id, _field_categories)``: for every work without a corpus paper whose OpenAlex
    subfield is some category's, the sorted list of those categories."""
    by_subfield = category_subfields(works, records, min_share, min_papers)
    return (
        works.filter(pl.col(S.PAPER_ID).is_null())
        .select(S.WORK_ID)
        .join(
            records.filter(pl.col(S.OA_FOUND)).select(S.WORK_ID, S.OA_SUBFIELD),
            on=S.WORK_ID,
            how="inner",
        )
        .join(by_subfield, on=S.OA_SUBFIELD, how="inner")
        .group_by(S.WORK_ID)
        .agg(pl.col(S.PRIMARY_CATEGORY).unique().sort().alias(FIELD_CATEGORIES))
    )


def with_field_categories(
    frame: pl.LazyFrame, fields: pl.LazyFrame | None, on: str = S.WORK_ID
) -> pl.LazyFrame:
    """``frame`` with ``_field_categories`` (:func:`subfield_categories` joined on ``on``;
    ``fields`` None: the rule is off, the column is null everywhere)."""
    if fields is None:
        return frame.with_columns(pl.lit(None, pl.List(pl.String)).alias(FIELD_CATEGORIES))
    return frame.join(
        fields.rename({S.WORK_ID: on}) if on != S.WORK_ID else fields,
        on=on,
        how="left",
        maintain_order="left",
    )


def fields_of(cfg: Config, works: pl.LazyFrame, records: pl.LazyFrame) -> pl.LazyFrame | None:
    """:func:`subfield_categories` under ``[negatives]`` of ``cfg``, or None when the rule is
    off."""
    ncfg = cfg.negatives
    if not ncfg.subfield_as_field:
        return None
    return subfield_categories(works, records, ncfg.subfield_min_share, ncfg.subfield_min_papers)
