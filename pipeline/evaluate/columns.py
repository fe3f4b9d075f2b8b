"""Column and file names used by the evaluation stage that ``pipeline/core/schema.py`` lacks.

The eval table's own columns (``survey_title``, ``candidate_raw``, ...) belong in
``pipeline/core/schema.py``; until they are added there, they are spelled once here and
nowhere else in ``pipeline/evaluate``. Names that schema.py already has are
re-exported so that evaluation code imports every column name from one place.
"""

from __future__ import annotations

from pipeline.core.schema import (
    CANDIDATE_ID,
    CANDIDATE_PRIOR_CITATIONS,
    IN_DOMAIN,
    LABEL,
    LABEL_NAME,
    LINE_NUMBER,
    SURVEY_ID,
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

# ----------------------------------------------------------- eval table (release)
SURVEY_TITLE = "survey_title"
SURVEY_ABSTRACT = "survey_abstract"
SURVEY_DATE = "survey_date"
CANDIDATE_TITLE = "candidate_title"
CANDIDATE_ABSTRACT = "candidate_abstract"
CANDIDATE_RAW = "candidate_raw"

EVAL_FILENAME = "eval_survey_reading_lists.parquet"

# ----------------------------------------------------------- runs and outputs
SCORE = "score"
SYSTEM = "system"
SUBSET = "subset"
SURVEY_YEAR = "survey_year"
