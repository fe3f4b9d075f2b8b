"""Baseline bibliographies: what a generator's numbers sit next to.

For each eval survey a bibliography is given for, each baseline is a bibliography of
N works drawn from the survey's judged candidates (its list and its hard negatives),
scored by :func:`pipeline.evaluate.bibliography.score_survey` like a generated one:

* ``oracle``: the list itself, tier by tier (every metric at its best);
* ``oracle-without-tier-t``: the list with its tier-t works removed (t = 1..4), the
  cost of missing one tier;
* ``popularity``: the N judged candidates most cited before the survey's date (the
  evaluation's ``popularity`` score, ``candidate_prior_citations``, a judgment-side column:
  a reference for a system that knows popularity from elsewhere);
* ``bm25``: the N judged candidates of highest BM25 against the survey's title and
  abstract (the evaluation's ``bm25`` score).

N is the size of the survey's list, so recall equals precision for the last two.
They rank the survey's candidates only, not the whole corpus or the survey's category:
the release publishes neither prior citations nor a category for corpus papers outside
the candidates, so both are upper bounds of the issue's corpus-wide baselines. Equal
scores are ordered by the evaluation's tie key (:mod:`pipeline.evaluate.ties`).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import polars as pl

from pipeline.evaluate.baselines import BM25, ORACLE, POPULARITY, bm25_scores, popularity_scores
from pipeline.evaluate.bibliography import (
    HARD_NEGATIVE,
    LISTED,
    TIERS,
    Resolved,
    SurveyScore,
    score_survey,
)
from pipeline.evaluate.columns import CANDIDATE_ID, LABEL, SURVEY_ID
from pipeline.evaluate.ties import tie_keys

WITHOUT_TIER = "oracle-without-tier-{tier}"
BIBLIOGRAPHY_BASELINES = (
    ORACLE,
    *(WITHOUT_TIER.format(tier=t) for t in TIERS),
    POPULARITY,
    BM25,
)
RESOLVED_BY = "baseline"

_TIE = "_tie"


def _bibliography(work_ids: Sequence[str], labels: dict[str, int]) -> list[Resolved]:
    """Judged works as a resolved bibliography, in the given order."""
    return [
        Resolved(i, LISTED if labels[w] >= 1 else HARD_NEGATIVE, w, labels[w], RESOLVED_BY)
        for i, w in enumerate(work_ids, start=1)
    ]


def baseline_scores(
    eval_set: pl.DataFrame, surveys: Collection[str]
) -> dict[str, list[SurveyScore]]:
    """Every baseline's score on each eval survey of ``surveys`` (module docstring).

    Args:
        eval_set: the eval table (:func:`pipeline.evaluate.evalset.load_eval_set`).
        surveys: the surveys a bibliography is given for; others are not scored.
    """
    from pipeline.evaluate.evaluation import answer_free

    frame = eval_set.filter(pl.col(SURVEY_ID).is_in(list(surveys)))
    visible = answer_free(frame)  # a baseline reads what a system reads
    frame = frame.select(SURVEY_ID, CANDIDATE_ID, LABEL).with_columns(
        # popularity is judgment-side (schema.POPULARITY_COLUMNS): a reference, as in evaluate
        popularity_scores(frame).alias(POPULARITY),
        bm25_scores(visible).alias(BM25),
        tie_keys(frame).alias(_TIE),
    )
    out: dict[str, list[SurveyScore]] = {name: [] for name in BIBLIOGRAPHY_BASELINES}
    for (survey_id,), rows in frame.sort(SURVEY_ID).group_by([SURVEY_ID], maintain_order=True):
        labels = {w: int(g) for w, g in rows.select(CANDIDATE_ID, LABEL).iter_rows()}
        listed = rows.filter(pl.col(LABEL) >= 1).sort(
            [LABEL, _TIE, CANDIDATE_ID], descending=[True, False, False]
        )
        ranked = {
            ORACLE: listed[CANDIDATE_ID].to_list(),
            **{
                WITHOUT_TIER.format(tier=t): listed.filter(pl.col(LABEL) != t)[
                    CANDIDATE_ID
                ].to_list()
                for t in TIERS
            },
            **{
                name: rows.sort([name, _TIE, CANDIDATE_ID], descending=[True, False, False])[
                    CANDIDATE_ID
                ]
                .head(listed.height)
                .to_list()
                for name in (POPULARITY, BM25)
            },
        }
        for name, work_ids in ranked.items():
            out[name].append(score_survey(survey_id, _bibliography(work_ids, labels), labels))
    return out
