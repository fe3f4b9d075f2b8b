"""The work directory's layout has one owner (:mod:`pipeline.engine.workdir`)."""

from __future__ import annotations

import ast
from pathlib import Path

import pipeline
from pipeline.core.config import Config
from pipeline.engine import workdir as W
from pipeline.engine.status import has_work, map_totals, status
from pipeline.stages import GRAPH

ROOT = Path(pipeline.__file__).parent
LAYOUT_NAMES = (W.MARKERS, W.MANIFESTS, W.SUCCESS, W.INPUTS, W.SHARD_INPUTS, W.PUBLISHED, W.LOCKS)
KNOWN: set[tuple[str, str]] = set()  # (module, name) allowed to spell a layout name


def test_no_module_spells_the_layout_but_its_owner() -> None:
    wrong = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel == "engine/workdir.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                for name in (*LAYOUT_NAMES, W.SUMMARY):
                    if node.value == name and (rel, name) not in KNOWN:
                        wrong.append(f"{rel}: {name!r}")
    assert wrong == []


def test_paths(tmp_path: Path) -> None:
    assert W.marker_path(tmp_path, "extract", "k") == tmp_path / "extract/_markers/k.json"
    assert W.manifest_path(tmp_path, "extract", "k") == tmp_path / "extract/_manifests/k.json"
    assert W.map_output(tmp_path, "extract", "papers", "k") == tmp_path / "extract/papers/k.parquet"
    assert W.success_path(tmp_path, "works") == tmp_path / "works/_SUCCESS.json"
    assert (
        W.shard_record_path(tmp_path, "extract", 1, 4) == tmp_path / "extract/_inputs/1-of-4.json"
    )
    assert W.eval_file(tmp_path) == tmp_path / "release/eval_survey_reading_lists.parquet"
    assert W.reduce_temp_dir(tmp_path, "works").name.startswith(".works.tmp-")


def test_an_empty_work_dir_reports_nothing_done(tmp_path: Path) -> None:
    report = status(tmp_path, Config(), GRAPH)
    assert list(report) == list(GRAPH)
    assert report["extract"] == {"files_done": 0, "current": False, "files_failed": []}
    assert all(report[n] == {"done": False} for n in GRAPH if n != "extract")
    assert not has_work(tmp_path, GRAPH)
    assert map_totals(tmp_path, "extract") == (0, {})
