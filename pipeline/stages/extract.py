"""Stage ``extract`` (map): unarXive JSONL -> papers, references, mentions, rejects.

Each line is decoded with typed msgspec structs that name only the fields used
(the records' dynamic-key dicts make generic JSON readers unusable). Rows are
buffered in Python lists and handed, one batch at a time, to a writer thread that
builds Arrow tables and writes Parquet while the next batch is decoded.

Both record layouts are detected per record:

* 2022: ``body_text`` is a list of paragraphs with ``section``/``sec_number``/
  ``sec_type``. A *section occurrence* is a run of consecutive paragraphs with the
  same (section, sec_type, sec_number). ``sec_number`` restarts inside each parent,
  so ``top_section`` is rebuilt from ``sec_type`` order: the last ``section``-level
  heading seen.
* 2024: ``sections`` is a dict keyed by heading; each key is one occurrence and its
  own top section (the hierarchy was dropped by the 2024 release).

A ``{{cite:<ref_id>}}`` marker inside a heading counts once per section occurrence.
Cite spans whose ref_id has no bib entry are counted (``cite_spans_missing_bib``),
not written. A paper seen twice in one file keeps its first copy; later copies are
rejected as ``duplicate_paper``. Across files, readers keep the copy from the file
whose name sorts first (``pipeline.stages.common.papers_winner``).
"""

from __future__ import annotations

import gc
import queue
import threading
import time
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Any

import msgspec
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import regex

from pipeline import schema as S
from pipeline.config import Config
from pipeline.ids import arxiv_expr, doi_expr, openalex_expr, strip_version
from pipeline.runner import Stage, register
from pipeline.sources import InputFile, iter_lines, source_name


# --------------------------------------------------------------------- typed records
class CiteSpan(msgspec.Struct, gc=False):
    ref_id: str | None = None


class Paragraph(msgspec.Struct, gc=False):
    section: str | None = None
    sec_type: str | None = None
    sec_number: str | int | None = None
    cite_spans: list[CiteSpan] | None = None


class Section2024(msgspec.Struct, gc=False):
    cite_spans: list[CiteSpan] | None = None


class Abstract(msgspec.Struct, gc=False):
    text: str | None = None
    cite_spans: list[CiteSpan] | None = None


class ContainedId(msgspec.Struct, gc=False):
    id: str | None = None


class BibIds(msgspec.Struct, gc=False):
    open_alex_id: str | None = None
    doi: str | None = None
    arxiv_id: str | None = None


class BibEntry(msgspec.Struct, gc=False):
    bib_entry_raw: str | None = None
    contained_arXiv_ids: list[ContainedId] | None = None  # noqa: N815 - JSON field name
    ids: BibIds | None = None


class Version(msgspec.Struct, gc=False):
    created: str | None = None


class Metadata(msgspec.Struct, gc=False):
    id: str | None = None
    title: str | None = None
    abstract: str | None = None
    categories: str | None = None
    versions: list[Version] | None = None
    update_date: str | None = None
    license: str | None = None
    doi: str | None = None


class Record(msgspec.Struct, gc=False):
    paper_id: str | None = None
    metadata: Metadata | None = None
    abstract: Abstract | str | None = None
    body_text: list[Paragraph] | None = None
    sections: dict[str, Section2024] | None = None
    bib_entries: dict[str, BibEntry] | None = None


