"""Input resolution and line streaming.

``--input`` takes files, directories, globs and
``hf://datasets/<owner>/<name>[@revision][/<glob>]``. Hub inputs are streamed through
huggingface_hub's ``HfFileSystem`` (no full download); the revision is resolved to
a commit sha once and every file is read at that sha, so a release records exactly
what it was built from.

Besides JSONL files, an input can be an archive of them (``.tar``, ``.tar.gz``/``.tgz``,
``.tar.zst``), whole or byte-split into parts (``NAME.part_aa``, ``NAME.part_ab``, ... or
``NAME.001``, ``NAME.002``, ...): the form unarXive 2024 is published in. Parts are found
beside each other, checked to be complete, and read as one stream in part order
(:mod:`pipeline.corpus.archive`).
"""

from __future__ import annotations

import bz2
import contextlib
import errno
import fnmatch
import functools
import glob
import hashlib
import lzma
import os
import re
import stat
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, Any, NamedTuple

from pipeline.core.errors import PipelineError
from pipeline.corpus.compression import Decompressed, StreamError, compression_of

SUFFIXES = (".jsonl", ".jsonl.gz", ".jsonl.zst", ".jsonl.xz", ".jsonl.bz2", ".json")
ARCHIVE_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.zst", ".tar.zstd", ".tzst")
# NAME.part_aa, NAME.part_ab, ... (split's default with a "part_" prefix, as the Hub
# publishes unarXive 2024) and NAME.001, NAME.002, ... (split -d -a 3, 7-Zip)
_PART = re.compile(
    r"^(?P<base>.+\.(?:tar|tar\.gz|tgz|tar\.zst|tar\.zstd|tzst))\.(?:part_(?P<alpha>[a-z]+)|(?P<num>[0-9]{3,}))$"
)
_HF = re.compile(r"^hf://datasets/(?P<repo>[^/@]+/[^/@]+)(?:@(?P<rev>[^/]+))?(?:/(?P<glob>.*))?$")
_HF_REVISION = re.compile(r"^(hf://datasets/[^/]+/[^/@]+)@[^/]+")
READ_BUFFER = 8 * 1024 * 1024
BOM = b"\xef\xbb\xbf"
LONG_LINE_HEAD = 4096  # bytes of an over-long line kept for its reject record


class InputError(PipelineError, ValueError):
    """An ``--input`` spec matched nothing or could not be read."""


def _part_number(alpha: str | None, num: str | None) -> int:
    """``aa`` -> 0, ``ab`` -> 1, ``ba`` -> 26; ``001`` -> 1."""
    if num is not None:
        return int(num)
    n = 0
    for ch in alpha or "":
        n = n * 26 + ord(ch) - ord("a")
    return n


def _part_label(alpha: str | None, num: str | None, index: int) -> str:
    """The suffix the part numbered ``index`` would have, in the naming of ``alpha``/``num``."""
    if num is not None:
        return str(index).zfill(len(num))
    width = len(alpha or "aa")
    chars = []
    for _ in range(width):
        index, r = divmod(index, 26)
        chars.append(chr(ord("a") + r))
    return "part_" + "".join(reversed(chars))


class InputReadError(PipelineError):
    """An input file could not be read to its end (corrupt compression, I/O or network error).

    Attributes:
        reason: ``"<exception type>: <message>"`` of the underlying error.
        lines_read: lines read before the failure.
    """

    def __init__(self, path: str, reason: str, lines_read: int, bytes_read: int = 0):
        super().__init__(
            f"{display(path)}: {reason} (after {lines_read} lines, {bytes_read:,} bytes)"
        )
        self.reason = reason
        self.lines_read = lines_read
        self.bytes_read = bytes_read


