"""The ``evaluate`` and ``export`` subcommands: argument parsing over
:func:`pipeline.api.evaluate` and :func:`pipeline.api.export`."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Any

from pipeline import api
from pipeline.cli.args import add_out_arg, add_release_arg
from pipeline.cli.evaluate_external import add_external_arguments, external_options
from pipeline.core.errors import UsageError
from pipeline.evaluate.aspects import TASK_LISTS, TASKS
from pipeline.evaluate.bibliography.score import RESULTS_FILE as BIBLIOGRAPHY_RESULTS
from pipeline.evaluate.evaluation import EVAL_DIR, REPORT_FILE
from pipeline.evaluate.systems.baselines import BASELINES
from pipeline.evaluate.systems.dense import DENSE
from pipeline.evaluate.systems.learned import LEARNED_BASELINES

log = logging.getLogger("pipeline")

# The flags that each add a system; ``--name`` names the one given just before it.
SYSTEM_FLAGS = (
    "--run",
    "--passage-run",
    "--model-file",
    "--encoder",
    "--scorer",
    "--sentence-transformer",
)


class _System(argparse.Action):
    """Appends the value to its own list and, with its flag, to ``systems`` (in order)."""

    def __call__(self, parser, namespace, values, option_string=None):  # type: ignore[override]
        getattr(namespace, self.dest).append(values)
        namespace.systems = [*getattr(namespace, "systems", []), [option_string, values, None]]


class _Name(argparse.Action):
    """Names the system of the flag just before it."""

    def __call__(self, parser, namespace, values, option_string=None):  # type: ignore[override]
        systems = getattr(namespace, "systems", [])
        if not systems or systems[-1][2] is not None:
            parser.error(f"--name {values!r} must follow the {'/'.join(SYSTEM_FLAGS)} it names")
        systems[-1][2] = values


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register ``evaluate`` on a subparsers object; sets ``func=main``."""
    parser = subparsers.add_parser(
        "evaluate",
        help="score runs and baselines on the eval set (metrics, bootstrap CIs, paired tests)",
        description=(
            f"Evaluate submitted runs and the baselines ({', '.join(BASELINES)}; the learned "
            f"{', '.join(LEARNED_BASELINES)} unless --no-learned; {DENSE} with the [dense] "
            "extra) on the eval "
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
        action=_System,
        default=[],
        metavar="FILE",
        help="a run: TREC (qid Q0 docid rank score tag), CSV/Parquet with survey_id, candidate_id, "
        "score (or query-id, corpus-id, score), or a 3-column .tsv; repeatable",
    )
    which.add_argument(
        "--bibliography",
        type=Path,
        metavar="FILE|DIR",
        help="score generated surveys' bibliographies instead of runs: JSONL, one "
        '{"survey_id": ..., "references": [...]} per line, each reference a raw string, a BibTeX '
        "entry or an object with title/doi/arxiv_id/openalex_id/year; or a folder of "
        "<survey_id>.bib / <survey_id>.md lists; needs a release folder; writes "
        f"{BIBLIOGRAPHY_RESULTS} (docs/evaluation.md)",
    )
    parser.add_argument(
        "--against",
        type=Path,
        metavar="FILE|DIR",
        help="with --bibliography: a second bibliography of the same surveys; adds paired "
        "tests (mean difference, sign-flip p-value, bootstrap interval) of the first against it",
    )
    which.add_argument(
        "--baselines-only",
        action="store_true",
        help="evaluate only the baselines (the default when no --run is given)",
    )
    add_out_arg(
        parser,
        f"eval_results.json, per_survey.parquet, {REPORT_FILE} and its figures/, and the "
        "evaluation cache in cache/ (unless --cache-dir)",
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
    parser.add_argument(
        "--task",
        choices=TASKS,
        default=TASK_LISTS,
        help="lists (default): a query per survey; aspects: a query per topical section of a "
        "survey (the release's aspects/ folder), with a breakdown per aspect kind and the "
        f"whole-survey baselines scored per aspect; written into {EVAL_DIR}/aspects/ unless --out; "
        "with --bibliography: also the per-section coverage of the survey's aspects",
    )
    _add_learned_arguments(parser)
    _add_model_arguments(parser)
    _add_passage_arguments(parser)
    add_external_arguments(parser)
    parser.set_defaults(func=main, systems=[])
    _add_export_parser(subparsers)
    return parser


# --------------------------------------------------------- models and names
def _add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """``--encoder``, ``--scorer``, ``--sentence-transformer``, ``--name``, ``--batch-size``,
    ``--no-cache``, ``--cache-dir``."""
    parser.add_argument(
        "--encoder",
        action=_System,
        default=[],
        metavar="PKG.MODULE:CALLABLE",
        help="a model: a callable taking a list of texts and returning one vector each; "
        "scored by cosine of survey and candidate vectors on the candidates view; repeatable",
    )
    parser.add_argument(
        "--scorer",
        action=_System,
        default=[],
        metavar="PKG.MODULE:CALLABLE",
        help="a model: a callable taking (query text, candidate texts) and returning one score "
        "each; repeatable",
    )
    parser.add_argument(
        "--sentence-transformer",
        action=_System,
        default=[],
        metavar="DIR",
        help="a local sentence-transformers model folder, used as an encoder (offline, CPU; "
        "needs the .[dense] extra); repeatable",
    )
    parser.add_argument(
        "--name",
        action=_Name,
        metavar="NAME",
        help="the system name of the --run/--model-file/--encoder/--scorer/--sentence-transformer "
        "just before it (default: the TREC tag, the file stem, the callable or folder name)",
    )
    parser.add_argument(
        "--batch-size",
        type=int,
        default=64,
        metavar="N",
        help="texts per encoder call, candidates per scorer call (default 64)",
    )
    parser.add_argument(
        "--no-cache",
        action="store_true",
        help="neither read nor write the evaluation cache (baselines' values, encoders' "
        "embeddings and vectors)",
    )
    parser.add_argument(
        "--cache-dir",
        type=Path,
        metavar="DIR",
        help="the evaluation cache's folder, to share it between runs written to different "
        "--out folders (default: OUT/cache; without --out, eval/cache beside the results)",
    )


def _add_passage_arguments(parser: argparse.ArgumentParser) -> None:
    """``--passages``, ``--passage-run``, ``--passage-aggregation``, ``--passage-chars``: full-text
    systems over the release's corpus_sections (docs/evaluation.md)."""
    parser.add_argument(
        "--passages",
        action="store_true",
        help="the --encoder/--sentence-transformer systems score each document from its "
        "sections (the release's corpus_sections), a document without full text on its title "
        "and abstract; rerank and retrieval mode, --task lists or aspects",
    )
    parser.add_argument(
        "--passage-run",
        action=_System,
        default=[],
        metavar="FILE",
        help="a run over the passage corpus of `export --format beir` (passages/corpus.jsonl: "
        "_id = document id#section order, or document id#abstract), aggregated to documents "
        "by --passage-aggregation; repeatable",
    )
    parser.add_argument(
        "--passage-aggregation",
        default="max",
        metavar="max|mean-top-K",
        help="a document's score from its passages' scores: max (default) or the mean of the "
        "K best, e.g. mean-top-3 (all of them when a document has fewer)",
    )
    parser.add_argument(
        "--passage-chars",
        type=int,
        default=2048,
        metavar="N",
        help="each passage (heading and text) is cut to N characters before an encoder reads "
        "it (default 2048; 0: not cut); the report names it",
    )


def _named(args: argparse.Namespace, flag: str) -> list[Any]:
    return [
        value if name is None else (value, name)
        for given, value, name in args.systems
        if given == flag
    ]


# --------------------------------------------------------- export
def _add_export_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """``export --format beir DIR``: registered with ``evaluate`` (they share this module)."""
    from pipeline.core.release_files import RETRIEVAL_SPLITS
    from pipeline.evaluate.report.export import (
        CORPUS_JSONL,
        FORMATS,
        QUERIES_JSONL,
        TOP_RANKED_JSONL,
    )

    parser = subparsers.add_parser(
        "export",
        help="write a release split in another tool's layout (BEIR's GenericDataLoader files)",
        description=(
            "Write one split of a release folder as BEIR's GenericDataLoader reads it: "
            f"{CORPUS_JSONL}, {QUERIES_JSONL}, qrels/test.tsv (the eval split; train: "
            f"qrels/train.tsv) and {TOP_RANKED_JSONL} (each query's judged candidates, for "
            "re-ranking)."
        ),
    )
    parser.add_argument(  # not required by argparse: the deprecated DIR may stand for it
        "--out",
        type=Path,
        default=None,
        metavar="DIR",
        help="the directory this command writes: BEIR's files of the split (required)",
    )
    parser.add_argument(
        "out_positional",
        nargs="?",
        type=Path,
        metavar="DIR",
        help="deprecated: the folder to write, before --out named it as in every command",
    )
    parser.add_argument(
        "--format",
        choices=FORMATS,
        default=FORMATS[0],
        help="the layout to write: beir, the files of BEIR's GenericDataLoader",
    )
    parser.add_argument(
        "--release",
        type=Path,
        default=Path("work/release"),
        metavar="DIR",
        help="the release folder (default: work/release)",
    )
    parser.add_argument(
        "--split",
        choices=tuple(RETRIEVAL_SPLITS),
        default="eval",
        help="eval (written as BEIR's test; the default) or train",
    )
    parser.add_argument(
        "--passages",
        action="store_true",
        help="also passages/: the split's full-text view (corpus_sections) as a passage corpus "
        "(_id = document id#section order; document id#abstract for a document without full "
        "text), with passages/mapping.tsv back to documents; evaluate a run over it with "
        "evaluate --passage-run",
    )
    parser.set_defaults(func=export_main)
    return parser


def export_main(args: argparse.Namespace) -> int:
    """Write the export; print each file with its rows."""
    out = args.out
    if args.out_positional is not None:
        if out is not None and out != args.out_positional:
            raise UsageError(f"export: --out {out} and DIR {args.out_positional} differ")
        log.warning("export DIR is deprecated and will be removed; use export --out DIR")
        out = args.out_positional
    if out is None:
        raise UsageError("export: --out DIR is required (the folder to write)")
    result = api.export(
        args.release, out, format=args.format, split=args.split, passages=args.passages
    )
    for name, rows in result.files.items():
        print(f"{result.out / name}\t{rows}")
    return 0


# --------------------------------------------- learned systems and retrieval mode
def _add_learned_arguments(parser: argparse.ArgumentParser) -> None:
    """``--model-file``, ``--mode`` and ``--no-learned``."""
    from pipeline.evaluate.retrieval.mode import MODES, RERANK

    parser.add_argument(
        "--model-file",
        action=_System,
        default=[],
        metavar="MODEL.txt",
        help="a model written by `python -m pipeline train` (its .json beside it names the "
        "feature set), or any LightGBM text model (no .json: a foreign model, its features "
        "by name from the sources below), scored on the eval candidates as a system named by "
        "the file stem; with --mode retrieval a foreign model re-ranks each survey's "
        "--first-stage top K; repeatable",
    )
    parser.add_argument(
        "--mode",
        choices=MODES,
        default=RERANK,
        help="rerank (default): runs score each survey's judged candidates; retrieval: runs "
        "and models rank the split's whole corpus (models keep their --top-k), unjudged "
        "documents count as not relevant",
    )
    parser.add_argument(
        "--top-k",
        type=int,
        default=1000,
        metavar="K",
        help="retrieval mode: documents a model (--encoder, --sentence-transformer, --scorer, "
        "a foreign --model-file) and the bm25 baseline keep per survey from the whole corpus "
        "(default 1000)",
    )
    parser.add_argument(
        "--first-stage",
        default="bm25",
        metavar="bm25|encoder|RUN",
        help="retrieval mode: what a --scorer or a foreign --model-file re-ranks, each "
        "survey's top K of bm25 over the corpus (default), of the first "
        "--encoder/--sentence-transformer (or the --qdrant collection), or of a run file",
    )
    parser.add_argument(
        "--index",
        choices=("exact", "faiss"),
        default="exact",
        help="retrieval mode: how an encoder searches the corpus's vectors, exact (default) "
        "or faiss (HNSW, the .[ann] extra; the report gives its recall@K against exact)",
    )
    parser.add_argument(
        "--qdrant",
        "--qdrant-url",
        dest="qdrant",
        metavar="URL_OR_PATH",
        help="retrieval mode: your own index, a Qdrant server URL (API key from "
        "QDRANT_API_KEY) or a qdrant-client local-mode folder; the surveys are encoded by "
        "the --encoder/--sentence-transformer given, or read from --query-vectors (the "
        ".[qdrant] extra); with a foreign --model-file also its cosine feature (re-ranking "
        "mode: only that)",
    )
    parser.add_argument(
        "--collection", metavar="NAME", help="the Qdrant collection holding the corpus's vectors"
    )
    parser.add_argument(
        "--id-field",
        default="_id",
        metavar="FIELD",
        help="the payload field of a Qdrant point that holds its corpus document id "
        "(default _id); points whose id is not in the corpus are counted and dropped",
    )
    parser.add_argument(
        "--query-vectors",
        type=Path,
        metavar="FILE",
        help="the surveys' vectors for --qdrant, for a model that cannot run here: Parquet "
        "with _id (survey id) and vector (a foreign model's cosine: for the surveys the "
        "collection lacks, before the --encoder)",
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
    if args.bibliography is not None:
        return _bibliography_main(args)
    if args.against is not None:
        raise UsageError("--against compares two bibliographies; give --bibliography too")
    if args.no_cache and args.cache_dir is not None:
        raise UsageError("--no-cache and --cache-dir: give one (the cache off, or its folder)")
    result = api.evaluate(
        args.release,
        out=args.out,
        runs=_named(args, "--run"),
        model_files=_named(args, "--model-file"),
        encoders=_named(args, "--encoder"),
        scorers=_named(args, "--scorer"),
        sentence_transformers=_named(args, "--sentence-transformer"),
        config=args.config,
        lenient=args.lenient,
        require_complete=args.require_complete,
        mode=args.mode,
        baselines_only=args.baselines_only,
        learned=not args.no_learned,
        cache=not args.no_cache,
        cache_dir=args.cache_dir,
        batch_size=args.batch_size,
        task=args.task,
        top_k=args.top_k,
        first_stage=args.first_stage,
        qdrant=args.qdrant,
        collection=args.collection,
        id_field=args.id_field,
        query_vectors=args.query_vectors,
        index=args.index,
        external=external_options(args),
        qdrant_api_key=args.qdrant_api_key,
        passages=args.passages,
        passage_runs=_named(args, "--passage-run"),
        passage_aggregation=args.passage_aggregation,
        passage_chars=args.passage_chars,
    )
    if getattr(args, "quiet", False):
        from pipeline.evaluate.report.markdown import summary_line

        print(summary_line(result.results, str(result.report_file)))
        return 0
    print(result.report, end="")
    log.info(
        "evaluate: wrote %s, %s and %s in %s",
        result.results_file.name,
        result.per_survey_file.name,
        result.report_file.name,
        result.out,
    )
    return 0


def _bibliography_main(args: argparse.Namespace) -> int:
    """``evaluate --bibliography``: score the file, print the macro means, say where the
    report is."""
    result = api.evaluate_bibliography(
        args.release,
        args.bibliography,
        out=args.out,
        against=args.against,
        config=args.config,
        aspects=args.task != TASK_LISTS,
    )
    report = result.results
    counts = ", ".join(f"{k} {v}" for k, v in report["counts"].items())
    print(f"bibliographies of {report['n_surveys']} survey(s), "
          f"{report['n_missing_surveys']} eval survey(s) without one; references: {counts}")  # fmt: skip
    reasons = ", ".join(f"{k} {v}" for k, v in report["unmatched_reasons"].items())
    print(f"unmatched by reason: {reasons}")
    level = f"{report['bootstrap']['level']:.0%}"
    print(f"  {'metric':<20} {'mean':>7}  {level} bootstrap interval")
    for name, value in report["metrics"].items():
        print(f"  {name:<20} {_number(value['mean'])}  "
              f"[{_number(value['ci_low'])}, {_number(value['ci_high'])}]  ({value['n_surveys']} surveys)")  # fmt: skip
    baselines = report.get("baselines")
    if baselines:
        shown = ("recall", "weighted_recall", "precision", "f1", "hard_negative_rate")
        print(
            f"baselines on the same eval surveys (means; intervals in {result.results_file.name}):"
        )
        print(f"  {'baseline':<24}" + "".join(f"{name:>{len(name) + 2}}" for name in shown))
        for name, value in baselines.items():
            if "skipped" in value:  # a release that cannot give it (an older one, no corpus)
                print(f"  {name:<24}  skipped: {value['skipped']}")
                continue
            print(f"  {name:<24}" + "".join(
                f"{_number(value['metrics'][m]['mean']):>{len(m) + 2}}" for m in shown))  # fmt: skip
    paired = report.get("paired")
    if paired is not None:
        print(f"against {paired['against']['name']} on {paired['n_surveys']} common survey(s): "
              "difference (this minus it), Holm-adjusted sign-flip p-value")  # fmt: skip
        for name, value in paired["metrics"].items():
            print(f"  {name:<20} {_number(value['diff'], signed=True)}  "
                  f"p={_number(value['p_holm'])}  ({value['n_surveys']} surveys)")  # fmt: skip
    aspects = report.get("aspects")
    if aspects is not None:
        print(f"aspects ({aspects['rule']}): {aspects['n_aspects']} aspect(s), headings "
              f"{aspects['headings_matched']} matched, {aspects['headings_unmatched']} unmatched")  # fmt: skip
        for name, value in aspects["metrics"].items():
            print(f"  {name:<20} {_number(value)}")
    log.info("evaluate: wrote %s", result.results_file)
    return 0


def _number(value: float | None, *, signed: bool = False) -> str:
    """A report number for the terminal, ``n/a`` when undefined."""
    if value is None:
        return f"{'n/a':>7}"
    return f"{value:+7.4f}" if signed else f"{value:7.4f}"
