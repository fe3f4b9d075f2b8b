"""Input resolution and line streaming.

``--input`` takes files, directories, globs and
``hf://datasets/<owner>/<name>[@revision]/<glob>``. Hub inputs are streamed through
huggingface_hub's ``HfFileSystem`` (no full download); the revision is resolved to
a commit sha once and every file is read at that sha, so a release records exactly
what it was built from.
"""

from __future__ import annotations

import bz2
import glob
import gzip
import hashlib
import io
import lzma
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

SUFFIXES = (".jsonl", ".jsonl.gz", ".jsonl.zst", ".jsonl.xz", ".jsonl.bz2", ".json")
_HF = re.compile(r"^hf://datasets/(?P<repo>[^/@]+/[^/@]+)(?:@(?P<rev>[^/]+))?(?:/(?P<glob>.*))?$")
_HF_REVISION = re.compile(r"^(hf://datasets/[^/]+/[^/@]+)@[^/]+")
READ_BUFFER = 8 * 1024 * 1024


class InputError(ValueError):
    """An ``--input`` spec matched nothing or could not be read."""


@dataclass(frozen=True)
class InputFile:
    """One input file and what identifies its content.

    Attributes:
        path: local path, or ``hf://datasets/owner/name@sha/path`` for Hub files.
        size: bytes on disk (compressed size for compressed files).
        identity: path + size + mtime (local) or etag/blob id (Hub); a change
            means the file must be extracted again.
        revision: resolved commit sha for Hub files, else ``""``.
        name: the file's path relative to the ``--input`` it was found under (a
            directory, a glob's fixed prefix, the repo root for Hub files): what
            tables record as ``source_file``, independent of where a corpus is mounted.
    """

    path: str
    size: int
    identity: str
    revision: str = ""
    name: str = ""

    @property
    def key(self) -> str:
        """Stable, filesystem-safe name for this file's outputs and marker.

        Hub paths are keyed without their ``@<commit>``: a new revision of the dataset
        keeps the keys of files it did not change (their identity, the etag, still
        decides whether they are redone).
        """
        name = self.path.rstrip("/").rsplit("/", 1)[-1]
        for suf in SUFFIXES:
            if name.endswith(suf):
                name = name[: -len(suf)]
                break
        name = re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:80]
        digest = hashlib.sha256(_HF_REVISION.sub(r"\1", self.path).encode()).hexdigest()[:10]
        return f"{name}-{digest}"


def _is_data_file(name: str) -> bool:
    return name.endswith(SUFFIXES)


def _local(spec: str) -> list[InputFile]:
    p = Path(spec)
    if p.is_dir():
        root = p
        paths = [q for q in p.rglob("*") if q.is_file() and _is_data_file(q.name)]
    elif p.is_file():
        root = p.parent
        paths = [p]
    else:
        # names are relative to the part of the glob before its first wildcard
        root = _glob_root(spec)
        paths = [Path(q) for q in glob.glob(spec, recursive=True) if Path(q).is_file()]
    out = []
    for q in paths:
        st = q.stat()
        path = str(q.resolve())
        name = q.relative_to(root).as_posix() if q.is_relative_to(root) else q.name
        out.append(InputFile(path, st.st_size, f"{path}|{st.st_size}|{st.st_mtime_ns}", "", name))
    return out


def _glob_root(spec: str) -> Path:
    """The directory part of a glob before its first wildcard."""
    parts = Path(spec).parts
    fixed = []
    for part in parts:
        if glob.has_magic(part):
            break
        fixed.append(part)
    return Path(*fixed) if fixed else Path(".")


