"""``python -m pipeline``: one subcommand per stage, plus synth, run, status and tools."""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

from pipeline import __version__
from pipeline.config import describe, load_config
from pipeline.errors import INTERRUPTED, user_message
from pipeline.progress import redirect_logging
from pipeline.runner import (
    DEFAULT_MAX_FAILED,
    MANIFESTS,
    MARKERS,
    check_failures,
    clean_stale_temps,
    disagreement,
    failed_inputs,
    reduce_done,
    run_map,
    run_reduce,
    shard_record_path,
    shard_records,
    stage_key,
    write_shard_record,
)
from pipeline.sources import InputError, resolve_inputs, shard
from pipeline.stages import GRAPH
from pipeline.stages.extract import summarize

log = logging.getLogger("pipeline")
CONSOLE_SCRIPT = "survey-reading-lists"  # [project.scripts] in pyproject.toml


def _shard_arg(value: str) -> tuple[int, int]:
    try:
        i, n = (int(x) for x in value.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--shard takes I/N, e.g. 0/4; got {value!r}") from None
    if not 0 <= i < n:
        raise argparse.ArgumentTypeError(f"--shard {value}: need 0 <= I < N")
    return i, n


def positive_int(value: str) -> int:
    """argparse type: an integer >= 1 (``--workers``)."""
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"need a whole number >= 1; got {value!r}")
    return number


def _max_failed_arg(value: str) -> str:
    try:
        number = float(value[:-1]) if value.endswith("%") else int(value)
    except ValueError:
        number = -1
    if number < 0 or (value.endswith("%") and number > 100):
        raise argparse.ArgumentTypeError(
            f"--max-failed-files takes a count (e.g. 3) or a share of the input files "
            f"(e.g. 1%); got {value!r}"
        )
    return value


