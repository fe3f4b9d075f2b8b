"""Stage modules; importing this package registers them in run order."""

from pipeline.stages import extract  # noqa: F401
