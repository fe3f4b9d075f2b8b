"""Learned rerankers: features of the answer-free candidates view, LightGBM training.

Public API:

* :func:`compute_features` / :data:`FEATURES` - the features (one registry, with docs).
* :func:`write_features` - the ``features`` command.
* :func:`train_release`, :func:`train_from_release`, :func:`load_model`, :func:`score` -
  the ``train`` command and scoring with a model file.
* :mod:`pipeline.cli.rank` - the ``features`` and ``train`` commands.
"""

from pipeline.rank.features import FEATURES, FeatureError, compute_features
from pipeline.rank.model import ModelError, load_model, score
from pipeline.rank.release import train_from_release, train_release, write_features

__all__ = [
    "FEATURES",
    "FeatureError",
    "ModelError",
    "compute_features",
    "load_model",
    "score",
    "train_from_release",
    "train_release",
    "write_features",
]
