"""Input resolution: local forms and hf:// paths (the Hub client is replaced by a fake)."""

from __future__ import annotations

import io
from pathlib import Path
from types import SimpleNamespace

import huggingface_hub
import pytest

from pipeline.corpus.sources import InputError, iter_lines, resolve_inputs

SHA = "0123456789abcdef0123456789abcdef01234567"


class FakeFs:
    """Stands in for HfFileSystem: two data files and a README at one commit."""

    files = {
        f"datasets/ines-besrour/unarxive_2024@{SHA}/data/a.jsonl": b'{"x": 1}\n\n{"x": 2}\n',
        f"datasets/ines-besrour/unarxive_2024@{SHA}/data/b.jsonl.gz": b"",
        f"datasets/ines-besrour/unarxive_2024@{SHA}/README.md": b"",
    }

    def glob(self, pattern: str, detail: bool = False) -> dict:
        assert pattern == f"datasets/ines-besrour/unarxive_2024@{SHA}/data/*"
        return {
            p: {"type": "file", "size": len(b), "lfs": {"sha256": "e" * 64}}
            for p, b in self.files.items()
            if "/data/" in p
        }

    def open(self, path: str, mode: str, block_size: int) -> io.BytesIO:
        return io.BytesIO(self.files[path])


def test_hf_inputs_resolve_revision_and_stream(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []

    class FakeApi:
        def dataset_info(self, repo_id: str, revision: str) -> SimpleNamespace:
            calls.append((repo_id, revision))
            return SimpleNamespace(sha=SHA)

    monkeypatch.setattr(huggingface_hub, "HfApi", FakeApi)
    monkeypatch.setattr(huggingface_hub, "HfFileSystem", FakeFs)
    files = resolve_inputs(["hf://datasets/ines-besrour/unarxive_2024@v1/data/*"])
    assert calls == [("ines-besrour/unarxive_2024", "v1")]
    assert [f.path.rsplit("/", 1)[-1] for f in files] == ["a.jsonl", "b.jsonl.gz"]
    assert {f.revision for f in files} == {SHA}
    assert all("e" * 64 in f.identity for f in files)
    assert [(n, bytes(line)) for n, line in iter_lines(files[0])] == [
        (1, b'{"x": 1}'),
        (3, b'{"x": 2}'),
    ]


def test_local_forms(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    for name in ("a.jsonl", "b.jsonl.gz", "c.json", "notes.txt"):
        (tmp_path / "d" / name).write_bytes(b"")
    by_dir = resolve_inputs([str(tmp_path / "d")])
    assert [Path(f.path).name for f in by_dir] == ["a.jsonl", "b.jsonl.gz", "c.json"]
    by_glob = resolve_inputs([str(tmp_path / "d" / "*.jsonl*")])
    assert [Path(f.path).name for f in by_glob] == ["a.jsonl", "b.jsonl.gz"]
    assert len({f.key for f in by_dir}) == 3
    with pytest.raises(InputError, match="hf://datasets"):
        resolve_inputs(["hf://models/x"])


def test_crlf_and_missing_final_newline(tmp_path: Path) -> None:
    p = tmp_path / "x.jsonl"
    p.write_bytes(b'{"a": 1}\r\n  \r\n{"a": 2}')
    (f,) = resolve_inputs([str(p)])
    assert [(n, bytes(x).strip()) for n, x in iter_lines(f)] == [(1, b'{"a": 1}'), (3, b'{"a": 2}')]
