"""Finished files are verified before they are trusted: markers record sizes and sha256."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import pytest

from pipeline import api
from pipeline.cli import main
from tests.test_negatives import synthetic_release_dir

# what a rerun rewrites anyway (timings, logs of this run), and the evaluation of the release
_VOLATILE = ("_SUCCESS.json", "_manifests", "_summary.json", "eval")


def _outputs(out: Path) -> dict[str, bytes]:
    return {
        p.relative_to(out).as_posix(): p.read_bytes()
        for p in sorted(out.rglob("*"))
        if p.is_file() and not any(v in p.relative_to(out).parts for v in _VOLATILE)
    }


@pytest.fixture
def work(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """(untouched work dir, a copy to damage, the corpus both were built from)."""
    original = synthetic_release_dir(tmp_path_factory)
    copy = tmp_path / "out"
    shutil.copytree(original, copy)
    return original, copy, original.parent / "corpus"


def _run(corpus: Path, out: Path, *extra: str) -> int:
    return main(["run", "--input", str(corpus), "--out", str(out), "--workers", "1", *extra])


def _flip_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def test_truncated_outputs_are_redone_byte_identical(work, caplog) -> None:
    original, out, corpus = work
    damaged = [
        sorted((out / "extract" / "papers").glob("*.parquet"))[0],
        out / "works" / "works.parquet",
        out / "negatives" / "negatives.parquet",
        sorted((out / "release").rglob("*.parquet"))[0],
    ]
    for p in damaged:
        _truncate(p)
    caplog.set_level(logging.WARNING, logger="pipeline")
    assert _run(corpus, out) == 0
    said = " ".join(r.getMessage() for r in caplog.records)
    for p in damaged:
        assert str(p) in said, f"the rerun should say it redoes {p}"
    assert _outputs(out) == _outputs(original)
    # the other extract tables of that file (the first mismatch is enough to redo it)
    for table in ("references", "mentions", "rejects"):
        _truncate(sorted((out / "extract" / table).glob("*.parquet"))[0])
        assert _run(corpus, out) == 0
        assert any(f"extract/{table}/" in r.getMessage() for r in caplog.records)
    assert _outputs(out) == _outputs(original)


def test_changed_bytes_of_same_size_are_found_by_checksum(work, caplog) -> None:
    original, out, corpus = work
    _flip_byte(out / "works" / "cites.parquet")  # surveys reads it: checked before
    _flip_byte(sorted((out / "extract" / "mentions").glob("*.parquet"))[0])
    _flip_byte(out / "release" / "README.md")  # the release's own files: with --verify
    caplog.set_level(logging.WARNING, logger="pipeline")
    assert _run(corpus, out, "--verify") == 0
    said = " ".join(r.getMessage() for r in caplog.records)
    assert "cites.parquet has sha256" in said and "README.md has sha256" in said
    assert _outputs(out) == _outputs(original)


def test_reduce_stage_refuses_a_damaged_extract_file(work, caplog) -> None:
    _, out, corpus = work
    target = sorted((out / "extract" / "papers").glob("*.parquet"))[0]
    _flip_byte(target)
    assert main(["works", "--out", str(out), "--force"]) == 2
    assert str(target) in caplog.text and "rerun extract" in caplog.text
    # its marker is gone, so extract redoes exactly that file
    assert not (out / "extract" / "_markers" / f"{target.stem}.json").exists()
    api.extract(corpus, out, workers=1)
    api.reduce("works", out)


def test_push_refuses_a_release_with_a_changed_file(work, capsys, caplog, monkeypatch) -> None:
    # this synthetic release with its placeholder card would be refused for that
    # (tests/test_hub.py); here only the check against the release record is under test
    monkeypatch.setattr("pipeline.hub.publish.publish_refusal", lambda *args: None)
    _, out, _ = work
    release = out / "release"
    args = ["push", "--repo-id", "someone/x", "--release", str(release), "--dry-run"]
    assert main(args) == 0
    plan = json.loads(capsys.readouterr().out)
    meta = json.loads((release / "eval_metadata.json").read_text())
    assert {f["path"] for f in plan["files"]} >= set(meta["files"])
    target = release / sorted(meta["files"])[0]
    _flip_byte(target)
    assert main(args) == 2
    assert str(target) in caplog.text and "differs from the release record" in caplog.text
    shutil.copytree(out / "release", out / "release2")
    (out / "release2" / "extra.parquet").write_bytes(b"PAR1")
    caplog.clear()
    assert main([*args[:3], "--release", str(out / "release2"), "--dry-run"]) == 2
    assert "differs" in caplog.text or "not a file the release stage wrote" in caplog.text
