"""Which surveys the release's leak audits read when a split is larger than they need.

An audit's verdict rests on AUCs and their chance half-widths, which already say how much a
sample of a given size can tell. Above ``release.audit_sample_rows`` rows, an audit reads a
sample of whole surveys instead of the split, so its memory is bounded by that number and not
by the corpus:

* each survey gets a stable key, the first 8 bytes (big endian) of
  ``sha1("audit-sample\\x1f" + survey_id)``; the surveys are taken in key order (ties by id)
  while their rows add up to at most ``max_rows`` (the first survey always, however long);
* the key reads the survey id only, never a label or a visible feature, so the sample is a
  uniform draw of surveys, the same at any batch size and on any machine;
* a split within the limit is read whole: a release of that size is audited as before.

The sample's error is the audit's own: each AUC's ``*_chance`` half-width is computed on the
rows the audit read, and :func:`sample_record` writes what was read next to the verdict.
"""

from __future__ import annotations

import hashlib
from typing import Any

import polars as pl

from pipeline.core import schema as S

SAMPLE_RULE = (
    "whole surveys in the order of sha1('audit-sample' 0x1f survey_id), taken while their rows "
    "add up to at most max_rows; every survey when the split is within max_rows"
)
_KEY = "_sample_key"
_SALT = "audit-sample\x1f"


def _key(survey_id: str) -> int:
    return int.from_bytes(hashlib.sha1((_SALT + survey_id).encode()).digest()[:8], "big")


def sample_surveys(per_survey: pl.DataFrame, max_rows: int, rows: str = "len") -> pl.Series | None:
    """The surveys an audit reads, sorted by id; ``None`` when it reads them all.

    Args:
        per_survey: one row per survey: ``survey_id`` and its row count (column ``rows``).
        max_rows: the most rows the sample may hold (at least one survey is taken).
        rows: the name of the row-count column.
    """
    if per_survey.height == 0 or int(per_survey[rows].sum()) <= max_rows:
        return None
    keyed = per_survey.select(
        pl.col(S.SURVEY_ID),
        pl.col(rows),
        pl.col(S.SURVEY_ID).map_elements(_key, return_dtype=pl.UInt64).alias(_KEY),
    ).sort(_KEY, S.SURVEY_ID)
    total = keyed[rows].cum_sum()
    taken = keyed.filter((total <= max_rows) | (pl.int_range(pl.len()) == 0))
    return taken[S.SURVEY_ID].sort()


def sample_record(per_survey: pl.DataFrame, chosen: pl.Series | None, max_rows: int,
                  rows: str = "len") -> dict[str, Any]:  # fmt: skip
    """What an audit read: the rule, the limit, and surveys and rows read of the split's."""
    all_rows = int(per_survey[rows].sum()) if per_survey.height else 0
    if chosen is None:
        read = per_survey
    else:
        read = per_survey.filter(pl.col(S.SURVEY_ID).is_in(chosen.implode()))
    return {
        "rule": SAMPLE_RULE,
        "max_rows": max_rows,
        "sampled": chosen is not None,
        "surveys": read.height,
        "of_surveys": per_survey.height,
        "rows": int(read[rows].sum()) if read.height else 0,
        "of_rows": all_rows,
    }


def keep(frame: pl.DataFrame, chosen: pl.Series | None) -> pl.DataFrame:
    """The rows of ``frame`` whose survey is in the sample (all of them when ``chosen`` is None)."""
    if chosen is None:
        return frame
    return frame.filter(pl.col(S.SURVEY_ID).is_in(chosen.implode()))
