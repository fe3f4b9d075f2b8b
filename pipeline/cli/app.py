"""``python -m pipeline``: one subcommand per stage, plus synth, run, status and tools."""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from pipeline import __version__, api
from pipeline.cli.args import (
    DEPRECATED_NOTES,
    REQUIRES_RELEASE,
    DeprecatedOption,
    add_out_arg,
    add_release_arg,
    positive_int,
    repo_id,
    shard_arg,
)
from pipeline.core.config import Config, describe, load_config
from pipeline.core.errors import INTERRUPTED, TERMINATED, UsageError, user_message
from pipeline.core.progress import redirect_logging
from pipeline.corpus.sources import InputError
from pipeline.engine.failures import DEFAULT_MAX_FAILED, max_failed_share
from pipeline.engine.workers import Terminated, sigterm_as_interrupt
from pipeline.hub.publish import ENDPOINT_HELP
from pipeline.rules.redact import SecretFilter
from pipeline.stages import GRAPH

log = logging.getLogger("pipeline")
CONSOLE_SCRIPT = "survey-reading-lists"  # [project.scripts] in pyproject.toml
STATUS_WIDTH = 100  # status wraps its counts at this many columns


def _max_failed_arg(value: str) -> str:
    try:
        max_failed_share(value)
    except UsageError:
        raise argparse.ArgumentTypeError(
            f"takes a count (e.g. 3) or a share of the input files from 0% to 100% (e.g. 1%); "
            f"got {value!r}"
        ) from None
    return value


def _common(
    p: argparse.ArgumentParser, inputs: bool = False, shards: bool = True, force: bool = True
) -> None:
    if inputs:
        p.add_argument(
            "--input",
            action="append",
            default=[],
            metavar="PATH",
            help="file, directory, glob or hf://datasets/... (repeatable)",
        )
        if shards:
            p.add_argument(
                "--shard",
                metavar="I/N",
                type=shard_arg,
                default=(0, 1),
                help="this machine's share of the extract, shard I of N: the plain input "
                "files sorted(files)[I::N], and of each archive the units u with u %% N == I "
                "(every shard reads the whole archive stream, decoding its own units only)",
            )
        else:
            p.set_defaults(shard=(0, 1))
        p.add_argument(
            "--workers",
            metavar="N",
            type=positive_int,
            default=api.default_workers(),
            help="worker processes (default: CPU count)",
        )
        p.add_argument(
            "--prune",
            action="store_true",
            help="delete finished extract outputs of files that are not in --input",
        )
    if force:
        add_out_arg(
            p,
            "the work directory (each stage's outputs, markers and manifests; the release in "
            "DIR/release)",
            default=Path("work"),
        )
    else:  # status reads a work directory and writes nothing
        p.add_argument(
            "--out",
            type=Path,
            default=Path("work"),
            metavar="DIR",
            help="the work directory to report on, as given to run --out (default: work)",
        )
    p.add_argument(
        "--config",
        type=Path,
        default=None,
        metavar="FILE",
        help="TOML config file (see `python -m pipeline config`)",
    )
    if force:
        p.add_argument(
            "--force", action="store_true", help="redo work even when its completion marker matches"
        )
        p.add_argument(
            "--verify",
            action="store_true",
            help="also compare finished files with the sha256 their markers record (sizes "
            "are always compared); a file that differs is redone",
        )
        p.add_argument(
            "--max-failed-files",
            type=_max_failed_arg,
            default=DEFAULT_MAX_FAILED,
            metavar="N",
            help="input files that may fail to read (damaged, unreachable) before the run "
            f"fails: a count or a share such as 1%% (default {DEFAULT_MAX_FAILED.replace('%', '%%')}); "
            "later stages use the files that succeeded and the release lists the failed ones",
        )


def _extract(args: argparse.Namespace, cfg: Config) -> int:
    api.extract(
        args.input,
        args.out,
        config=cfg,
        workers=args.workers,
        shard_of=args.shard,
        force=args.force,
        verify=args.verify,
        prune=args.prune,
        max_failed_files=args.max_failed_files,
    )
    return 0


def _reduce(name: str):
    def cmd(args: argparse.Namespace, cfg: Config) -> int:
        api.reduce(
            name,
            args.out,
            config=cfg,
            force=args.force,
            verify=args.verify,
            max_failed_files=args.max_failed_files,
        )
        return 0

    return cmd


def _openalex_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--openalex",
        type=Path,
        default=None,
        metavar="DIR",
        help="the OpenAlex works snapshot (DIR/works/**/*.gz or DIR/data/works/, with "
        "merged_ids/works/) to describe the cited works from, "
        "instead of the API ([openalex_lookup] snapshot)",
    )


