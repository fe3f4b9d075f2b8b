"""Normalisation of work identifiers (arXiv ids, DOIs, OpenAlex ids).

One set of patterns, usable both by Python's ``regex`` (scalar helpers, for single
values) and by Polars (vectorised expressions, used on whole columns by ``extract``):
the patterns avoid look-around, which the Rust regex engine does not support.
Every function returns ``None`` (a null) for an empty or unusable value.
"""

from __future__ import annotations

import polars as pl
import regex

# New-style ids (0704.0001 onwards); old-style ids (hep-th/9901001, math.PR/0601001),
# where a subject-class suffix is dropped because arXiv ignores it.
ARXIV_NEW = r"(?:^|[^\d.])(\d{4}\.\d{4,5})(?:v\d+)?(?:\D|$)"
ARXIV_OLD = r"(?:^|[^A-Za-z-])([a-z][a-z-]*)(?:\.[A-Z]{2})?/(\d{7})(?:v\d+)?(?:\D|$)"
DOI = r"(10\.\d{4,9}/[^\s\p{Cc}]+)"  # cut at whitespace or a control character
DOI_TRAILING = ".,;"
OPENALEX = r"(W\d+)\s*$"

_NEW, _OLD, _DOI, _OA = (regex.compile(p) for p in (ARXIV_NEW, ARXIV_OLD, DOI, OPENALEX))


def normalize_arxiv(value: str | None) -> str | None:
    """``arXiv:2104.06921v2`` / ``https://arxiv.org/abs/2104.06921`` -> ``2104.06921``.

    Old-style ids keep their archive (``hep-th/9901001``); ``math.PR/0601001`` ->
    ``math/0601001``.
    """
    if not value:
        return None
    m = _NEW.search(value)
    if m:
        return m.group(1)
    m = _OLD.search(value)
    return f"{m.group(1)}/{m.group(2)}" if m else None


def normalize_doi(value: str | None) -> str | None:
    """``https://doi.org/10.1090/TRAN/8674`` / ``doi:10...`` -> ``10.1090/tran/8674``."""
    if not value:
        return None
    m = _DOI.search(value)
    return m.group(1).rstrip(DOI_TRAILING).lower() if m else None


def normalize_openalex(value: str | None) -> str | None:
    """``https://openalex.org/W4225968159`` -> ``W4225968159``."""
    if not value:
        return None
    m = _OA.search(value)
    return m.group(1) if m else None


def strip_version(paper_id: str) -> str:
    """``2212.11774v2`` -> ``2212.11774``; other ids are normalised like bib arXiv ids."""
    return normalize_arxiv(paper_id) or paper_id.strip()


def arxiv_expr(col: str | pl.Expr) -> pl.Expr:
    """Polars twin of :func:`normalize_arxiv` for a whole column."""
    c = pl.col(col) if isinstance(col, str) else col
    old = pl.concat_str([c.str.extract(ARXIV_OLD, 1), c.str.extract(ARXIV_OLD, 2)], separator="/")
    return pl.coalesce(c.str.extract(ARXIV_NEW, 1), old)


def doi_expr(col: str | pl.Expr) -> pl.Expr:
    """Polars twin of :func:`normalize_doi`."""
    c = pl.col(col) if isinstance(col, str) else col
    return c.str.extract(DOI, 1).str.strip_chars_end(DOI_TRAILING).str.to_lowercase()


def openalex_expr(col: str | pl.Expr) -> pl.Expr:
    """Polars twin of :func:`normalize_openalex`."""
    c = pl.col(col) if isinstance(col, str) else col
    return c.str.extract(OPENALEX, 1)
