"""The stage contract: what a stage declares (:class:`Stage`) and the batch sizes it may
use (:class:`Limits`); what a reduce stage sees is :class:`pipeline.engine.context.ReduceContext`.

A stage is a transform. It reads upstream tables with ``ctx.read(stage, table)`` (only
stages it declares in ``reads``, with the schema their owner declares) and writes the
tables it declares in ``outputs`` with ``ctx.write(table, frame)``; the executor
(:mod:`pipeline.engine.map_stage`, :mod:`pipeline.engine.reduce`) makes the context, the
temporary directory, the scratch folder, the markers and the manifests. The stage list itself is :data:`pipeline.stages.STAGES`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pyarrow as pa

COMMON_SECTION = "common"  # settings of every stage's writing (the Parquet codec)


# A map stage's fn reports an input file it could not read to its end as counts
# ``{FAILED: {"reason": ..., "lines_read": ...}}``: an outcome, not a crash (the runner
# records it in the file's manifest and writes no marker).
FAILED = "failed"


@dataclass(frozen=True)
class Stage:
    """A pipeline stage.

    Attributes:
        name: subcommand and output directory name.
        kind: ``"map"`` (per input file) or ``"reduce"`` (once over upstream outputs).
        reads: stages whose outputs this stage reads (``ctx.read`` refuses any other).
        config_sections: config sections that change this stage's output, besides
            ``[common]``, which changes every stage's (:attr:`hashed_sections`).
        fn: map: ``fn(source, outputs: dict[table, temp Path], cfg, progress) -> counts``;
            reduce: ``fn(ctx: ReduceContext) -> counts``.
        outputs: the tables this stage writes, with their schemas: a map stage writes one
            file per input file of each, a reduce stage ``<table>.parquet``. Files that are
            not tables (the release's) are written at ``ctx.output(name)``.
        help: one line for the CLI.
        always_run: a reduce stage the runner runs every time, because what it reads is
            not only upstream tables (the OpenAlex lookups: a rerun goes on with the ids not
            yet answered); its output is compared by :attr:`key_extra`, so the stages after
            it rerun only when it changed.
        key_extra: ``key_extra(stage_dir) -> str``, folded into the stage's key: what its
            written output depends on beyond config and upstream (for ``always_run``).
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
    outputs: tuple[tuple[str, pa.Schema], ...] = ()
    help: str = ""
    fn_many: Callable[..., Iterator[dict[str, Any]]] | None = None
    always_run: bool = False
    key_extra: Callable[[Path], str] | None = None

    @property
    def hashed_sections(self) -> tuple[str, ...]:
        """The config sections this stage's markers and outputs are keyed by."""
        return (COMMON_SECTION, *self.config_sections)

    @property
    def tables(self) -> tuple[str, ...]:
        """The names of the tables this stage writes, in declaration order."""
        return tuple(name for name, _ in self.outputs)

    def schema_of(self, table: str) -> pa.Schema:
        """The declared schema of ``table``.

        Raises:
            StageContractError: this stage declares no such table.
        """
        for name, schema in self.outputs:
            if name == table:
                return schema
        raise StageContractError(
            f"stage {self.name!r} declares no table {table!r} (it declares {list(self.tables)})"
        )


class StageContractError(RuntimeError):
    """A stage read a stage it does not declare, or wrote a table it does not declare: a
    bug in the stage, never a property of the input."""


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


@dataclass(frozen=True)
class Limits:
    """Batch sizes of the reduce stages: they bound memory, never change a byte of output
    (``tests/test_batch_sizes.py``), so they are outside the config and its hash; tests
    and ``bench/small_batches.py`` set them small to prove it."""

    works_merge_every: int = 8  # works: per-file aliases, links and partials combined every N files
    works_title_memo_strings: int = 2_000_000  # works: raw strings whose title keys are held
    works_table_batch_rows: int = 1_000_000  # works: works written at once to works.parquet
    negatives_batch_pairs: int = 5_000_000  # negatives: window pairs built at once
    release_batch_rows: int = 200_000  # release: reading-list rows per survey batch
    release_batch_aspect_rows: int = 300_000  # release: aspect rows per survey batch
    release_works_batch_rows: int = 250_000  # release: works keyed at once for the works table
    aspects_batch_rows: int = 2_000_000  # aspects: (aspect, candidate) rows per survey batch
    work_part_rows: int = 10_000_000  # rows of cites per part of visible.work_parts
    split_rows: int = 2_000_000  # rows of cites read at once while it is cut into parts

    def divided(self, by: int) -> Limits:
        """Every limit divided by ``by`` (at least 1)."""
        values = {k: max(v // by, 1) for k, v in self.__dict__.items()}
        return Limits(**values)
