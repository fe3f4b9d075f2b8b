"""Evaluate the model you already have: a LightGBM text model that ``train`` did not write,
its features read from your own stores.

* :mod:`.model`: the model file, its feature names, ``--feature-map``.
* :mod:`.keys`: a user's paper ids (arXiv id, DOI, OpenAlex id, in any form) joined to the
  eval candidates through the release's aliases.
* :mod:`.sources`: Turso / libSQL tables, Parquet or CSV files, the release's own features.
* :mod:`.vectors`: the survey-candidate cosine of a Qdrant collection.
* :mod:`.system`: the model's scores on the eval set (re-ranking mode) or on a first stage's
  top K (retrieval mode), an ordinary submitted system.
* :mod:`.popularity`: per feature its gain and hard-negative AUC, the model against the
  ``popularity`` baseline, the time-leakage note (the report's section).
"""

from pipeline.evaluate.external.model import ForeignModelError, is_foreign
from pipeline.evaluate.external.popularity import render_section
from pipeline.evaluate.external.sources import SourceError
from pipeline.evaluate.external.system import (
    NO_OPTIONS,
    ExternalOptions,
    foreign_model_retrieval,
    foreign_model_scores,
    secrets_in_env,
    with_qdrant,
)

KIND_FOREIGN = "foreign model"

__all__ = [
    "KIND_FOREIGN",
    "NO_OPTIONS",
    "ExternalOptions",
    "ForeignModelError",
    "SourceError",
    "foreign_model_retrieval",
    "foreign_model_scores",
    "is_foreign",
    "render_section",
    "secrets_in_env",
    "with_qdrant",
]
