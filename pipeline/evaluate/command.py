"""The ``evaluate`` subcommand: argument parsing over :func:`pipeline.api.evaluate`."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from pipeline import api
from pipeline.arg_types import add_out_arg, add_release_arg
from pipeline.evaluate.evaluation import EVAL_DIR, REPORT_FILE

log = logging.getLogger("pipeline")


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register ``evaluate`` on a subparsers object; sets ``func=main``."""
    parser = subparsers.add_parser(
        "evaluate",
        help="score runs and baselines on the eval set (metrics, bootstrap CIs, paired tests)",
        description=(
            "Evaluate submitted runs and the baselines (random, popularity, bm25, oracle) on the eval "
            f"set; writes eval_results.json, per_survey.parquet and {REPORT_FILE} into --out DIR, and "
            f"prints the report. DIR defaults to {EVAL_DIR}/ next to the release: for a release "
            f"folder work/release, work/{EVAL_DIR}/ (never inside the release, which is what push "
            f"publishes); for a Hub dataset, ./{EVAL_DIR}/. Equal scores are ordered by a fixed pseudo-random tie key of "
            "(survey_id, candidate_id) (see tie_breaking in eval_results.json); judged candidates "
            "missing from a run rank last. A survey a run has no row for is warned about (or, with "
            "--require-complete, an error)."
        ),
    )
    add_release_arg(parser, hub=True)
    which = parser.add_mutually_exclusive_group()
    which.add_argument(
        "--run",
        action="append",
        default=[],
        metavar="FILE",
        help="a run: TREC (qid Q0 docid rank score tag), or CSV/Parquet with survey_id, candidate_id, "
        "score; repeatable",
    )
    which.add_argument(
        "--baselines-only",
        action="store_true",
        help="evaluate only the baselines (the default when no --run is given)",
    )
    add_out_arg(
        parser,
        f"eval_results.json, per_survey.parquet, {REPORT_FILE} and its figures/",
        default_text=f"{EVAL_DIR}/ beside the release folder, ./{EVAL_DIR}/ for a Hub dataset",
    )
    parser.add_argument(
        "--lenient",
        action="store_true",
        help="drop run rows whose ids are not in the eval set (counted, with a warning) instead of failing",
    )
    parser.add_argument(
        "--require-complete",
        action="store_true",
        help="fail when a run has no row for some eval survey (default: warn, count it as "
        "missing_surveys and rank all that survey's candidates as missing)",
    )
    parser.add_argument(
        "--config", type=Path, metavar="FILE", help="TOML config; its [evaluate] table is used"
    )
    _add_learned_arguments(parser)
    parser.set_defaults(func=main)
    return parser


# --------------------------------------------- learned systems and retrieval mode (issue 13)
def _add_learned_arguments(parser: argparse.ArgumentParser) -> None:
    """``--model-file``, ``--mode`` and ``--no-learned``."""
    from pipeline.evaluate.retrieval import MODES, RERANK

    parser.add_argument(
        "--model-file",
        action="append",
        default=[],
        metavar="MODEL.txt",
        help="a model written by `python -m pipeline train` (its .json beside it names the "
        "feature set), scored on the eval candidates as a system named by the file stem; "
        "repeatable",
    )
    parser.add_argument(
        "--mode",
        choices=MODES,
        default=RERANK,
        help="rerank (default): runs score each survey's judged candidates; retrieval: runs "
        "rank the split's whole corpus, unjudged documents count as not relevant",
    )
    parser.add_argument(
        "--no-learned",
        action="store_true",
        help="skip the learned baselines: lgbm, lgbm-metadata (trained on the release's train "
        "split) and dense (when the .[dense] extra is installed)",
    )


def main(args: argparse.Namespace) -> int:
    """Run the evaluation for parsed arguments (:func:`pipeline.api.evaluate`), print the
    report and say where it is.

    Bad input raises (``ValueError``, ``FileNotFoundError``): ``python -m pipeline``
    turns it into one line and exit code 2.
    """
    result = api.evaluate(
        args.release,
        out=args.out,
        runs=args.run,
        model_files=args.model_file,
        config=args.config,
        lenient=args.lenient,
        require_complete=args.require_complete,
        mode=args.mode,
        learned=not args.no_learned,
    )
    print(result.report, end="")
    log.info(
        "evaluate: wrote %s, %s and %s in %s",
        result.results_file.name,
        result.per_survey_file.name,
        result.report_file.name,
        result.out,
    )
    return 0
