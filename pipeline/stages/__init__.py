# ruff: noqa: I001 - import order is run order
"""Stage modules; importing this package registers them in run order."""

from pipeline.stages import extract  # noqa: F401
from pipeline.stages import works  # noqa: F401
from pipeline.stages import surveys  # noqa: F401
from pipeline.stages import labels  # noqa: F401
from pipeline.stages import negatives  # noqa: F401
from pipeline.stages import split  # noqa: F401
from pipeline.stages import release  # noqa: F401
