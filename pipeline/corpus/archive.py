"""Archives as input: the JSONL members of a tar (plain, gzip or zstd; one file or
byte-split parts), read as one stream and grouped into units.

unarXive 2024 is published as one gzip-compressed tar cut at arbitrary bytes into
``unarXive_2024.tar.gz.part_aa``, ``_ab``, ``_ac``: part ``ab`` cannot be decompressed
without ``aa``. So the parts are read in order as one stream (:class:`PartsReader`),
decompressed (:class:`pipeline.corpus.compression.Decompressed`), and the tar is parsed as it
streams (``tarfile`` in stream mode), never unpacked to disk.

**Units.** A run of consecutive JSONL members is one *unit*: the input unit of the
extract stage, with its own outputs, marker and manifest (``<archive key>.<index>``). A
unit closes after the member that brings its JSONL bytes to ``unit_bytes``, so its
composition follows from the archive and the config alone, and it is known at that
member's header, before its data: a rerun or a shard decides whether to decode a unit
before reading it. Members keep their own identity inside a unit: each row's
``source_file`` is its member's path, line numbers restart in every member, and a paper
twice in one member is a duplicate as in a file (so an archive and its unpacked tree
give the same rows). Grouping members matters at corpus scale: unarXive 2024 holds
millions of small members, and a Parquet file and a marker per member would be millions
of files for every later stage to open.

Directories, non-JSONL members (``._*`` resource forks included) and empty members are
skipped and counted (:attr:`ArchiveReader.members`).

**Damage** (a missing or reordered part, a truncated last part, a flipped byte, a part
that changed while read) raises :class:`ArchiveError`, one line naming the part; every
unit read completely before it stays valid.
"""

from __future__ import annotations

import hashlib
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from pipeline.core.errors import PipelineError
from pipeline.corpus.compression import (
    GZIP_MAGIC,
    ZSTD_MAGIC,
    Decompressed,
    StreamError,
    compression_of,
)
from pipeline.corpus.sources import InputFile, display, open_raw

READ_ERRORS = (StreamError, tarfile.TarError, EOFError)  # what a damaged archive raises
TAR_BUFFER = 1 << 20  # decompressed bytes tarfile reads at a time
CHUNK = 4 << 20  # bytes of member data handed on at a time


class ArchiveError(PipelineError):
    """An archive cannot be read on: the message names the part and what is wrong.

    Attributes:
        part: the part's name (its path relative to its ``--input``).
        index: the part's index, or -1.
        checksum: found by a checksum (the part's published sha256, or gzip's CRC at
            the end of the stream), not where it is: data read before it is suspect too.
    """

    def __init__(self, message: str, part: str = "", index: int = -1, checksum: bool = False):
        super().__init__(message)
        self.part = part
        self.index = index
        self.checksum = checksum


def part_names(archive: InputFile) -> list[str]:
    """Each part's name, as messages show it."""
    return [display(p.name or p.path.rsplit("/", 1)[-1]) for p in archive.parts]


class PartsReader:
    """``read(n)`` over an archive's parts in order, as if they were one file.

    Each part must yield exactly the size it was listed with: a part that grew or shrank
    since (rewritten, re-downloaded, cut by a full disk) is an error naming it.
    """

    def __init__(self, archive: InputFile):
        self.parts = archive.parts
        self.names = part_names(archive)
        self.index = -1
        self.offset = 0  # bytes read over all parts
        self._starts: list[int] = []
        start = 0
        for p in self.parts:
            self._starts.append(start)
            start += p.size
        self._file: IO[bytes] | None = None
        self._left = 0  # bytes the current part should still yield
        self._hash: Any = None  # sha256 of the current part so far, when it has a published one

    def part_at(self, offset: int) -> int:
        """Index of the part holding byte ``offset`` of the whole stream."""
        i = 0
        for k, s in enumerate(self._starts):
            if s <= offset:
                i = k
        return i

    def _next_part(self) -> bool:
        if self._file is not None:
            extra = self._file.read(1)
            self._file.close()
            self._file = None
            name = self.names[self.index]
            if extra:
                raise ArchiveError(
                    f"{name}: is longer than the {self.parts[self.index].size:,} "
                    "bytes it was listed with: it changed while it was read; rerun",
                    name,
                    self.index,
                )
            want = self.parts[self.index].sha256
            if self._hash is not None and self._hash.hexdigest() != want:
                raise ArchiveError(
                    f"{name}: its sha256 is {self._hash.hexdigest()[:16]}..., the published one "
                    f"{want[:16]}...: the part is damaged or not the published one; "
                    "download it again and rerun",
                    name,
                    self.index,
                    checksum=True,
                )
        if self.index + 1 >= len(self.parts):
            return False
        self.index += 1
        try:
            self._file = open_raw(self.parts[self.index])
        except OSError as e:
            raise ArchiveError(
                f"{self.names[self.index]}: cannot be opened: {e}", self.names[self.index]
            ) from None
        self._left = self.parts[self.index].size
        self._hash = hashlib.sha256() if self.parts[self.index].sha256 else None
        return True

    def read(self, n: int) -> bytes:
        while True:
            if self._file is None or self._left == 0:
                if not self._next_part():
                    return b""
                continue
            try:
                data = self._file.read(min(n, self._left))
            except OSError as e:
                raise ArchiveError(
                    f"{self.names[self.index]}: cannot be read at byte "
                    f"{self.parts[self.index].size - self._left:,}: {e}",
                    self.names[self.index],
                ) from None
            if not data:
                size = self.parts[self.index].size
                raise ArchiveError(
                    f"{self.names[self.index]}: ends at byte {size - self._left:,} of the "
                    f"{size:,} it was listed with: it is truncated or changed while it was "
                    "read; replace it and rerun",
                    self.names[self.index],
                )
            self._left -= len(data)
            self.offset += len(data)
            if self._hash is not None:
                self._hash.update(data)
            return data

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


