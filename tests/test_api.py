"""The typed API (:mod:`pipeline.api`): what the CLI, the Jobs and the demo call."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import pipeline
from pipeline import api
from pipeline.core.config import Config, ConfigError
from pipeline.corpus.sources import InputError
from tests.conftest import SAMPLE_2022


def test_config_of_takes_a_config_a_path_or_none(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text("[surveys]\nmin_resolved_refs = 25\n")
    assert api.config_of(None) == Config()
    assert api.config_of(path).surveys.min_resolved_refs == 25
    assert api.config_of(str(path)) == api.config_of(path)
    cfg = api.config_of(path)
    assert api.config_of(cfg) is cfg
    with pytest.raises(ConfigError, match="not found"):
        api.config_of(tmp_path / "missing.toml")


def test_bad_arguments_raise_input_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not a reduce stage; available: works"):
        api.reduce("extract", tmp_path)
    with pytest.raises(InputError, match="no such work directory"):
        api.status(tmp_path / "none")
    with pytest.raises(InputError, match="needs --input"):
        api.extract([], tmp_path)
    with pytest.raises(InputError, match=">= 1"):
        api.extract(SAMPLE_2022, tmp_path, workers=0)
    with pytest.raises(InputError, match="run needs --input"):
        api.run(None, tmp_path)


def test_extract_reduce_and_status_return_typed_results(tmp_path: Path) -> None:
    out = tmp_path / "w"
    assert api.status(tmp_path).has_work is False
    extracted = api.extract(SAMPLE_2022, out, workers=1)
    assert extracted.files == 1 and extracted.papers == 49 and extracted.failed_files == []
    assert extracted.outputs == out / "extract"
    works = api.reduce("works", out)
    assert works.outputs == out / "works" and not works.skipped
    assert works.manifest is not None and works.manifest["stage"] == "works"
    assert api.reduce("works", out).skipped
    report = api.status(out)
    assert report.has_work and list(report.stages)[:2] == ["extract", "works"]
    states = {name: state for name, state, _ in report.rows()}
    assert states["extract"] == "done" and states["works"] == "done"
    assert states["surveys"] == "not run"
    # a survey rule changed: extract and works are still done for it
    config = tmp_path / "c.toml"
    config.write_text("[surveys]\nmin_resolved_refs = 25\n")
    changed = api.status(out, config=config)
    assert changed.state("extract") == "done" and changed.state("works") == "done"


def test_no_caller_reenters_the_cli_with_argv() -> None:
    """Jobs, the demo and the command modules call the API, never ``cli.main``."""
    root = Path(pipeline.__file__).parent
    wrong = []
    for path in sorted(root.rglob("*.py")):
        if path.name == "__main__.py" or path.relative_to(root).as_posix() == "cli/__init__.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module in (
                "pipeline.cli",
                "pipeline.cli.app",
            ):
                if any(a.name == "main" for a in node.names):
                    wrong.append(str(path.relative_to(root)))
    assert wrong == []


def test_a_script_without_a_main_guard_runs_with_workers(tmp_path: Path) -> None:
    """Spawned workers imported the caller's script again: one calling ``api.run`` at its
    top level, as the docs' snippet reads, ran again in each worker and failed with "a
    worker process died"."""
    import subprocess
    import sys

    from tests.conftest import PREVIEW_2024

    script = tmp_path / "build_it.py"
    script.write_text(
        "from pipeline import api\n\n"
        f"result = api.extract([{str(SAMPLE_2022)!r}, {str(PREVIEW_2024)!r}], 'work', workers=2)\n"
        "print('papers', result.papers)\n",
        encoding="utf-8",
    )
    proc = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["papers", "50"]
