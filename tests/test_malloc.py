"""The allocator settings of an extract worker (pipeline.core.malloc) and the extract
profile that measures what they save (bench/profile_extract.py)."""

from __future__ import annotations

import json
import platform
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from bench.profile_extract import instrumented, profile, without_writer
from bench.real_corpus import real_corpus, real_lines
from pipeline.core import malloc
from pipeline.stages.extract import driver, records, rows

ROOT = Path(__file__).resolve().parents[1]


def test_the_thresholds_are_set_on_glibc_once_per_process() -> None:
    code = (
        "import json; from pipeline.core import malloc; "
        "print(json.dumps([malloc.keep_freed_memory(), malloc.keep_freed_memory()]))"
    )
    got = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    glibc = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"
    assert json.loads(got.stdout) == [glibc, glibc]


def test_another_c_library_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(malloc, "_set", None)
    monkeypatch.setattr(malloc.platform, "libc_ver", lambda: ("musl", "1.2"))
    called = []
    monkeypatch.setattr(malloc.ctypes, "CDLL", lambda *a: called.append(a))
    assert malloc.keep_freed_memory() is False
    assert called == []  # mallopt is not even looked up


def _wrapped() -> tuple[object, ...]:
    return (driver.DECODER, driver.extract_record, rows.Writer._write_batch, rows.Writer.put)


def test_the_profile_splits_extract_and_puts_back_what_it_wraps(tmp_path: Path) -> None:
    one_copy_mb = sum(len(line) + 1 for line in real_lines()) / 1e6
    files = real_corpus(tmp_path / "corpus", size_mb=one_copy_mb, file_mb=one_copy_mb)
    own = (records.DECODER, rows.extract_record, rows.Writer._write_batch, rows.Writer.put)
    res = profile(files, tmp_path / "out", rounds=1)
    s = res["s_per_gb"]
    keys = {"b_wall", "b_cpu", "a_wall", "a_cpu", "a0_wall", "a0_cpu", "decode", "rows"}
    assert keys | {"columns", "read", "loop", "waits"} == set(s)
    assert s["decode"] > 0 and s["rows"] > 0 and s["columns"] > 0
    assert res["a_over_b"] > 0 and res["a0_over_b"] > 0
    # the wrapped functions are the stage's own again
    assert _wrapped() == own
    with without_writer(), instrumented(Counter()):  # nestable, and undone in order
        assert _wrapped() != own
    assert _wrapped() == own
