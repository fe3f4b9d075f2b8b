"""The ``extract`` stage's driver: decode input files (or an archive's units) line by line
into batches, hand them to the writer thread, count what is read, written and rejected,
and report each file's counts (the engine sums them: :func:`pipeline.engine.status.map_summary`).

Lines read = papers written + rejects (by reason), per file, in its manifest. Across
files, readers keep the copy of a paper from the file whose ``source_file`` (its path
relative to its ``--input``) sorts first (``pipeline.rules.tables.papers_winner``).
"""

from __future__ import annotations

import gc
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import msgspec
import regex

from pipeline.core import schema as S
from pipeline.core.config import Config
from pipeline.core.malloc import keep_freed_memory
from pipeline.corpus.provenance import SYNTHETIC_GENERATORS, SYNTHETIC_PAPERS
from pipeline.corpus.sources import InputFile, InputReadError, LongLine, iter_lines, source_name
from pipeline.engine.stage import FAILED, Stage
from pipeline.stages.extract.records import DECODER, Reject, decode_reason
from pipeline.stages.extract.rows import FileDone, Tables, Writer, extract_record

GIL_SWITCH_INTERVAL = 0.0002  # seconds; see extract_files


def _documents(
    source: InputFile | Any, max_line_bytes: int
) -> Iterable[tuple[str, Iterable[tuple[int, bytes | memoryview | LongLine]]]]:
    """``(source_file, lines)`` per document: one for an input file, one per member for an
    archive's unit (read by ``pipeline.engine.archive_stream.run_archive``), whose line numbers restart per
    member."""
    if isinstance(source, InputFile):
        return [(source_name(source), iter_lines(source, max_line_bytes))]
    return source.documents(max_line_bytes)


def _decode_file(
    source: InputFile | Any,
    cfg: Config,
    progress: Callable[[int, int, int], None],
    writer: Writer,
) -> dict[str, Any]:
    """Decode one input file (or unit) and hand its batches to ``writer``; return its counts."""
    ecfg = cfg.extract
    counts: dict[str, Any] = {
        "lines_read": 0,
        "papers_written": 0,
        "bytes_read": 0,
        "references": 0,
        "mentions_rows": 0,
        "sections_rows": 0,
        "section_texts_rows": 0,
        "section_texts_skipped": 0,
        "cite_spans_missing_bib": 0,
        "dois_cut_at_control_chars": 0,
        "layouts": {"2022": 0, "2024": 0},
        SYNTHETIC_PAPERS: 0,
        SYNTHETIC_GENERATORS: {},
        "rejects": {},
    }
    generators: dict[str, int] = counts[SYNTHETIC_GENERATORS]
    batch: Tables | None = None
    in_batch = 0
    last_report = time.monotonic()
    pending = [0, 0, 0]
    members = 0
    for name, lines in _documents(source, ecfg.max_line_bytes):
        members += 1
        seen: set[str] = set()
        if batch is None:
            batch = Tables(name)
        else:
            batch.start(name)
        for line_number, line in lines:
            n_bytes = line.length if isinstance(line, LongLine) else len(line)
            counts["lines_read"] += 1
            counts["bytes_read"] += n_bytes + 1
            pending[1] += n_bytes + 1
            try:
                if isinstance(line, LongLine):
                    line = line.head
                    raise Reject("line_too_long", f"{n_bytes} bytes > {ecfg.max_line_bytes}")
                try:
                    rec = DECODER.decode(line)
                except (msgspec.DecodeError, msgspec.ValidationError) as e:
                    raise Reject(decode_reason(e), str(e)) from None
                except RecursionError:
                    raise Reject(
                        "too_deeply_nested", "nesting deeper than the decoder allows"
                    ) from None
                except Exception as e:  # noqa: BLE001 - whatever one line does, it is that line's reject
                    raise Reject("decode_error", f"{type(e).__name__}: {e}") from None
                sizes = batch.sizes()
                try:
                    extract_record(rec, line_number, batch, seen, line)
                except Reject:
                    raise
                except Exception as e:  # noqa: BLE001 - whatever one record does, it is that record's reject
                    batch.truncate(sizes)  # the rows it appended before it failed
                    raise Reject("extract_error", f"{type(e).__name__}: {e}") from None
                counts["layouts"][batch.papers[S.LAYOUT][-1]] += 1
                counts["papers_written"] += 1
                if rec.synthetic is not None:
                    counts[SYNTHETIC_PAPERS] += 1
                    generators[rec.synthetic] = generators.get(rec.synthetic, 0) + 1
                pending[0] += 1
            except Reject as rj:
                rjs = batch.rejects
                rjs[S.LINE_NUMBER].append(line_number)
                rjs[S.REASON].append(rj.reason)
                rjs[S.HEAD].append(bytes(line[: ecfg.reject_head_bytes]))
                rjs["detail"].append(str(rj)[:500])
                counts["rejects"][rj.reason] = counts["rejects"].get(rj.reason, 0) + 1
                pending[2] += 1
            in_batch += 1
            if in_batch >= ecfg.batch_papers:
                _count_batch(batch, counts)
                writer.put(batch)
                batch, in_batch = Tables(name), 0
                now = time.monotonic()
                if now - last_report > 0.5:
                    progress(*pending)
                    pending, last_report = [0, 0, 0], now
    if batch is None:
        batch = Tables(source_name(source) if isinstance(source, InputFile) else "")
    _count_batch(batch, counts)
    writer.put(batch)
    progress(*pending)
    counts["rejects_total"] = sum(counts["rejects"].values())
    if not isinstance(source, InputFile):
        counts["members"] = members
    if counts["lines_read"] != counts["papers_written"] + counts["rejects_total"]:
        raise RuntimeError(f"{source.path}: lines read != papers written + rejects: {counts}")
    return counts


