"""What a reduce stage sees: :class:`ReduceContext`, through which it reads and writes."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from pipeline.core import schema as S
from pipeline.core.config import Config
from pipeline.core.parquet import RowGroupWriter, sink_checked, write_table
from pipeline.engine import workdir as W
from pipeline.engine.stage import Limits, Stage, StageContractError


@dataclass
class ReduceContext:
    """What a reduce stage sees: the work dir, the config, the stage graph it runs in, its
    own temporary output dir, and its limits. Every read and write of a table goes
    through it."""

    out: Path
    cfg: Config
    stage: Stage
    tmp_dir: Path
    stages: Mapping[str, Stage]
    limits: Limits = field(default_factory=Limits)

    def _upstream(self, stage: str) -> Stage:
        if stage not in self.stage.reads:
            raise StageContractError(
                f"stage {self.stage.name!r} reads {stage!r}, which it does not declare in "
                f"reads {list(self.stage.reads)}"
            )
        return self.stages[stage]

    def files(self, stage: str, table: str) -> list[Path]:
        """Parquet files of an upstream table (map: one per input file; reduce: one)."""
        self._upstream(stage).schema_of(table)
        return W.upstream_files(self.out, self.stages, stage, table)

    def files_by_table(self, stage: str) -> dict[str, list[Path]]:
        """Parquet files of every table of an upstream stage, by table name: what a rule
        reading several of them takes (:data:`pipeline.rules.tables.ExtractFiles`)."""
        return {table: self.files(stage, table) for table in self._upstream(stage).tables}

    def read(self, stage: str, table: str) -> pl.LazyFrame:
        """An upstream table as a lazy frame, cast to the schema its stage declares."""
        schema = self._upstream(stage).schema_of(table)
        return S.scan(W.upstream_files(self.out, self.stages, stage, table), schema)

    def counts(self, stage: str) -> dict[str, Any]:
        """The counts an upstream reduce stage recorded (empty when it recorded none)."""
        self._upstream(stage)
        return W.reduce_counts(self.out, stage) or {}

    def manifests(self, stage: str) -> list[dict[str, Any]]:
        """Every manifest of an upstream map stage (one per input file: its ``source_key``,
        counts or failure), in file-key order."""
        self._upstream(stage)
        return [json.loads(p.read_text()) for p in W.manifest_paths(self.out, stage)]

    def failed_inputs(self, stage: str) -> list[dict[str, Any]]:
        """Input files of an upstream map stage that failed with this config and have no
        output (:func:`pipeline.engine.workdir.failed_inputs`)."""
        return W.failed_inputs(self.out, self._upstream(stage), self.cfg)

    def cache_dir(self) -> Path:
        """This stage's cache, kept across runs and configs (outside every stage folder, so a
        stage redone with another config, or a killed run, keeps what it already paid for)."""
        return W.cache_dir(self.out, self.stage.name)

    def summary_output(self) -> Path:
        """Path of this stage's run summary (:data:`pipeline.engine.workdir.SUMMARY`), inside
        its output folder."""
        return self.output(W.SUMMARY)

    def output(self, name: str) -> Path:
        """Path for an output file of this stage (inside the temp dir until success)."""
        p = self.tmp_dir / name
        p.parent.mkdir(parents=True, exist_ok=True)
        return p

    def table_path(self, table: str) -> Path:
        """Where a declared table of this stage is written."""
        self.stage.schema_of(table)
        return self.output(f"{table}.parquet")

    def write(self, table: str, frame: pl.DataFrame) -> int:
        """Write a declared table (checked against its schema); return its row count."""
        path = self.table_path(table)
        return write_table(frame, path, self.stage.schema_of(table), self.cfg, table)

    def writer(self, table: str) -> RowGroupWriter:
        """A :class:`pipeline.core.parquet.RowGroupWriter` of a declared table, written in batches."""
        path = self.table_path(table)
        return RowGroupWriter(path, self.stage.schema_of(table), self.cfg, table)

    def sink(self, table: str, frame: pl.LazyFrame) -> None:
        """Stream a lazy frame to a declared table (:func:`pipeline.core.parquet.sink_checked`)."""
        sink_checked(frame, self.stage.schema_of(table), self.table_path(table), self.cfg)

    def scratch(self) -> Path:
        """This run's scratch folder: the runner creates it and removes it when the stage
        returns or fails, before the stage's files are listed."""
        path = W.reduce_scratch_dir(self.tmp_dir)
        path.mkdir(exist_ok=True)
        return path
