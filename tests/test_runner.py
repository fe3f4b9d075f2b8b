"""Runner: atomic writes, markers, resume after kill -9, workers, shards, force."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipeline import api
from pipeline.cli import main
from pipeline.core.config import ConfigError, load_config
from pipeline.core.files import atomic_path
from pipeline.corpus.sources import InputError, resolve_inputs, shard

ROOT = Path(__file__).resolve().parents[1]


def _corpus(tmp: Path, sample_lines: list[bytes], files: int) -> Path:
    """``files`` JSONL files, each a copy of the real sample (about 10 MB each)."""
    d = tmp / "corpus"
    d.mkdir()
    body = b"\n".join(sample_lines) + b"\n"
    for i in range(files):
        (d / f"part_{i:02d}.jsonl").write_bytes(body)
    return d


def _parquet_bytes(out: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(out)): p.read_bytes()
        for p in sorted((out / "extract").rglob("*.parquet"))
    }


def _mtimes(out: Path) -> dict[str, int]:
    return {p.name: p.stat().st_mtime_ns for p in (out / "extract" / "_markers").glob("*.json")}


def test_atomic_path_removes_temp_on_failure(tmp_path: Path) -> None:
    final = tmp_path / "x.txt"
    with pytest.raises(RuntimeError), atomic_path(final) as tmp:
        tmp.write_text("partial")
        raise RuntimeError("boom")
    assert not final.exists()
    assert list(tmp_path.iterdir()) == []


def test_kill_minus_9_then_resume_is_byte_identical(
    tmp_path: Path, sample_lines: list[bytes]
) -> None:
    corpus = _corpus(tmp_path, sample_lines, 6)
    reference = tmp_path / "reference"
    api.extract(corpus, reference, workers=1)

    out = tmp_path / "killed"
    cmd = [
        sys.executable,
        "-m",
        "pipeline",
        "extract",
        "--input",
        str(corpus),
        "--out",
        str(out),
        "--workers",
        "1",
    ]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    markers = out / "extract" / "_markers"
    deadline = time.monotonic() + 60
    while (
        time.monotonic() < deadline
        and len(list(markers.glob("*.json")) if markers.exists() else []) < 2
    ):
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    before = _mtimes(out)
    assert 2 <= len(before) < 6, "the kill should land part-way through the corpus"

    api.extract(corpus, out, workers=2)
    after = _mtimes(out)
    assert {k: after[k] for k in before} == before, "finished files must not be redone"
    assert len(after) == 6
    assert _parquet_bytes(out) == _parquet_bytes(reference)
    assert not list(out.rglob("*.tmp-*")), "temp files of the killed run are cleaned"


def test_rerun_skips_and_force_redoes(tmp_path: Path, sample_lines: list[bytes], caplog) -> None:
    corpus = _corpus(tmp_path, sample_lines[:5], 3)
    out = tmp_path / "out"
    api.extract(corpus, out, workers=2)
    first = _mtimes(out)
    caplog.clear()
    caplog.set_level(logging.INFO, logger="pipeline")
    api.extract(corpus, out, workers=1)
    assert _mtimes(out) == first
    assert sum(r.message.startswith("extract: skip ") for r in caplog.records) == 3
    api.extract(corpus, out, workers=1, force=True)
    assert all(_mtimes(out)[k] > v for k, v in first.items())


def test_changed_input_or_config_redoes_that_file(
    tmp_path: Path, sample_lines: list[bytes]
) -> None:
    corpus = _corpus(tmp_path, sample_lines[:5], 2)
    out = tmp_path / "out"
    api.extract(corpus, out, workers=1)
    first = _mtimes(out)
    time.sleep(0.01)
    (corpus / "part_01.jsonl").write_bytes(b"\n".join(sample_lines[:4]) + b"\n")
    api.extract(corpus, out, workers=1)
    second = _mtimes(out)
    changed = {k for k in first if second[k] != first[k]}
    assert len(changed) == 1 and "part_01" in changed.pop()
    cfg = tmp_path / "c.toml"
    cfg.write_text("[extract]\nbatch_papers = 2\n")
    api.extract(corpus, out, config=cfg)
    assert all(_mtimes(out)[k] != v for k, v in second.items())


def test_shards_partition_the_sorted_files(tmp_path: Path, sample_lines: list[bytes]) -> None:
    corpus = _corpus(tmp_path, sample_lines[:2], 5)
    files = resolve_inputs([str(corpus)])
    parts = [shard(files, i, 3) for i in range(3)]
    assert sorted(f.path for p in parts for f in p) == [f.path for f in files]
    assert [f.path for f in parts[1]] == [files[1].path, files[4].path]
    out = tmp_path / "out"
    for i in range(3):
        api.extract(corpus, out, shard_of=(i, 3))
    assert len(_mtimes(out)) == 5
    with pytest.raises(InputError):
        shard(files, 3, 3)


def test_status_reports_counts(tmp_path: Path, sample_lines: list[bytes], capsys) -> None:
    corpus = _corpus(tmp_path, sample_lines[:4], 2)
    out = tmp_path / "out"
    api.extract(corpus, out, workers=1)
    capsys.readouterr()
    assert main(["status", "--json", "--out", str(out)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["extract"]["files_done"] == 2
    assert report["extract"]["papers_written"] == 8
    assert main(["status", "--out", str(out)]) == 0
    table = capsys.readouterr().out.splitlines()
    # a table in pipeline order: extract first, release last
    assert [line.split()[0] for line in table] == [
        "stage",
        "extract",
        "works",
        "openalex",
        "surveys",
        "labels",
        "negatives",
        "split",
        "aspects",
        "release",
    ]
    assert table[1].split()[1] == "done" and "8 papers" in table[1]
    assert table[2].split()[1:3] == ["not", "run"]


def test_errors_are_clear(tmp_path: Path) -> None:
    assert (
        main(["extract", "--input", str(tmp_path / "nothing*.jsonl"), "--out", str(tmp_path)]) == 2
    )
    bad = tmp_path / "bad.toml"
    bad.write_text("[surveys]\nmin_resolved_refz = 3\n")
    with pytest.raises(ConfigError, match="min_resolved_refz"):
        load_config(bad)
    bad.write_text("[surveys]\nmin_resolved_refs = 'many'\n")
    with pytest.raises(ConfigError, match="expected int"):
        load_config(bad)


def test_duplicate_papers_across_files_are_counted(
    tmp_path: Path, sample_lines: list[bytes]
) -> None:
    corpus = _corpus(tmp_path, sample_lines[:3], 2)  # the same 3 papers in two files
    out = tmp_path / "out"
    api.extract(corpus, out, workers=1)
    summary = json.loads((out / "extract" / "_summary.json").read_text())
    assert summary["papers_written"] == 6
    assert summary["unique_papers"] == 3
    assert summary["duplicate_papers_across_files"] == 3


def test_moved_corpus_is_refused_then_pruned(tmp_path: Path, sample_lines: list[bytes]) -> None:
    """Outputs of files not in --input would join later stages: refused, or pruned on request."""
    corpus = _corpus(tmp_path, sample_lines[:3], 2)
    out = tmp_path / "out"
    api.extract(corpus, out, workers=1)
    moved = tmp_path / "moved"
    corpus.rename(moved)
    assert main(["extract", "--input", str(moved), "--out", str(out), "--workers", "1"]) == 2
    assert len(_mtimes(out)) == 2
    args = ["extract", "--input", str(moved), "--out", str(out), "--workers", "1", "--prune"]
    assert main(args) == 0
    assert len(_mtimes(out)) == 2
    assert len(list((out / "extract" / "papers").glob("*.parquet"))) == 2


def test_concurrent_runs_keep_each_others_temp_files(tmp_path: Path) -> None:
    from pipeline.core.files import temp_tag
    from pipeline.engine.workdir import clean_stale_temps

    d = tmp_path / "extract" / "papers"
    d.mkdir(parents=True)
    live = d / f"x.parquet.{temp_tag()}"  # this process: alive
    dead = d / f"y.parquet.tmp-{temp_tag().split('-')[1]}-999999999-abc"  # pid that cannot exist
    other_host = d / "z.parquet.tmp-elsewhere-1-abc"
    for p in (live, dead, other_host):
        p.write_text("partial")
    clean_stale_temps(tmp_path)
    assert live.exists() and other_host.exists() and not dead.exists()


def test_later_stages_wait_for_every_shard(tmp_path: Path, sample_lines: list[bytes]) -> None:
    corpus = _corpus(tmp_path, sample_lines[:3], 3)
    out = tmp_path / "out"
    api.extract(corpus, out, shard_of=(0, 2))
    assert main(["works", "--out", str(out)]) == 2  # 2 of 3 files done: refused
    assert not (out / "works").exists()
    assert main(["run", "--out", str(out)]) == 2
    api.extract(corpus, out, shard_of=(1, 2))
    api.reduce("works", out)


def _children(pid: int) -> list[int]:
    kids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        if int(fields[1]) == pid:
            kids.append(int(stat.parent.name))
    return kids


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_workers_die_with_the_main_process(
    tmp_path: Path, sample_lines: list[bytes], sig: signal.Signals
) -> None:
    """Killing the main process during extract stops every worker within seconds."""
    corpus = _corpus(tmp_path, sample_lines, 8)
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "pipeline", "extract", "--input", str(corpus)]
    proc = subprocess.Popen(
        [*cmd, "--out", str(out), "--workers", "2"],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        workers: list[int] = []
        while time.monotonic() < deadline and proc.poll() is None:
            workers = [p for p in _children(proc.pid) if _alive(p)]
            if len(workers) >= 2 and (out / "extract" / "_markers").exists():
                break
            time.sleep(0.02)
        assert len(workers) >= 2, "the workers should be running"
        os.kill(proc.pid, sig)
        proc.wait()
        killed_at = time.monotonic()
        while time.monotonic() - killed_at < 10 and any(_alive(p) for p in workers):
            time.sleep(0.05)
        assert not any(_alive(p) for p in workers), "workers outlived the main process by 10 s"
        markers = set((out / "extract" / "_markers").glob("*.json"))
        time.sleep(1.0)
        assert set((out / "extract" / "_markers").glob("*.json")) == markers
    finally:
        if proc.poll() is None:
            proc.kill()


def test_shards_with_different_input_lists_are_refused(
    tmp_path: Path, sample_lines: list[bytes], caplog
) -> None:
    corpus = _corpus(tmp_path, sample_lines[:2], 6)
    fewer = tmp_path / "fewer"
    fewer.mkdir()
    for p in sorted(corpus.iterdir())[:4]:
        (fewer / p.name).write_bytes(p.read_bytes())
    out = tmp_path / "out"
    api.extract(corpus, out, shard_of=(0, 2))
    # a shard started later with another list is refused at once, naming both lists
    assert main(["extract", "--input", str(fewer), "--out", str(out), "--shard", "1/2"]) == 2
    assert str(corpus) in caplog.text and str(fewer) in caplog.text
    # shards started at the same time only meet in later stages: those refuse too
    from pipeline.corpus.sources import resolve_inputs
    from pipeline.engine.workdir import write_shard_record

    keys = [f.key for f in resolve_inputs([str(fewer)])]
    write_shard_record(out, "extract", 1, 2, [str(fewer)], keys)
    caplog.clear()
    assert main(["works", "--out", str(out)]) == 2
    (message,) = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert "different --input lists" in message
    assert f"{corpus} (6 files)" in message and f"{fewer} (4 files)" in message
    assert not (out / "works").exists()


def test_disk_full_is_one_line_and_rc_2(
    tmp_path: Path, sample_lines: list[bytes], monkeypatch: pytest.MonkeyPatch, caplog
) -> None:
    import errno

    import pipeline.engine.workdir

    def full(*_args, **_kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(pipeline.engine.workdir, "file_record", full)
    corpus = _corpus(tmp_path, sample_lines[:2], 1)
    assert main(["extract", "--input", str(corpus), "--out", str(tmp_path / "o")]) == 2
    (message,) = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert "No space left on device" in message and "\n" not in message


def test_the_runner_and_the_jobs_judge_an_input_done_alike(
    tmp_path: Path, sample_lines: list[bytes]
) -> None:
    """``workdir.input_problem`` is what ``run_map`` skips by and what ``jobs.extract_missing``
    waits on: a fresh file, a finished one, a damaged manifest, another config."""
    from pipeline import jobs
    from pipeline.engine import workdir as W
    from pipeline.engine.workdir import input_problem
    from pipeline.stages import GRAPH

    corpus, out = tmp_path / "in", tmp_path / "out"
    corpus.mkdir()
    (corpus / "a.jsonl").write_bytes(b"\n".join(sample_lines[:2]) + b"\n")
    cfg, stage = load_config(), GRAPH["extract"]
    (source,) = resolve_inputs([str(corpus)])
    assert input_problem(stage, source, out, cfg) == "not done"
    assert len(jobs.extract_missing(out, str(corpus), cfg)) == 1
    api.extract(corpus, out, workers=1)
    assert input_problem(stage, source, out, cfg) is None
    assert jobs.extract_missing(out, str(corpus), cfg) == []
    other = load_config(overrides={"extract": {"batch_papers": 7}})
    assert input_problem(stage, source, out, other) == "stale"
    assert len(jobs.extract_missing(out, str(corpus), other)) == 1
    manifest = W.manifest_path(out, stage.name, source.key)
    manifest.write_text('{"counts": ')
    assert f"its manifest {manifest} is damaged" == input_problem(stage, source, out, cfg)
    assert len(jobs.extract_missing(out, str(corpus), cfg)) == 1
    api.extract(corpus, out, workers=1)  # redone
    assert input_problem(stage, source, out, cfg) is None
