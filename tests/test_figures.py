"""The report's figures: drawn, linked from report.md, byte-identical across runs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pipeline.core.config import EvaluateConfig
from pipeline.evaluate import write_evaluation
from pipeline.evaluate.columns import EVAL_FILENAME
from pipeline.evaluate.report.figures import CAPTIONS, FIGURES_DIR
from pipeline.evaluate.report.markdown import render_report
from pipeline.evaluate.synthetic import synthetic_eval_set

CONFIG = EvaluateConfig(bootstrap_samples=20, random_seeds=1)


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("figures") / "release"
    root.mkdir()
    synthetic_eval_set(12, 16, seed=5, years=(2023, 2024)).write_parquet(root / EVAL_FILENAME)
    return root


def _run(release: Path, out: Path) -> dict:
    return write_evaluation(release, baselines_only=True, out_dir=out, config=CONFIG, learned=False)


def test_every_figure_is_linked_and_byte_identical_across_runs(
    release: Path, tmp_path: Path
) -> None:
    results = _run(release, tmp_path / "a")
    _run(release, tmp_path / "b")
    first, second = tmp_path / "a" / "eval", tmp_path / "b" / "eval"
    names = sorted(p.name for p in (first / FIGURES_DIR).iterdir())
    assert names == sorted(CAPTIONS)
    for name in names:
        png = (first / FIGURES_DIR / name).read_bytes()
        assert png.startswith(b"\x89PNG") and b"matplotlib" not in png.lower()  # no metadata
        assert png == (second / FIGURES_DIR / name).read_bytes(), name
    report = (first / "report.md").read_text(encoding="utf-8")
    links = re.findall(r"!\[[^\]]+\]\(([^)]+)\)", report)
    assert sorted(links) == sorted(f"{FIGURES_DIR}/{n}" for n in names)
    assert all((first / link).is_file() for link in links)
    # the report reads without them: the same text, less the links
    bare = render_report(results)
    assert "![" not in bare
    assert re.sub(r"\n\n!\[[^\]]+\]\([^)]+\)", "", report) == bare
