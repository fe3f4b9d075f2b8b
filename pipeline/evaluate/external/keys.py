"""Joining a user's rows to the eval candidates through the release's aliases.

A user's table names a paper as their data does: ``2104.06921``, ``arXiv:2104.06921v2``,
``https://arxiv.org/abs/2104.06921``, ``10.1/X``, ``https://doi.org/10.1/x``, ``W123`` or
``https://openalex.org/W123``. :func:`alias_key` brings each form to the release's alias
form (``arxiv:2104.06921``, ``doi:10.1/x``, ``openalex:W123``; :mod:`pipeline.rules.aliases`),
and :func:`candidate_keys` lists every alias of every eval candidate (its id and the
``candidate_aliases`` of the eval file), so a row keyed by any of them reaches its candidate.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from pipeline.core.schema import CANDIDATE_ALIASES
from pipeline.evaluate.columns import CANDIDATE_ID
from pipeline.rules.aliases import ARXIV_PREFIX, DOI_PREFIX, OPENALEX_PREFIX
from pipeline.rules.ids import arxiv_expr, doi_expr, openalex_expr

KEY = "_key"


def alias_key(ids: pl.Expr) -> pl.Expr:
    """Each identifier of ``ids`` in the release's alias form (null when it has none).

    An explicit prefix or URL says the kind; a bare ``10.`` value is a DOI, a bare ``W``
    followed by digits an OpenAlex id, anything else is read as an arXiv id.
    """
    text = ids.cast(pl.String).str.strip_chars()
    lower = text.str.to_lowercase()
    is_doi = lower.str.contains(r"^doi:|doi\.org/|^10\.\d")
    is_openalex = lower.str.contains(r"^openalex:|openalex\.org/") | text.str.contains(r"^W\d+$")
    return (
        pl.when(is_doi)
        .then(pl.lit(DOI_PREFIX) + doi_expr(text))
        .when(is_openalex)
        .then(pl.lit(OPENALEX_PREFIX) + openalex_expr(text))
        .otherwise(pl.lit(ARXIV_PREFIX) + arxiv_expr(text))
    )


def candidate_keys(eval_path: Path, candidates: pl.Series, aliases: bool = True) -> pl.DataFrame:
    """``_key``, ``candidate_id``: every alias form of each of ``candidates`` (its id and,
    when the eval file has them and ``aliases``, its ``candidate_aliases``), one row per
    distinct pair. Retrieval mode passes ``aliases=False``: only judged candidates have
    aliases in the eval file, so using them would find judged documents under more names."""
    frame = pl.DataFrame({CANDIDATE_ID: candidates.unique().sort()})
    forms = [frame.select(pl.col(CANDIDATE_ID).alias("_alias"), CANDIDATE_ID)]
    if aliases and CANDIDATE_ALIASES in pl.read_parquet_schema(eval_path):
        aliases = (
            pl.scan_parquet(eval_path)
            .select(CANDIDATE_ID, CANDIDATE_ALIASES)
            .unique(CANDIDATE_ID)
            .explode(CANDIDATE_ALIASES)
            .select(pl.col(CANDIDATE_ALIASES).alias("_alias"), CANDIDATE_ID)
            .collect()
        )
        forms.append(aliases.join(frame, on=CANDIDATE_ID, how="semi"))
    both = pl.concat(forms).drop_nulls()
    return (
        pl.concat(
            [
                both.select(alias_key(pl.col("_alias")).alias(KEY), CANDIDATE_ID),
                both.select(pl.col("_alias").alias(KEY), CANDIDATE_ID),
            ]
        )
        .drop_nulls()
        .unique()
        .sort(KEY, CANDIDATE_ID)
    )


def match_keys(rows: pl.DataFrame, key: str, keys: pl.DataFrame) -> pl.DataFrame:
    """``rows`` with ``candidate_id`` for each row whose ``key`` names a candidate (by its own
    form or its alias form), the others dropped; a row naming two candidates gives both."""
    with_key = rows.with_columns(
        pl.col(key).cast(pl.String).alias("_raw"), alias_key(pl.col(key)).alias("_norm")
    )
    by_raw = with_key.join(keys, left_on="_raw", right_on=KEY, how="inner")
    by_norm = with_key.join(keys, left_on="_norm", right_on=KEY, how="inner")
    return pl.concat([by_raw, by_norm]).unique(maintain_order=True).drop("_raw", "_norm")
