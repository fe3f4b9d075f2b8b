"""The ``features`` and ``train`` subcommands: argument parsing over :mod:`pipeline.rank`
and :func:`pipeline.api.train`."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pipeline import api
from pipeline.config import ConfigError
from pipeline.rank.features import FEATURE_SETS, FULL_SET, FeatureError
from pipeline.rank.release import FEATURES_JSON, MODEL_NAME


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Register ``features`` and ``train``; each sets ``func``."""
    p = subparsers.add_parser(
        "features",
        help="ranking features of every (survey, candidate) of a release's candidates view",
        description="Writes <out>/train.parquet and <out>/eval.parquet (survey_id, candidate_id, "
        f"one column per feature) and <out>/{FEATURES_JSON} (definitions). Reads only the "
        "answer-free candidates/ files of the release.",
    )
    p.add_argument("--release", type=Path, required=True, metavar="DIR", help="release folder")
    p.add_argument("--out", type=Path, required=True, metavar="DIR", help="output folder")
    p.set_defaults(func=_features)

    p = subparsers.add_parser(
        "train",
        help="LightGBM lambdarank on a release's train split (byte-reproducible model file)",
        description="Trains on the train split's features and tiers, holds out the latest train "
        "surveys for early stopping, and writes <out>/<name>.txt (LightGBM text model) and "
        "<out>/<name>.json (feature set, version, training facts). `evaluate --model-file` "
        "scores the eval candidates with it.",
    )
    p.add_argument("--release", type=Path, required=True, metavar="DIR", help="release folder")
    p.add_argument("--out", type=Path, required=True, metavar="DIR", help="output folder")
    p.add_argument(
        "--feature-set",
        choices=sorted(FEATURE_SETS),
        default=FULL_SET,
        help=f"features to train on (default {FULL_SET}; 'metadata' = no text feature)",
    )
    p.add_argument("--name", default=MODEL_NAME, help=f"model file stem (default {MODEL_NAME})")
    p.add_argument("--config", type=Path, metavar="FILE", help="TOML config; its [train] table")
    p.set_defaults(func=_train)


def _features(args: argparse.Namespace) -> int:
    from pipeline.rank.release import write_features

    try:
        meta = write_features(args.release, args.out)
    except (FeatureError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(json.dumps({"out": str(args.out), "rows": meta["rows"]}, sort_keys=True))
    return 0


def _train(args: argparse.Namespace) -> int:
    try:
        result = api.train(
            args.release, args.out, feature_set=args.feature_set, config=args.config, name=args.name
        )
    except (FeatureError, FileNotFoundError, ConfigError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    path, meta = result.model, result.metadata
    print(
        json.dumps(
            {
                "model": str(path),
                "feature_set": meta["feature_set"],
                "best_iteration": meta["best_iteration"],
                "validation": {k: meta["validation"][k] for k in ("metric", "value")},
            },
            sort_keys=True,
        )
    )
    return 0