def _hub(spec: str) -> list[InputFile]:
    m = _HF.match(spec)
    if not m:
        raise InputError(f"{spec}: expected hf://datasets/<owner>/<name>[@revision]/<glob>")
    from huggingface_hub import HfApi, HfFileSystem

    repo, rev, pattern = m.group("repo"), m.group("rev") or "main", m.group("glob") or "**"
    sha = HfApi().dataset_info(repo, revision=rev).sha
    fs = HfFileSystem()
    base = f"datasets/{repo}@{sha}"
    out = []
    for path, info in sorted(fs.glob(f"{base}/{pattern}", detail=True).items()):
        if info.get("type") != "file" or not _is_data_file(path):
            continue
        etag = (info.get("lfs") or {}).get("sha256") or info.get("blob_id") or ""
        name = path[len(base) + 1 :]
        # identity without the commit: an unchanged file (same etag) in a new revision
        # of the dataset is not extracted again
        identity = f"hf://datasets/{repo}/{name}|{info['size']}|{etag}"
        out.append(InputFile(f"hf://{path}", int(info["size"]), identity, sha, name))
    return out


def resolve_inputs(specs: list[str]) -> list[InputFile]:
    """All input files named by ``specs``, deduplicated and sorted by path.

    Raises:
        InputError: a spec matches no data file.
    """
    found: dict[str, InputFile] = {}
    for spec in specs:
        files = _hub(spec) if spec.startswith("hf://") else _local(spec)
        if not files:
            raise InputError(f"--input {spec}: no {'/'.join(SUFFIXES)} file found")
        for f in files:
            found[f.path] = f
    return [found[k] for k in sorted(found)]


def shard(files: list[InputFile], index: int, count: int) -> list[InputFile]:
    """``sorted(files)[index::count]`` so ``count`` machines split one corpus."""
    if not 0 <= index < count:
        raise InputError(f"--shard {index}/{count}: need 0 <= I < N")
    return sorted(files, key=lambda f: f.path)[index::count]


def _open_raw(f: InputFile) -> IO[bytes]:
    if f.path.startswith("hf://"):
        from huggingface_hub import HfFileSystem

        return HfFileSystem().open(f.path[len("hf://") :], "rb", block_size=READ_BUFFER)
    return open(f.path, "rb", buffering=READ_BUFFER)  # noqa: SIM115 - closed by caller


def open_binary(f: InputFile) -> IO[bytes]:
    """Decompressed byte stream of an input file (by suffix)."""
    raw = _open_raw(f)
    name = f.path
    if name.endswith(".gz"):
        return gzip.GzipFile(fileobj=raw)
    if name.endswith(".xz"):
        return lzma.LZMAFile(raw)
    if name.endswith(".bz2"):
        return bz2.BZ2File(raw)
    if name.endswith(".zst"):
        import zstandard

        return io.BufferedReader(
            zstandard.ZstdDecompressor().stream_reader(raw, closefd=True), READ_BUFFER
        )
    return raw


def iter_lines(f: InputFile) -> Iterator[tuple[int, bytes | memoryview]]:
    """``(line_number, line)`` pairs, 1-based, blank lines skipped.

    Lines are zero-copy ``memoryview`` slices of large read chunks (msgspec decodes
    them directly); call ``bytes()`` on one to keep it. A ``.json`` file holds one
    (possibly pretty-printed) object and yields it as line 1.
    """
    with open_binary(f) as stream:
        if f.path.endswith(".json"):
            data = stream.read()
            if data.strip():
                yield 1, data
            return
        number = 0
        rest = b""
        while True:
            chunk = stream.read(READ_BUFFER)
            if not chunk:
                break
            data = rest + chunk if rest else chunk
            view = memoryview(data)
            start = 0
            while True:
                end = data.find(b"\n", start)
                if end < 0:
                    break
                number += 1
                # a line that starts with a non-space byte is not blank (no copy needed)
                if (end > start and data[start] > 32) or data[start:end].strip():
                    yield number, view[start:end]
                start = end + 1
            rest = data[start:]
        if rest:
            number += 1
            if rest.strip():
                yield number, rest


def source_name(f: InputFile) -> str:
    """Name written into the ``source_file`` column: the path relative to its ``--input``,
    so tables do not depend on where a corpus is mounted (byte-identical rebuilds)."""
    return f.name or f.path.rstrip("/").rsplit("/", 1)[-1]
