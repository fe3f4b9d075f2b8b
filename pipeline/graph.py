"""What a stage declares (:class:`Stage`) and the graph of them (:func:`stage_graph`).

The stage list itself is :data:`pipeline.stages.STAGES`; the runner
(:mod:`pipeline.runner`) executes it and :mod:`pipeline.workdir` knows where each
stage's files are.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any


@dataclass(frozen=True)
class Stage:
    """A pipeline stage.

    Attributes:
        name: subcommand and output directory name.
        kind: ``"map"`` (per input file) or ``"reduce"`` (once over upstream outputs).
        reads: stages whose outputs this stage reads.
        config_sections: config sections that change this stage's output.
        fn: map: ``fn(source, outputs: dict[table, temp Path], cfg, progress) -> counts``;
            reduce: ``fn(ctx: ReduceContext) -> counts``.
        tables: map stages: output table names (one subdirectory each).
        help: one line for the CLI.
        fn_many: optional map-stage form over a sequence of files:
            ``fn_many([(source, outputs), ...], cfg, progress)`` yields each file's counts,
            in order, once that file's outputs are complete (lets a stage overlap the
            end of one file with the start of the next).
    """

    name: str
    kind: str
    reads: tuple[str, ...]
    config_sections: tuple[str, ...]
    fn: Callable[..., dict[str, Any]]
    tables: tuple[str, ...] = ()
    help: str = ""
    fn_many: Callable[..., Iterator[dict[str, Any]]] | None = None


def stage_graph(stages: Iterable[Stage]) -> Mapping[str, Stage]:
    """The stages by name, in run order, for the runner's lookups of upstream stages.

    Raises:
        ValueError: two stages share a name, or a stage reads one that does not run before it.
    """
    graph: dict[str, Stage] = {}
    for stage in stages:
        if stage.name in graph:
            raise ValueError(f"two stages are named {stage.name!r}")
        late = [r for r in stage.reads if r not in graph]
        if late:
            raise ValueError(f"stage {stage.name!r} reads {late}, which do not run before it")
        graph[stage.name] = stage
    return MappingProxyType(graph)
