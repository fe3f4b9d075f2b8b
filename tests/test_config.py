"""Config validation: every invalid value of every field fails at load, with rc 2 and one line."""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pipeline.cli import main
from pipeline.core.config import Config, ConfigError, field_check, load_config

ROOT = Path(__file__).resolve().parents[1]


def _fields() -> list[tuple[str, str, Any]]:
    cfg = Config()
    return [
        (sec.name, f.name, getattr(getattr(cfg, sec.name), f.name))
        for sec in dataclasses.fields(cfg)
        for f in dataclasses.fields(getattr(cfg, sec.name))
    ]


def _wrong_type(default: Any) -> Any:
    if isinstance(default, bool):
        return "yes"
    if isinstance(default, (int, float)):
        return "many"
    if isinstance(default, str):
        return 3
    if isinstance(default, tuple):
        return [{"a": 1}]
    return ["not", "a", "table"]


def _invalid_values() -> list[tuple[str, str, Any]]:
    cases = []
    for section, name, default in _fields():
        cases.append((section, name, _wrong_type(default)))
        for bad in field_check(section, name, default).invalid:
            cases.append((section, name, bad))
    return cases


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and math.isnan(v):
        return "nan"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)  # JSON string escapes are valid TOML basic-string escapes
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return "{" + ", ".join(f"{json.dumps(k)} = {_toml_value(x)}" for k, x in v.items()) + "}"


def test_defaults_are_valid_and_every_field_has_a_rule() -> None:
    load_config()
    for section, name, default in _fields():
        check = field_check(section, name, default)
        assert check.test(default), f"{section}.{name}: default {default!r} fails its own rule"


@pytest.mark.parametrize(
    ("section", "name", "value"),
    _invalid_values(),
    ids=lambda x: repr(x)[:30] if not isinstance(x, str) else x[:30],
)
def test_every_invalid_value_fails_at_load_with_rc_2_and_one_line(
    tmp_path: Path, caplog, section: str, name: str, value: Any
) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(f"[{section}]\n{name} = {_toml_value(value)}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=name):
        load_config(path)
    caplog.clear()
    caplog.set_level(logging.ERROR, logger="pipeline")
    # `status` runs no stage: the config is refused before any command does anything
    assert main(["status", "--out", str(tmp_path / "out"), "--config", str(path)]) == 2
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and "\n" not in errors[0] and name in errors[0], errors
    assert not (tmp_path / "out").exists()


def test_section_that_is_not_a_table(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text("extract = 3\n")
    with pytest.raises(ConfigError, match="extract: expected a table"):
        load_config(path)


def test_bad_config_refused_before_any_stage_in_a_subprocess(tmp_path: Path) -> None:
    """The real CLI: rc 2, one stderr line, nothing written, no traceback."""
    path = tmp_path / "bad.toml"
    path.write_text('[release]\ndataset_name = "x\\n---\\nlicense: mit"\n')
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "pipeline", "run", "--input", str(tmp_path), "--out", str(out)]
        + ["--config", str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "dataset_name" in lines[0] and "allowed:" in lines[0], proc.stderr
    assert not out.exists()
