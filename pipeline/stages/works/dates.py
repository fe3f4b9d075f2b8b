"""Dates: a work's ``known_date`` is the paper's first version date, else the month of the
work's arXiv id, else January 1 of the earliest year its raw references give (the last
19xx/20xx word of each raw string), else null; ``date_source`` says which (``corpus``,
``arxiv_id``, ``reference_year``). Without the reference year, an undated work could be a
hard negative only when something cited it before the survey, so "undated and never cited
before" would have meant "positive"."""

from __future__ import annotations

import polars as pl

# A year in a raw reference: the last 19xx/20xx word of the string (the publication year
# in every style of the real sample; arXiv ids such as 2104.06921 do not match).
REFERENCE_YEAR = r"\b(19[5-9]\d|20[0-4]\d)\b"
DATE_FROM_CORPUS, DATE_FROM_ARXIV_ID, DATE_FROM_REFERENCE_YEAR = (
    "corpus",
    "arxiv_id",
    "reference_year",
)


def arxiv_month_expr(alias: pl.Expr) -> pl.Expr:
    """First day of the month encoded in an ``arxiv:`` alias, else null.

    ``arxiv:2104.06921`` -> 2021-04-01; ``arxiv:hep-th/9901001`` -> 1999-01-01 (two-digit
    years from 91 are 19xx: arXiv began in August 1991).
    """
    new = alias.str.extract_groups(r"^arxiv:(?P<yy>\d{2})(?P<mm>\d{2})\.\d{4,5}$")
    old = alias.str.extract_groups(r"^arxiv:[a-z-]+/(?P<yy>\d{2})(?P<mm>\d{2})\d{3}$")
    yy = pl.coalesce(new.struct.field("yy"), old.struct.field("yy")).cast(pl.Int32)
    mm = pl.coalesce(new.struct.field("mm"), old.struct.field("mm")).cast(pl.Int32)
    is_old = old.struct.field("yy").is_not_null()
    year = pl.when(is_old & (yy >= 91)).then(1900 + yy).otherwise(2000 + yy)
    return pl.when(mm.is_between(1, 12)).then(pl.date(year, mm, 1)).otherwise(None)