def _run(args: argparse.Namespace, cfg: Config) -> int:
    """Every stage in order; extract is skipped when no --input is given but its outputs exist."""
    result = api.run(
        args.input,
        args.out,
        config=cfg,
        workers=args.workers,
        force=args.force,
        verify=args.verify,
        prune=args.prune,
        max_failed_files=args.max_failed_files,
    )
    if result.evaluation is not None:
        from pipeline.evaluate.report.markdown import render_report

        print(render_report(result.evaluation.results))
    return 0


def _status(args: argparse.Namespace, cfg: Config) -> int:
    report = api.status(args.out, config=cfg)
    if args.json:
        print(json.dumps(report.stages, indent=2, sort_keys=True, default=str))
    else:
        rows = [("stage", "state", "counts"), *report.rows()]
        width = [max(len(r[i]) for r in rows) for i in range(2)]
        indent = " " * (width[0] + width[1] + 4)
        for name, state, detail in rows:
            lines = _wrap_items(detail, STATUS_WIDTH - len(indent))
            print(f"{name:<{width[0]}}  {state:<{width[1]}}  {lines[0]}".rstrip())
            for line in lines[1:]:
                print(f"{indent}{line}")
    if not report.has_work:
        log.warning(
            "%s holds no pipeline work (no stage outputs): is this the right --out?", args.out
        )
    return 0


def _wrap_items(detail: str, width: int) -> list[str]:
    """``"a 1, b 2, ..."`` in lines of at most ``width`` characters, breaking only between
    items, so a counter's name and its value are never cut (a longer item gets its own line)."""
    lines = [""]
    for item in detail.split(", ") if detail else []:
        candidate = f"{lines[-1]}, {item}" if lines[-1] else item
        if len(candidate) <= width or not lines[-1]:
            lines[-1] = candidate
        else:
            lines[-1] += ","
            lines.append(item)
    return lines


def _push(args: argparse.Namespace) -> int:
    result = api.push(
        args.release,
        args.repo_id,
        tag=args.tag,
        private=args.private,
        endpoint=args.endpoint,
        dry_run=args.dry_run,
        revision=args.revision,
        commit_message=args.commit_message,
        commit_description=args.commit_description,
        allow_synthetic=args.allow_synthetic,
    )
    if args.dry_run:
        print(json.dumps({"dry_run": True, **result.plan}, indent=2))
    else:
        print(json.dumps(result.done, indent=2))
    return 0


def _add_push(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "push",
        help="upload the release folder to a Hub dataset repo in one commit, then tag it",
        description="Checks the release folder against what the release stage recorded, "
        "refuses a release built from synthetic papers (unless --allow-synthetic) and a card "
        "that still holds a placeholder or names another repo, then creates the dataset repo "
        "if missing and uploads every release file in one commit (the options follow `hf "
        "upload`). --dry-run prints the plan after the same checks and needs no token.",
    )
    p.add_argument(
        "--repo-id",
        type=repo_id,
        required=True,
        metavar="OWNER/NAME",
        help="the dataset repo (created if missing); the card must name it ([release] repo_id)",
    )
    add_release_arg(p, default=Path("work/release"))
    p.add_argument("--tag", metavar="TAG", default=None, help="tag the commit, e.g. v0.1.0")
    p.add_argument(
        "--revision",
        default=None,
        metavar="BRANCH",
        help="branch to commit to (default: main); created from main when missing",
    )
    p.add_argument(
        "--commit-message",
        default=None,
        metavar="TEXT",
        help="summary of the commit (default: 'Release <version>')",
    )
    p.add_argument(
        "--commit-description", default=None, metavar="TEXT", help="description of the commit"
    )
    p.add_argument(
        "--private", action="store_true", help="create the repo private (ignored if it exists)"
    )
    p.add_argument(
        "--allow-synthetic",
        action="store_true",
        help="publish a release built from synthetic papers (the demo, synth, the bench corpus) "
        "or papers of unknown provenance; its card says so at the top",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="run every check and print the planned operations; change nothing",
    )
    p.add_argument("--endpoint", default=None, metavar="URL", help=ENDPOINT_HELP)
    p.set_defaults(func=_push)


def _roles(args: argparse.Namespace) -> int:
    """Print heading, normalised text, role and survey role (tab-separated)."""
    import polars as pl

    from pipeline.engine.context import ReduceContext
    from pipeline.rules.roles import heading_report, work_headings
    from pipeline.rules.tables import scan_extract

    cfg = load_config(args.config)
    if args.out is not None:
        # read as the stage that applies the roles reads them (labels, which reads extract)
        ctx = ReduceContext(args.out, cfg, GRAPH["labels"], args.out, GRAPH)
        if not ctx.files("extract", "sections"):
            raise InputError(f"{args.out}: no extract sections tables (run extract first)")
        extract = ctx.files_by_table("extract")
        headings = work_headings(
            scan_extract(extract, "sections"), scan_extract(extract, "mentions")
        )
    else:
        lines = [line.rstrip("\r\n") for line in sys.stdin]
        headings = pl.LazyFrame(
            {"heading": [x for x in lines if x.strip()]}, schema={"heading": pl.String}
        )
    report = heading_report(headings, cfg.roles)
    cols = ["heading", "normalized", "role", "survey_role"]
    cols += [c for c in report.columns if c not in cols]
    lines = ["\t".join(cols)]
    for row in report.select(cols).iter_rows():
        lines.append("\t".join(str(v).replace("\t", " ").replace("\n", " ") for v in row))
    try:
        sys.stdout.write("\n".join(lines) + "\n")
        sys.stdout.flush()
    except BrokenPipeError:  # `| head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