@dataclass(frozen=True)
class Member:
    """A tar member: its path inside the archive and the header fields that identify it."""

    name: str
    size: int
    mtime: int
    kind: str  # "jsonl", "empty", "non_jsonl", "directory", "other"

    def header(self) -> list[Any]:
        return [self.name, self.size, self.mtime]


def _kind(info: tarfile.TarInfo, name: str) -> str:
    if info.isdir():
        return "directory"
    if not info.isfile():
        return "other"  # links, devices, fifos: nothing to read
    leaf = name.rsplit("/", 1)[-1]
    if not name.endswith(".jsonl") or leaf.startswith("._"):
        return "non_jsonl"
    return "jsonl" if info.size > 0 else "empty"


def _member_name(info: tarfile.TarInfo) -> str:
    name = info.name
    while name.startswith("./"):
        name = name[2:]
    return name.lstrip("/")


class _MemberData:
    """``read(n)`` of a member's data, from the decompressed stream under tarfile's.

    tarfile's stream (``tf.fileobj``) hands data on by joining its reads and slicing the
    rest off: two copies of every byte, under the GIL, as long as the decompression
    itself (measured over the bench archive). So what tarfile has read ahead (its
    ``buf``) is handed on first, then the data is read from the stream below, and
    tarfile's position (``pos``) moves by what was read: it then finds the next header
    where it expects it. A tarfile without these attributes is read through as before.
    """

    def __init__(self, tar_stream: Any, size: int):
        self._tar = tar_stream
        self._below = getattr(tar_stream, "fileobj", None)
        self._direct = (
            self._below is not None
            and isinstance(getattr(tar_stream, "buf", None), bytes)
            and isinstance(getattr(tar_stream, "pos", None), int)
        )
        self._left = size

    def read(self, n: int = CHUNK) -> bytes:
        if self._left <= 0:
            return b""
        want = min(n, self._left)
        tar = self._tar
        if not self._direct:
            data = tar.read(want)
        elif tar.buf:
            data, tar.buf = tar.buf[:want], tar.buf[want:]
            tar.pos += len(data)
        else:
            data = self._below.read(want)
            tar.pos += len(data)
        if not data:
            raise tarfile.ReadError("unexpected end of data inside a member")
        self._left -= len(data)
        return data


class _Buffered:
    """``read(n)`` over member data already read."""

    def __init__(self, chunks: list[bytes]):
        self._chunks = chunks
        self._i = 0

    def read(self, n: int = CHUNK) -> bytes:
        if self._i >= len(self._chunks):
            return b""
        self._i += 1
        return self._chunks[self._i - 1]