def _read_errors() -> tuple[type[BaseException], ...]:
    """What a damaged or unreachable file raises while it is read (OSError covers gzip's
    BadGzipFile, bz2 and Hub HTTP errors after huggingface_hub's own retries)."""
    import zstandard

    return (OSError, EOFError, zlib.error, lzma.LZMAError, zstandard.ZstdError, StreamError)


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
        sha256: a part's published sha256, checked as it is read: the Hub's LFS hash,
            or a ``SHA256SUMS`` / ``<part>.sha256`` file beside local parts.
        parts: for an archive, its files in stream order (one for a whole archive,
            several for a byte-split one); empty for a JSONL file. An archive's ``path``
            and ``name`` are its first part's without the part suffix, its ``size`` the
            parts' total and its ``identity`` theirs joined.
    """

    path: str
    size: int
    identity: str
    revision: str = ""
    name: str = ""
    parts: tuple[InputFile, ...] = ()
    sha256: str = ""  # the published sha256 of an archive's part (Hub LFS, SHA256SUMS)

    @property
    def is_archive(self) -> bool:
        """Whether this input is an archive (its members are the input units)."""
        return bool(self.parts)

    @property
    def key(self) -> str:
        """Stable, filesystem-safe name for this file's outputs and marker.

        Hub paths are keyed without their ``@<commit>``: a new revision of the dataset
        keeps the keys of files it did not change (their identity, the etag, still
        decides whether they are redone).
        """
        name = self.path.rstrip("/").rsplit("/", 1)[-1]
        for suf in SUFFIXES if not self.parts else ():
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


def _is_archive_file(name: str) -> bool:
    return name.endswith(ARCHIVE_SUFFIXES) or _PART.match(name) is not None


def _walk(root: Path, exclude: tuple[Path, ...]) -> list[Path]:
    """Every file under ``root``, following symlinked folders (once each).

    Raises:
        InputError: a folder under ``root`` cannot be entered (permissions, a broken
            mount): its files would be lost without a word.
    """
    found: list[Path] = []
    problems: list[str] = []
    seen: set[tuple[int, int]] = set()

    def refuse(err: OSError) -> None:
        problems.append(f"{display(str(err.filename))} ({err.strerror or type(err).__name__})")

    for folder, dirs, files in os.walk(root, onerror=refuse, followlinks=True):
        here = Path(folder)
        try:
            st = here.stat()
        except OSError as e:
            refuse(e)
            dirs[:] = []
            continue
        if (st.st_dev, st.st_ino) in seen or any(_within(here, x) for x in exclude):
            dirs[:] = []  # a symlink loop, or the work directory inside the input
            continue
        seen.add((st.st_dev, st.st_ino))
        dirs.sort()
        found.extend(here / f for f in sorted(files))
    if problems:
        raise InputError(
            f"--input {display(str(root))}: cannot enter {len(problems)} folder(s): "
            + "; ".join(problems[:5])
            + " (fix the permissions, or give the readable folders as --input)"
        )
    return found


def _within(path: Path, folder: Path) -> bool:
    try:
        return path.resolve().is_relative_to(folder)
    except (OSError, RuntimeError):  # Path.resolve raises RuntimeError on a symlink loop
        return False


class NotARegularFile(OSError):
    """An input entry that is not a regular file (a FIFO, a device, a symlink loop or a
    dangling symlink): reading it would block, never end or fail, so it is a failed input
    with this reason, counted like a damaged file."""

    def __init__(self, path: str, what: str) -> None:
        super().__init__(errno.EINVAL, what, path)

    def __str__(self) -> str:
        return f"{self.strerror}: not a regular file, not read"


def _file_kind(mode: int) -> str:
    for test, kind in (
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISDIR, "a directory"),
    ):
        if test(mode):
            return kind
    return "not a regular file"


def regular_file_problem(path: str | Path) -> str | None:
    """Why ``path`` cannot be read as an input file, or None for a regular file."""
    try:
        mode = os.stat(path).st_mode
    except OSError as e:  # ELOOP: a symlink loop; ENOENT: a dangling symlink
        return e.strerror or type(e).__name__
    return None if stat.S_ISREG(mode) else _file_kind(mode)


def _local(spec: str, exclude: tuple[Path, ...] = ()) -> list[InputFile]:
    p = Path(spec)
    if p.is_dir():
        root = p
        paths = [q for q in _walk(p, exclude) if _is_data_file(q.name) or _is_archive_file(q.name)]
    elif p.is_file():
        root = p.parent
        paths = [p]
        m = _PART.match(p.name)
        if m is not None:  # a part stands for its archive: find its siblings
            paths = [q for q in sorted(p.parent.iterdir()) if _base_of(q.name) == m["base"]]
    else:
        # names are relative to the part of the glob before its first wildcard
        root = _glob_root(spec)
        paths = _glob(spec, exclude)
    out = []
    sums: dict[Path, dict[str, str]] = {}
    for q in paths:
        if any(_within(q, x) for x in exclude):
            continue
        name = q.relative_to(root).as_posix() if q.is_relative_to(root) else q.name
        problem = regular_file_problem(q)
        if problem is not None:
            # listed, so that extract records it as a failed input with this reason (as
            # it does a damaged file) instead of blocking on it or stopping the run
            path = os.path.abspath(q)
            identity = f"{path}|{problem}"
            out.append(InputFile(path, 0, identity, "", name))
            continue
        st = q.stat()
        path = str(q.resolve())
        digest = ""
        if _is_archive_file(q.name):
            if q.parent not in sums:
                sums[q.parent] = _published_sums(q.parent)
            digest = sums[q.parent].get(q.name, "")
        identity = f"{path}|{st.st_size}|{st.st_mtime_ns}"
        out.append(InputFile(path, st.st_size, identity, "", name, sha256=digest))
    return _group_parts(out)


_SUM_LINE = re.compile(r"^([0-9a-fA-F]{64})\s+\*?(.+?)\s*$")


def _published_sums(folder: Path) -> dict[str, str]:
    """sha256 by file name from ``SHA256SUMS`` and ``<file>.sha256`` files in ``folder``
    (``sha256sum``'s format), for checking archive parts as they are read."""
    found: dict[str, str] = {}
    files = sorted(folder.glob("*.sha256"))
    if (folder / "SHA256SUMS").is_file():
        files.insert(0, folder / "SHA256SUMS")
    for f in files:
        with contextlib.suppress(OSError, UnicodeDecodeError):
            for line in f.read_text().splitlines():
                m = _SUM_LINE.match(line)
                if m:
                    found[m.group(2).rsplit("/", 1)[-1]] = m.group(1).lower()
    return found


def _base_of(name: str) -> str | None:
    m = _PART.match(name)
    return m["base"] if m else None


def _group_parts(files: list[InputFile]) -> list[InputFile]:
    """JSONL files as they are; archives, whole or in parts, as one input each.

    Raises:
        InputError: an archive's parts are incomplete (a missing part names itself) or
            mix two namings.
    """
    out: list[InputFile] = []
    groups: dict[str, list[tuple[int, InputFile, re.Match[str]]]] = {}
    for f in files:
        base_name = f.path.rsplit("/", 1)[-1]
        m = _PART.match(base_name)
        if m is not None:
            key = f.path[: len(f.path) - len(base_name)] + m["base"]
            groups.setdefault(key, []).append((_part_number(m["alpha"], m["num"]), f, m))
        elif base_name.endswith(ARCHIVE_SUFFIXES):
            out.append(replace(f, parts=(f,)))
        elif _is_data_file(base_name):
            out.append(f)
    wholes = {f.path for f in out if f.is_archive}
    for key, members in sorted(groups.items()):
        if key in wholes:
            raise InputError(
                f"{display(key)} is there whole and in parts: give one of them as --input"
            )
        members.sort(key=lambda t: t[0])
        numbers = [n for n, _, _ in members]
        first = members[0][2]
        kinds = {m["alpha"] is None for _, _, m in members}
        if len(kinds) > 1:
            raise InputError(f"{display(key)}: parts named both NAME.part_xx and NAME.NNN")
        start = 0 if first["alpha"] is not None else min(numbers[0], 1)
        want = list(range(start, start + len(members) + 1))
        missing = [n for n in want if n not in numbers and n < numbers[-1]]
        if numbers[0] != start:
            missing = list(range(start, numbers[0])) + missing
        if missing:
            label = _part_label(first["alpha"], first["num"], missing[0])
            raise InputError(
                f"{display(key)}.{label} is missing: the archive's parts are "
                f"{', '.join(_part_label(first['alpha'], first['num'], n) for n in numbers)} "
                "and each part continues the one before it; add the missing part"
            )
        parts = tuple(f for _, f, _ in members)
        head = parts[0]
        name = head.name[: len(head.name) - len(head.path) + len(key)] if head.name else ""
        out.append(
            InputFile(
                key,
                sum(p.size for p in parts),
                "||".join(p.identity for p in parts),
                head.revision,
                name or key.rsplit("/", 1)[-1],
                parts,
            )
        )
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


def _glob(spec: str, exclude: tuple[Path, ...]) -> list[Path]:
    """Every entry but a folder that a glob names, each real one once (a FIFO or a symlink
    loop it names is listed: a failed input).

    A ``**`` is matched against :func:`_walk`, which enters each real folder once, as the
    folder form does: glob's own ``**`` follows a symlink back into a folder it is in,
    down to the system's 40 levels (one such link gave 41 paths per entry; two, 2**40).
    Without ``**`` a glob's depth is its own; an entry it reaches by two paths (through a
    symlinked folder) is listed once, under its shortest path.

    Raises:
        InputError: a folder a ``**`` passes cannot be entered (as :func:`_walk`).
    """
    root = _glob_root(spec)
    pattern = Path(spec).parts[len(root.parts) :]
    if spec.endswith("/"):  # names folders only, as glob reads it
        paths = []
    elif "**" not in pattern:
        paths = [Path(q) for q in glob.glob(spec) if not Path(q).is_dir()]
    elif root.is_dir():
        paths = [q for q in _walk(root, exclude) if _matches(q.relative_to(root).parts, pattern)]
    else:
        paths = []
    once: dict[tuple[str, str], Path] = {}
    for q in sorted(paths, key=lambda q: (len(q.parts), q)):
        once.setdefault((os.path.realpath(q.parent), q.name), q)
    return sorted(once.values())


def _matches(parts: tuple[str, ...], pattern: tuple[str, ...]) -> bool:
    """Whether a relative path matches a glob's parts as :func:`glob.glob` matches them: a
    ``**`` part stands for any number of folders, and a wildcard matches no hidden name
    unless it starts with a dot itself."""

    @functools.cache
    def match(i: int, j: int) -> bool:
        if j == len(pattern):
            return i == len(parts)
        if pattern[j] == "**":
            return match(i, j + 1) or (
                i < len(parts) and not parts[i].startswith(".") and match(i + 1, j)
            )
        return (
            i < len(parts)
            and (pattern[j].startswith(".") or not parts[i].startswith("."))
            and fnmatch.fnmatchcase(parts[i], pattern[j])
            and match(i + 1, j + 1)
        )

    return match(0, 0)


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
        leaf = path.rsplit("/", 1)[-1]
        if info.get("type") != "file" or not (_is_data_file(leaf) or _is_archive_file(leaf)):
            continue
        etag = (info.get("lfs") or {}).get("sha256") or info.get("blob_id") or ""
        name = path[len(base) + 1 :]
        # identity without the commit: an unchanged file (same etag) in a new revision
        # of the dataset is not extracted again
        identity = f"hf://datasets/{repo}/{name}|{info['size']}|{etag}"
        lfs = (info.get("lfs") or {}).get("sha256") or ""
        out.append(InputFile(f"hf://{path}", int(info["size"]), identity, sha, name, sha256=lfs))
    return _group_parts(out)


def resolve_inputs(specs: list[str], exclude: list[Path] | None = None) -> list[InputFile]:
    """All input files (and archives) named by ``specs``, deduplicated and sorted by path.

    ``exclude``: folders never read as input (the work directory, when it lies inside
    an input folder: its own markers are ``.json`` files).

    Raises:
        InputError: a spec matches no data file, or a folder under it cannot be entered.
    """
    found: dict[str, InputFile] = {}
    skip = tuple(Path(x).resolve() for x in exclude or ())
    for spec in specs:
        files = _hub(spec) if spec.startswith("hf://") else _local(spec, skip)
        if not files:
            raise InputError(
                f"--input {spec}: no {'/'.join(SUFFIXES)} file and no "
                f"{'/'.join(ARCHIVE_SUFFIXES)} archive (or NAME.part_aa, NAME.001 parts) found"
            )
        for f in files:
            found[f.path] = f
    return [found[k] for k in sorted(found)]


def shard(files: list[InputFile], index: int, count: int) -> list[InputFile]:
    """``sorted(files)[index::count]`` so ``count`` machines split one corpus.

    Archives are not split by file: every shard reads each archive and takes its own
    share of the archive's units (``pipeline.corpus.archive``: unit ``u`` is shard ``u % count``'s).
    """
    if not 0 <= index < count:
        raise InputError(f"--shard {index}/{count}: need 0 <= I < N")
    plain = sorted((f for f in files if not f.is_archive), key=lambda f: f.path)
    archives = sorted((f for f in files if f.is_archive), key=lambda f: f.path)
    return plain[index::count] + archives


class _Listed:
    """A local file read no further than the size it was listed with: a file that grows
    while it is read (one being written, or a /proc file that lists as 0 bytes) fails as
    an archive part that changed does, instead of being read without end."""

    def __init__(self, raw: IO[bytes], path: str, size: int) -> None:
        self._raw, self._path, self._left, self._size = raw, path, size, size

    def read(self, n: int = -1) -> bytes:
        data = self._raw.read(n if n is not None and n >= 0 else self._left + 1)
        self._left -= len(data)
        if self._left < 0:
            raise OSError(
                f"{display(self._path)}: is longer than the {self._size:,} bytes it was "
                "listed with: it changed while it was read; rerun"
            )
        return data

    def close(self) -> None:
        self._raw.close()

    def __enter__(self) -> _Listed:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._raw, name)


