"""Leak audit: can any visible feature alone tell positives from hard negatives?

For every column of the answer-free ``candidates`` view, and simple features derived
from them (string and list lengths, the id's form, a missing date, the candidate's
age at the survey's text date), the audit computes the AUC of that feature alone for
telling positives (label >= 1) from hard negatives (label 0):

* ``pooled``: over all (survey, candidate) rows of the split;
* ``per_survey``: the mean of per-survey AUCs, over surveys with both classes (a
  feature constant within a survey scores 0.5 there).

AUC is the Mann-Whitney statistic with ties counted one half: 0.5 means the feature
carries no information, 1.0 that it ranks every positive above every negative, 0.0
the reverse (which is as informative: a model learns the inverse). A feature with
missing values is audited where it is defined, and its missingness is a feature of its
own. ``release`` writes the table into ``eval_metadata.json`` and the card, and warns
(or fails, ``release.leak_audit = "error"``) when any AUC lies outside
``release.leak_auc_bounds``.
"""

from __future__ import annotations

import polars as pl

from pipeline import schema as S

_GROUP = "_group"
_Y = "_positive"


def features(rows: pl.DataFrame) -> dict[str, pl.Expr]:
    """Feature name -> expression over a ``candidates`` frame (numeric or boolean)."""

    def length(col: str) -> pl.Expr:
        return pl.col(col).str.len_chars().fill_null(0)

    kind = pl.col(S.CANDIDATE_ID).str.extract(r"^([a-z]+):", 1)
    out: dict[str, pl.Expr] = {
        S.N_CITING_SURVEYS: pl.col(S.N_CITING_SURVEYS),
        S.CANDIDATE_PRIOR_CITATIONS: pl.col(S.CANDIDATE_PRIOR_CITATIONS),
        S.IN_DOMAIN: pl.col(S.IN_DOMAIN),
        S.CANDIDATE_DATE: pl.col(S.CANDIDATE_DATE).cast(pl.Int32),
        "candidate_date_missing": pl.col(S.CANDIDATE_DATE).is_null(),
        "candidate_age_days": (pl.col(S.SURVEY_DATE) - pl.col(S.CANDIDATE_DATE)).dt.total_days(),
        "candidate_id_length": length(S.CANDIDATE_ID),
        "candidate_id_arxiv": kind == "arxiv",
        "candidate_id_doi": kind == "doi",
        "candidate_id_openalex": kind == "openalex",
        "candidate_title_length": length(S.CANDIDATE_TITLE),
        "candidate_title_missing": pl.col(S.CANDIDATE_TITLE).is_null(),
        "candidate_abstract_length": length(S.CANDIDATE_ABSTRACT),
        "candidate_abstract_missing": pl.col(S.CANDIDATE_ABSTRACT).is_null(),
        "candidate_raw_length": length(S.CANDIDATE_RAW),
        "candidate_raw_missing": pl.col(S.CANDIDATE_RAW).is_null(),
        "candidate_categories_count": pl.col(S.CANDIDATE_CATEGORIES).list.len().fill_null(0),
        S.SURVEY_DATE: pl.col(S.SURVEY_DATE).cast(pl.Int32),
        "survey_title_length": length(S.SURVEY_TITLE),
        "survey_abstract_length": length(S.SURVEY_ABSTRACT),
        "survey_categories_count": pl.col(S.SURVEY_CATEGORIES).list.len().fill_null(0),
    }
    return {k: v for k, v in out.items() if all(c in rows.columns for c in v.meta.root_names())}


def _auc(values: pl.DataFrame) -> pl.DataFrame:
    """Per ``_group``: AUC of column ``x`` for ``y`` (bool), over rows with ``x`` not null."""
    return (
        values.drop_nulls("x")
        .with_columns(pl.col("x").cast(pl.Float64).rank("average").over(_GROUP).alias("_r"))
        .group_by(_GROUP)
        .agg(
            pl.col("y").sum().cast(pl.Float64).alias("_p"),
            (~pl.col("y")).sum().cast(pl.Float64).alias("_n"),
            pl.col("_r").filter(pl.col("y")).sum().alias("_rp"),
        )
        .filter((pl.col("_p") > 0) & (pl.col("_n") > 0))
        .with_columns(
            (
                (pl.col("_rp") - pl.col("_p") * (pl.col("_p") + 1) / 2)
                / (pl.col("_p") * pl.col("_n"))
            ).alias("auc")
        )
    )


def audit(rows: pl.DataFrame, labels: pl.Series) -> dict[str, dict[str, float | None]]:
    """``{feature: {"pooled": auc, "per_survey": mean auc, "surveys": n}}`` for one split.

    Args:
        rows: the split's ``candidates`` rows.
        labels: their labels, in the same order.
    """
    return audit_values(feature_values(rows, labels))


def feature_values(rows: pl.DataFrame, labels: pl.Series) -> pl.DataFrame:
    """``(survey_id, _y, <feature>...)``: what :func:`audit_values` needs of ``rows``, without
    their text (so a split can be audited batch by batch: concatenate the batches' values)."""
    return rows.select(
        S.SURVEY_ID,
        (labels >= 1).alias(_Y),
        *[expr.cast(pl.Float64).alias(name) for name, expr in features(rows).items()],
    )


def audit_values(values: pl.DataFrame) -> dict[str, dict[str, float | None]]:
    """:func:`audit` of the :func:`feature_values` of a split."""
    y = values[_Y]
    result: dict[str, dict[str, float | None]] = {}
    for name in values.columns[2:]:
        x = values[name]
        frame = pl.DataFrame({"x": x, "y": y, S.SURVEY_ID: values[S.SURVEY_ID]})
        pooled = _auc(frame.with_columns(pl.lit(0).alias(_GROUP)))
        per = _auc(frame.with_columns(pl.col(S.SURVEY_ID).alias(_GROUP)))
        result[name] = {
            "pooled": round(float(pooled["auc"][0]), 4) if pooled.height else None,
            "per_survey": round(float(per["auc"].mean()), 4) if per.height else None,
            "surveys": per.height,
        }
    return result


def outside(table: dict[str, dict[str, float | None]], low: float, high: float) -> list[str]:
    """``feature (scope) = auc`` for every AUC of ``table`` outside ``[low, high]``."""
    bad = []
    for name, row in sorted(table.items()):
        for scope in ("pooled", "per_survey"):
            v = row.get(scope)
            if v is not None and not (low <= v <= high):
                bad.append(f"{name} ({scope}) = {v}")
    return bad
