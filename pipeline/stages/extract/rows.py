"""Rows of a batch of papers: column buffers (:class:`Tables`), one record's rows
(:func:`extract_record`), and the writer thread that turns a batch into Parquet.

Rows are buffered in Python lists and handed, one batch at a time, to the writer thread,
which builds Arrow tables and writes Parquet while the next batch is decoded. Cite spans
whose ref_id has no bib entry are counted (``cite_spans_missing_bib``), not written. A
paper seen twice in one file keeps its first copy; later copies are rejected as
``duplicate_paper``.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from itertools import chain
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import regex

from pipeline.core import schema as S
from pipeline.core.config import Config
from pipeline.rules.ids import arxiv_expr, doi_expr, openalex_expr, strip_version
from pipeline.rules.licences import extractable
from pipeline.stages.extract.records import (
    Abstract,
    BibIds,
    Record,
    Reject,
    parse_iso_date,
    parse_version_date,
)
from pipeline.stages.extract.structure import occurrences
from pipeline.stages.extract.texts import TEXT_DECODER, neutral_expr, occurrence_texts

_NO_IDS = BibIds()
_BAD_ID_CHAR = regex.compile(r"[\s\p{Cc}\p{Cf}]")
_REJECTS_OUT = pa.schema(list(S.REJECTS) + [pa.field("detail", pa.string())])


class Tables:
    """Column buffers for one batch of papers (plain lists; Arrow is built in the writer)."""

    __slots__ = (
        "papers",
        "references",
        "mentions",
        "sections",
        "section_texts",
        "rejects",
        "runs",
        "texts_skipped",
    )

    def __init__(self, source: str) -> None:
        # source_file is constant per input file (per member of an archive's unit): the
        # writer adds it from ``runs``, not every row.
        # paper_id of references and sections, and section_index, are rebuilt in the writer
        # thread from each paper's counts (n_bib_entries, _N_SECTIONS): a Python string per
        # row would be built while holding the GIL
        self.papers: dict[str, list[Any]] = _buffers(S.PAPERS) | {_N_SECTIONS: []}
        self.references: dict[str, list[Any]] = _buffers(S.REFERENCES, _BY_PAPER) | {_CONTAINED: []}
        # every cited ref id, in section order (each section row's _N_CITED gives its
        # section); the writer thread turns them into mentions (_mentions)
        self.mentions: dict[str, list[Any]] = {S.REF_ID: []}
        self.sections: dict[str, list[Any]] = _buffers(S.SECTIONS, _BY_PAPER) | {_N_CITED: []}
        self.section_texts: dict[str, list[Any]] = _buffers(S.SECTION_TEXTS)
        self.rejects: dict[str, list[Any]] = _buffers(S.REJECTS) | {"detail": []}
        self.runs: list[tuple[str, dict[str, int]]] = []
        # papers whose licence allows their text but whose text could not be read: kept,
        # without text (the driver counts them: section_texts_skipped)
        self.texts_skipped = 0
        self.start(source)

    def start(self, source: str) -> None:
        """Rows from here on come from ``source`` (the next member of a unit)."""
        self.runs.append((source, {name: _rows(getattr(self, name)) for name in S.EXTRACT_TABLES}))

    def run_lengths(self, name: str) -> list[tuple[str, int]]:
        """``(source_file, rows)`` runs of table ``name``, in row order."""
        ends = [start[name] for _, start in self.runs[1:]] + [_rows(getattr(self, name))]
        return [(src, end - start[name]) for (src, start), end in zip(self.runs, ends, strict=True)]

    def sizes(self) -> tuple[int, int, int, int, int]:
        """Rows of papers, references, mentions, sections and section texts (every column
        of a table has as many between two records)."""
        return (
            len(self.papers[S.PAPER_ID]),
            len(self.references[S.REF_ID]),
            len(self.mentions[S.REF_ID]),
            len(self.sections[S.SECTION]),
            len(self.section_texts[S.PAPER_ID]),
        )

    def truncate(self, sizes: tuple[int, int, int, int, int]) -> None:
        """Drop the rows appended since :meth:`sizes` returned ``sizes``."""
        tables = (self.papers, self.references, self.mentions, self.sections, self.section_texts)
        for table, size in zip(tables, sizes, strict=True):
            for column in table.values():
                del column[size:]


def _rows(cols: dict[str, list[Any]]) -> int:
    return len(next(iter(cols.values())))


_CONTAINED = "_contained_arxiv_ids"
_CITED_ROW = "_cited_row"  # a cited ref id's row of sections in the batch
_N_CITED = "_n_cited"  # a section row's cited ref ids
_PAPER_ROW = "_paper_row"  # a section occurrence's row of papers in the batch
_N_SECTIONS = "_n_sections"  # a paper's rows of sections
_BY_PAPER = (S.PAPER_ID, S.SECTION_INDEX)  # built by the writer thread (_by_paper)


def _buffers(schema: pa.Schema, built: tuple[str, ...] = ()) -> dict[str, list[Any]]:
    return {n: [] for n in schema.names if n != S.SOURCE_FILE and n not in built}


def extract_record(
    rec: Record,
    line_number: int,
    out: Tables,
    seen: set[str],
    line: bytes | memoryview | None = None,
) -> None:
    """Append one paper's rows to ``out`` (its cited ref ids raw: see :func:`_mentions`);
    with the record's ``line``, the text of its sections when its licence lets some release
    carry it (:func:`_section_texts`).

    Raises:
        Reject: the record lacks what every later stage needs.
    """
    md = rec.metadata
    if md is None:
        raise Reject("missing_metadata")
    # stripped before the emptiness check: an id of blanks is no id (then the record's own)
    paper_id = strip_version(md.id or "") or strip_version(rec.paper_id or "")
    if not paper_id:
        raise Reject("missing_paper_id")
    if md.categories is None or not md.categories.split():
        raise Reject("missing_categories", f"categories={md.categories!r}")
    if rec.body_text is None and rec.sections is None:
        raise Reject("unknown_layout", "neither body_text (2022) nor sections (2024)")
    if _BAD_ID_CHAR.search(paper_id):
        # ids end up in TREC runs and file names; an id with a tab or a newline breaks them
        raise Reject(
            "invalid_paper_id", f"paper id {paper_id!r} contains whitespace or control characters"
        )
    if paper_id in seen:
        raise Reject("duplicate_paper", f"{paper_id} already extracted from this file")

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
    # joined by single spaces, split again in the writer thread (a list column built from
    # Python lists cost 4x the rest of papers' columns); cats holds no empty string
    p[S.CATEGORIES].append(" ".join(cats))
    p[S.PRIMARY_CATEGORY].append(cats[0])
    p[S.FIRST_VERSION_DATE].append(parse_version_date(versions[0].created) if versions else None)
    p[S.TEXT_DATE].append(parse_version_date(versions[-1].created) if versions else None)
    p[S.UPDATE_DATE].append(parse_iso_date(md.update_date))
    p[S.LICENSE].append(md.license)
    p[S.DOI].append(md.doi)  # normalised in the writer
    p[S.N_BIB_ENTRIES].append(len(bib))
    p[S.LAYOUT].append("2022" if rec.body_text is not None else "2024")
    p[S.LINE_NUMBER].append(line_number)

    # identifiers are appended raw and normalised column-wise in the writer thread
    # (Polars, outside the GIL): per-entry Python regex calls would be the hot spot.
    r = out.references
    r[S.REF_ID].extend(bib)
    entries = list(bib.values())
    ids = [e.ids or _NO_IDS for e in entries]
    r[S.ARXIV_ID].extend([i.arxiv_id for i in ids])
    r[S.DOI].extend([i.doi for i in ids])
    r[S.OPENALEX_ID].extend([i.open_alex_id for i in ids])
    r[S.RAW].extend([e.bib_entry_raw for e in entries])
    r[_CONTAINED].extend(
        [
            " ".join([c.id for c in e.contained_arXiv_ids if c.id])
            if e.contained_arXiv_ids
            else None
            for e in entries
        ]
    )

    occs = occurrences(rec)
    sec = out.sections
    cited = [o.cited for o in occs]
    out.mentions[S.REF_ID].extend(chain.from_iterable(cited))
    sec[_N_CITED].extend([len(c) for c in cited])
    p[_N_SECTIONS].append(len(occs))
    sec[S.SECTION].extend([o.section for o in occs])
    sec[S.SEC_NUMBER].extend([o.number for o in occs])
    sec[S.LEVEL].extend([o.level for o in occs])
    sec[S.TOP_INDEX].extend([o.top for o in occs])
    sec[S.UNNAMED].extend([o.unnamed for o in occs])
    sec[S.APPENDIX].extend([o.appendix for o in occs])
    if line is not None and extractable(md.license):
        _section_texts(line, paper_id, [i for i, o in enumerate(occs) if o.body], out)
    seen.add(paper_id)  # last: a record that fails part-way is not taken as seen


def _section_texts(line: bytes | memoryview, paper_id: str, body: list[int], out: Tables) -> None:
    """Append the text of each body occurrence (``body``: their section indexes, in paper
    order) to ``section_texts``; an occurrence whose text is blank has no row. A text of the
    wrong type (the main decoder reads no text), or occurrences the two decoders count
    differently, leave the paper without text (``texts_skipped``), never rejected."""
    try:
        texts = occurrence_texts(TEXT_DECODER.decode(line))
    except (msgspec.DecodeError, msgspec.ValidationError):
        out.texts_skipped += 1
        return
    if len(texts) != len(body):
        out.texts_skipped += 1
        return
    t = out.section_texts
    for index, text in zip(body, texts, strict=True):
        if text and not text.isspace():
            t[S.PAPER_ID].append(paper_id)
            t[S.SECTION_INDEX].append(index)
            t[S.SECTION_TEXT].append(text)  # markers made neutral in the writer (_finish)


# --------------------------------------------------------------------- writer thread
DICTIONARY_COLUMNS = (
    S.PAPER_ID,
    S.SECTION,
    S.TOP_SECTION,
    S.SEC_NUMBER,
    S.SOURCE_FILE,
    S.PRIMARY_CATEGORY,
    S.LICENSE,
    S.LAYOUT,
    S.REASON,
    S.CATEGORIES,
)
# every column of the buffers Polars builds: a column without a type is scanned to infer
# one, which took half of the references' conversion (measured), and a list of only None
# needs one anyway
_BUFFER_TYPES = {
    S.REF_ID: pl.String,
    S.ARXIV_ID: pl.String,
    S.DOI: pl.String,
    S.OPENALEX_ID: pl.String,
    S.RAW: pl.String,
    _CONTAINED: pl.String,
    S.SECTION: pl.String,
    S.SEC_NUMBER: pl.String,
    S.LEVEL: pl.Int64,
    S.TOP_INDEX: pl.Int64,
    S.UNNAMED: pl.Boolean,
    S.APPENDIX: pl.Boolean,
    _N_CITED: pl.Int64,
}


def _columns(name: str, cols: dict[str, list[Any]]) -> pl.DataFrame:
    """Python lists -> Polars columns (holds the GIL: runs on the decoding thread).

    Polars builds the long string columns of references and mentions ~3x faster than
    ``pa.array``, and builds every other table too: pyarrow's conversion of Python
    objects imports pandas (``test_extract_does_not_import_pandas`` says what it costs).
    """
    if name == "section_texts":
        return pl.DataFrame(cols, schema=_TEXTS_IN)
    if name in ("references", "mentions", "sections"):
        return pl.DataFrame(cols, schema={k: _BUFFER_TYPES[k] for k in cols}, strict=False)
    return pl.DataFrame(cols, schema=_REJECTS_IN if name == "rejects" else _PAPERS_IN)


def _buffer_schema(schema: pa.Schema) -> dict[str, pl.DataType]:
    """Polars types of a table's buffers: ``schema`` less ``source_file`` (see _finish)."""
    return {k: t for k, t in S.polars_schema(schema).items() if k != S.SOURCE_FILE}


