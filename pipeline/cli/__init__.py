"""The command line, the one home of argparse: ``python -m pipeline`` (or ``survey-reading-lists``).

:mod:`pipeline.cli.app` builds the parser and runs a command; one module per command group
turns flags into calls of the typed API (:mod:`pipeline.api`) and of the packages below it:
:mod:`~pipeline.cli.evaluate` (``evaluate``, ``export``), :mod:`~pipeline.cli.rank`
(``features``, ``train``), :mod:`~pipeline.cli.jobs` (``job``, ``submit``),
:mod:`~pipeline.cli.demo` and :mod:`~pipeline.cli.args` (argument types shared by them).
"""

from pipeline.cli.app import STATUS_WIDTH, build_parser, main

__all__ = ["STATUS_WIDTH", "build_parser", "main"]
