"""The stage contract (``pipeline.engine.stage``, ``pipeline.engine.context``): a stage reads
only what it declares, writes only the tables it declares with their declared schemas, and
the runner owns its scratch folder; the limits bound batches without entering the config."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import polars as pl
import pytest

from pipeline.core import schema as S
from pipeline.core.config import Config
from pipeline.engine.context import ReduceContext
from pipeline.engine.reduce import run_reduce
from pipeline.engine.stage import Limits, Stage, StageContractError, stage_graph
from pipeline.stages import GRAPH, STAGES


def _ctx(tmp_path: Path, stage: Stage, stages=GRAPH) -> ReduceContext:
    return ReduceContext(out=tmp_path, cfg=Config(), stage=stage, tmp_dir=tmp_path, stages=stages)


def test_a_stage_reads_only_the_stages_it_declares(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path, GRAPH["surveys"])  # reads extract and works
    assert ctx.read("works", "cites").collect_schema().names() == S.CITES.names
    with pytest.raises(StageContractError, match="does not declare"):
        ctx.read("labels", "labels")
    with pytest.raises(StageContractError, match="does not declare"):
        ctx.files("negatives", "negatives")
    with pytest.raises(StageContractError, match="declares no table"):
        ctx.read("works", "no_such_table")


def test_a_stage_writes_only_its_declared_tables_with_their_schemas(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path, GRAPH["surveys"])
    with pytest.raises(StageContractError, match="declares no table"):
        ctx.write("labels", pl.DataFrame())
    with pytest.raises(ValueError, match="surveys"):  # a frame without the schema's columns
        ctx.write("surveys", pl.DataFrame({"x": [1]}))


def test_every_table_read_has_one_declared_owner() -> None:
    """What one stage writes another reads under the same schema: the owner's declaration."""
    owners: dict[str, str] = {}
    for stage in STAGES:
        for table in stage.tables:
            assert table not in owners, f"{table} written by {owners.get(table)} and {stage.name}"
            owners[table] = stage.name
    assert owners["cites"] == "works" and owners["papers"] == "extract"


def test_the_runner_removes_the_scratch_folder_even_when_the_stage_fails(tmp_path: Path) -> None:
    seen: list[Path] = []

    def failing(ctx: ReduceContext) -> dict:
        scratch = ctx.scratch()
        (scratch / "part.parquet").write_bytes(b"x")
        seen.append(scratch)
        raise RuntimeError("boom")

    def fine(ctx: ReduceContext) -> dict:
        (ctx.scratch() / "part.parquet").write_bytes(b"x")
        ctx.write("rows", pl.DataFrame({"a": ["1"]}))
        return {"ok": 1}

    import pyarrow as pa

    schema = pa.schema([("a", pa.string())])
    bad = Stage("bad", "reduce", (), (), failing, outputs=(("rows", schema),))
    good = Stage("good", "reduce", (), (), fine, outputs=(("rows", schema),))
    stages = stage_graph([bad, good])
    with pytest.raises(RuntimeError, match="boom"):
        run_reduce(bad, tmp_path, Config(), force=True, stages=stages)
    assert seen and not seen[0].exists()
    manifest = run_reduce(good, tmp_path, Config(), force=True, stages=stages)
    assert manifest is not None and sorted(manifest["files"]) == ["rows.parquet"]
    assert not (tmp_path / "good" / "_scratch").exists()


def test_limits_are_not_config() -> None:
    """Batch sizes never change output (tests/test_batch_sizes.py), so they stay out of the
    config and its hash: a release records its config, not how it was batched."""
    config_fields = {f.name for section in dataclasses.fields(Config) for f in
                     dataclasses.fields(getattr(Config(), section.name))}  # fmt: skip
    assert not {f.name for f in dataclasses.fields(Limits)} & config_fields
    assert Limits().divided(7).works_merge_every == 1
    assert Limits().divided(7).release_batch_rows == 200_000 // 7