_PAPERS_IN = _buffer_schema(S.PAPERS.append(pa.field(_N_SECTIONS, pa.int32()))) | {
    S.CATEGORIES: pl.String
}
_REJECTS_IN = _buffer_schema(_REJECTS_OUT)
_TEXTS_IN = _buffer_schema(S.SECTION_TEXTS)


def _by_paper(
    papers: pl.DataFrame, references: pl.DataFrame, sections: pl.DataFrame, cited: pl.DataFrame
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame, np.ndarray]:
    """``references``, ``sections`` and ``cited`` with the columns the decoding thread
    leaves out (``_BY_PAPER``, ``_CITED_ROW``), and every bib entry's row of papers.

    Papers of one batch may share an id (two members of a unit): rows are matched by the
    paper's row in the batch, never by its id.
    """
    n = papers.height
    ids = papers[S.PAPER_ID]
    n_bib = papers[S.N_BIB_ENTRIES].to_numpy()
    n_sec = papers[_N_SECTIONS].to_numpy()
    bib_rows = np.repeat(np.arange(n, dtype=np.int64), n_bib)
    sec_rows = np.repeat(np.arange(n, dtype=np.int64), n_sec)
    firsts = np.repeat(np.cumsum(n_sec, dtype=np.int64) - n_sec, n_sec)
    references = references.with_columns(ids.gather(bib_rows).alias(S.PAPER_ID))
    sections = sections.with_columns(
        ids.gather(sec_rows).alias(S.PAPER_ID),
        pl.Series(_PAPER_ROW, sec_rows),
        pl.Series(S.SECTION_INDEX, np.arange(len(sec_rows), dtype=np.int64) - firsts),
    )
    n_cited = sections[_N_CITED].to_numpy()
    cited = cited.with_columns(
        pl.Series(_CITED_ROW, np.repeat(np.arange(len(n_cited), dtype=np.int64), n_cited))
    )
    return references, sections, cited, bib_rows


