"""Cases 11 and 14-21 of issue 21's attack battery: each held input is refused with one
line (rc 2), or handled, instead of crashing, leaking or writing outside the run."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

import pytest

from pipeline.cli import main
from pipeline.config import Config, ConfigError, load_config


# --------------------------------------------------------------------- 16: integer ranges
def _int_fields() -> list[tuple[str, str]]:
    cfg = Config()
    found = []
    for sec in dataclasses.fields(cfg):
        section = getattr(cfg, sec.name)
        for f in dataclasses.fields(section):
            value = getattr(section, f.name)
            if isinstance(value, int) and not isinstance(value, bool):
                found.append((sec.name, f.name))
            if isinstance(value, tuple) and value and isinstance(value[0], int):
                found.append((sec.name, f.name))
    return found


@pytest.mark.parametrize(("section", "name"), _int_fields())
@pytest.mark.parametrize("value", [2**63, 2**64, 10**30])
def test_no_integer_past_64_bits_passes_config_validation(
    tmp_path: Path, caplog, section: str, name: str, value: int
) -> None:
    default = getattr(getattr(Config(), section), name)
    text = f"[{value}]" if isinstance(default, tuple) else str(value)
    path = tmp_path / "big.toml"
    path.write_text(f"[{section}]\n{name} = {text}\n")
    with pytest.raises(ConfigError, match=name):
        load_config(path)
    caplog.set_level(logging.ERROR, logger="pipeline")
    assert main(["status", "--out", str(tmp_path / "out"), "--config", str(path)]) == 2
    (message,) = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert name in message and "\n" not in message
