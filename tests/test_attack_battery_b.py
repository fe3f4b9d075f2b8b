"""Issue 21, cases 1, 2, 3, 7, 9, 10, 12, 13: one hostile record or damaged work-directory
file never stops, hangs or quietly passes a run, and neighbours on one --out do not crash
each other."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest

from pipeline import api
from pipeline.cli import main
from pipeline.core import schema as S
from pipeline.engine import workdir as W
from pipeline.engine.locks import run_lock
from pipeline.evaluate.evalset import EvalSetError
from pipeline.stages.extract import records, rows
from pipeline.stages.extract.structure import Occurrence, structure
from tests.test_negatives import synthetic_release_dir
from tests.test_verify import _flip_byte, _outputs, _run

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def work(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """(untouched work dir, a copy to damage, the corpus both were built from)."""
    original = synthetic_release_dir(tmp_path_factory)
    copy = tmp_path / "out"
    shutil.copytree(original, copy)
    return original, copy, original.parent / "corpus"


def _record(sample_lines: list[bytes], i: int, **changes: object) -> dict:
    rec = json.loads(sample_lines[i])
    rec["metadata"] = dict(rec["metadata"], **changes.pop("metadata", {}))  # type: ignore[arg-type]
    rec.update(changes)
    return rec


def _paragraph(number: str, sec_type: str, heading: str = "Heading") -> dict:
    return {"section": heading, "sec_number": number, "sec_type": sec_type, "cite_spans": []}


def _extract(tmp_path: Path, records: list[dict]) -> tuple[Path, dict]:
    """Extract ``records`` (one file) in this process; return the out dir and the manifest."""
    p = tmp_path / "in.jsonl"
    p.write_bytes(b"\n".join(json.dumps(r).encode() for r in records) + b"\n")
    out = tmp_path / "out"
    api.extract(p, out, workers=1)
    (manifest,) = [json.loads(m.read_text()) for m in W.manifest_paths(out, "extract")]
    return out, manifest


# --------------------------------------------------------------------- 1: no growth beyond the record
def test_1_a_huge_gap_in_section_numbers_costs_no_more_than_the_record() -> None:
    """Sections 1 and 999999999 with subsections between: the subsections are the missing
    section 2, and no list of the numbers between is built (it hung at 4 GB)."""
    for far in ("999999999", "99999999999"):
        occs = [Occurrence("Intro", "1", 1, {}), Occurrence("Sub", "1", 2, {})]
        occs += [Occurrence("Sub", "2", 2, {}), Occurrence("Far", far, 1, {})]
        t0 = time.monotonic()
        got = structure(occs)
        assert time.monotonic() - t0 < 1.0
        tops = [(("u" if o.unnamed else "") + o.number, got[o.top].number) for o in got]
        if far == "999999999":
            assert tops == [("1", "1"), ("u2", "2"), ("1", "2"), ("2", "2"), (far, far)]
        assert len(got) <= len(occs) + 1


# --------------------------------------------------------------------- 2: any error is that line's reject
def test_2_a_superscript_subsection_number_is_not_a_number(
    tmp_path: Path, sample_lines: list[bytes]
) -> None:
    body = [_paragraph("1", "section"), _paragraph("²", "subsection"), _paragraph("3", "section")]
    rec = _record(sample_lines, 0, body_text=body)
    occs = [Occurrence("a", "1", 1, {}), Occurrence("b", "²", 2, {}), Occurrence("c", "3", 1, {})]
    assert len(structure(occs)) >= 3
    out, manifest = _extract(tmp_path, [rec, json.loads(sample_lines[1])])
    assert manifest["counts"]["papers_written"] == 2
    assert manifest["counts"]["rejects_total"] == 0


def test_2_an_error_of_any_type_while_extracting_is_a_counted_reject(
    tmp_path: Path, sample_lines: list[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever extract_record raises is that line's reject (file and line named), and the
    rows it appended before failing are dropped."""
    bad_id = json.loads(sample_lines[1])["metadata"]["id"]
    real = rows.occurrences

    def fail_for_one(rec):  # noqa: ANN001, ANN202
        if rec.metadata.id == bad_id:
            raise KeyError("boom")
        return real(rec)

    monkeypatch.setattr(rows, "occurrences", fail_for_one)
    records = [json.loads(line) for line in sample_lines[:3]]
    out, manifest = _extract(tmp_path, records)
    counts = manifest["counts"]
    assert (counts["papers_written"], counts["rejects"]) == (2, {"extract_error": 1})
    rejects = pl.read_parquet(out / "extract" / "rejects")
    row = rejects.row(0, named=True)
    assert (row[S.LINE_NUMBER], row[S.SOURCE_FILE], row["reason"]) == (
        2,
        "in.jsonl",
        "extract_error",
    )
    assert "KeyError" in row["detail"]
    for table in ("papers", "references", "sections"):
        ids = pl.read_parquet(out / "extract" / table)[S.PAPER_ID].to_list()
        assert bad_id not in ids, table
    papers = pl.read_parquet(out / "extract" / "papers")
    assert papers.height == 2 and papers[S.PAPER_ID].null_count() == 0


