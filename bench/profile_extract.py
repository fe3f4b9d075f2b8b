"""Where one extract worker's time goes, against decode-only: the figures behind (a)/(b).

``make bench`` reports (a) extract over (b) decode-only; this says what the rest of (a)
is. On the real-record bench corpus (``bench/real_corpus.py``, ``--size-mb``) or the
``.jsonl`` files of ``--input``, in one process and in interleaved rounds (this
machine's speed drifts between processes by more than the effects measured):

* (b) decode only and (a) extract, as ``make bench`` times them;
* (a0) extract with the writer thread's work removed: every batch's columns are built
  on the decoding thread as always, then dropped, nothing is written. (a0)/(b) is the
  most (a)/(b) can reach while the rows are built in Python: the writer's whole cost
  is gone;
* one more extract, instrumented: the decoding thread's CPU split into decoding,
  rows (``extract_record``), columns (``Writer.put``), reading the lines (timed alone,
  as (b) reads them) and the rest (the per-line loop, each batch's and file's own work),
  and its waits (wall minus CPU: the GIL handed to the writer thread, and the last
  file's writes).

Figures are seconds per GB of JSONL, medians over the rounds. Nothing is written to
``bench/results``: this explains a figure, it is not one.

Usage: ``python bench/profile_extract.py [--size-mb 1000] [--rounds 5] [--input DIR]``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.bench_extract import mb, time_decode, time_extract  # noqa: E402
from bench.real_corpus import real_corpus  # noqa: E402
from pipeline.core.malloc import keep_freed_memory  # noqa: E402
from pipeline.corpus.sources import iter_lines, resolve_inputs  # noqa: E402
from pipeline.stages.extract import driver, rows  # noqa: E402


def without_writer() -> contextlib.AbstractContextManager[None]:
    """Extract with each batch's columns built and then dropped (no Parquet, no Polars)."""
    return mock.patch.object(rows.Writer, "_write_batch", lambda self, batch: None)


class _TimedDecoder:
    def __init__(self, decoder: Any, spent: Counter[str]) -> None:
        self.decoder, self.spent = decoder, spent

    def decode(self, line: Any) -> Any:
        t = time.thread_time()
        try:
            return self.decoder.decode(line)
        finally:
            self.spent["decode"] += time.thread_time() - t


@contextlib.contextmanager
def instrumented(spent: Counter[str]) -> Iterator[None]:
    """Add the decoding thread's CPU seconds in decode, extract_record and Writer.put to
    ``spent`` (each call timed: about 1 us per paper, a 200 KB line)."""
    record, put = driver.extract_record, rows.Writer.put

    def timed_record(*args: Any) -> None:
        t = time.thread_time()
        try:
            record(*args)
        finally:
            spent["rows"] += time.thread_time() - t

    def timed_put(self: rows.Writer, batch: rows.Tables) -> None:
        t = time.thread_time()
        try:
            put(self, batch)
        finally:
            spent["columns"] += time.thread_time() - t

    with (
        mock.patch.object(driver, "DECODER", _TimedDecoder(driver.DECODER, spent)),
        mock.patch.object(driver, "extract_record", timed_record),
        mock.patch.object(rows.Writer, "put", timed_put),
    ):
        yield


def time_read(files: list[Path]) -> float:
    """CPU seconds of this thread to read every line of ``files`` (part of (a) and (b))."""
    t = time.thread_time()
    for f in resolve_inputs([str(p) for p in files]):
        for _ in iter_lines(f):
            pass
    return time.thread_time() - t


def profile(files: list[Path], out: Path, rounds: int) -> dict[str, Any]:
    """The figures of the module docstring, in seconds per GB (medians over ``rounds``)."""
    gb = mb(files) / 1000
    got: dict[str, list[float]] = {}

    def add(key: str, seconds: float) -> None:
        got.setdefault(key, []).append(seconds / gb)

    keep_freed_memory()  # as an extract worker has them, for (b) too
    time_decode(files)  # into the page cache
    time_extract(files, out)  # one-off initialisation of Polars and pyarrow
    for _ in range(rounds):
        wall, cpu = time_decode(files)
        add("b_wall", wall)
        add("b_cpu", cpu)
        wall, cpu = time_extract(files, out)
        add("a_wall", wall)
        add("a_cpu", cpu)
        with without_writer():
            wall, cpu = time_extract(files, out)
        add("a0_wall", wall)
        add("a0_cpu", cpu)
        spent: Counter[str] = Counter()
        with instrumented(spent):
            wall, cpu = time_extract(files, out)
        for key in ("decode", "rows", "columns"):
            add(key, spent[key])
        read = time_read(files)
        add("read", read)
        add("loop", cpu - sum(spent.values()) - read)
        add("waits", wall - cpu)
    med = {k: round(statistics.median(v), 3) for k, v in got.items()}
    ratios = {
        "a_over_b": round(
            statistics.median(b / a for b, a in zip(got["b_wall"], got["a_wall"], strict=True)), 3
        ),
        "a0_over_b": round(
            statistics.median(b / a for b, a in zip(got["b_wall"], got["a0_wall"], strict=True)), 3
        ),
    }
    return {"corpus_mb": round(gb * 1000, 1), "rounds": rounds, "s_per_gb": med, **ratios}


def report(res: dict[str, Any]) -> None:
    s = res["s_per_gb"]
    print(f"{res['corpus_mb']:,.0f} MB, {res['rounds']} interleaved rounds; seconds per GB:")
    print(f"(b)  decode only              {s['b_wall']:.3f} wall  {s['b_cpu']:.3f} CPU")
    print(
        f"(a)  extract                  {s['a_wall']:.3f} wall  {s['a_cpu']:.3f} CPU   (a)/(b) = {res['a_over_b']:.2f}"
    )
    print(
        f"(a0) extract, writer removed  {s['a0_wall']:.3f} wall  {s['a0_cpu']:.3f} CPU   (a0)/(b) = {res['a0_over_b']:.2f}  (the most (a)/(b) can reach with rows built in Python)"
    )
    print(
        f"     decoding thread of (a): decode {s['decode']:.3f}, rows {s['rows']:.3f}, "
        f"columns {s['columns']:.3f}, reading {s['read']:.3f} (measured alone), the rest {s['loop']:.3f}; "
        f"waits {s['waits']:.3f}"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mb", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--input", type=Path, help="a folder of .jsonl files (default: real records)")
    ap.add_argument("--dir", type=Path, default=ROOT / "bench_out")
    args = ap.parse_args()
    if args.input is not None:
        files = sorted(args.input.glob("*.jsonl"))
        if not files:
            ap.error(f"--input {args.input}: no .jsonl file")
    else:
        files = real_corpus(args.dir / "real_corpus", args.size_mb)
    res = profile(files, args.dir / "extract_profile", args.rounds)
    report(res)
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
