"""Mistakes a user can make on the command line or in the API get one line they can act on
and exit code 2, never "unexpected ..." and exit code 1 (the code of a bug)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline import api
from pipeline.cli import main
from pipeline.core.errors import UsageError
from pipeline.corpus.provenance import ALLOW_FLAG
from pipeline.engine.failures import allowed_failures


def _one_error(capsys: pytest.CaptureFixture[str]) -> str:
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert " ERROR " in line and "unexpected" not in line, line
    return line


@pytest.mark.parametrize("spelling", ["./nosuchdir", "../nosuchdir", "hf://datasets/../x"])
def test_a_release_path_that_looks_like_a_path_is_not_sent_to_the_hub(
    spelling: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")  # ../nosuchdir stays inside tmp_path
    assert main(["evaluate", "--release", spelling, "--out", str(tmp_path / "o")]) == 2
    assert spelling in _one_error(capsys)


@pytest.mark.parametrize(
    "content", [b"\xff\xfe\x00\x01garbage\x89PNG\r\n", b'[evaluate]\nname = "caf\xe9"\n']
)
def test_a_config_that_is_not_utf8_is_one_line(
    content: bytes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "my.toml"
    config.write_bytes(content)
    assert main(["status", "--out", str(tmp_path), "--config", str(config)]) == 2
    line = _one_error(capsys)
    assert str(config) in line and "not a UTF-8 text file" in line


@pytest.mark.parametrize("value", ["nan%", "inf%", "-inf%", "-1", "101%", "1.5", "x%", ""])
def test_max_failed_files_refuses_what_is_no_count_or_share(
    value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["extract", "--input", str(tmp_path), "--out", str(tmp_path / "w")]
    assert main([*argv, "--max-failed-files", value]) == 2
    assert "--max-failed-files" in _one_error(capsys)
    with pytest.raises(UsageError, match="max_failed_files"):  # the API's keyword
        api.run([str(tmp_path)], tmp_path / "w", max_failed_files=value)
    assert not (tmp_path / "w").exists()  # refused before anything was written


@pytest.mark.parametrize(
    ("spec", "total", "allowed"), [("0", 10, 0), ("3", 10, 3), ("1%", 250, 2), ("100%", 7, 7)]
)
def test_max_failed_files_counts_and_shares(spec: str, total: int, allowed: int) -> None:
    assert allowed_failures(spec, total) == allowed


def test_messages_name_the_api_keyword_beside_the_flag() -> None:
    assert ALLOW_FLAG == "--allow-synthetic (allow_synthetic=True in Python)"