def open_raw(f: InputFile) -> IO[bytes]:
    """The file's bytes as stored (compressed or not), from a local path or the Hub.

    Raises:
        NotARegularFile: a local entry that is not a regular file (checked on the open
            descriptor, which never blocks: a FIFO opened to be read would wait for a writer).
    """
    if f.path.startswith("hf://"):
        from huggingface_hub import HfFileSystem

        return HfFileSystem().open(f.path[len("hf://") :], "rb", block_size=READ_BUFFER)
    try:
        fd = os.open(f.path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENOENT) and os.path.islink(f.path):
            raise NotARegularFile(f.path, f"a symlink that leads nowhere ({e.strerror})") from None
        raise
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise NotARegularFile(f.path, _file_kind(mode))
    os.set_blocking(fd, True)
    raw = open(fd, "rb", buffering=READ_BUFFER)  # noqa: SIM115 - closed by caller
    return _Listed(raw, f.path, f.size)  # type: ignore[return-value]


def open_binary(f: InputFile) -> IO[bytes] | Decompressed:
    """Decompressed byte stream of an input file (by suffix).

    gzip and zstd end only where their decompressor says the stream ends
    (:class:`pipeline.corpus.compression.Decompressed`): a cut file is an error, not a short read.
    """
    raw = open_raw(f)
    name = f.path
    if name.endswith(".xz"):
        return lzma.LZMAFile(raw)
    if name.endswith(".bz2"):
        return bz2.BZ2File(raw)
    kind = compression_of(name)
    return Decompressed(raw, kind) if kind else raw


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
    counter = [0, 0]  # lines, decompressed bytes
    try:
        yield from _lines(f, limit, counter)
    except _read_errors() as e:
        raise InputReadError(f.path, f"{type(e).__name__}: {e}", counter[0], counter[1]) from e


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
        yield from stream_lines(stream, limit, counter, whole=f.path.endswith(".json"))


