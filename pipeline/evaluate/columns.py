"""The column and file names the evaluation uses, from one place.

The eval table's columns are :mod:`pipeline.core.schema`'s and its file name is
:mod:`pipeline.core.release_files`'s, re-exported here; the columns of runs and of the
evaluation's own outputs (``score``, ``system``, ``subset``, ``survey_year``) are spelled
here, once.
"""

from __future__ import annotations

from pipeline.core.release_files import EVAL_FILE as EVAL_FILENAME
from pipeline.core.schema import (
    CANDIDATE_ABSTRACT,
    CANDIDATE_ID,
    CANDIDATE_PRIOR_CITATIONS,
    CANDIDATE_RAW,
    CANDIDATE_TITLE,
    IN_DOMAIN,
    LABEL,
    LABEL_NAME,
    LINE_NUMBER,
    SURVEY_ABSTRACT,
    SURVEY_DATE,
    SURVEY_ID,
    SURVEY_TITLE,
)

__all__ = [
    "CANDIDATE_ABSTRACT",
    "CANDIDATE_ID",
    "CANDIDATE_PRIOR_CITATIONS",
    "CANDIDATE_RAW",
    "CANDIDATE_TITLE",
    "EVAL_FILENAME",
    "IN_DOMAIN",
    "LABEL",
    "LABEL_NAME",
    "LINE_NUMBER",
    "SCORE",
    "SUBSET",
    "SURVEY_ABSTRACT",
    "SURVEY_DATE",
    "SURVEY_ID",
    "SURVEY_TITLE",
    "SURVEY_YEAR",
    "SYSTEM",
]

# ----------------------------------------------------------- runs and outputs
SCORE = "score"
SYSTEM = "system"
SUBSET = "subset"
SURVEY_YEAR = "survey_year"