def _count_batch(batch: Tables, counts: dict[str, Any]) -> None:
    counts["dois_cut_at_control_chars"] += _control_dois(batch)
    counts["references"] += len(batch.references[S.REF_ID])
    counts["sections_rows"] += len(batch.sections[S.SECTION])
    counts["section_texts_rows"] += len(batch.section_texts[S.PAPER_ID])
    counts["section_texts_skipped"] += batch.texts_skipped


_CONTROL_CHAR = regex.compile(r"\p{Cc}")


def _control_dois(batch: Tables) -> int:
    """DOIs of a batch holding a control character (``ids.DOI`` cuts them there).

    One regex pass over the joined column; entries are checked one by one only when it hits.
    """
    n = 0
    for column in (batch.papers[S.DOI], batch.references[S.DOI]):
        values = [v for v in column if v]
        if _CONTROL_CHAR.search("".join(values)):
            n += sum(1 for v in values if _CONTROL_CHAR.search(v.strip()))
    return n


def extract_files(
    jobs: Iterable[tuple[InputFile, dict[str, Path]]],
    cfg: Config,
    progress: Callable[[int, int, int], None],
) -> Iterator[dict[str, Any]]:
    """Extract input files in order, yielding each file's counts once its tables are complete.

    One writer thread serves the whole sequence, so the last batches of file k are
    written while file k+1 is decoded; a file is only yielded (and so only marked
    done by the runner) after its Parquet files are closed.
    """
    keep_freed_memory()  # each batch's rows are freed: keep their memory for the next
    writer = Writer(cfg)
    writer.start()
    gc_was_enabled = gc.isenabled()
    gc.disable()  # the structs are gc=False; collections during a batch are pure overhead
    # The writer re-takes the GIL between every Arrow/Polars call; with the default 5 ms
    # switch interval it waits that long each time while the decoder runs, and ends up
    # 8x slower (measured). A short interval lets it keep pace.
    switch_interval = sys.getswitchinterval()
    sys.setswitchinterval(GIL_SWITCH_INTERVAL)
    waiting: tuple[dict[str, Any], FileDone, float] | None = None
    try:
        for source, outputs in jobs:
            t0 = time.monotonic()
            writer.open(outputs)
            try:
                counts = _decode_file(source, cfg, progress, writer)
            except InputReadError as e:
                # the file is a failed outcome; its partial tables are discarded by the runner
                counts = {
                    FAILED: {
                        "reason": e.reason,
                        "lines_read": e.lines_read,
                        "bytes_read": e.bytes_read,
                    }
                }
            done = writer.end()
            if waiting is not None:
                yield _settle(*waiting)
            waiting = (counts, done, t0)
        if waiting is not None:
            yield _settle(*waiting)
    finally:
        writer.stop()
        sys.setswitchinterval(switch_interval)
        if gc_was_enabled:
            gc.enable()


def _settle(counts: dict[str, Any], done: FileDone, t0: float) -> dict[str, Any]:
    done.wait()
    if FAILED not in counts:
        for key, n in done.counts.items():
            counts[key] += n
    counts["seconds"] = round(time.monotonic() - t0, 3)
    return counts


def extract_file(
    source: InputFile,
    outputs: dict[str, Path],
    cfg: Config,
    progress: Callable[[int, int, int], None],
) -> dict[str, Any]:
    """Extract one input file into the four tables; return its manifest counts."""
    (counts,) = extract_files([(source, outputs)], cfg, progress)
    return counts


STAGE = Stage(
    name="extract",
    kind="map",
    reads=(),
    config_sections=("extract",),
    fn=extract_file,
    fn_many=extract_files,
    outputs=tuple(S.EXTRACT_TABLES.items()),
    help="unarXive JSONL -> papers, references, mentions, sections, section texts, rejects "
    "(one set per input file)",
)