@dataclass
class Unit:
    """A unit of an archive: its index, its JSONL members, and (once read) where it ended.

    Its data can be read once, member by member, with :meth:`members_data`, or skipped
    with :meth:`drain`; the reader moves on to the next unit only after one of them.
    """

    index: int
    members: list[Member]
    _buffered: list[list[bytes]] = field(default_factory=list, repr=False)
    _last: Any = field(default=None, repr=False)  # the last member's tar file object, if open
    parts_end: int = -1  # index of the part the unit's last byte was read from
    consumed: bool = False
    _where: Any = field(default=None, repr=False)  # () -> index of the part read up to

    def members_hash(self) -> str:
        """Hash of the members' header fields (path, size, mtime), in order."""
        h = hashlib.sha256()
        for m in self.members:
            h.update(repr(m.header()).encode("utf-8", "surrogateescape"))
        return h.hexdigest()

    def members_data(self) -> Iterator[tuple[Member, Any]]:
        """``(member, stream)`` for each member in order; each stream has ``read(n)``."""
        self.consumed = True
        for i, m in enumerate(self.members):
            if i < len(self._buffered):
                yield m, _Buffered(self._buffered[i])
            else:
                yield m, self._last
        self._finish()

    def drain(self) -> None:
        """Skip the unit's data (the reader still has to read through it)."""
        self.consumed = True
        self._finish()

    def _finish(self) -> None:
        self._buffered = []
        if self._last is not None:
            while self._last.read(CHUNK):  # what the consumer left of the last member
                pass
            self._last = None
        self.parts_end = self._where()


class ArchiveReader:
    """The units of one archive, in order, read as one stream.

    Attributes:
        members: count of members by kind (``jsonl``, ``empty``, ``non_jsonl``,
            ``directory``, ``other``), over the whole archive once read.
        decompressed: decompressed bytes read so far.
    """

    def __init__(self, archive: InputFile, unit_bytes: int):
        self.archive = archive
        self.unit_bytes = unit_bytes
        self.members: dict[str, int] = {}
        self.raw = PartsReader(archive)
        self.kind = compression_of(archive.path)
        self.stream = Decompressed(self.raw, self.kind)

    @property
    def decompressed(self) -> int:
        return self.stream.produced

    def part_now(self) -> int:
        """Index of the part the stream has read up to."""
        return self.raw.part_at(max(self.raw.offset - 1, 0))

    def _fail(self, what: str, offset: int | None = None) -> ArchiveError:
        at = self.raw.offset if offset is None else offset
        i = self.raw.part_at(max(at - 1, 0))
        names = self.raw.names
        part = names[i] if names else display(self.archive.name)
        within = at - sum(p.size for p in self.archive.parts[:i])
        if self.stream.crc_failed:
            # gzip checks its CRC only at the end: the wrong byte can be in any part
            return ArchiveError(
                f"{display(self.archive.name)}: the {self.kind} checksum at the end of the "
                "stream does not match: a byte of some part is wrong, and every unit read "
                "in this run is discarded; check each part against its published sha256 "
                "(a SHA256SUMS file beside the parts names the damaged one) and rerun",
                display(self.archive.name),
                0,
                checksum=True,
            )
        hint = (
            "; a part is out of order, damaged or from another archive: check each part "
            "against its published sha256 and rerun"
            if len(names) > 1
            else "; replace the file and rerun"
        )
        return ArchiveError(f"{part}: {what} (near byte {within:,} of the part){hint}", part, i)

    def _check_start(self) -> None:
        head = self.raw.read(max(len(GZIP_MAGIC), len(ZSTD_MAGIC)))
        magic = {"gzip": GZIP_MAGIC, "zstd": ZSTD_MAGIC}.get(self.kind)
        if magic is not None and not head.startswith(magic):
            part = self.raw.names[0]
            raise ArchiveError(
                f"{part}: does not start with a {self.kind} header: it is not the first part "
                "(parts out of order or misnamed) or not a "
                f"{self.kind} archive",
                part,
            )
        self.stream.raw = _Prefixed(head, self.raw)

    def damage(self, e: BaseException) -> ArchiveError:
        """The one-line error for what reading the archive raised (it may surface while a
        unit's data is read, outside :meth:`units`)."""
        if isinstance(e, ArchiveError):
            return e
        if isinstance(e, StreamError):
            return self._fail(str(e), e.offset)
        return self._fail(f"damaged tar data: {type(e).__name__}: {e}")

    def units(self) -> Iterator[Unit]:
        """Every unit, in order; each must be read or drained before the next.

        Raises:
            ArchiveError: the archive is damaged (names the part).
        """
        try:
            self._check_start()
            yield from self._units()
        except READ_ERRORS as e:
            raise self.damage(e) from None
        finally:
            self.raw.close()

    def _units(self) -> Iterator[Unit]:
        tf = tarfile.open(fileobj=self.stream, mode="r|", bufsize=TAR_BUFFER)  # type: ignore[call-overload]
        index = 0
        members: list[Member] = []
        buffered: list[list[bytes]] = []
        held = 0
        for info in tf:
            name = _member_name(info)
            kind = _kind(info, name)
            self.members[kind] = self.members.get(kind, 0) + 1
            if kind != "jsonl":
                continue
            member = Member(name, info.size, int(info.mtime), kind)
            members.append(member)
            f = _MemberData(tf.fileobj, info.size)
            held += info.size
            if held < self.unit_bytes:
                buffered.append(_read_all(f))
                continue
            unit = Unit(index, members, buffered, f, _where=self.part_now)
            yield unit
            if not unit.consumed:
                raise RuntimeError("a unit was neither read nor drained")
            index += 1
            members, buffered, held = [], [], 0
        self._check_end(tf)
        if members:
            last = len(self.archive.parts) - 1
            unit = Unit(index, members, buffered, None, _where=lambda: last)
            yield unit
            if not unit.consumed:
                raise RuntimeError("a unit was neither read nor drained")

    def _check_end(self, tf: tarfile.TarFile) -> None:
        """After tarfile's end of archive only zero padding may follow, then the end of the
        compressed stream: tarfile also stops at a damaged header, and that must not pass
        for the end."""
        rest = getattr(tf.fileobj, "buf", b"")
        while True:
            if rest.strip(b"\0"):
                raise self._fail(
                    "damaged tar data: a member header is invalid (tar stops reading there)"
                )
            rest = self.stream.read(TAR_BUFFER)
            if not rest:
                return