def build_parser() -> argparse.ArgumentParser:
    script = Path(sys.argv[0]).name
    prog = script if script == CONSOLE_SCRIPT else "python -m pipeline"
    parser = _Parser(prog=prog, description=__doc__)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    _add_verbosity(parser, top=True)
    sub = parser.add_subparsers(dest="command", required=True)

    for name, stage in GRAPH.items():
        reads = f"reads {', '.join(stage.reads)} from DIR; " if stage.reads else "reads --input; "
        p = sub.add_parser(
            name,
            help=stage.help,
            description=f"Stage {name} ({stage.kind}): {stage.help}. It {reads}writes DIR/{name}/ "
            "and its completion marker; a finished stage with the same config and inputs is "
            "skipped (--force redoes it).",
        )
        _common(p, inputs=stage.kind == "map")
        if name == "openalex":
            _openalex_arg(p)
        p.set_defaults(handler=_extract if stage.kind == "map" else _reduce(name))

    p = sub.add_parser(
        "run",
        help="every stage in order (extract needs --input)",
        description="Every stage in order into the work directory DIR (extract from --input; "
        "without --input, the finished extract outputs in DIR), then the baselines' "
        "evaluation of the release into DIR/eval, and the card again with their results. A "
        "killed run resumes when the same command runs again.",
    )
    _common(p, inputs=True, shards=False)
    _openalex_arg(p)
    p.set_defaults(handler=_run)

    p = sub.add_parser(
        "status",
        help="which stages and shards are done, with counts",
        description="A table of the stages in order (done, partial, outdated or not run for "
        "the config) with every count they recorded; --json prints the full report.",
    )
    _common(p, force=False)
    p.add_argument("--json", action="store_true", help="print the full report as JSON")
    p.set_defaults(handler=_status)

    p = sub.add_parser(
        "roles",
        help="headings -> normalised text, role and survey role (to tune [roles] overrides)",
        description="Reads headings, one per line on stdin, or every heading of a work "
        "directory (--out, with occurrences, papers and mentions), and prints "
        "heading, normalised text, role and survey role, tab-separated.",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        metavar="DIR",
        help="the work directory to read headings from, as status reads it (nothing is "
        "written there; default: headings on stdin)",
    )
    p.add_argument(
        "--from-out",
        dest="out",
        action=DeprecatedOption,
        instead="--out",
        type=Path,
        metavar="DIR",
        help="deprecated spelling of --out (the work directory to read headings from)",
    )
    p.add_argument(
        "--config", metavar="FILE", type=Path, default=None, help="TOML config ([roles] overrides)"
    )
    p.set_defaults(func=_roles)

    p = sub.add_parser(
        "config",
        help="print every config field with its default and help",
        description="Prints every [section] field of the TOML config with its default and "
        "what it does; a config file sets any of them (--config FILE).",
    )
    p.set_defaults(func=lambda a: print(describe()) or 0)

    for add_parser in _plugins():
        add_parser(sub)
    for command in sub.choices.values():
        _add_verbosity(command)
    return parser


def _plugins() -> list[Callable[[argparse._SubParsersAction], Any]]:
    """Registrars of the subcommands that are not stages of the runner, in help order
    (modules that bring their own parsers, and ``push``)."""
    import importlib

    found: list[Callable[[argparse._SubParsersAction], Any]] = []
    for name in (
        "pipeline.cli.synth",
        "pipeline.cli.demo",
        "pipeline.cli.evaluate",  # evaluate
        "push",
        "pipeline.cli.jobs",  # job, submit
        "pipeline.cli.rank",  # features, train
    ):
        if name == "push":
            found.append(_add_push)
            continue
        try:
            found.append(importlib.import_module(name).add_parser)
        except ModuleNotFoundError as e:
            if e.name != name:
                raise
    return found


