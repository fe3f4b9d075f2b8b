"""The published form in `make bench`: decompression alone per library, and extract from
the split tar.gz against extract from the same JSONL as plain files, at 1 and 2 workers.

The bench corpus's files are packed as unarXive 2024 is on the Hub: one tar (gzip level
6, the ``tar -czf`` default) of ``processed_unarxive_extended_data/.../*.jsonl`` members,
cut into three parts (cached in ``<dir>/archive``). Rates are MB of uncompressed JSONL
per second, on the same bytes.
"""

from __future__ import annotations

import gzip
import shutil
import tarfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from pipeline.core.config import Config
from pipeline.corpus.archive import PACK_MTIME, ArchiveReader
from pipeline.corpus.compression import Decompressed
from pipeline.corpus.sources import resolve_inputs
from pipeline.engine.map_stage import run_map
from pipeline.stages import GRAPH

MEMBER_ROOT = "processed_unarxive_extended_data/unarXive_01981221/bench"
READ = 4 << 20


def pack_split(files: list[Path], dest: Path, parts: int = 3) -> list[Path]:
    """``files`` as one tar.gz cut into ``parts`` (streamed: the corpus need not fit in memory)."""
    stamp = dest / f".done-{len(files)}-{sum(f.stat().st_size for f in files)}"
    if stamp.exists():
        return sorted(dest.glob("*.part_*"))
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    whole = whole_path(dest)
    whole.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with (
        open(whole, "wb") as raw,
        gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6, mtime=0) as gz,
    ):
        with tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tf:
            for f in files:
                info = tarfile.TarInfo(f"{MEMBER_ROOT}/{f.name}")
                info.size, info.mtime, info.mode = f.stat().st_size, PACK_MTIME, 0o644
                with open(f, "rb") as src:
                    tf.addfile(info, src)
    size = whole.stat().st_size
    step = -(-size // parts)
    out = []
    with open(whole, "rb") as src:
        for i in range(parts):
            part = dest / f"bench.tar.gz.part_a{chr(97 + i)}"
            with open(part, "wb") as dst:
                left = step
                while left > 0:
                    chunk = src.read(min(left, 64 << 20))
                    if not chunk:
                        break
                    dst.write(chunk)
                    left -= len(chunk)
            out.append(part)
    print(f"packed {size / 1e6:,.0f} MB of tar.gz in {time.perf_counter() - t0:.1f} s", flush=True)
    stamp.touch()
    return out


def whole_path(parts_dir: Path) -> Path:
    """The uncut archive, kept apart from its parts (one folder holding both would name
    one archive twice)."""
    return parts_dir.parent / f"{parts_dir.name}_whole" / "bench.tar.gz"


def _drain(open_stream: Callable[[], Any]) -> int:
    n = 0
    with open_stream() as f:
        while True:
            data = f.read(READ)
            if not data:
                return n
            n += len(data)


def decompressors(whole: Path, parts_dir: Path) -> dict[str, Callable[[], Any]]:
    """Each library's stream over the same tar.gz (the libraries that are installed)."""
    found: dict[str, Callable[[], Any]] = {"stdlib gzip": lambda: gzip.open(whole, "rb")}
    try:
        from isal import igzip, isal_zlib

        found["isal igzip"] = lambda: igzip.open(whole, "rb")
        (archive,) = resolve_inputs([str(parts_dir)])

        def ours() -> Any:
            from pipeline.corpus.archive import PartsReader

            return Decompressed(PartsReader(archive), "gzip", (isal_zlib, None))

        found["isal, the parts (ours)"] = ours
    except ImportError:
        pass
    try:
        from zlib_ng import gzip_ng

        found["zlib-ng gzip_ng"] = lambda: gzip_ng.open(whole, "rb")
    except ImportError:
        pass
    try:
        import rapidgzip

        found["rapidgzip, 1 thread"] = lambda: rapidgzip.open(str(whole), parallelization=1)
        found["rapidgzip, 2 threads"] = lambda: rapidgzip.open(str(whole), parallelization=2)
    except ImportError:
        pass
    return found


def time_decompress(files: list[Path], parts_dir: Path, repeat: int) -> dict[str, Any]:
    """``files`` packed as the Hub packs the corpus (cached in ``parts_dir``): the parts' MB
    and each library's decompression alone (MB of JSONL per second, best of ``repeat``)."""
    parts = pack_split(files, parts_dir)
    whole = whole_path(parts_dir)
    res: dict[str, Any] = {"archive_mb": round(sum(p.stat().st_size for p in parts) / 1e6, 1)}
    res["decompress_mb_s"] = {}
    for name, opener in decompressors(whole, parts_dir).items():
        res["decompress_mb_s"][name] = mb_s = _best_mb_s(partial(_drain, opener), repeat)
        print(f"decompress {name:<26} {mb_s:>8,.0f} MB/s", flush=True)
    # what the extract's reader thread does before handing a byte on: the parts as one
    # stream, decompressed, the tar members found and read through, units formed
    res["reader_mb_s"] = mb_s = _best_mb_s(partial(_read_units, parts_dir), repeat)
    print(f"the archive reader (ours: parts, ISA-L, tar, units) {mb_s:>8,.0f} MB/s", flush=True)
    return res


def _best_mb_s(read: Callable[[], int], repeat: int) -> float:
    """MB per second of ``read`` (which returns the bytes it produced), best of ``repeat``."""
    best, n = float("inf"), 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        n = read()
        best = min(best, time.perf_counter() - t0)
    return round(n / best / 1e6, 1)


def _read_units(parts_dir: Path) -> int:
    """Every unit of the archive in ``parts_dir`` read through; returns the bytes of tar
    decompressed (as the decompression rows count them)."""
    (archive,) = resolve_inputs([str(parts_dir)])
    reader = ArchiveReader(archive, Config().archive.unit_mb << 20)
    for unit in reader.units():
        unit.drain()
    return reader.decompressed


def time_run_map(spec: Path, out: Path, workers: int, cfg: Config) -> float:
    """Wall seconds of the extract stage over ``spec`` (worker start-up included)."""
    shutil.rmtree(out, ignore_errors=True)
    inputs = resolve_inputs([str(spec)])
    t0 = time.perf_counter()
    run_map(GRAPH["extract"], inputs, out, cfg, workers, force=True)
    return time.perf_counter() - t0


def measure(files: list[Path], work: Path, repeat: int) -> dict[str, Any]:
    """The archive figures of `make bench` (printed, and returned for its JSON line)."""
    size = sum(f.stat().st_size for f in files)
    res = time_decompress(files, work / "archive", repeat)
    plain_dir = files[0].parent
    cfg = Config()
    # Two workers are two spawned processes that import the pipeline before reading a byte:
    # a fixed cost, timed on two one-line files, that is a large share of a 1 GB run and
    # none of the real corpus's (371 GB)
    tiny = work / "tiny"
    shutil.rmtree(tiny, ignore_errors=True)
    tiny.mkdir(parents=True)
    for f in files[:2]:
        with open(f, "rb") as src:
            (tiny / f.name).write_bytes(src.readline())
    startup = min(time_run_map(tiny, work / "x_tiny", 2, cfg) for _ in range(repeat))
    res["start_up_s_2w"] = round(startup, 2)
    print(f"start-up of 2 worker processes (two one-line files): {startup:.2f} s", flush=True)
    for workers in (1, 2):
        plain = min(time_run_map(plain_dir, work / "x_plain", workers, cfg) for _ in range(repeat))
        arch = min(
            time_run_map(work / "archive", work / "x_arch", workers, cfg) for _ in range(repeat)
        )
        res[f"extract_plain_mb_s_{workers}w"] = round(size / plain / 1e6, 1)
        res[f"extract_archive_mb_s_{workers}w"] = round(size / arch / 1e6, 1)
        res[f"archive_vs_plain_{workers}w"] = round(plain / arch, 3)
        print(
            f"extract, {workers} worker(s): plain JSONL {size / plain / 1e6:>7,.0f} MB/s, "
            f"split tar.gz {size / arch / 1e6:>7,.0f} MB/s   archive/plain = {plain / arch:.2f}"
            + ("  target >= 0.6" if workers == 2 else ""),
            flush=True,
        )
        if workers == 2 and min(plain, arch) > startup:
            res["extract_plain_mb_s_2w_after_start_up"] = round(size / (plain - startup) / 1e6, 1)
            res["extract_archive_mb_s_2w_after_start_up"] = round(size / (arch - startup) / 1e6, 1)
            print(
                f"    without the {startup:.2f} s start-up: plain JSONL "
                f"{res['extract_plain_mb_s_2w_after_start_up']:,.0f} MB/s, split tar.gz "
                f"{res['extract_archive_mb_s_2w_after_start_up']:,.0f} MB/s   archive/plain = "
                f"{(plain - startup) / (arch - startup):.2f}",
                flush=True,
            )
    for scratch in ("x_plain", "x_arch", "x_tiny", "tiny"):
        shutil.rmtree(work / scratch, ignore_errors=True)
    return res
