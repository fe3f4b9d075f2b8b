"""``python -m pipeline.evaluate ...``: the evaluate subcommand on its own."""

from __future__ import annotations

import argparse
import sys

from pipeline.evaluate.command import add_parser


def _cli(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pipeline.evaluate")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["evaluate", *(sys.argv[1:] if argv is None else argv)])
    return args.func(args)


if __name__ == "__main__":
    sys.exit(_cli())
