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
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, NamedTuple

SUFFIXES = (".jsonl", ".jsonl.gz", ".jsonl.zst", ".jsonl.xz", ".jsonl.bz2", ".json")
_HF = re.compile(r"^hf://datasets/(?P<repo>[^/@]+/[^/@]+)(?:@(?P<rev>[^/]+))?(?:/(?P<glob>.*))?$")
_HF_REVISION = re.compile(r"^(hf://datasets/[^/]+/[^/@]+)@[^/]+")
READ_BUFFER = 8 * 1024 * 1024
BOM = b"\xef\xbb\xbf"
LONG_LINE_HEAD = 4096  # bytes of an over-long line kept for its reject record


class InputError(ValueError):
    """An ``--input`` spec matched nothing or could not be read."""


class InputReadError(Exception):
    """An input file could not be read to its end (corrupt compression, I/O or network error).

    Attributes:
        reason: ``"<exception type>: <message>"`` of the underlying error.
        lines_read: lines read before the failure.
    """

    def __init__(self, path: str, reason: str, lines_read: int):
        super().__init__(f"{display(path)}: {reason} (after {lines_read} lines)")
        self.reason = reason
        self.lines_read = lines_read


def _read_errors() -> tuple[type[BaseException], ...]:
    """What a damaged or unreachable file raises while it is read (OSError covers gzip's
    BadGzipFile, bz2 and Hub HTTP errors after huggingface_hub's own retries)."""
    import zstandard

    return (OSError, EOFError, zlib.error, lzma.LZMAError, zstandard.ZstdError)


class LongLine(NamedTuple):
    """A line longer than the limit, in place of its bytes: its first bytes and its length."""

    head: bytes
    length: int


def display(text: str) -> str:
    """``text`` safe to write anywhere: bytes of a non-UTF-8 file name (held as surrogates
    by Python) are shown as ``\\xNN``."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


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
        # never hidden, never mistaken for a temp file (publishing and cleanup skip those)
        name = re.sub(r"^\.|\.(?=tmp-)", "_", name)
        # a name that is not valid UTF-8 is keyed by its bytes
        path = _HF_REVISION.sub(r"\1", self.path).encode("utf-8", "surrogateescape")
        return f"{name}-{hashlib.sha256(path).hexdigest()[:10]}"


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


def iter_lines(
    f: InputFile, max_line_bytes: int | None = None
) -> Iterator[tuple[int, bytes | memoryview | LongLine]]:
    """``(line_number, line)`` pairs, 1-based, blank lines skipped.

    Lines are zero-copy ``memoryview`` slices of large read chunks (msgspec decodes
    them directly); call ``bytes()`` on one to keep it. A ``.json`` file holds one
    (possibly pretty-printed) object and yields it as line 1. A UTF-8 byte-order mark
    at the start of a file is skipped.

    A line longer than ``max_line_bytes`` is yielded as a :class:`LongLine` (its head
    and length): the limit is enforced while reading, so memory stays bounded by the
    limit plus one read chunk, and the time is linear in the file size.

    Raises:
        InputReadError: the file cannot be read to its end.
    """
    limit = max_line_bytes if max_line_bytes is not None else 1 << 62
    counter = [0]
    try:
        yield from _lines(f, limit, counter)
    except _read_errors() as e:
        raise InputReadError(f.path, f"{type(e).__name__}: {e}", counter[0]) from e


def _head(parts: list[bytes]) -> bytes:
    """The first LONG_LINE_HEAD bytes of ``parts`` joined (without joining all of them)."""
    head = b""
    for part in parts:
        head += part[: LONG_LINE_HEAD - len(head)]
        if len(head) >= LONG_LINE_HEAD:
            break
    return head


def _lines(
    f: InputFile, limit: int, counter: list[int]
) -> Iterator[tuple[int, bytes | memoryview | LongLine]]:
    with open_binary(f) as stream:
        if f.path.endswith(".json"):
            data = stream.read(min(limit, 1 << 40) + 1)
            data = data[len(BOM) :] if data.startswith(BOM) else data
            counter[0] = 1
            if len(data) > limit:
                length = len(data) + sum(
                    len(c) for c in iter(lambda: stream.read(READ_BUFFER), b"")
                )
                yield 1, LongLine(data[:LONG_LINE_HEAD], length)
            elif data.strip():
                yield 1, data
            return
        number = 0
        pieces: list[bytes] = []  # the current line so far, when it spans chunks
        held = 0  # bytes in pieces
        long_head: bytes | None = None  # set once the current line is over the limit
        first = True
        while True:
            chunk = stream.read(READ_BUFFER)
            if not chunk:
                break
            if first:
                first = False
                if chunk.startswith(BOM):
                    chunk = chunk[len(BOM) :]
            start = 0
            if held:
                end = chunk.find(b"\n")
                stop = len(chunk) if end < 0 else end
                held += stop
                if long_head is None and held > limit:
                    long_head = _head([*pieces, chunk[:stop]])
                    pieces = []  # dropped: the line is only counted from here on
                if long_head is None and end < 0:
                    pieces.append(chunk)
                if end < 0:
                    continue
                number += 1
                counter[0] = number
                if long_head is not None:
                    yield number, LongLine(long_head, held)
                else:
                    pieces.append(chunk[:end])
                    line = b"".join(pieces)
                    if line.strip():
                        yield number, line
                pieces, held, long_head = [], 0, None
                start = end + 1
            view = memoryview(chunk)
            while True:
                end = chunk.find(b"\n", start)
                if end < 0:
                    break
                number += 1
                counter[0] = number
                if end - start > limit:
                    yield (
                        number,
                        LongLine(chunk[start : min(end, start + LONG_LINE_HEAD)], end - start),
                    )
                # a line that starts with a non-space byte is not blank (no copy needed)
                elif (end > start and chunk[start] > 32) or chunk[start:end].strip():
                    yield number, view[start:end]
                start = end + 1
            if start < len(chunk):
                held = len(chunk) - start
                if held > limit:
                    long_head = chunk[start : start + LONG_LINE_HEAD]
                else:
                    pieces = [chunk[start:]]
        if held:
            number += 1
            counter[0] = number
            if long_head is not None:
                yield number, LongLine(long_head, held)
            else:
                line = b"".join(pieces)
                if line.strip():
                    yield number, line


def source_name(f: InputFile) -> str:
    """Name written into the ``source_file`` column: the path relative to its ``--input``,
    so tables do not depend on where a corpus is mounted (byte-identical rebuilds)."""
    return display(f.name or f.path.rstrip("/").rsplit("/", 1)[-1])