def _finish(name: str, frame: pl.DataFrame, runs: list[tuple[str, int]]) -> pa.Table:
    """Normalise identifiers, add ``source_file``, cast to the schema (mostly outside the GIL)."""
    schema = _REJECTS_OUT if name == "rejects" else S.EXTRACT_TABLES[name]
    if name == "papers":
        frame = frame.with_columns(
            doi_expr(S.DOI).alias(S.DOI), pl.col(S.CATEGORIES).str.split(" ")
        )
    elif name == "section_texts":
        frame = frame.with_columns(neutral_expr(pl.col(S.SECTION_TEXT)))
    elif name == "references":
        frame = frame.with_columns(
            pl.coalesce(arxiv_expr(S.ARXIV_ID), arxiv_expr(_CONTAINED)).alias(S.ARXIV_ID),
            doi_expr(S.DOI).alias(S.DOI),
            openalex_expr(S.OPENALEX_ID).alias(S.OPENALEX_ID),
        ).drop(_CONTAINED)
    runs = [(src, n) for src, n in runs if n]
    names = pl.Series(S.SOURCE_FILE, [src for src, _ in runs], pl.String)
    index = np.repeat(np.arange(len(runs), dtype=np.int64), [n for _, n in runs])
    table = frame.with_columns(names.gather(index)).to_arrow()
    # one chunk per column, whatever Polars' thread count: identical Parquet bytes anywhere
    return table.select(schema.names).cast(schema).combine_chunks()


