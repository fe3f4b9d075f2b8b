"""``evaluate``'s flags for a foreign ``--model-file``: where its features come from
(:mod:`pipeline.evaluate.external`)."""

from __future__ import annotations

import argparse
import datetime as dt
from pathlib import Path

from pipeline.cli.args import positive_seconds
from pipeline.evaluate.external import ExternalOptions
from pipeline.evaluate.external.turso_remote import TIMEOUT_S


def _date(text: str) -> dt.date:
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a date YYYY-MM-DD") from None


def add_external_arguments(parser: argparse.ArgumentParser) -> None:
    """``--feature-map``, ``--turso-url``, ``--turso-token``, ``--features-table``,
    ``--features-key``, ``--features``, ``--vector-feature``, ``--qdrant-api-key`` and
    ``--features-as-of``."""
    group = parser.add_argument_group(
        "a foreign model (a --model-file without train's JSON: any LightGBM text model)",
        "its features are matched by name (or --feature-map) to the release's own features, "
        "the Qdrant cosine (--qdrant-url/--qdrant with --collection), --features files and "
        "the --turso-url table, each joined to the candidates by any id form (arXiv id, DOI, "
        "OpenAlex id)",
    )
    group.add_argument("--feature-map", type=Path, metavar="FILE.toml",
                       help='model_feature = "source column" lines, for features whose '
                       "column has another name")  # fmt: skip
    group.add_argument("--turso-url", metavar="URL",
                       help="a Turso / libSQL database: libsql:// or https:// (token from "
                       "--turso-token, TURSO_AUTH_TOKEN or TURSO_DB_TOKEN), file:PATH or a "
                       "local database file (the .[turso] extra)")  # fmt: skip
    group.add_argument("--turso-token", metavar="TOKEN",
                       help="the database token (default: TURSO_AUTH_TOKEN or TURSO_DB_TOKEN); "
                       "never printed or written")  # fmt: skip
    group.add_argument("--turso-timeout", type=positive_seconds, default=TIMEOUT_S, metavar="SECONDS",
                       help="how long a remote database may take to answer each request "
                       f"before the run stops (default {TIMEOUT_S:g})")  # fmt: skip
    group.add_argument("--features-table", default="papers", metavar="NAME",
                       help="the table of per-paper features (default papers)")  # fmt: skip
    group.add_argument("--features-key", default="id", metavar="COLUMN",
                       help="its column naming the paper, in any id form (default id)")  # fmt: skip
    group.add_argument("--features", action="append", type=Path, default=[], metavar="FILE",
                       help="Parquet or CSV with candidate_id (any id form), optionally "
                       "survey_id (pair features), and feature columns; repeatable")  # fmt: skip
    group.add_argument("--vector-feature", default="cosine", metavar="NAME",
                       help="the model feature that is the survey-candidate cosine of the "
                       "Qdrant collection (default cosine)")  # fmt: skip
    group.add_argument("--qdrant-api-key", metavar="KEY",
                       help="the Qdrant API key (default: QDRANT_API_KEY); never printed")  # fmt: skip
    group.add_argument("--features-as-of", type=_date, metavar="YYYY-MM-DD",
                       help="the date the outside features were taken: the report gives the "
                       "share of surveys dated before it (time leakage)")  # fmt: skip


def external_options(args: argparse.Namespace) -> ExternalOptions:
    """The parsed flags as :class:`ExternalOptions` (the Qdrant ones are added by
    :class:`pipeline.evaluate.evaluation.EvaluationRequest` in re-ranking mode)."""
    return ExternalOptions(
        feature_map=args.feature_map,
        turso_url=args.turso_url,
        turso_token=args.turso_token,
        turso_timeout_s=args.turso_timeout,
        features_table=args.features_table,
        features_key=args.features_key,
        features=tuple(args.features),
        vector_feature=args.vector_feature,
        features_as_of=args.features_as_of,
    )
