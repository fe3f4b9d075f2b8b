"""The subsets a system is scored on: ``ALL`` ranks all judged candidates of a survey; ``IN``
ranks only the in-domain candidates (``in_domain`` true: corpus papers whose own categories
include the survey's primary category) and ``OUT`` all the others (``in_domain`` false or
null), each as if the survey had no other candidates; ``year=YYYY`` is ``ALL`` restricted to
the surveys first posted in that year."""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from pipeline.evaluate.columns import CANDIDATE_ID, IN_DOMAIN, LABEL, SCORE, SUBSET, SURVEY_ID
from pipeline.evaluate.scoring.compute import RANK_ALL, per_survey_metrics

SUBSET_ALL, SUBSET_IN, SUBSET_OUT = "ALL", "IN", "OUT"
RANKING_SUBSETS = (SUBSET_ALL, SUBSET_IN, SUBSET_OUT)


def year_subset(year: int) -> str:
    """Subset name of the surveys first posted in ``year``."""
    return f"year={year}"


def per_survey_subsets(
    judged: pl.DataFrame, ks: Sequence[int], ranked: str = RANK_ALL
) -> pl.DataFrame:
    """Every metric per survey on the ALL, IN and OUT candidate subsets.

    Args:
        judged: eval rows with ``score`` (null = not scored) and ``in_domain``.
        ks: metric cutoffs.
        ranked: ``all`` (re-ranking) or ``scored`` (retrieval; see
            :func:`pipeline.evaluate.scoring.compute.per_survey_metrics`).

    Returns:
        ``subset``, ``survey_id`` then one column per metric; sorted by subset, survey.
    """
    parts = {
        SUBSET_ALL: judged,
        SUBSET_IN: judged.filter(pl.col(IN_DOMAIN).eq_missing(True)),
        SUBSET_OUT: judged.filter(pl.col(IN_DOMAIN).ne_missing(True)),  # the rest, null too
    }
    return pl.concat(
        [
            per_survey_metrics(part.select(SURVEY_ID, CANDIDATE_ID, LABEL, SCORE), ks=ks, ranked=ranked)
            .with_columns(pl.lit(subset).alias(SUBSET))
            .select(SUBSET, pl.exclude(SUBSET))
            for subset, part in parts.items()
        ]
    ).sort(SUBSET, SURVEY_ID)  # fmt: skip
