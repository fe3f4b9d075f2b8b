"""Identical runs on one work directory (issue 41): each exits 0 or refuses in one line
naming the other run, and the work directory ends up as after one uninterrupted run.

Two crashes were found: the loser of two reduce-stage swaps renamed its folder onto the
winner's (``ENOTEMPTY``), and one run's clean-up walked into a folder another run renamed
or removed (``ENOENT``). The unit tests below pin each mechanism; the last one starts
identical runs of the CLI together (``bench/concurrent_runs.py`` runs it at size).
"""

from __future__ import annotations

import errno
import fcntl
import os
import random
import shutil
import threading
import time
from pathlib import Path

import polars as pl
import pyarrow as pa
import pytest

from bench.concurrent_runs import command, differences, outcome, run_env, snapshot, start_runs
from pipeline.core.config import Config
from pipeline.core.files import temp_tag
from pipeline.engine import workdir as W
from pipeline.engine.context import ReduceContext
from pipeline.engine.reduce import run_reduce
from pipeline.engine.stage import Stage, stage_graph

ROWS = pa.schema([("a", pa.string())])


def _stage(fn) -> tuple[Stage, dict[str, Stage]]:
    def write(ctx: ReduceContext) -> dict:
        fn()
        (ctx.scratch() / "part").mkdir()  # a scratch folder the runner removes
        ctx.write("rows", pl.DataFrame({"a": ["1", "2"]}))
        return {"rows": 2}

    stage = Stage("toy", "reduce", (), (), write, outputs=(("rows", ROWS),))
    return stage, stage_graph([stage])


def test_a_second_run_waits_for_a_stage_being_written_then_skips_it(tmp_path: Path) -> None:
    """Both runs found the stage not done; the second waits for the first one's lock and
    then finds it done, instead of writing it too and renaming over the first's folder."""
    release = threading.Event()
    calls: list[int] = []

    def slow() -> None:
        calls.append(1)
        release.wait(timeout=30)

    stage, stages = _stage(slow)
    results: dict[str, object] = {}

    def go(name: str) -> None:
        results[name] = run_reduce(stage, tmp_path, Config(), False, stages=stages)

    first = threading.Thread(target=go, args=("first",))
    first.start()
    while not calls:
        time.sleep(0.01)
    second = threading.Thread(target=go, args=("second",))
    second.start()
    time.sleep(0.3)  # time to reach the stage; it must be waiting, not writing
    assert len(calls) == 1 and second.is_alive()
    release.set()
    first.join(timeout=30)
    second.join(timeout=30)
    assert results["first"] is not None and results["second"] is None  # None: skipped as done
    assert len(calls) == 1
    assert W.reduce_done(tmp_path, "toy", Config(), stages)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["_locks", "toy"]  # no temp left


def test_without_locks_the_loser_of_a_swap_keeps_the_winners_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bucket mount has no locks (docs/MOUNTS.md): another run's folder may take the
    stage's place between this run's two renames. Its folder is kept, not a crash."""
    stage, stages = _stage(lambda: None)
    winner = tmp_path / "winner"
    run_reduce(stage, winner, Config(), False, stages=stages)

    def no_locks(fd: int, op: int) -> None:
        raise OSError(errno.ENOLCK, "No locks available")

    real_replace = os.replace

    def the_other_run_swaps_first(src, dst) -> None:
        if Path(src).name.startswith(".toy.tmp-"):  # this run's second rename
            shutil.copytree(winner / "toy", dst)  # the other run's first
        real_replace(src, dst)

    monkeypatch.setattr(fcntl, "flock", no_locks)
    monkeypatch.setattr(os, "replace", the_other_run_swaps_first)
    out = tmp_path / "out"
    out.mkdir()
    assert run_reduce(stage, out, Config(), False, stages=stages) is None
    assert snapshot(out / "toy") == snapshot(winner / "toy")
    assert [p.name for p in out.iterdir() if p.name.startswith(".")] == []


def test_cleanup_leaves_live_temp_folders_alone_and_skips_vanished_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another live run's temp folder is not entered; a folder it renames or removes while
    this run lists the work directory is passed over; a dead run's leftovers go."""
    live = W.reduce_temp_dir(tmp_path, "labels")  # this process: alive
    (live / "_scratch").mkdir(parents=True)
    inside = live / "_scratch" / f"x.parquet.tmp-{temp_tag().split('-')[1]}-999999999-abc"
    inside.write_text("the live run's own business")
    old = W.reduce_old_dir(tmp_path, "labels")
    old.mkdir()
    dead = tmp_path / f".split.tmp-{temp_tag().split('-')[1]}-999999999-abc"
    dead.mkdir()
    legacy_old = tmp_path / ".works.old-0123abcd"
    legacy_old.mkdir()
    going = tmp_path / "eval" / "cache"
    going.mkdir(parents=True)
    real_scandir = os.scandir

    def renamed_meanwhile(path):
        if not isinstance(path, int) and Path(path) == going:
            shutil.rmtree(going)  # the other run, between this run's listing and descent
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", renamed_meanwhile)
    W.clean_stale_temps(tmp_path)
    assert inside.exists() and old.exists()
    assert not dead.exists() and not legacy_old.exists()


@pytest.mark.slow
def test_identical_runs_started_together_end_as_one_run(tmp_path: Path) -> None:
    """3 runs of one command at once, 3 times with seeded delays (0-0.5 s): every run exits
    0 or refuses in one line naming the other run, and the work directory equals an
    uninterrupted run's, file for file (timings aside: bench.concurrent_runs.snapshot)."""
    from pipeline.synth.demo_corpus import build_corpus

    corpus = tmp_path / "corpus"
    build_corpus(corpus, 150)
    env = run_env()
    ref = tmp_path / "reference"
    (run,) = start_runs(command(corpus, ref, 1), [0.0], env)
    assert run.returncode == 0, run.stderr
    want = snapshot(ref)
    rng = random.Random(41)
    for trial in range(3):
        out = tmp_path / f"trial{trial}"
        delays = [round(rng.uniform(0, 0.5), 3) for _ in range(3)]
        runs = start_runs(command(corpus, out, 1), delays, env)
        crashed = [r for r in runs if outcome(r.returncode, r.stderr) == "crash"]
        assert not crashed, (
            f"trial {trial} {delays}: rc {crashed[0].returncode}: {crashed[0].stderr}"
        )
        assert differences(snapshot(out), want) == [], f"trial {trial} {delays}"
