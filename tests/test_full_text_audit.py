"""Full-text availability in the leak audit (:func:`pipeline.rules.leak_audit.with_full_text`):
the single feature and the relative share, computed by hand on a tiny list, and audited."""

from __future__ import annotations

import polars as pl
import pytest

from pipeline.core import schema as S
from pipeline.rules.leak_audit import (
    CANDIDATE_KEY,
    FULL_TEXT,
    RELATIVE_FULL_TEXT,
    audit_values,
    with_full_text,
)

# s1: a, b, c with full text a and b; s2: d (full text), e; labels: a, d positive
VALUES = pl.DataFrame(
    {
        S.SURVEY_ID: ["s1", "s1", "s1", "s2", "s2"],
        CANDIDATE_KEY: ["a", "b", "c", "d", "e"],
        "_positive": [True, False, False, True, False],
    }
)
WITH_TEXT = pl.Series(["a", "b", "d"])


def test_the_single_feature() -> None:
    got = with_full_text(VALUES, WITH_TEXT)
    assert CANDIDATE_KEY not in got.columns
    assert got[FULL_TEXT].to_list() == [1.0, 1.0, 0.0, 1.0, 0.0]
    table = audit_values(got)[FULL_TEXT]
    # pooled: positives a, d (1, 1) over negatives b, c, e (1, 0, 0): (0.5 + 1 + 1) * 2 / 6
    assert table["pooled"] == pytest.approx(5 / 6, abs=1e-4)
    # per survey: s1 a vs b (tie), c: 0.75; s2 d vs e: 1.0
    assert table["per_survey"] == pytest.approx(0.875, abs=1e-4)


def test_the_relative_share_counts_each_candidate_once() -> None:
    # an aspect view lists a survey's candidates once per aspect: the share is the same
    doubled = pl.concat([VALUES, VALUES.head(3)])
    got = with_full_text(doubled, WITH_TEXT, relative=True, keep_key=True)
    # s1: a and b share availability with 1 of 2 others, c with 0; s2: 0 of 1 for both
    assert got[RELATIVE_FULL_TEXT].to_list() == [0.5, 0.5, 0.0, 0.0, 0.0, 0.5, 0.5, 0.0]
    assert CANDIDATE_KEY in got.columns