class _Parser(argparse.ArgumentParser):
    """argparse whose usage errors are :class:`UsageError` (one line, ``(see --help)``), so
    :func:`main` reports them in the one error format, exit 2."""

    def error(self, message: str):  # type: ignore[override]
        raise UsageError(f"{self.prog}: {' '.join(message.split())} (see --help)")

    def parse_args(self, args=None, namespace=None):  # type: ignore[override]
        # unknown options are the top parser's to report: name the subcommand they were given to
        parsed, extra = self.parse_known_args(args, namespace)
        if extra:
            command = getattr(parsed, "command", None)
            prog = f"{self.prog} {command}" if command else self.prog
            raise UsageError(f"{prog}: unrecognized arguments: {' '.join(extra)} (see --help)")
        return parsed


def _add_verbosity(p: argparse.ArgumentParser, top: bool = False) -> None:
    """``-v``/``-q`` before or after the subcommand (SUPPRESS: a subcommand's default
    does not overwrite what was given before it)."""
    default = {} if top else {"default": argparse.SUPPRESS}
    group = p.add_mutually_exclusive_group()
    group.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="debug logging, and a traceback with every error",
        **default,
    )
    group.add_argument(
        "-q", "--quiet", action="store_true", help="only warnings and errors", **default
    )


def _check_out(args: argparse.Namespace) -> None:
    out = getattr(args, "out", None)
    if isinstance(out, Path) and out.exists() and not out.is_dir():
        raise InputError(f"--out {out} is a file; give a directory")


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    log.warning("%s", message)  # one line, not Python's `file:line: Category` form


@contextlib.contextmanager
def _log_to_stderr(level: int) -> Iterator[None]:
    """The pipeline's log lines on stderr at ``level`` while a command runs, scrubbed of
    secrets (:class:`pipeline.rules.redact.SecretFilter`).

    A handler on the ``pipeline`` logger, not the root logger: records still propagate
    (pytest's capture sees them), and a command run from inside another (``demo`` runs
    ``run``) does not print every line twice. On a terminal the lines go through
    ``tqdm.write``, so they do not tear a progress bar.
    """
    previous = log.level
    log.setLevel(level)
    # every record, the traceback of -v included, loses the token before a handler sees
    # it; records of other libraries' loggers that reach stderr through logging's
    # last-resort handler too
    secrets = SecretFilter()
    log.addFilter(secrets)
    last_resort = logging.lastResort
    if last_resort is not None:
        last_resort.addFilter(secrets)
    handler = None
    if not any(getattr(h, "pipeline_cli", False) for h in log.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
        handler.pipeline_cli = True  # type: ignore[attr-defined]
        log.addHandler(handler)
    try:
        with redirect_logging(log) if handler is not None else contextlib.nullcontext():
            yield
    finally:
        if handler is not None:
            log.removeHandler(handler)
        log.removeFilter(secrets)
        if last_resort is not None:
            last_resort.removeFilter(secrets)
        log.setLevel(previous)


def main(argv: list[str] | None = None) -> int:
    """Run one subcommand; every expected failure is one line on stderr and exit code 2.

    One format for every command: a bad command line, bad input, a missing token, a Hub
    that refuses are each one log line ``<time> ERROR <what went wrong>`` on stderr; no
    subcommand prints its own ``error:`` line.

    Ctrl-C exits 130 and SIGTERM 143, each with a line saying how to resume; an
    unexpected error exits 1 with one line, and with its traceback under ``-v``.
    """
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if getattr(args, REQUIRES_RELEASE, False) and args.release is None:
            raise UsageError(f"{args.command}: --release DIR is required (the release to read)")
    except UsageError as e:
        with _log_to_stderr(logging.INFO):
            log.error("%s", e)
        return 2
    verbose, quiet = getattr(args, "verbose", False), getattr(args, "quiet", False)
    level = logging.DEBUG if verbose else logging.WARNING if quiet else logging.INFO
    with _log_to_stderr(level), warnings.catch_warnings(), sigterm_as_interrupt():
        warnings.showwarning = _show_warning
        for note in getattr(args, DEPRECATED_NOTES, None) or ():
            log.warning("%s", note)
        try:
            _check_out(args)
            if hasattr(args, "handler"):
                snapshot = getattr(args, "openalex", None)
                overrides = {"openalex_lookup": {"snapshot": str(snapshot)}} if snapshot else None
                cfg = load_config(args.config, overrides=overrides)
                return args.handler(args, cfg)
            return args.func(args)
        except KeyboardInterrupt as e:
            terminated = isinstance(e, Terminated)
            message = TERMINATED if terminated else INTERRUPTED
            if verbose:
                log.exception("%s", message)
            else:
                log.error("%s", message)
            return 128 + e.signum if terminated else 130
        except Exception as e:
            expected = user_message(e)
            message = expected or f"unexpected {type(e).__name__}: {' '.join(str(e).split())}"
            if verbose:
                log.exception("%s", message)
            else:
                log.error("%s", message if expected else f"{message} (-v shows the traceback)")
            return 2 if expected else 1
