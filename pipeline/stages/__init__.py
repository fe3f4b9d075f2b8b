"""The pipeline's stages, declared once, in run order.

Each stage module defines ``STAGE`` (a :class:`pipeline.runner.Stage`) and nothing
registers itself: :data:`STAGES` is the list the runner is handed, and :data:`GRAPH`
the same stages by name (each stage reads only stages listed before it).
"""

from pipeline.runner import Stage, stage_graph
from pipeline.stages import (
    aspects,
    extract,
    labels,
    negatives,
    release,
    split,
    surveys,
    works,
)

STAGES: tuple[Stage, ...] = (
    extract.STAGE,
    works.STAGE,
    surveys.STAGE,
    labels.STAGE,
    negatives.STAGE,
    split.STAGE,
    aspects.STAGE,
    release.STAGE,
)
GRAPH = stage_graph(STAGES)