_NOT_BLANK = re.compile(rb"[^ \t\r\n\f\v]")


def _read_up_to(stream: Any, n: int) -> bytes:
    """``n`` bytes, or all there are (a decompressing stream returns less per read)."""
    parts = []
    while n > 0:
        data = stream.read(min(n, READ_BUFFER))
        if not data:
            break
        parts.append(data)
        n -= len(data)
    return b"".join(parts)


def stream_lines(
    stream: IO[bytes] | Decompressed | Any,
    limit: int,
    counter: list[int],
    whole: bool = False,
) -> Iterator[tuple[int, bytes | memoryview | LongLine]]:
    """The lines of a byte stream with ``read(n)``, as :func:`iter_lines` describes them.

    ``whole``: the stream holds one JSON object (a ``.json`` file), yielded as line 1.
    ``counter[0]`` holds the number of the last line read, for error messages.
    """
    if whole:
        data = _read_up_to(stream, min(limit, 1 << 40) + 1)
        counter[1] = len(data)
        data = data[len(BOM) :] if data.startswith(BOM) else data
        counter[0] = 1
        if len(data) > limit:
            length = len(data) + sum(len(c) for c in iter(lambda: stream.read(READ_BUFFER), b""))
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
        counter[1] += len(chunk)
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
            if end == start or chunk[start] <= 32:
                # blank lines are skipped in one step, whatever their number (a
                # compressed file of nothing but newlines took minutes line by line)
                hit = _NOT_BLANK.search(chunk, start)
                stop = chunk.rfind(b"\n", start, hit.start() if hit else len(chunk)) + 1
                if stop > start:
                    number += chunk.count(b"\n", start, stop)
                    counter[0] = number
                    start = stop
                    continue
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
