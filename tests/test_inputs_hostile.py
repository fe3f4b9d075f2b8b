"""Inputs that used to stop, slow down or silently shorten a corpus run (issue 21, cases
4, 5, 6 and 8), and the 2024 layout's placeholder headings."""

from __future__ import annotations

import gzip
import json
import os
import sys
from pathlib import Path

import pytest
import zstandard

from pipeline import api
from pipeline.corpus import sources
from pipeline.corpus.layout import group_sections
from pipeline.corpus.sources import (
    InputError,
    InputFile,
    InputReadError,
    iter_lines,
    resolve_inputs,
)
from tests.test_roles import heading_role, survey_heading_role


def _file(p: Path) -> InputFile:
    return InputFile(str(p), p.stat().st_size, str(p), "", p.name)


def test_a_zst_file_cut_in_half_fails_instead_of_ending_early(tmp_path: Path) -> None:
    """Case 4: zstandard's readers end quietly at a cut; the file must count as failed."""
    body = b"".join(b'{"n": %7d}\n' % i for i in range(200_000))
    p = tmp_path / "cut.jsonl.zst"
    whole = zstandard.ZstdCompressor().compress(body)
    p.write_bytes(whole[: len(whole) // 2])
    seen = 0
    with pytest.raises(InputReadError) as err:
        for _ in iter_lines(_file(p)):
            seen += 1
    assert "truncated" in err.value.reason
    assert err.value.lines_read == seen > 0
    assert err.value.bytes_read > 0 and f"{err.value.bytes_read:,} bytes" in str(err.value)


def test_a_failed_gzip_file_reports_the_lines_and_bytes_it_decoded(tmp_path: Path) -> None:
    """Case 4: a file that fails after megabytes was reported "after 0 lines"."""
    body = b"".join(b'{"n": %7d}\n' % i for i in range(300_000))
    p = tmp_path / "t.jsonl.gz"
    p.write_bytes(gzip.compress(body)[:-20])
    with pytest.raises(InputReadError) as err:
        for _ in iter_lines(_file(p)):
            pass
    assert err.value.lines_read > 100_000 and err.value.bytes_read > 1_000_000


def test_files_in_a_symlinked_folder_are_inputs(tmp_path: Path) -> None:
    """Case 5: a data file in a symlinked subdirectory of --input was skipped."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "b.jsonl").write_bytes(b"{}\n")
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.jsonl").write_bytes(b"{}\n")
    (corpus / "linked").symlink_to(elsewhere, target_is_directory=True)
    (corpus / "loop").symlink_to(corpus, target_is_directory=True)  # read once, not forever
    names = sorted(f.name for f in resolve_inputs([str(corpus)]))
    assert names == ["a.jsonl", "linked/b.jsonl"]


def test_a_folder_that_cannot_be_entered_is_an_error_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Case 5: a chmod 000 subdirectory was skipped without a word. (Tests may run as
    root, whom chmod does not stop, so the refusal is the operating system's answer.)"""
    corpus = tmp_path / "corpus"
    (corpus / "locked").mkdir(parents=True)
    (corpus / "a.jsonl").write_bytes(b"{}\n")
    real_scandir = os.scandir

    def scandir(path: object = ".") -> object:
        if str(path).endswith("locked"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "scandir", scandir)
    with pytest.raises(
        InputError, match=r"cannot enter 1 folder\(s\): .*locked \(Permission denied\)"
    ):
        resolve_inputs([str(corpus)])


def test_a_work_directory_inside_the_input_is_never_read_as_input(
    tmp_path: Path, sample_lines: list[bytes]
) -> None:
    """Case 6: ``run --input corpus --out corpus/work`` twice read its own markers."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.jsonl").write_bytes(b"\n".join(sample_lines[:10]) + b"\n")
    out = corpus / "work"
    first = api.extract([corpus], out, workers=1)
    files = sorted(p.relative_to(out) for p in out.rglob("*.parquet"))
    second = api.extract([corpus], out, workers=1)
    assert first.files == second.files == 1
    assert sorted(p.relative_to(out) for p in out.rglob("*.parquet")) == files
    assert json.loads((out / "extract" / "_summary.json").read_text())["rejects"] == {}


def _line_events(data: bytes) -> int:
    """Python line events while :func:`sources.stream_lines` reads ``data``."""
    import io

    count = 0
    code = sources.stream_lines.__code__

    def tracer(frame, event, arg):  # noqa: ANN001, ANN202
        nonlocal count
        if frame.f_code is code:
            if event == "line":
                count += 1
            return tracer
        return None

    sys.settrace(tracer)
    try:
        lines = list(sources.stream_lines(io.BytesIO(data), 1 << 30, [0, 0]))
    finally:
        sys.settrace(None)
    assert [(n, bytes(x)) for n, x in lines] == [(len(data) - 2, b"{}")]
    return count


def test_blank_lines_cost_no_work_per_line() -> None:
    """Case 8: 200 MiB of newlines (a 204 KB .gz) took 47 s, line by line. The reader's
    work no longer grows with the number of blank lines (counted in interpreter steps,
    not seconds)."""
    small = _line_events(b"\n" * 1_000 + b"{}\n")
    large = _line_events(b"\n" * 1_000_000 + b"{}\n")
    assert large < small + 50, (small, large)


def test_publisher_placeholders_in_the_2024_grouping() -> None:
    """The publisher's group_sections.py: no ``section`` -> "Unknown Section", a null one
    -> "null"; each paragraph stripped, its spans shifted only by what came before."""
    body = [
        {"text": "  Lead ", "cite_spans": [{"start": 2, "end": 6, "ref_id": "b0"}]},
        {"section": None, "text": "x", "cite_spans": []},
        {"section": "Intro", "text": " ab ", "cite_spans": [{"start": 1, "end": 3}]},
        {"section": "Intro", "text": " cd", "cite_spans": [{"start": 1, "end": 3}]},
    ]
    got = group_sections(body)
    assert list(got) == ["Unknown Section", "null", "Intro"]
    assert got["Unknown Section"]["text"] == "Lead"
    assert got["Unknown Section"]["cite_spans"][0]["start"] == 2  # not shifted by the strip
    assert got["Intro"]["text"] == "abcd"
    assert [s["start"] for s in got["Intro"]["cite_spans"]] == [1, 3]


@pytest.mark.parametrize("heading", ["Unknown Section", "null"])
def test_placeholder_headings_are_never_a_survey_core(heading: str) -> None:
    assert heading_role(heading) == "other"
    assert survey_heading_role(heading) == "other"  # a topical heading would be related work
    assert survey_heading_role("Graph neural networks") == "related_work"


def test_placeholder_keys_of_a_2024_survey_are_not_its_core() -> None:
    import polars as pl

    from pipeline.core.config import RolesConfig
    from pipeline.rules.roles import section_roles

    headings = ["Introduction", "Unknown Section", "Graph neural networks", "null"]
    sections = pl.LazyFrame(
        {
            "paper_id": ["s"] * 4,
            "section_index": [0, 1, 2, 3],
            "section": headings,
            "level": [0] * 4,
            "top_index": [0, 1, 2, 3],
            "unnamed": [False] * 4,
            "appendix": [False] * 4,
        }
    )
    roles = section_roles(sections, RolesConfig(), survey=True).collect()
    assert roles.sort("section_index")["role"].to_list() == [
        "introduction",
        "other",
        "related_work",
        "other",
    ]


def _hostile_folder(root: Path) -> Path:
    """One good file beside entries that are not regular files."""
    from tests.conftest import PREVIEW_2024

    folder = root / "input"
    folder.mkdir()
    (folder / "good.jsonl").write_bytes(PREVIEW_2024.read_bytes())
    (folder / "loop.jsonl").symlink_to(folder / "loop.jsonl")  # a symlink loop
    (folder / "dangling.jsonl").symlink_to(folder / "missing.jsonl")
    os.mkfifo(folder / "pipe.jsonl")  # blocks a reader until a writer comes
    (folder / "zero.jsonl").symlink_to("/dev/zero")  # never ends
    (folder / "random.jsonl.gz").symlink_to("/dev/urandom")
    return folder


@pytest.mark.parametrize("form", ["folder", "glob"])
def test_entries_that_are_not_regular_files_are_counted_failed_inputs(
    tmp_path: Path, form: str
) -> None:
    """A FIFO, a device, a symlink loop or a dangling symlink among the inputs stopped or
    hung the run; each is now a failed input with its reason, and the good file is read."""
    import subprocess

    folder = _hostile_folder(tmp_path)
    spec = str(folder) if form == "folder" else f"{folder}/*.json*"
    argv = [sys.executable, "-m", "pipeline", "extract", "--input", spec, "--workers", "1"]
    argv += ["--out", str(tmp_path / "work"), "--max-failed-files", "5"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((tmp_path / "work" / "extract" / "_summary.json").read_text())
    failed = {f["file"]: f["reason"] for f in summary["failed_files"]}
    assert set(failed) == {
        "loop.jsonl", "dangling.jsonl", "pipe.jsonl", "zero.jsonl", "random.jsonl.gz"
    }  # fmt: skip
    assert "FIFO" in failed["pipe.jsonl"] and "character device" in failed["zero.jsonl"]
    assert "symbolic links" in failed["loop.jsonl"]
    assert all("not a regular file" in reason for reason in failed.values())
    assert summary["papers_written"] > 0
    # one more than allowed fails the run, naming the files, in one line and exit 2
    argv[-1] = "4"
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "5 of 6 input files failed" in proc.stderr, proc.stderr


def test_a_file_longer_than_it_was_listed_is_not_read_on(tmp_path: Path) -> None:
    """A file that grows while it is read (or lists as 0 bytes and yields bytes, as /proc
    files do) is read no further than its listed size: a failed input, not an endless one."""
    p = tmp_path / "growing.jsonl"
    p.write_bytes(b'{"n": 1}\n' * 1000)
    listed = InputFile(str(p), 90, str(p), "", p.name)  # as it was when listed
    with pytest.raises(InputReadError, match="longer than the 90 bytes it was listed with"):
        for _ in iter_lines(listed):
            pass
    assert sum(1 for _ in iter_lines(_file(p))) == 1000