# --------------------------------------------------------------------- 3: dates past every calendar
def test_3_a_version_date_past_any_year_is_no_date(
    tmp_path: Path, sample_lines: list[bytes]
) -> None:
    assert records.parse_version_date("Thu, 22 Dec 99999999999999999999 15:08:58 GMT") is None
    assert records.parse_version_date("Thu, 22 Dec 2022 15:08:58 GMT").year == 2022
    huge = [{"version": "v1", "created": "Thu, 22 Dec 99999999999999999999 15:08:58 GMT"}]
    rec = _record(sample_lines, 0, metadata={"versions": huge})
    out, manifest = _extract(tmp_path, [rec])
    assert manifest["counts"]["papers_written"] == 1
    papers = pl.read_parquet(out / "extract" / "papers")
    assert papers[S.FIRST_VERSION_DATE].to_list() == [None]


# --------------------------------------------------------------------- 7: an id of blanks is no id
def test_7_a_blank_paper_id_is_missing(tmp_path: Path, sample_lines: list[bytes]) -> None:
    rec = _record(sample_lines, 0, metadata={"id": "   "}, paper_id="   ")
    out, manifest = _extract(tmp_path, [rec])
    assert manifest["counts"]["rejects"] == {"missing_paper_id": 1}
    assert pl.read_parquet(out / "extract" / "papers").height == 0


