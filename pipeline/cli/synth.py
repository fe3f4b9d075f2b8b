"""The ``synth`` command: flags in, :func:`pipeline.synth.generator.generate` out."""

from __future__ import annotations

import argparse
import inspect
import time
from pathlib import Path
from typing import Any

from pipeline.cli.args import add_out_arg
from pipeline.synth import generator as synth

# the generator's own defaults are the flags' defaults
DEFAULTS = {
    name: p.default
    for name, p in inspect.signature(synth.generate).parameters.items()
    if p.default is not inspect.Parameter.empty
}


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register the ``synth`` subcommand on an ``argparse`` subparsers object."""
    p = subparsers.add_parser(
        "synth",
        help="write a deterministic synthetic unarXive-format corpus",
        description="Writes JSONL files of synthetic unarXive records into DIR: the same "
        "arguments give the same bytes. Every record carries the synthetic mark, so a release "
        "built from them says SYNTHETIC on its card and push refuses it without "
        "--allow-synthetic.",
    )
    add_out_arg(p, "the JSONL files of the corpus")
    p.add_argument("--papers", required=True, type=int, metavar="N", help="number of papers")
    p.add_argument(
        "--layout", choices=synth.LAYOUTS, default="2022", help="record layout (default 2022)"
    )
    p.add_argument("--seed", type=int, default=0, metavar="S", help="random seed (default 0)")
    p.add_argument("--small", action="store_true", help="~10 KB records instead of ~200 KB")
    p.add_argument(
        "--survey-share",
        type=float,
        default=DEFAULTS["survey_share"],
        metavar="F",
        help="share of CS papers that are surveys",
    )
    p.add_argument("--malformed", type=int, default=0, metavar="N", help="broken lines to insert")
    p.add_argument("--files", type=int, default=1, metavar="K", help="number of output files")
    p.add_argument(
        "--cs-share",
        type=float,
        default=DEFAULTS["cs_share"],
        metavar="F",
        help="share of papers with a cs.* primary category",
    )
    p.set_defaults(func=main)
    return p


def main(args: argparse.Namespace) -> int:
    """Run ``synth`` from parsed arguments; prints one summary line.

    An argument out of range raises ``ValueError``: ``python -m pipeline`` reports it in its
    one error format, exit code 2.
    """
    start = time.perf_counter()
    paths = synth.generate(
        Path(args.out),
        args.papers,
        layout=args.layout,
        seed=args.seed,
        small=args.small,
        survey_share=args.survey_share,
        malformed=args.malformed,
        files=args.files,
        cs_share=args.cs_share,
    )
    seconds = time.perf_counter() - start
    mb = sum(p.stat().st_size for p in paths) / 1e6
    print(
        f"synth: {args.papers} papers + {args.malformed} malformed lines, layout {args.layout}, seed {args.seed}"
        f" -> {len(paths)} file(s) in {args.out}: {mb:.1f} MB in {seconds:.1f} s ({mb / max(seconds, 1e-9):.1f} MB/s)"
    )
    return 0