def _mentions(
    cited: pl.DataFrame,
    bib_rows: np.ndarray,
    references: pl.DataFrame,
    sections: pl.DataFrame,
    sources: pa.ChunkedArray,
) -> tuple[pa.Table, int]:
    """Mentions of one batch from its cited ref ids, and how many cited no bib entry.

    ``references`` and ``sections`` are the batch's columns (``_by_paper``), ``bib_rows``
    every bib entry's row of papers, ``sources`` the finished ``source_file`` of sections.
    A mention row is a (section occurrence, bib entry) pair with the number of times the
    occurrence cites it, in paper order and then first-citation order. Ref ids without a
    bib entry in their paper are counted (``cite_spans_missing_bib``), not written. The
    counting runs here, in Polars outside the GIL: per cite span in Python it would hold
    the decoding thread.
    """
    bib = pl.DataFrame({_PAPER_ROW: bib_rows, S.REF_ID: references[S.REF_ID]})
    kept = (
        cited.with_columns(sections[_PAPER_ROW].gather(cited[_CITED_ROW]).alias(_PAPER_ROW))
        .join(bib, on=[_PAPER_ROW, S.REF_ID], how="semi", maintain_order="left")
        .group_by([_CITED_ROW, S.REF_ID], maintain_order=True)
        .agg(pl.len().alias(S.N_MENTIONS))
    )
    rows = kept[_CITED_ROW]
    index = sections[S.SECTION_INDEX].gather(rows)
    top_rows = rows - index + sections[S.TOP_INDEX].gather(rows)  # the paper's top-level row
    frame = pl.DataFrame(
        {
            S.PAPER_ID: sections[S.PAPER_ID].gather(rows),
            S.REF_ID: kept[S.REF_ID],
            S.SECTION: sections[S.SECTION].gather(rows),
            S.TOP_SECTION: sections[S.SECTION].gather(top_rows),
            S.SECTION_INDEX: index,
            S.N_MENTIONS: kept[S.N_MENTIONS],
            S.SOURCE_FILE: pl.from_arrow(sources).gather(rows),
        }
    )
    table = frame.to_arrow().cast(S.MENTIONS).combine_chunks()
    return table, cited.height - int(kept[S.N_MENTIONS].sum())


