"""The ``features`` and ``train`` subcommands: argument parsing over :mod:`pipeline.rank`
and :func:`pipeline.api.train`.

Bad input raises (``FeatureError``, ``ConfigError``, ``FileNotFoundError``): ``python -m
pipeline`` turns it into its one error line and exit code 2, as for every command.
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from pipeline import api
from pipeline.cli.args import add_out_arg, add_release_arg
from pipeline.rank.features import FEATURE_SETS, FULL_SET
from pipeline.rank.release import FEATURES_JSON, MODEL_NAME

log = logging.getLogger("pipeline")


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Register ``features`` and ``train``; each sets ``func``."""
    p = subparsers.add_parser(
        "features",
        help="ranking features of every (survey, candidate) of a release's candidates view",
        description="Writes DIR/train.parquet and DIR/eval.parquet (survey_id, candidate_id, "
        f"one column per feature) and DIR/{FEATURES_JSON} (definitions). Reads only the "
        "answer-free candidates/ files of the release.",
    )
    add_release_arg(p)
    add_out_arg(p, f"train.parquet, eval.parquet and {FEATURES_JSON}")
    p.set_defaults(func=_features)

    p = subparsers.add_parser(
        "train",
        help="LightGBM lambdarank on a release's train split (byte-reproducible model file)",
        description="Trains on the train split's features and tiers, holds out the latest train "
        "surveys for early stopping, and writes DIR/<name>.txt (LightGBM text model) and "
        "DIR/<name>.json (feature set, version, training facts). `evaluate --model-file` "
        "scores the eval candidates with it.",
    )
    add_release_arg(p)
    add_out_arg(p, "the model, <name>.txt, and its facts, <name>.json")
    p.add_argument(
        "--feature-set",
        choices=sorted(FEATURE_SETS),
        default=FULL_SET,
        help=f"features to train on (default {FULL_SET}; 'metadata' = no text feature)",
    )
    p.add_argument(
        "--name", default=MODEL_NAME, metavar="NAME", help=f"model file stem (default {MODEL_NAME})"
    )
    p.add_argument("--config", type=Path, metavar="FILE", help="TOML config; its [train] table")
    p.set_defaults(func=_train)


def _features(args: argparse.Namespace) -> int:
    from pipeline.rank.release import write_features

    meta = write_features(args.release, args.out)
    per_split = ", ".join(f"{n:,} {split}" for split, n in meta["rows"].items())
    log.info("features: rows per split %s; wrote %s", per_split, args.out)
    print(json.dumps({"out": str(args.out), "rows": meta["rows"]}, sort_keys=True))
    return 0


def _train(args: argparse.Namespace) -> int:
    result = api.train(
        args.release, args.out, feature_set=args.feature_set, config=args.config, name=args.name
    )
    path, meta = result.model, result.metadata
    log.info("train: wrote %s and %s", path, path.with_suffix(".json"))
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