DECODER = msgspec.json.Decoder(Record)
CITE_MARKER = regex.compile(r"\{\{cite:([^}]*)\}\}")
_MONTHS = {m: i for i, m in enumerate("Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split(), 1)}


class Reject(Exception):
    """A record that cannot be used; ``reason`` is a fixed category, the message a detail."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(detail or reason)
        self.reason = reason


def parse_version_date(created: str | None) -> date | None:
    """``"Thu, 22 Dec 2022 15:08:58 GMT"`` -> ``date(2022, 12, 22)``."""
    if not created:
        return None
    parts = created.replace(",", " ").split()
    try:
        return date(int(parts[3]), _MONTHS[parts[2]], int(parts[1]))
    except (IndexError, KeyError, ValueError):
        return None


def parse_iso_date(value: str | None) -> date | None:
    if not value:
        return None
    try:
        return date.fromisoformat(value[:10])
    except ValueError:
        return None


def clean_heading(heading: str | None) -> str:
    """Heading text with citation markers removed and whitespace collapsed."""
    if not heading:
        return ""
    if "{{cite:" in heading:
        heading = CITE_MARKER.sub("", heading)
    return " ".join(heading.split())


def _classify(err: Exception) -> str:
    msg = str(err)
    if isinstance(err, msgspec.ValidationError):
        return "not_an_object" if "Expected `object`" in msg and "$." not in msg else "wrong_type"
    if "UTF-8" in msg:
        return "invalid_utf8"
    if "truncated" in msg:
        return "truncated_json"
    return "invalid_json"


# --------------------------------------------------------------------- per-record extraction
class Tables:
    """Column buffers for one batch of papers (plain lists; Arrow is built in the writer)."""

    __slots__ = ("papers", "references", "mentions", "rejects")

    def __init__(self) -> None:
        # source_file is constant per file: the writer adds it, not every row.
        self.papers: dict[str, list[Any]] = _buffers(S.PAPERS)
        self.references: dict[str, list[Any]] = _buffers(S.REFERENCES) | {_CONTAINED: []}
        self.mentions: dict[str, list[Any]] = _buffers(S.MENTIONS)
        self.rejects: dict[str, list[Any]] = _buffers(S.REJECTS) | {"detail": []}


_CONTAINED = "_contained_arxiv_ids"


def _buffers(schema: pa.Schema) -> dict[str, list[Any]]:
    return {n: [] for n in schema.names if n != S.SOURCE_FILE}


def _count_spans(
    spans: list[CiteSpan] | None, bib: dict[str, BibEntry], counts: dict[str, int]
) -> int:
    """Add cite spans to ``counts``; return how many pointed at no bib entry."""
    missing = 0
    if spans:
        for cs in spans:
            rid = cs.ref_id
            if rid is not None and rid in bib:
                counts[rid] = counts.get(rid, 0) + 1
            else:
                missing += 1
    return missing


def _heading_markers(heading: str, bib: dict[str, BibEntry], counts: dict[str, int]) -> int:
    missing = 0
    for rid in dict.fromkeys(CITE_MARKER.findall(heading)):
        if rid in bib:
            counts[rid] = counts.get(rid, 0) + 1
        else:
            missing += 1
    return missing


def _occurrences(
    rec: Record, bib: dict[str, BibEntry]
) -> tuple[list[tuple[str, str, dict[str, int]]], int]:
    """Section occurrences in paper order: (section, top_section, {ref_id: n}) and missing-bib count."""
    occs: list[tuple[str, str, dict[str, int]]] = []
    missing = 0
    ab = rec.abstract
    if isinstance(ab, Abstract) and ab.cite_spans:
        counts: dict[str, int] = {}
        missing += _count_spans(ab.cite_spans, bib, counts)
        occs.append(("Abstract", "Abstract", counts))
    if rec.body_text is not None:
        prev: tuple[Any, Any, Any] | None = None
        top = ""
        counts = {}
        for p in rec.body_text:
            key = (p.section, p.sec_type, p.sec_number)
            if key != prev:
                prev = key
                heading = p.section or ""
                section = clean_heading(heading)
                if p.sec_type not in ("subsection", "subsubsection", "paragraph") or not top:
                    top = section
                counts = {}
                occs.append((section, top, counts))
                if "{{cite:" in heading:
                    missing += _heading_markers(heading, bib, counts)
            missing += _count_spans(p.cite_spans, bib, counts)
    else:
        for heading, sec in (rec.sections or {}).items():
            section = clean_heading(heading)
            counts = {}
            occs.append((section, section, counts))
            if "{{cite:" in heading:
                missing += _heading_markers(heading, bib, counts)
            missing += _count_spans(sec.cite_spans, bib, counts)
    return occs, missing


def extract_record(rec: Record, line_number: int, out: Tables, seen: set[str]) -> int:
    """Append one paper's rows to ``out``; return its count of cite spans without a bib entry.

    Raises:
        Reject: the record lacks what every later stage needs.
    """
    md = rec.metadata
    if md is None:
        raise Reject("missing_metadata")
    raw_id = md.id or rec.paper_id
    if not raw_id:
        raise Reject("missing_paper_id")
    if md.categories is None or not md.categories.split():
        raise Reject("missing_categories", f"categories={md.categories!r}")
    if rec.body_text is None and rec.sections is None:
        raise Reject("unknown_layout", "neither body_text (2022) nor sections (2024)")
    paper_id = strip_version(raw_id)
    if paper_id in seen:
        raise Reject("duplicate_paper", f"{paper_id} already extracted from this file")
    seen.add(paper_id)

    bib = rec.bib_entries or {}
    cats = md.categories.split()
    versions = md.versions or []
    ab = rec.abstract
    abstract = (
        md.abstract if md.abstract is not None else (ab.text if isinstance(ab, Abstract) else ab)
    )
    p = out.papers
    p[S.PAPER_ID].append(paper_id)
    p[S.TITLE].append(" ".join(md.title.split()) if md.title else None)
    p[S.ABSTRACT].append(abstract.strip() if abstract else None)
    p[S.CATEGORIES].append(cats)
    p[S.PRIMARY_CATEGORY].append(cats[0])
    p[S.FIRST_VERSION_DATE].append(parse_version_date(versions[0].created) if versions else None)
    p[S.UPDATE_DATE].append(parse_iso_date(md.update_date))
    p[S.LICENSE].append(md.license)
    p[S.DOI].append(md.doi)  # normalised in the writer
    p[S.N_BIB_ENTRIES].append(len(bib))
    p[S.LAYOUT].append("2022" if rec.body_text is not None else "2024")
    p[S.LINE_NUMBER].append(line_number)

    # identifiers are appended raw and normalised column-wise in the writer thread
    # (Polars, outside the GIL): per-entry Python regex calls were the hot spot.
    r = out.references
    n = len(bib)
    r[S.PAPER_ID].extend([paper_id] * n)
    r[S.REF_ID].extend(bib)
    raw_arxiv, raw_contained, raw_doi, raw_oa, raw = (
        r[S.ARXIV_ID],
        r[_CONTAINED],
        r[S.DOI],
        r[S.OPENALEX_ID],
        r[S.RAW],
    )
    for entry in bib.values():
        ids = entry.ids
        if ids is None:
            raw_arxiv.append(None)
            raw_doi.append(None)
            raw_oa.append(None)
        else:
            raw_arxiv.append(ids.arxiv_id)
            raw_doi.append(ids.doi)
            raw_oa.append(ids.open_alex_id)
        contained = entry.contained_arXiv_ids
        raw_contained.append(" ".join([c.id for c in contained if c.id]) if contained else None)
        raw.append(entry.bib_entry_raw)

    occs, missing = _occurrences(rec, bib)
    m = out.mentions
    m_ref, m_sec, m_top, m_idx, m_n = (
        m[S.REF_ID],
        m[S.SECTION],
        m[S.TOP_SECTION],
        m[S.SECTION_INDEX],
        m[S.N_MENTIONS],
    )
    rows = 0
    for index, (section, top, counts) in enumerate(occs):
        if counts:
            k = len(counts)
            rows += k
            m_ref.extend(counts)
            m_n.extend(counts.values())
            m_sec.extend([section] * k)
            m_top.extend([top] * k)
            m_idx.extend([index] * k)
    m[S.PAPER_ID].extend([paper_id] * rows)
    return missing


# --------------------------------------------------------------------- writer thread
class _Writer(threading.Thread):
    """Builds Arrow tables from column buffers and writes them, overlapping decoding."""

    def __init__(self, outputs: dict[str, Path], cfg: Config, source: str):
        super().__init__(daemon=True)
        self.source = source
        self.outputs = outputs
        self.cfg = cfg
        self.q: queue.Queue[Tables | None] = queue.Queue(maxsize=2)
        self.writers: dict[str, pq.ParquetWriter] = {}
        self.error: BaseException | None = None

    def _table(self, name: str, cols: dict[str, list[Any]]) -> pa.Table:
        """Arrow table of one batch: identifiers normalised, ``source_file`` added."""
        schema = _REJECTS_OUT if name == "rejects" else S.EXTRACT_TABLES[name]
        n = len(next(iter(cols.values())))
        if name in ("papers", "references"):
            raw_types = {
                S.ARXIV_ID: pl.String,
                S.DOI: pl.String,
                S.OPENALEX_ID: pl.String,
                _CONTAINED: pl.String,
            }
            df = pl.DataFrame(
                cols,
                schema_overrides={k: v for k, v in raw_types.items() if k in cols},
                strict=False,
            )
            if name == "papers":
                df = df.with_columns(doi_expr(S.DOI).alias(S.DOI))
            else:
                df = df.with_columns(
                    pl.coalesce(arxiv_expr(S.ARXIV_ID), arxiv_expr(_CONTAINED)).alias(S.ARXIV_ID),
                    doi_expr(S.DOI).alias(S.DOI),
                    openalex_expr(S.OPENALEX_ID).alias(S.OPENALEX_ID),
                ).drop(_CONTAINED)
            table = df.to_arrow()
        else:
            table = pa.table({k: pa.array(v, type=schema.field(k).type) for k, v in cols.items()})
        table = table.append_column(S.SOURCE_FILE, pa.array([self.source] * n, pa.string()))
        return table.select(schema.names).cast(schema)

    def _write(self, name: str, cols: dict[str, list[Any]]) -> None:
        if (
            not cols[S.LINE_NUMBER if name in ("papers", "rejects") else S.REF_ID]
            and name in self.writers
        ):
            return
        table = self._table(name, cols)
        if name not in self.writers:
            self.writers[name] = pq.ParquetWriter(
                self.outputs[name], table.schema, compression=self.cfg.extract.compression
            )
        if table.num_rows:
            self.writers[name].write_table(table, row_group_size=self.cfg.extract.row_group_rows)

    def run(self) -> None:
        try:
            while (batch := self.q.get()) is not None:
                for name in S.EXTRACT_TABLES:
                    self._write(name, getattr(batch, name))
        except BaseException as e:  # surfaced by close(); the thread must not die silently
            self.error = e
            while self.q.get() is not None:
                pass

    def put(self, batch: Tables) -> None:
        if self.error is not None:
            raise self.error
        self.q.put(batch)

    def close(self) -> None:
        self.q.put(None)
        self.join()
        for w in self.writers.values():
            w.close()
        if self.error is not None:
            raise self.error


_REJECTS_OUT = pa.schema(list(S.REJECTS) + [pa.field("detail", pa.string())])


def extract_file(
    source: InputFile,
    outputs: dict[str, Path],
    cfg: Config,
    progress: Callable[[int, int, int], None],
) -> dict[str, Any]:
    """Extract one input file into the four tables; return its manifest counts."""
    src = source_name(source)
    ecfg = cfg.extract
    writer = _Writer(outputs, cfg, src)
    writer.start()
    counts: dict[str, Any] = {
        "lines_read": 0,
        "papers_written": 0,
        "bytes_read": 0,
        "references": 0,
        "mentions_rows": 0,
        "cite_spans_missing_bib": 0,
        "layouts": {"2022": 0, "2024": 0},
        "rejects": {},
    }
    seen: set[str] = set()
    batch = Tables()
    in_batch = 0
    last_report = time.monotonic()
    pending = [0, 0, 0]
    gc_was_enabled = gc.isenabled()
    gc.disable()  # the structs are gc=False; collections during a batch are pure overhead
    try:
        for line_number, line in iter_lines(source):
            counts["lines_read"] += 1
            counts["bytes_read"] += len(line) + 1
            pending[1] += len(line) + 1
            try:
                if len(line) > ecfg.max_line_bytes:
                    raise Reject("line_too_long", f"{len(line)} bytes > {ecfg.max_line_bytes}")
                try:
                    rec = DECODER.decode(line)
                except (msgspec.DecodeError, msgspec.ValidationError) as e:
                    raise Reject(_classify(e), str(e)) from None
                counts["cite_spans_missing_bib"] += extract_record(rec, line_number, batch, seen)
                counts["layouts"][batch.papers[S.LAYOUT][-1]] += 1
                counts["papers_written"] += 1
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
                counts["references"] += len(batch.references[S.REF_ID])
                counts["mentions_rows"] += len(batch.mentions[S.REF_ID])
                writer.put(batch)
                batch, in_batch = Tables(), 0
                now = time.monotonic()
                if now - last_report > 0.5:
                    progress(*pending)
                    pending, last_report = [0, 0, 0], now
        counts["references"] += len(batch.references[S.REF_ID])
        counts["mentions_rows"] += len(batch.mentions[S.REF_ID])
        writer.put(batch)
    finally:
        writer.close()
        if gc_was_enabled:
            gc.enable()
    progress(*pending)
    counts["rejects_total"] = sum(counts["rejects"].values())
    if counts["lines_read"] != counts["papers_written"] + counts["rejects_total"]:
        raise RuntimeError(f"{source.path}: lines read != papers written + rejects: {counts}")
    return counts


STAGE = register(
    Stage(
        name="extract",
        kind="map",
        reads=(),
        config_sections=("extract",),
        fn=extract_file,
        tables=tuple(S.EXTRACT_TABLES),
        help="unarXive JSONL -> papers, references, mentions, rejects (one set per input file)",
    )
)


def summarize(out: Path) -> dict[str, Any]:
    """Totals over every finished input file, plus papers present in more than one file.

    Written to ``<out>/extract/_summary.json`` after each extract run. The copy kept
    for a paper found in several files is the one whose ``source_file`` sorts first.
    """
    import json

    from pipeline.runner import MANIFESTS, write_json

    base = out / STAGE.name
    totals: dict[str, Any] = {"files": 0, "rejects": {}}
    for path in sorted((base / MANIFESTS).glob("*.json")):
        counts = json.loads(path.read_text())["counts"]
        totals["files"] += 1
        for k, v in counts.items():
            if isinstance(v, int):
                totals[k] = totals.get(k, 0) + v
        for reason, n in counts["rejects"].items():
            totals["rejects"][reason] = totals["rejects"].get(reason, 0) + n
    papers = sorted((base / "papers").glob("*.parquet"))
    if papers:
        ids = pl.scan_parquet(papers).select(S.PAPER_ID)
        stats = ids.select(
            pl.len().alias("rows"), pl.col(S.PAPER_ID).n_unique().alias("unique")
        ).collect()
        totals["duplicate_papers_across_files"] = int(stats["rows"][0] - stats["unique"][0])
        totals["unique_papers"] = int(stats["unique"][0])
    write_json(base / "_summary.json", totals)
    return totals
