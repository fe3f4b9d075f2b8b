"""A non-editable install runs ``demo``: the card template and the demo samples are
package data, found through ``importlib.resources``, never through the checkout.

Offline: the wheel is built without build isolation (setuptools is a dev dependency)
and installed with ``--no-deps`` into a fresh venv; the dependencies come from this
test's own environment through a ``.pth`` line naming its site-packages directory (a
path line only: that directory's own ``.pth`` files, among them the editable install
of this checkout, are not read). The demo runs outside the checkout, and the test
checks that ``pipeline`` was imported from the fresh venv.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> str:
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"{cmd}\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    return proc.stdout


@pytest.mark.slow
def test_wheel_in_a_fresh_venv_runs_demo(tmp_path: Path) -> None:
    # built from a copy: setuptools writes build/ and *.egg-info/ next to the sources
    src = tmp_path / "src"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build")
    shutil.copytree(ROOT / "pipeline", src / "pipeline", ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    dist = tmp_path / "dist"
    _run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q"]
        + ["-w", str(dist), str(src)],
        cwd=tmp_path,
    )
    (wheel,) = dist.glob("*.whl")
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=tmp_path)
    python = venv / "bin" / "python"
    _run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps"]
        + ["--no-index", str(wheel)],
        cwd=tmp_path,
    )
    site = Path(
        _run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            tmp_path,
        ).strip()
    )
    (site / "deps_from_test_env.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")

    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    where = _run([str(python), "-c", "import pipeline; print(pipeline.__file__)"], tmp_path, env)
    assert Path(where.strip()).is_relative_to(venv), where
    out = tmp_path / "demo"
    _run(
        [str(venv / "bin" / "survey-reading-lists"), "demo", "-q", "--out", str(out)], tmp_path, env
    )
    card = (out / "release" / "README.md").read_text(encoding="utf-8")
    assert card.startswith("---\n") and "{" not in card.split("---")[1]
    # the corpus in the Hub's form, the real samples among its members (package data)
    assert (out / "corpus" / "unarXive_2024.tar.gz.part_ac").is_file()
    summary = json.loads((out / "extract" / "_summary.json").read_text())
    assert summary["archive_members"]["jsonl"] == 6
    assert (out / "eval" / "report.md").is_file()