class _Prefixed:
    """A reader that first returns ``head``, then reads ``raw``."""

    def __init__(self, head: bytes, raw: Any):
        self.head = head
        self.raw = raw

    def read(self, n: int) -> bytes:
        if self.head:
            out, self.head = self.head, b""
            return out
        return self.raw.read(n)

    def close(self) -> None:
        self.raw.close()


def _read_all(f: Any) -> list[bytes]:
    chunks = []
    while True:
        data = f.read(CHUNK)
        if not data:
            return chunks
        chunks.append(data)


def unit_key(archive: InputFile, index: int) -> str:
    """File key of an archive's unit ``index`` (its outputs, marker and manifest)."""
    return f"{archive.key}.{index:06d}"


def unit_identity(archive: InputFile, unit: Unit, parts_end: int) -> str:
    """What a unit's content depends on: its members' header fields and the identities of
    the parts up to the one its last byte was read from (later parts cannot change it)."""
    parts = [p.identity for p in archive.parts[: parts_end + 1]]
    return hashlib.sha256(
        repr([unit.members_hash(), parts]).encode("utf-8", "surrogateescape")
    ).hexdigest()


PACK_MTIME = 1704067200  # 2024-01-01: fixed, so a packed archive has the same bytes every time


def pack(
    members: list[tuple[str, bytes | None]],
    dest: Path,
    name: str = "unarXive_2024.tar.gz",
    parts: int = 3,
    numbered: bool = False,
) -> list[Path]:
    """Write ``members`` as one gzip-compressed tar cut into ``parts`` byte pieces, the
    form unarXive 2024 is published in (``NAME.part_aa``, ...; ``NAME.001``, ... with
    ``numbered``). Deterministic: same members, same bytes.

    Args:
        members: ``(path inside the archive, data)`` in archive order; ``None`` data is a
            directory.
        dest: folder for the parts (created).
        name: the archive's name.
        parts: pieces to cut it into (1: the whole archive, without a part suffix).
        numbered: name parts ``.001``, ``.002`` instead of ``.part_aa``, ``.part_ab``.

    Returns:
        The parts' paths, in order.
    """
    import gzip
    import io

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
        for path, data in members:
            info = tarfile.TarInfo(path)
            info.mtime = PACK_MTIME
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            if data is None:
                info.type = tarfile.DIRTYPE
                info.mode = 0o755
                tf.addfile(info)
            else:
                info.size = len(data)
                info.mode = 0o644
                tf.addfile(info, io.BytesIO(data))
    blob = gzip.compress(buf.getvalue(), compresslevel=6, mtime=0)
    dest.mkdir(parents=True, exist_ok=True)
    if parts <= 1:
        path = dest / name
        path.write_bytes(blob)
        return [path]
    size = -(-len(blob) // parts)
    out = []
    for i in range(parts):
        suffix = f"{i + 1:03d}" if numbered else "part_" + chr(97 + i // 26) + chr(97 + i % 26)
        path = dest / f"{name}.{suffix}"
        path.write_bytes(blob[i * size : (i + 1) * size])
        out.append(path)
    return out