# --------------------------------------------------------------------- 9: a damaged record means redo
def _cut_in_half(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def test_9_half_written_markers_manifests_and_success_are_redone(work, caplog) -> None:
    original, out, corpus = work
    (marker,) = W.marker_paths(out, "extract")
    rounds = [
        [marker, W.success_path(out, "works"), W.success_path(out, "release")],
        [W.manifest_path(out, "extract", marker.stem)],
    ]
    caplog.set_level(logging.WARNING, logger="pipeline")
    for damaged in rounds:
        for p in damaged:
            _cut_in_half(p)
        caplog.clear()
        assert main(["status", "--out", str(out)]) == 0
        for p in damaged:
            assert f"{p} is damaged" in caplog.text, p
        caplog.clear()
        assert _run(corpus, out) == 0
        for p in damaged:
            assert str(p) in caplog.text, f"the rerun should name {p}"
            assert W.read_record(p) is not None
        assert _outputs(out) == _outputs(original)


def test_9_a_reduce_stage_alone_refuses_over_a_damaged_marker(work, caplog) -> None:
    _, out, corpus = work
    marker = W.marker_paths(out, "extract")[0]
    marker.write_text('{"key": {"stage": "extract", "ident')
    assert main(["works", "--out", str(out), "--force"]) == 2
    assert str(marker) in caplog.text
    from pipeline.jobs import extract_missing
    from pipeline.stages import GRAPH  # noqa: F401 - the graph jobs reads

    assert len(extract_missing(out, str(corpus), api.config_of(None))) == 1
    api.extract(corpus, out, workers=1)
    api.reduce("works", out)


# --------------------------------------------------------------------- 10: final outputs verified on every run
def test_10_a_same_size_flip_in_the_release_is_redone_by_a_plain_run(work, caplog) -> None:
    original, out, corpus = work
    target = W.eval_file(out)
    _flip_byte(target)
    caplog.set_level(logging.WARNING, logger="pipeline")
    assert _run(corpus, out) == 0  # no --verify: the release is cheap to hash on every run
    assert f"{target} has sha256" in caplog.text
    assert _outputs(out) == _outputs(original)


def test_10_evaluate_refuses_a_release_file_that_differs_from_its_record(
    work, capsys, caplog
) -> None:
    _, out, _ = work
    target = W.eval_file(out)
    _flip_byte(target)
    eval_out = out.parent / "eval_out"
    assert main(["evaluate", "--eval-file", str(W.release_dir(out)), "--out", str(eval_out)]) == 2
    assert f"{target} has sha256" in caplog.text and "release record" in caplog.text
    assert not (eval_out / "eval_results.json").exists()
    # a copy of the release folder without its _SUCCESS.json: eval_metadata.json still says
    copy = out.parent / "copy"
    shutil.copytree(W.release_dir(out), copy)
    (copy / W.SUCCESS).unlink()
    with pytest.raises(EvalSetError, match="eval_metadata.json"):
        api.evaluate(copy, out=eval_out, learned=False)


# --------------------------------------------------------------------- 12: pids are reused
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_12_a_dead_owners_temp_is_removed_when_its_pid_is_reused(tmp_path: Path) -> None:
    """A temp of a dead process whose pid now belongs to a live one (here: this process) is
    a leftover; it was kept forever when owners were judged by pid alone."""
    from pipeline.core.files import owner_alive, temp_tag

    code = "from pipeline.core.files import temp_tag; print(temp_tag())"
    child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    dead_tag = child.stdout.strip()
    host, dead_pid = dead_tag.split("-")[1:3]
    reused = dead_tag.replace(f"-{host}-{dead_pid}-", f"-{host}-{os.getpid()}-", 1)
    assert reused != dead_tag
    d = tmp_path / "extract" / "papers"
    d.mkdir(parents=True)
    leftover = d / f"x.parquet.{reused}"
    live = d / f"y.parquet.{temp_tag()}"
    for p in (leftover, live):
        p.write_text("partial")
    assert not owner_alive(leftover.name) and owner_alive(live.name)
    W.clean_stale_temps(tmp_path)
    assert live.exists() and not leftover.exists()


# --------------------------------------------------------------------- 13: one config at a time on one --out
_HOLD = """
import sys, time
from pathlib import Path
from pipeline.engine.locks import run_lock
from pipeline.core.config import load_config
with run_lock(Path(sys.argv[1]), load_config(sys.argv[2])):
    print("held", flush=True)
    time.sleep(600)
"""


def _other_config(tmp_path: Path) -> Path:
    path = tmp_path / "other.toml"
    path.write_text("[surveys]\nmin_resolved_refs = 5\n")
    return path


def test_13_a_run_with_another_config_is_refused_while_same_config_runs_share(
    tmp_path: Path, sample_lines: list[bytes], caplog
) -> None:
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_bytes(b"\n".join(sample_lines[:3]) + b"\n")
    out, other = tmp_path / "out", _other_config(tmp_path)
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD, str(out), str(other)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        args = ["extract", "--input", str(corpus), "--out", str(out), "--workers", "1"]
        assert main(args) == 2
        assert "is in use by a run with another config" in caplog.text
        assert not W.marker_paths(out, "extract")
        assert main([*args, "--config", str(other)]) == 0  # the same config: shares it
    finally:
        holder.kill()
        holder.wait()
    assert main(args) == 0  # a killed holder holds nothing


def test_13_runs_with_two_configs_started_together_never_crash(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Two identical runs and one with another config, started together on one --out:
    the identical ones cooperate, the other config is refused in one line (before, one of
    them read a Parquet file the other was replacing and crashed)."""
    corpus = synthetic_release_dir(tmp_path_factory).parent / "corpus"
    out, other = tmp_path / "out", _other_config(tmp_path)
    base = [sys.executable, "-m", "pipeline", "run", "--input", str(corpus), "--out", str(out)]
    base += ["--workers", "1"]
    commands = [base, base, [*base, "--config", str(other)]]
    procs = [
        subprocess.Popen(c, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        for c in commands
    ]
    results = [(p.wait(timeout=600), p.stderr.read()) for p in procs]
    codes = [rc for rc, _ in results]
    assert codes in ([0, 0, 2], [2, 2, 0]), results
    for rc, err in results:
        if rc == 2:
            (line,) = err.strip().splitlines()
            assert "is in use by a run with another config" in line


def test_13_without_file_locks_a_run_goes_ahead_with_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog
) -> None:
    """A Jobs bucket mount has no file locking (MOUNTS.md): flock fails there."""
    import errno
    import fcntl

    def no_locks(fd: int, op: int) -> None:
        raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))

    monkeypatch.setattr(fcntl, "flock", no_locks)
    ran = False
    with run_lock(tmp_path / "out", api.config_of(None)):
        ran = True
    assert ran and "has no file locks" in caplog.text and "MOUNTS.md" in caplog.text
