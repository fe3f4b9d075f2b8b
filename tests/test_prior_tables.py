"""``prior_tables`` with the survey running counts collected once (``survey=``) gives the
same tables as counting them for the works asked for (what the negatives batches rely on)."""

from __future__ import annotations

from datetime import date

import polars as pl
from polars.testing import assert_frame_equal

from pipeline.core import schema as S
from pipeline.rules import visible as V


def _citations() -> pl.LazyFrame:
    rows = [
        ("s1", 1, "cs.CL", date(2020, 1, 1)),
        ("s2", 1, "cs.CL", date(2020, 3, 1)),
        ("s3", 1, "cs.LG", date(2020, 3, 1)),
        ("s2", 2, "cs.CL", date(2020, 3, 1)),
        ("s4", 2, "cs.LG", date(2021, 5, 1)),
        ("s4", 3, "cs.LG", date(2021, 5, 1)),
        ("s5", 3, "cs.LG", None),
    ]
    return pl.LazyFrame(
        rows,
        schema={
            S.SURVEY_ID: pl.String,
            S.WORK_ID: pl.Int64,
            S.PRIMARY_CATEGORY: pl.String,
            S.FIRST_VERSION_DATE: pl.Date,
        },
        orient="row",
    )


def test_survey_counts_collected_once_give_the_same_tables() -> None:
    sc = _citations()
    corpus = pl.LazyFrame(
        {S.WORK_ID: [3, 1, 2], "_cited_on": [date(2019, 1, 1)] * 3, "_running": [4, 2, 1]}
    )
    tables = V.survey_prior_tables(sc)
    survey = dict(zip(tables, pl.collect_all(list(tables.values())), strict=True))
    for works in ([1], [2, 3], [1, 2, 3], [9]):
        w = pl.LazyFrame({S.WORK_ID: works})
        want = V.prior_tables(sc, works=w, corpus=corpus)
        got = V.prior_tables(sc, works=w, corpus=corpus, survey=survey)
        assert list(got) == list(want)
        for name in want:
            assert_frame_equal(got[name].collect(), want[name].collect())


def test_running_counts_collected_in_steps_equal_the_one_query() -> None:
    # corpus_prior_counts collects the counts, the running totals and the sort one after
    # another; the table must be the one query's, row for row (its bytes are written)
    rows = _citations().select(
        S.SURVEY_ID, S.WORK_ID, S.PRIMARY_CATEGORY, pl.col(S.FIRST_VERSION_DATE).alias("_cited_on")
    )
    for keys in ([S.WORK_ID], [S.WORK_ID, S.PRIMARY_CATEGORY]):
        want = V.running_counts(rows, keys).collect()
        got = V.collected_running_counts(rows, keys)
        assert_frame_equal(got, want)
    # work 1: cited once on a date, then twice on a later one: 1, then 3
    table = V.collected_running_counts(rows, [S.WORK_ID]).filter(pl.col(S.WORK_ID) == 1)
    assert table["_running"].to_list() == [1, 3]