def _common(
    p: argparse.ArgumentParser, inputs: bool = False, shards: bool = True, force: bool = True
) -> None:
    if inputs:
        p.add_argument(
            "--input",
            action="append",
            default=[],
            help="file, directory, glob or hf://datasets/... (repeatable)",
        )
        if shards:
            p.add_argument(
                "--shard",
                type=_shard_arg,
                default=(0, 1),
                help="take sorted(files)[I::N] of the inputs",
            )
        else:
            p.set_defaults(shard=(0, 1))
        p.add_argument(
            "--workers",
            type=positive_int,
            default=os.cpu_count() or 1,
            help="worker processes (default: CPU count)",
        )
        p.add_argument(
            "--prune",
            action="store_true",
            help="delete finished extract outputs of files that are not in --input",
        )
    p.add_argument("--out", type=Path, default=Path("work"), help="work directory (default: work)")
    p.add_argument(
        "--config",
        type=Path,
        default=None,
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


def _extract(args: argparse.Namespace, cfg, verify: bool = False) -> int:
    if not args.input:
        raise InputError("extract needs --input")
    every = resolve_inputs(args.input)
    files = shard(every, *args.shard)
    # every shard records the whole input list under its own name: later stages check that
    # all shards agree on it and wait until every file of it is done
    _check_shard_inputs(args.out, args.shard, args.input, every, args.prune)
    _check_foreign_outputs(args.out, every, args.prune)
    clean_stale_temps(args.out / "extract")
    verify = verify or args.verify
    run_map(GRAPH["extract"], files, args.out, cfg, args.workers, args.force, verify)
    totals = summarize(args.out)
    log.info(
        "extract: %s files, %s papers, %s rejects, %s duplicate papers across files, "
        "%s failed files; outputs in %s",
        totals["files"],
        totals.get("papers_written", 0),
        totals.get("rejects_total", 0),
        totals.get("duplicate_papers_across_files", 0),
        len(totals["failed_files"]),
        args.out / "extract",
    )
    keys = {f.key for f in every}
    failed = [f for f in failed_inputs(args.out, GRAPH["extract"], cfg) if f["source_key"] in keys]
    check_failures(failed, len(every), args.max_failed_files, "extract")
    return 0


def _check_shard_inputs(
    out: Path, shard_arg: tuple[int, int], specs: list[str], every: list, prune: bool
) -> None:
    """Record this shard's whole input list; refuse (recording nothing) when another shard
    recorded a different one. With ``--prune`` the disagreeing records are deleted instead.
    """
    index, count = shard_arg
    name = f"{index}-of-{count}"
    keys = sorted(f.key for f in every)
    others = {k: r for k, r in shard_records(out, "extract").items() if k != name}
    differ = {k: r for k, r in others.items() if r["files"] != keys}
    if differ and not prune:
        first = next(iter(differ))
        mine = {"shard": [index, count], "input": specs, "files": keys}
        problem = disagreement({first: differ[first], name: mine})
        raise InputError(f"extract: {problem} (or add --prune to drop the other shards' records)")
    for rec in differ.values():
        shard_record_path(out, "extract", *rec["shard"]).unlink(missing_ok=True)
    if differ:
        log.warning(
            "extract: --prune removed %d shard record(s) of another input list", len(differ)
        )
    write_shard_record(out, "extract", index, count, specs, keys)


def _check_foreign_outputs(out: Path, inputs: list, prune: bool) -> None:
    """Refuse to mix corpora: finished extract files in ``out`` must all be inputs.

    Later stages read every finished extract file in ``out`` (that is how shards from
    several machines come together), so outputs of files that are not in ``--input``
    (a moved corpus, another corpus, files removed from it) would silently join the
    benchmark. ``--prune`` deletes them instead.
    """
    keys = {f.key for f in inputs}
    base = out / "extract"
    for m in (base / MANIFESTS).glob("*.json"):
        if m.stem not in keys and not (base / MARKERS / m.name).exists():
            m.unlink(missing_ok=True)  # a failed file that is no longer an input: no outputs
    foreign = sorted(m.stem for m in (base / MARKERS).glob("*.json") if m.stem not in keys)
    if not foreign:
        return
    if not prune:
        raise InputError(
            f"{len(foreign)} finished extract file(s) in {base} are not in --input "
            f"(e.g. {foreign[0]}); later stages would read them too. Use a fresh --out, "
            "or add --prune to delete them."
        )
    for key in foreign:
        for table in GRAPH["extract"].tables:
            (base / table / f"{key}.parquet").unlink(missing_ok=True)
        (base / MANIFESTS / f"{key}.json").unlink(missing_ok=True)
        (base / MARKERS / f"{key}.json").unlink(missing_ok=True)
    log.warning("extract: --prune removed the outputs of %d file(s) not in --input", len(foreign))


def _run_reduce(stage, args: argparse.Namespace, cfg) -> None:
    run_reduce(stage, args.out, cfg, args.force, args.max_failed_files, args.verify, stages=GRAPH)


def _reduce(name: str):
    def cmd(args: argparse.Namespace, cfg) -> int:
        _run_reduce(GRAPH[name], args, cfg)
        log.info("%s: outputs in %s", name, args.out / name)
        return 0

    return cmd


def _run(args: argparse.Namespace, cfg) -> int:
    """Every stage in order; extract is skipped when no --input is given but its outputs exist."""
    if args.input:
        # checksums of the extract outputs now: the reduce stages would check them before
        # reading them anyway, and here a damaged file can still be redone from its input
        _extract(args, cfg, verify=True)
    elif stage_key(args.out, "extract", cfg, GRAPH) is None:
        raise InputError("run needs --input (no finished extract outputs in --out)")
    clean_stale_temps(args.out)
    for stage in GRAPH.values():
        if stage.kind == "reduce":
            _run_reduce(stage, args, cfg)
    _evaluate_release(args.out, cfg)
    log.info("run: every stage's outputs in %s; the release in %s", args.out, args.out / "release")
    return 0


def _evaluate_release(out: Path, cfg) -> None:
    """Evaluate the baselines on a finished release (the last step of ``run``)."""
    import polars as pl

    from pipeline.evaluate import evaluate
    from pipeline.evaluate.report import render_report

    eval_file = out / "release" / "eval_survey_reading_lists.parquet"
    if not (out / "release" / "_SUCCESS.json").exists():
        return
    if not eval_file.exists() or pl.scan_parquet(eval_file).select(pl.len()).collect().item() == 0:
        log.warning(
            "evaluate: the release has no eval surveys (none dated on/after %s); skipped",
            cfg.split.eval_from,
        )
        return
    results = evaluate(eval_file, runs=(), baselines_only=True, out_dir=out, config=cfg.evaluate)
    print(render_report(results))
    log.info("evaluate: results in %s", out / "eval")


def status_report(out: Path, cfg) -> dict[str, dict]:
    """Per stage, in pipeline order: whether it is done for ``cfg``, with its counts."""
    report: dict[str, dict] = {}
    for name, stage in GRAPH.items():
        d = out / name
        if stage.kind == "map":
            manifests = [json.loads(p.read_text()) for p in sorted((d / MANIFESTS).glob("*.json"))]
            manifests = [m for m in manifests if m.get("status") != "failed"]
            totals: dict[str, int] = {}
            for m in manifests:
                for k, v in m["counts"].items():
                    if isinstance(v, int):
                        totals[k] = totals.get(k, 0) + v
            report[name] = {
                "files_done": len(manifests),
                "current": stage_key(out, name, cfg, GRAPH) is not None,
                "files_failed": [
                    {k: f[k] for k in ("file", "reason", "lines_read")}
                    for f in failed_inputs(out, stage, cfg)
                ],
                **totals,
            }
        else:
            success = d / "_SUCCESS.json"
            entry = {"done": reduce_done(out, name, cfg, GRAPH)}
            if success.exists():
                entry["counts"] = json.loads(success.read_text())["counts"]
            report[name] = entry
    return report


def _status_rows(report: dict[str, dict]) -> list[tuple[str, str, str]]:
    rows = []
    for name, entry in report.items():
        if "files_done" in entry:
            failed = len(entry["files_failed"])
            if entry["current"]:
                state = "done"
            elif entry["files_done"] or failed:
                state = "partial"
            else:
                state = "not run"
            detail = f"{entry['files_done']} file(s) done, {failed} failed"
            if "papers_written" in entry:
                detail += f", {entry['papers_written']:,} papers"
        else:
            counts = entry.get("counts")
            state = "done" if entry["done"] else "outdated" if counts is not None else "not run"
            detail = ", ".join(
                f"{k} {v:,}" for k, v in (counts or {}).items() if isinstance(v, int)
            )[:90]
        rows.append((name, state, detail))
    return rows


def _status(args: argparse.Namespace, cfg) -> int:
    if not args.out.is_dir():
        raise InputError(f"--out {args.out}: no such work directory")
    report = status_report(args.out, cfg)
    if args.json:
        print(json.dumps(report, indent=2, sort_keys=True, default=str))
    else:
        rows = [("stage", "state", "counts"), *_status_rows(report)]
        width = [max(len(r[i]) for r in rows) for i in range(2)]
        for name, state, detail in rows:
            print(f"{name:<{width[0]}}  {state:<{width[1]}}  {detail}".rstrip())
    if not any((args.out / name).is_dir() for name in GRAPH):
        log.warning(
            "%s holds no pipeline work (no stage outputs): is this the right --out?", args.out
        )
    return 0


def _roles(args: argparse.Namespace) -> int:
    """Print heading, normalised text, role and survey role (tab-separated)."""
    import polars as pl

    from pipeline.roles import heading_report, work_headings
    from pipeline.runner import ReduceContext
    from pipeline.tables import scan_extract

    cfg = load_config(args.config)
    if args.from_out is not None:
        ctx = ReduceContext(args.from_out, cfg, GRAPH["extract"], args.from_out, GRAPH)
        if not ctx.upstream("extract", "sections"):
            raise InputError(f"{args.from_out}: no extract sections tables (run extract first)")
        headings = work_headings(scan_extract(ctx, "sections"), scan_extract(ctx, "mentions"))
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
        p = sub.add_parser(name, help=stage.help)
        _common(p, inputs=stage.kind == "map")
        p.set_defaults(handler=_extract if stage.kind == "map" else _reduce(name))

    p = sub.add_parser("run", help="every stage in order (extract needs --input)")
    _common(p, inputs=True, shards=False)
    p.set_defaults(handler=_run)

    p = sub.add_parser("status", help="which stages and shards are done, with counts")
    _common(p, force=False)
    p.add_argument("--json", action="store_true", help="print the full report as JSON")
    p.set_defaults(handler=_status)

    p = sub.add_parser(
        "roles",
        help="headings -> normalised text, role and survey role (to tune [roles] overrides)",
        description="Reads headings, one per line on stdin, or every heading of a work "
        "directory (--from-out, with occurrences, papers and mentions), and prints "
        "heading, normalised text, role and survey role, tab-separated.",
    )
    p.add_argument(
        "--from-out", type=Path, default=None, help="work directory to read headings from"
    )
    p.add_argument("--config", type=Path, default=None, help="TOML config ([roles] overrides)")
    p.set_defaults(func=_roles)

    p = sub.add_parser("config", help="print every config field with its default and help")
    p.set_defaults(func=lambda a: print(describe()) or 0)

    for module in _plugins():
        module.add_parser(sub)
    for command in sub.choices.values():
        _add_verbosity(command)
    return parser


def _plugins() -> list:
    """Subcommands that are not stages of the runner (they bring their own parsers)."""
    import importlib

    mods = []
    for name in (
        "pipeline.synth",
        "pipeline.demo",
        "pipeline.evaluate",
        "pipeline.publish",  # push
        "pipeline.jobs",  # job, submit
        "pipeline.rank",  # features, train
    ):
        try:
            mods.append(importlib.import_module(name))
        except ModuleNotFoundError as e:
            if e.name != name:
                raise
    return mods


class _Parser(argparse.ArgumentParser):
    """argparse with one-line usage errors (``prog: error: ... (see --help)``), exit 2."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


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
    """The pipeline's log lines on stderr at ``level`` while a command runs.

    A handler on the ``pipeline`` logger, not the root logger: records still propagate
    (pytest's capture sees them), and a command run from inside another (``demo`` runs
    ``run``) does not print every line twice. On a terminal the lines go through
    ``tqdm.write``, so they do not tear a progress bar.
    """
    previous = log.level
    log.setLevel(level)
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
        log.setLevel(previous)


def main(argv: list[str] | None = None) -> int:
    """Run one subcommand; every expected failure is one line on stderr and exit code 2.

    Ctrl-C exits 130 with a line saying how to resume; an unexpected error exits 1 with
    one line, and with its traceback under ``-v``.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    verbose, quiet = getattr(args, "verbose", False), getattr(args, "quiet", False)
    level = logging.DEBUG if verbose else logging.WARNING if quiet else logging.INFO
    with _log_to_stderr(level), warnings.catch_warnings():
        warnings.showwarning = _show_warning
        try:
            _check_out(args)
            if hasattr(args, "handler"):
                cfg = load_config(args.config)
                return args.handler(args, cfg)
            return args.func(args)
        except KeyboardInterrupt:
            if verbose:
                log.exception("%s", INTERRUPTED)
            else:
                log.error("%s", INTERRUPTED)
            return 130
        except Exception as e:
            expected = user_message(e)
            message = expected or f"unexpected {type(e).__name__}: {' '.join(str(e).split())}"
            if verbose:
                log.exception("%s", message)
            else:
                log.error("%s", message if expected else f"{message} (-v shows the traceback)")
            return 2 if expected else 1
