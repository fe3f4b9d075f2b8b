"""Output bytes depend neither on the reduce stages' batch sizes nor on Polars' thread
count.

The batch sizes are the stages' :class:`pipeline.engine.stage.Limits`: ``works`` merges
per-file partials every ``works_merge_every`` files, holds the title keys of at most
``works_title_memo_strings`` raw strings across files, sorts ``cites`` in paper-id ranges
and writes ``works`` in work-id ranges of ``works_table_batch_rows`` works,
``negatives`` builds candidate pairs in batches of at most ``negatives_batch_pairs`` (in
survey-date order, each reading its own dates' prior-count rows), ``negatives`` and
``split`` cut the works into parts of ``work_part_rows`` citations, ``aspects`` and
``release`` write their rows in batches of ``aspects_batch_rows`` and
``release_batch_rows``: with every one of them at its smallest, every output file has the
same bytes.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.engine.stage import Limits
from tests.test_negatives import _cfg, run_stage, synthetic_release_dir

STAGES = ("works", "openalex", "negatives", "split", "aspects", "release")


def _hashes(out: Path) -> dict[str, str]:
    return {
        p.relative_to(out).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for stage in STAGES
        for p in sorted((out / stage).rglob("*"))
        if p.is_file() and not p.name.startswith("_")
    }


@pytest.fixture(scope="module")
def default_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The session's synthetic run with its release written again by the stage alone: that
    run's card also holds the baselines' results. Every stage at the default limits and this
    process's Polars thread count (only read by the tests here)."""
    out = tmp_path_factory.mktemp("default_run") / "out"
    shutil.copytree(synthetic_release_dir(tmp_path_factory), out)
    run_stage(out, "release", _cfg())
    return out


def test_outputs_do_not_depend_on_batch_sizes(tmp_path: Path, default_run: Path) -> None:
    out = tmp_path / "out"
    shutil.copytree(default_run, out)
    before = _hashes(out)
    assert any(k.endswith("_survey_reading_lists.parquet") for k in before)
    assert {k.split("/")[0] for k in before} == set(STAGES)

    smallest = Limits(
        works_merge_every=1,
        works_title_memo_strings=3,  # title keys of almost every raw string computed again
        works_table_batch_rows=5,  # works.parquet written five works at a time
        negatives_batch_pairs=1,  # one survey per batch
        release_batch_rows=3,
        release_batch_aspect_rows=3,
        release_works_batch_rows=5,  # the works table keyed five works at a time
        aspects_batch_rows=3,  # one survey's aspect rows per batch
        # works cut into parts (cites split into files, read a chunk at a time)
        work_part_rows=40,
        split_rows=7,
    )
    for stage in STAGES:
        shutil.rmtree(out / stage)
        run_stage(out, stage, _cfg(), smallest)
    assert _hashes(out) == before


_RUN_STAGES = """
import sys
from pathlib import Path
from tests.test_batch_sizes import STAGES
from tests.test_negatives import _cfg, run_stage
out = Path(sys.argv[1])
for stage in STAGES:
    run_stage(out, stage, _cfg())
"""


def test_outputs_do_not_depend_on_thread_count(tmp_path: Path, default_run: Path) -> None:
    """The stages on another Polars thread count (fixed when Polars is imported, so in a
    process of its own) write the bytes of the default run on this process's count."""
    import polars as pl

    other = 1 if pl.thread_pool_size() > 1 else 3
    root = Path(__file__).resolve().parents[1]
    out = tmp_path / f"threads{other}"
    shutil.copytree(default_run, out)
    for stage in STAGES:
        shutil.rmtree(out / stage)
    env = {**os.environ, "POLARS_MAX_THREADS": str(other), "PYTHONPATH": str(root)}
    subprocess.run([sys.executable, "-c", _RUN_STAGES, str(out)], env=env, cwd=root, check=True)
    got = _hashes(out)
    assert any(k.endswith("negatives.parquet") for k in got)
    assert got == _hashes(default_run)
