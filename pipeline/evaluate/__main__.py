"""``python -m pipeline.evaluate ...``: the evaluate subcommand on its own."""

from __future__ import annotations

import sys


def _cli(argv: list[str] | None = None) -> int:
    # the main CLI, so errors, -v/-q and Ctrl-C are handled the same way
    from pipeline.cli import main

    return main(["evaluate", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(_cli())
