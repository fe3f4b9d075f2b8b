"""``python -m pipeline demo``: the whole pipeline on the bundled demo corpus.

The corpus (:mod:`pipeline.synth.demo_corpus`) is built in ``<out>/corpus``, then every stage
runs into ``<out>/`` and the baselines are evaluated (:func:`pipeline.api.demo`).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from pipeline import api
from pipeline.cli.args import positive_int


def main(args: argparse.Namespace) -> int:
    """The ``demo`` command: :func:`pipeline.api.demo`, then print the evaluation report."""
    from pipeline.evaluate.report.markdown import render_report

    result = api.demo(
        args.out,
        papers=args.papers,
        fixtures=args.fixtures,
        workers=args.workers,
        config=args.config,
    )
    if result.evaluation is not None:
        print(render_report(result.evaluation.results))
    return 0


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Register the ``demo`` subcommand."""
    from pipeline.cli.args import add_out_arg

    p = subparsers.add_parser(
        "demo",
        help="build the bundled demo corpus and run every stage plus the evaluation",
        description="Builds the demo corpus (synthetic papers plus the real unarXive samples "
        "shipped with the package, packed as the Hub packs unarXive 2024) in DIR/corpus, runs "
        "every stage into DIR and evaluates the baselines. Its release is marked synthetic: "
        "push refuses it without --allow-synthetic.",
    )
    add_out_arg(
        p,
        "the work directory: the corpus, every stage's outputs, DIR/release and DIR/eval",
        default=Path("demo_out"),
    )
    p.add_argument(
        "--papers",
        type=positive_int,
        default=1500,
        metavar="N",
        help="synthetic papers (default 1500), all in the 2024 layout as the corpus is "
        "published, like the real samples (so no aspect is a 2022-layout section or "
        "subsection; `synth --layout 2022` writes that layout)",
    )
    p.add_argument(
        "--fixtures",
        type=Path,
        default=None,
        metavar="DIR",
        help="folder holding the real samples (default: the package's demo_data)",
    )
    p.add_argument(
        "--workers",
        metavar="N",
        type=positive_int,
        default=api.default_workers(),
        help="worker processes (default: CPU count)",
    )
    p.add_argument("--config", type=Path, default=None, metavar="FILE", help="TOML config file")
    p.set_defaults(func=main)
