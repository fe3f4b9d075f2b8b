"""The pipeline's stages, declared once, in run order.

Each stage module defines ``STAGE`` (a :class:`pipeline.engine.stage.Stage`) and nothing
registers itself: :data:`STAGES` is the list the runner is handed, and :data:`GRAPH`
the same stages by name (each stage reads only stages listed before it).

Both are built on first use (PEP 562): the executor imports the contract
(:mod:`pipeline.engine.stage`) without importing every stage, and a stage module
imports the contract without importing the executor.
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    if name not in ("STAGES", "GRAPH"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from pipeline.engine.stage import stage_graph
    from pipeline.stages import (
        aspects,
        extract,
        labels,
        negatives,
        openalex,
        release,
        split,
        surveys,
        works,
    )

    stages = (
        extract.STAGE,
        works.STAGE,
        openalex.STAGE,
        surveys.STAGE,
        labels.STAGE,
        negatives.STAGE,
        split.STAGE,
        aspects.STAGE,
        release.STAGE,
    )
    globals().update(STAGES=stages, GRAPH=stage_graph(stages))
    return globals()[name]