# a file's counts that only the writer thread knows (see _mentions)
_WRITER_COUNTS = ("cite_spans_missing_bib", "mentions_rows")


class FileDone:
    """Set by the writer thread when every table of one input file is closed."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.error: BaseException | None = None
        self.counts = dict.fromkeys(_WRITER_COUNTS, 0)

    def wait(self) -> None:
        self.event.wait()
        if self.error is not None:
            raise self.error


class Writer(threading.Thread):
    """Finishes and writes batches while the next one (or the next file) is decoded.

    The decoding thread turns its lists into Arrow/Polars columns itself (that work
    holds the GIL either way); this thread runs what releases the GIL: the Polars
    identifier normalisation, the casts, and Parquet encoding and compression. It
    lives for a whole run of files, so writing the end of one file overlaps
    decoding the start of the next.
    """

    def __init__(self, cfg: Config):
        super().__init__(daemon=True)
        self.cfg = cfg
        self.q: queue.Queue[tuple[str, Any]] = queue.Queue(maxsize=2)
        self.error: BaseException | None = None
        self.outputs: dict[str, Path] = {}
        self.writers: dict[str, pq.ParquetWriter] = {}
        self.counts: dict[str, int] = {}

    def _write_batch(self, batch: dict[str, tuple[pl.DataFrame, Any]]) -> None:
        references, sections, cited, bib_rows = _by_paper(
            batch["papers"][0], batch["references"][0], batch["sections"][0], batch["mentions"][0]
        )
        batch["references"] = (references, batch["references"][1])
        batch["sections"] = (sections, batch["sections"][1])
        tables = {
            name: _finish(name, frame, runs)
            for name, (frame, runs) in batch.items()
            if name != "mentions"
        }
        tables["mentions"], missing = _mentions(
            cited,
            bib_rows,
            references,
            sections,
            tables["sections"].column(S.SOURCE_FILE),
        )
        self.counts["cite_spans_missing_bib"] += missing
        self.counts["mentions_rows"] += tables["mentions"].num_rows
        for name in S.EXTRACT_TABLES:
            self._write(name, tables[name])

    def _write(self, name: str, table: pa.Table) -> None:
        if table.num_rows == 0 and name in self.writers:
            return
        if name not in self.writers:
            self.writers[name] = pq.ParquetWriter(
                self.outputs[name],
                table.schema,
                compression=self.cfg.common.compression,
                # dictionaries only where values repeat; ids and raw strings are unique
                use_dictionary=[c for c in DICTIONARY_COLUMNS if c in table.column_names],
            )
        if table.num_rows:
            self.writers[name].write_table(table, row_group_size=self.cfg.extract.row_group_rows)

    def _close_file(self) -> None:
        writers, self.writers = self.writers, {}
        for w in writers.values():
            w.close()

    def run(self) -> None:
        while True:
            kind, item = self.q.get()
            if kind == "stop":
                return
            try:
                if self.error is not None:
                    raise self.error
                if kind == "open":
                    self.outputs = item
                    self.counts = dict.fromkeys(_WRITER_COUNTS, 0)
                elif kind == "batch":
                    self._write_batch(item)
                elif kind == "end":
                    self._close_file()
                    item.counts = self.counts
                    item.event.set()
            except BaseException as e:  # reported through the file's FileDone
                self.error = e
                if kind == "end":
                    with contextlib.suppress(BaseException):
                        self._close_file()
                    item.error = e
                    item.event.set()

    def open(self, outputs: dict[str, Path]) -> None:
        self.q.put(("open", outputs))

    def put(self, batch: Tables) -> None:
        if self.error is not None:
            raise self.error
        self.q.put(
            (
                "batch",
                {
                    name: (_columns(name, getattr(batch, name)), batch.run_lengths(name))
                    for name in S.EXTRACT_TABLES
                },
            )
        )

    def end(self) -> FileDone:
        done = FileDone()
        self.q.put(("end", done))
        return done

    def stop(self) -> None:
        self.q.put(("stop", None))
        self.join()
