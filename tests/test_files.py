"""One atomic writer and one file hash (pipeline/core/files.py), used everywhere."""

from __future__ import annotations

import ast
from pathlib import Path

import polars as pl
import pytest

import pipeline
from pipeline.core import files
from pipeline.core.config import EvaluateConfig
from pipeline.engine.workdir import clean_stale_temps
from pipeline.evaluate import write_evaluation
from pipeline.evaluate.columns import EVAL_FILENAME
from pipeline.evaluate.synthetic import synthetic_eval_set

ROOT = Path(pipeline.__file__).parent
# Who may call these, and why. Everyone else goes through pipeline.core.files.
ALLOWED = {
    "os.replace": {
        "core/files.py": "the atomic writer",
        # a map file's tables (temp_tag names) and a reduce stage's whole directory are
        # committed together, in the order the markers need
        "engine/map_files.py": "a map file's tables, owner-tagged temps, before its marker",
        "engine/reduce.py": "a reduce stage's whole folder, swapped in",
    },
    "hashlib.sha256": {
        "core/files.py": "the file hash",
        "core/config.py": "hash of the config text, not of a file",
        "corpus/sources.py": "hash of an input path, not of a file",
        "corpus/archive.py": "a part's sha256 while it streams (checked against the published one), "
        "and the hash of a unit's member headers",
        "jobs/identity.py": "fingerprints of the package's bytes and of input identities, not of a file",
        "integrations/mteb_lite.py": "the lite sample's order: the sha256 of an id, not of a file",
    },
    "hashlib.file_digest": {},
    "tempfile.mkstemp": {},
    "tempfile.NamedTemporaryFile": {},
}


def _calls(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
        ):
            found.add(f"{node.func.value.id}.{node.func.attr}")
    return found


def test_one_atomic_writer_and_one_file_hash() -> None:
    wrong = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        for call in sorted(_calls(path) & set(ALLOWED)):
            if rel not in ALLOWED[call]:
                wrong.append(f"{rel} calls {call}")
    assert not wrong, wrong


def test_atomic_path_uses_the_owner_tag(tmp_path: Path) -> None:
    final = tmp_path / "a.json"
    with files.atomic_path(final) as tmp:
        assert tmp.name.startswith("a.json.tmp-") and files.owner_alive(tmp.name)
        tmp.write_text("{}")
    assert final.read_text() == "{}" and list(tmp_path.iterdir()) == [final]


def test_a_concurrent_cleanup_keeps_an_evaluations_temp_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``run`` on the same --out cleans stale temps while ``evaluate`` writes: the
    evaluation's temp files carry the owner tag, so they are left alone."""
    release = tmp_path / "release"
    release.mkdir()
    synthetic_eval_set(6, 8, seed=3, years=(2023, 2024)).write_parquet(release / EVAL_FILENAME)
    write = pl.DataFrame.write_parquet

    def write_then_clean(self: pl.DataFrame, path: Path, *args, **kwargs):  # noqa: ANN002, ANN003
        write(self, path, *args, **kwargs)
        clean_stale_temps(tmp_path)  # the temp file exists now, before its os.replace

    monkeypatch.setattr(pl.DataFrame, "write_parquet", write_then_clean)
    config = EvaluateConfig(bootstrap_samples=10, random_seeds=1)
    write_evaluation(release, baselines_only=True, out_dir=tmp_path, config=config, learned=False)
    assert (tmp_path / "eval" / "per_survey.parquet").exists()
