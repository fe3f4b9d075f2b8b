"""Normalisation of work identifiers (arXiv ids, DOIs, OpenAlex ids).

Used by ``extract`` (per bib entry and per paper) and by ``works`` (aliases).
Every function returns ``None`` for an empty or unusable value.
"""

from __future__ import annotations

import regex

# New-style ids (0704.0001 onwards) and old-style ids (hep-th/9901001, math.PR/0601001).
_NEW = regex.compile(r"(?<![\d.])(\d{4}\.\d{4,5})(?:v\d+)?(?!\d)")
_OLD = regex.compile(r"(?<![A-Za-z-])([a-z][a-z-]*)(?:\.[A-Z]{2})?/(\d{7})(?:v\d+)?(?!\d)")
_DOI = regex.compile(r"10\.\d{4,9}/\S+")
_OPENALEX = regex.compile(r"(W\d+)\s*$")


def normalize_arxiv(value: str | None) -> str | None:
    """``arXiv:2104.06921v2`` / ``https://arxiv.org/abs/2104.06921`` -> ``2104.06921``.

    Old-style ids keep their archive (``hep-th/9901001``); a subject class suffix
    (``math.PR/0601001``) is dropped because arXiv ignores it.
    """
    if not value:
        return None
    m = _NEW.search(value)
    if m:
        return m.group(1)
    m = _OLD.search(value)
    if m:
        return f"{m.group(1)}/{m.group(2)}"
    return None


def normalize_doi(value: str | None) -> str | None:
    """``https://doi.org/10.1090/TRAN/8674`` / ``doi:10...`` -> ``10.1090/tran/8674``."""
    if not value:
        return None
    m = _DOI.search(value.strip())
    if not m:
        return None
    return m.group(0).rstrip(".,;").lower()


def normalize_openalex(value: str | None) -> str | None:
    """``https://openalex.org/W4225968159`` -> ``W4225968159``."""
    if not value:
        return None
    m = _OPENALEX.search(value.strip())
    return m.group(1) if m else None


def strip_version(paper_id: str) -> str:
    """``2212.11774v2`` -> ``2212.11774``; other ids are normalised like bib arXiv ids."""
    return normalize_arxiv(paper_id) or paper_id.strip()
