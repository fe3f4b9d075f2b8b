"""Stage ``extract`` (map): unarXive JSONL -> papers, references, mentions, rejects.

Each line is decoded with typed msgspec structs that name only the fields used
(the records' dynamic-key dicts make generic JSON readers unusable). Rows are
buffered in Python lists and handed, one batch at a time, to a writer thread that
builds Arrow tables and writes Parquet while the next batch is decoded.

Both record layouts are detected per record:

* 2022: ``body_text`` is a list of paragraphs with ``section``/``sec_number``/
  ``sec_type``. A *section occurrence* is a run of consecutive paragraphs with the
  same (section, sec_type, sec_number). Its top-level section is rebuilt by
  :func:`structure` (the rules are in its docstring): a dotted number names its
  top-level section ("2.1" is in 2), a section that has no paragraph of its own
  becomes an *unnamed* top-level section, paragraph-level headings (empty
  ``sec_type``) stay inside their section, letter numbers mark appendices.
* 2024: ``sections`` is a dict keyed by heading; each key is one occurrence and its
  own top section (the hierarchy was dropped by the 2024 release).

Besides the mentions, every occurrence (cited or not) is a row of ``sections``, so
later stages see the whole structure of a paper (``pipeline.roles`` infers roles
from it).

A ``{{cite:<ref_id>}}`` marker inside a heading counts once per section occurrence.
Cite spans whose ref_id has no bib entry are counted (``cite_spans_missing_bib``),
not written. A paper seen twice in one file keeps its first copy; later copies are
rejected as ``duplicate_paper``. Across files, readers keep the copy from the file
whose ``source_file`` (its path relative to its ``--input``) sorts first
(``pipeline.tables.papers_winner``).
"""

from __future__ import annotations

import contextlib
import gc
import operator
import queue
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from datetime import date
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import regex

from pipeline import schema as S
from pipeline.config import Config
from pipeline.ids import arxiv_expr, doi_expr, openalex_expr, strip_version
from pipeline.provenance import SYNTHETIC_FIELD, SYNTHETIC_GENERATORS, SYNTHETIC_PAPERS
from pipeline.runner import FAILED, Stage
from pipeline.sources import InputFile, InputReadError, LongLine, iter_lines, source_name


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
    # set by the pipeline's own generators only (pipeline.provenance)
    synthetic: str | None = msgspec.field(default=None, name=SYNTHETIC_FIELD)


DECODER = msgspec.json.Decoder(Record)
_NO_IDS = BibIds()
CITE_MARKER = regex.compile(r"\{\{cite:([^}]*)\}\}")
_BAD_ID_CHAR = regex.compile(r"[\s\p{Cc}\p{Cf}]")
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
    except (IndexError, KeyError, ValueError, OverflowError):  # a year past C long: OverflowError
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

    __slots__ = ("papers", "references", "mentions", "sections", "rejects", "runs")

    def __init__(self, source: str) -> None:
        # source_file is constant per input file (per member of an archive's unit): the
        # writer adds it from ``runs``, not every row.
        self.papers: dict[str, list[Any]] = _buffers(S.PAPERS)
        self.references: dict[str, list[Any]] = _buffers(S.REFERENCES) | {_CONTAINED: []}
        # every cited ref id with the batch row of its section occurrence; the writer
        # thread turns them into mentions (_mentions)
        self.mentions: dict[str, list[Any]] = {_CITED_ROW: [], S.REF_ID: []}
        self.sections: dict[str, list[Any]] = _buffers(S.SECTIONS) | {_PAPER_ROW: []}
        self.rejects: dict[str, list[Any]] = _buffers(S.REJECTS) | {"detail": []}
        self.runs: list[tuple[str, dict[str, int]]] = []
        self.start(source)

    def start(self, source: str) -> None:
        """Rows from here on come from ``source`` (the next member of a unit)."""
        self.runs.append((source, {name: _rows(getattr(self, name)) for name in S.EXTRACT_TABLES}))

    def run_lengths(self, name: str) -> list[tuple[str, int]]:
        """``(source_file, rows)`` runs of table ``name``, in row order."""
        ends = [start[name] for _, start in self.runs[1:]] + [_rows(getattr(self, name))]
        return [(src, end - start[name]) for (src, start), end in zip(self.runs, ends, strict=True)]

    def sizes(self) -> tuple[int, int, int, int]:
        """Rows of papers, references, mentions and sections (every column of a table has
        as many between two records)."""
        return (
            len(self.papers[S.PAPER_ID]),
            len(self.references[S.REF_ID]),
            len(self.mentions[S.REF_ID]),
            len(self.sections[S.PAPER_ID]),
        )

    def truncate(self, sizes: tuple[int, int, int, int]) -> None:
        """Drop the rows appended since :meth:`sizes` returned ``sizes``."""
        for table, size in zip(
            (self.papers, self.references, self.mentions, self.sections), sizes, strict=True
        ):
            for column in table.values():
                del column[size:]


def _rows(cols: dict[str, list[Any]]) -> int:
    return len(next(iter(cols.values())))


_CONTAINED = "_contained_arxiv_ids"
_CITED_ROW = "_cited_row"  # a cited ref id's row of sections in the batch
_PAPER_ROW = "_paper_row"  # a section occurrence's row of papers in the batch


def _buffers(schema: pa.Schema) -> dict[str, list[Any]]:
    return {n: [] for n in schema.names if n != S.SOURCE_FILE}


GIL_SWITCH_INTERVAL = 0.0002  # seconds; see extract_files
_UNSET = object()


_REF_ID = operator.attrgetter("ref_id")


def _heading_refs(heading: str) -> list[str]:
    """Ref ids of the citation markers in a heading, once each (a marker counts once per
    section occurrence)."""
    return list(dict.fromkeys(CITE_MARKER.findall(heading)))


_LEVELS = {"section": 1, "subsection": 2, "subsubsection": 3}


class Occurrence:
    """One section occurrence in paper order (a row of ``sections``)."""

    __slots__ = ("section", "number", "level", "top", "unnamed", "appendix", "cited")

    def __init__(
        self,
        section: str,
        number: str,
        level: int,
        cited: list[str | None],
        unnamed: bool = False,
    ) -> None:
        self.section = section
        self.number = number
        self.level = level
        self.top = -1  # index of the enclosing top-level occurrence, set by structure()
        self.unnamed = unnamed
        self.appendix = False
        # ref ids as cited here, in order (bib entry or not): the writer thread counts them
        self.cited = cited


_NO_HEAD = frozenset(("", "-1", "0"))  # unnumbered occurrences
# Longest section number read as a number: longer ones are labels (no real paper has
# more than a few sections, and int() of a long digit string costs its length squared).
_MAX_NUMBER_DIGITS = 9


def _section_number(head: str) -> int | None:
    """An ASCII decimal section number ("12"), else None ("²", "٣", "A", "")."""
    if head.isascii() and head.isdigit() and len(head) <= _MAX_NUMBER_DIGITS:
        return int(head)
    return None


def structure(occs: list[Occurrence]) -> list[Occurrence]:
    """Top-level sections of a 2022-layout paper; returns the occurrences in paper order,
    with an unnamed occurrence inserted for every top-level section known only from the
    numbers of its subsections (``top`` set on every occurrence, indexes in the result).

    Rules (measured on the 49 real papers of the sample; see
    the data card (``pipeline/data_cards/survey_reading_lists.md``)):

    * A ``section``-level occurrence opens a top-level section.
    * A dotted number ("2.1", "3.4.1", "2.0.0.1", "D.1") belongs to the top-level
      section of its first component; when no occurrence opened it, an unnamed
      top-level section with that number is inserted before it (its role is inferred
      later from its subsections and its neighbours, never taken from the previous
      section).
    * A non-dotted number starting with a letter ("S1") does the same with the whole
      number.
    * Other sub-level occurrences (numbers that restart inside each parent: "1", "2",
      or "-1", or paragraph-level headings) stay in the current top-level section,
      except across a gap in the top-level numbering: between sections a and b with
      b > a + 1, the run of sub-level occurrences is split where the subsection numbers
      restart, and the last groups go to the missing sections a+1, ..., b-1 (as unnamed
      sections); when there are fewer groups than missing sections, the leading
      paragraph-level headings form a group too.
    * A top-level section numbered with a letter ("A", "C.1") is an appendix.
    * Before any top-level section, an occurrence is its own top-level section.
    """
    n = len(occs)
    # the top of each occurrence: an index into occs, or a number string (unnamed)
    tops: list[int | str] = [0] * n
    heads: list[str] = []
    dotted: list[bool] = []
    for o in occs:  # _head inlined: this runs for every occurrence of every paper
        first, dot, _ = o.number.partition(".")
        if first in _NO_HEAD:
            heads.append("")
            dotted.append(False)
        else:
            heads.append(first)
            dotted.append(bool(dot) or (first[0].isalpha() and o.level > 1))
    opened: dict[str, int | str] = {}
    cur: int | str | None = None
    cur_head = ""
    i = 0
    while i < n:
        o = occs[i]
        if o.level == 1 or (cur is None and not dotted[i]):
            cur, cur_head = i, heads[i] if o.level == 1 else ""
            if cur_head:
                opened.setdefault(cur_head, i)
            tops[i] = i
            i += 1
            continue
        if dotted[i]:
            key = heads[i] if "." in o.number else o.number.strip()
            cur = opened.setdefault(key, key)
            cur_head = key
            tops[i] = cur
            i += 1
            continue
        j = i
        while j < n and occs[j].level != 1 and not dotted[j]:
            j += 1
        for k in range(i, j):
            tops[k] = cur
        low = _section_number(cur_head)
        high = _section_number(heads[j]) if j < n and occs[j].level == 1 else None
        if low is not None and high is not None:
            # at most one missing section per sub-level occurrence can be filled, so at most
            # that many (plus one, to tell "more than the groups") are listed: a number
            # gap of 10^11 costs no more than the occurrences between
            missing: list[str] = []
            for x in range(low + 1, high):
                if len(missing) > j - i:
                    break
                if str(x) not in opened:
                    missing.append(str(x))
            if missing:
                starts: list[int] = []
                prev_sub: int | None = None
                for k in range(i, j):
                    if occs[k].level == 2:
                        num = _section_number(heads[k])
                        if not starts or (
                            num is not None and prev_sub is not None and num <= prev_sub
                        ):
                            starts.append(k)
                        if num is not None:
                            prev_sub = num
                if len(starts) < len(missing) and (not starts or starts[0] > i):
                    starts.insert(0, i)
                groups = [(a, b) for a, b in zip(starts, starts[1:] + [j], strict=True)]
                if len(groups) >= len(missing):
                    groups = groups[len(groups) - len(missing) :]
                for (a, b), key in zip(groups, missing, strict=False):
                    opened[key] = key
                    for k in range(a, b):
                        tops[k] = key
                    cur, cur_head = key, key
        i = j
    out: list[Occurrence] = []
    index_of: dict[int | str, int] = {}
    for i, o in enumerate(occs):
        t = tops[i]
        if isinstance(t, str) and t not in index_of:
            index_of[t] = len(out)
            u = Occurrence("", t, 1, [], unnamed=True)
            u.top = len(out)
            u.appendix = t[:1].isalpha()
            out.append(u)
        if t == i:
            index_of[i] = len(out)
            o.appendix = heads[i][:1].isalpha()
        o.top = index_of[t]
        out.append(o)
    return out


def _occurrences(rec: Record) -> list[Occurrence]:
    """Section occurrences in paper order, with ``top`` set and the ref ids cited in each."""
    occs: list[Occurrence] = []
    ab = rec.abstract
    if isinstance(ab, Abstract) and ab.cite_spans:
        occs.append(Occurrence("Abstract", "", 1, list(map(_REF_ID, ab.cite_spans))))
    if rec.body_text is not None:
        # Hot loop (about 100 paragraphs and 90 cite spans per paper): fields compared one
        # by one, ref ids gathered in C (map), counted later in Polars (_mentions).
        prev_section: Any = _UNSET
        prev_type: Any = _UNSET
        prev_number: Any = _UNSET
        cited: list[str | None] = []
        body: list[Occurrence] = []
        for p in rec.body_text:
            heading = p.section
            if heading != prev_section or p.sec_type != prev_type or p.sec_number != prev_number:
                prev_section, prev_type, prev_number = heading, p.sec_type, p.sec_number
                heading = heading or ""
                cited = _heading_refs(heading) if "{{cite:" in heading else []
                number = "" if prev_number is None else str(prev_number)
                body.append(
                    Occurrence(clean_heading(heading), number, _LEVELS.get(prev_type, 4), cited)  # type: ignore[arg-type]
                )
            spans = p.cite_spans
            if spans:
                cited.extend(map(_REF_ID, spans))
        offset = len(occs)
        for o in structure(body):
            o.top += offset
            occs.append(o)
    else:
        for heading, sec in (rec.sections or {}).items():
            cited = _heading_refs(heading) if "{{cite:" in heading else []
            if sec.cite_spans:
                cited.extend(map(_REF_ID, sec.cite_spans))
            occs.append(Occurrence(clean_heading(heading), "", 0, cited))
    for i, o in enumerate(occs):
        if o.top < 0:
            o.top = i
    return occs


def extract_record(rec: Record, line_number: int, out: Tables, seen: set[str]) -> None:
    """Append one paper's rows to ``out`` (its cited ref ids raw: see :func:`_mentions`).

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
    p[S.CATEGORIES].append(cats)
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
    # (Polars, outside the GIL): per-entry Python regex calls were the hot spot.
    r = out.references
    n = len(bib)
    r[S.PAPER_ID].extend([paper_id] * n)
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

    occs = _occurrences(rec)
    sec = out.sections
    base = len(sec[S.PAPER_ID])  # this paper's first row of sections in the batch
    m = out.mentions
    m_ref, m_row = m[S.REF_ID], m[_CITED_ROW]
    for index, occ in enumerate(occs):
        cited = occ.cited
        if cited:
            m_ref.extend(cited)
            m_row.extend([base + index] * len(cited))
    n_occ = len(occs)
    sec[S.PAPER_ID].extend([paper_id] * n_occ)
    sec[_PAPER_ROW].extend([len(p[S.PAPER_ID]) - 1] * n_occ)
    sec[S.SECTION_INDEX].extend(range(n_occ))
    sec[S.SECTION].extend([o.section for o in occs])
    sec[S.SEC_NUMBER].extend([o.number for o in occs])
    sec[S.LEVEL].extend([o.level for o in occs])
    sec[S.TOP_INDEX].extend([o.top for o in occs])
    sec[S.UNNAMED].extend([o.unnamed for o in occs])
    sec[S.APPENDIX].extend([o.appendix for o in occs])
    seen.add(paper_id)  # last: a record that fails part-way is not taken as seen


# --------------------------------------------------------------------- writer thread
_DICTIONARY_COLUMNS = (
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
_RAW_TYPES = {  # columns whose lists may hold only None (or nothing)
    S.ARXIV_ID: pl.String,
    S.DOI: pl.String,
    S.OPENALEX_ID: pl.String,
    _CONTAINED: pl.String,
    S.REF_ID: pl.String,
    _CITED_ROW: pl.Int64,
    _PAPER_ROW: pl.Int64,
}


def _columns(name: str, cols: dict[str, list[Any]]) -> pl.DataFrame | pa.Table:
    """Python lists -> columnar (holds the GIL: runs on the decoding thread).

    Polars builds the long string columns of references and mentions ~3x faster
    than ``pa.array``; pyarrow is faster for papers (list and date columns).
    """
    if name in ("references", "mentions", "sections"):
        overrides = {k: v for k, v in _RAW_TYPES.items() if k in cols}
        return pl.DataFrame(cols, schema_overrides=overrides, strict=False)
    schema = _REJECTS_OUT if name == "rejects" else S.PAPERS
    return pa.table({k: pa.array(v, type=schema.field(k).type) for k, v in cols.items()})


def _finish(name: str, frame: pl.DataFrame | pa.Table, runs: list[tuple[str, int]]) -> pa.Table:
    """Normalise identifiers, add ``source_file``, cast to the schema (mostly outside the GIL)."""
    schema = _REJECTS_OUT if name == "rejects" else S.EXTRACT_TABLES[name]
    if name == "papers":
        frame = pl.from_arrow(frame).with_columns(doi_expr(S.DOI).alias(S.DOI))  # zero-copy in
    elif name == "references":
        frame = frame.with_columns(
            pl.coalesce(arxiv_expr(S.ARXIV_ID), arxiv_expr(_CONTAINED)).alias(S.ARXIV_ID),
            doi_expr(S.DOI).alias(S.DOI),
            openalex_expr(S.OPENALEX_ID).alias(S.OPENALEX_ID),
        ).drop(_CONTAINED)
    table = frame.to_arrow() if isinstance(frame, pl.DataFrame) else frame
    sources = [pa.repeat(pa.scalar(src, pa.string()), n) for src, n in runs if n]
    column = pa.concat_arrays(sources) if sources else pa.array([], pa.string())
    table = table.append_column(S.SOURCE_FILE, column)
    # one chunk per column, whatever Polars' thread count: identical Parquet bytes anywhere
    return table.select(schema.names).cast(schema).combine_chunks()


def _mentions(
    cited: pl.DataFrame,
    papers: pa.Table,
    references: pl.DataFrame,
    sections: pl.DataFrame,
    sources: pa.ChunkedArray,
) -> tuple[pa.Table, int]:
    """Mentions of one batch from its cited ref ids, and how many cited no bib entry.

    ``papers``, ``references`` and ``sections`` are the batch's columns as the decoding
    thread built them (``_columns``), ``sources`` the finished ``source_file`` of sections.
    A mention row is a (section occurrence, bib entry) pair with the number of times the
    occurrence cites it, in paper order and then first-citation order. Ref ids without a
    bib entry in their paper are counted (``cite_spans_missing_bib``), not written. The
    counting runs here, in Polars outside the GIL: per cite span in Python it held the
    decoding thread.
    """
    # papers of one batch may share an id (two members of a unit): bib entries and
    # sections are matched by the paper's row in the batch, never by its id
    n_bib = papers.column(S.N_BIB_ENTRIES).to_numpy(zero_copy_only=False)
    bib = pl.DataFrame(
        {
            _PAPER_ROW: np.repeat(np.arange(len(n_bib), dtype=np.int64), n_bib),
            S.REF_ID: references[S.REF_ID],
        }
    )
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


class _FileDone:
    """Set by the writer thread when every table of one input file is closed."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.error: BaseException | None = None
        self.counts = dict.fromkeys(_WRITER_COUNTS, 0)

    def wait(self) -> None:
        self.event.wait()
        if self.error is not None:
            raise self.error


class _Writer(threading.Thread):
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

    def _write_batch(self, batch: dict[str, tuple[pl.DataFrame | pa.Table, Any]]) -> None:
        tables = {
            name: _finish(name, frame, runs)
            for name, (frame, runs) in batch.items()
            if name != "mentions"
        }
        tables["mentions"], missing = _mentions(
            batch["mentions"][0],
            batch["papers"][0],
            batch["references"][0],
            batch["sections"][0],
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
                compression=self.cfg.extract.compression,
                # dictionaries only where values repeat; ids and raw strings are unique
                use_dictionary=[c for c in _DICTIONARY_COLUMNS if c in table.column_names],
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
            except BaseException as e:  # reported through the file's _FileDone
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

    def end(self) -> _FileDone:
        done = _FileDone()
        self.q.put(("end", done))
        return done

    def stop(self) -> None:
        self.q.put(("stop", None))
        self.join()


_REJECTS_OUT = pa.schema(list(S.REJECTS) + [pa.field("detail", pa.string())])


def _documents(
    source: InputFile | Any, max_line_bytes: int
) -> Iterable[tuple[str, Iterable[tuple[int, bytes | memoryview | LongLine]]]]:
    """``(source_file, lines)`` per document: one for an input file, one per member for an
    archive's unit (``pipeline.archive_runner``), whose line numbers restart per member."""
    if isinstance(source, InputFile):
        return [(source_name(source), iter_lines(source, max_line_bytes))]
    return source.documents(max_line_bytes)


def _decode_file(
    source: InputFile | Any,
    cfg: Config,
    progress: Callable[[int, int, int], None],
    writer: _Writer,
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
                    raise Reject(_classify(e), str(e)) from None
                except RecursionError:
                    raise Reject(
                        "too_deeply_nested", "nesting deeper than the decoder allows"
                    ) from None
                except Exception as e:  # noqa: BLE001 - whatever one line does, it is that line's reject
                    raise Reject("decode_error", f"{type(e).__name__}: {e}") from None
                sizes = batch.sizes()
                try:
                    extract_record(rec, line_number, batch, seen)
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
    counts["sections_rows"] += len(batch.sections[S.PAPER_ID])


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
    writer = _Writer(cfg)
    writer.start()
    gc_was_enabled = gc.isenabled()
    gc.disable()  # the structs are gc=False; collections during a batch are pure overhead
    # The writer re-takes the GIL between every Arrow/Polars call; with the default 5 ms
    # switch interval it waits that long each time while the decoder runs, and ends up
    # 8x slower (measured). A short interval lets it keep pace.
    switch_interval = sys.getswitchinterval()
    sys.setswitchinterval(GIL_SWITCH_INTERVAL)
    waiting: tuple[dict[str, Any], _FileDone, float] | None = None
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


def _settle(counts: dict[str, Any], done: _FileDone, t0: float) -> dict[str, Any]:
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
    tables=tuple(S.EXTRACT_TABLES),
    help="unarXive JSONL -> papers, references, mentions, rejects (one set per input file)",
)


def summarize(out: Path) -> dict[str, Any]:
    """Totals over every finished input file, plus papers present in more than one file.

    Written to ``<out>/extract/_summary.json`` after each extract run. The copy kept
    for a paper found in several files is the one whose ``source_file`` sorts first.
    """
    from pipeline.files import write_json
    from pipeline.runner import MANIFESTS, MARKERS, map_output_problem
    from pipeline.workdir import ARCHIVES, read_record, summary_path

    base = out / STAGE.name
    totals: dict[str, Any] = {"files": 0, "rejects": {}, "failed_files": []}
    for path in sorted((base / MANIFESTS).glob("*.json")):
        manifest = read_record(path, "counts")
        if manifest is None:  # damaged: its file is redone (runner.run_map)
            continue
        if manifest.get("status") == FAILED:
            if not (base / MARKERS / path.name).exists():
                totals["failed_files"].append({"file": manifest["source_file"], **manifest[FAILED]})
            continue
        counts = manifest["counts"]
        totals["files"] += 1
        for k, v in counts.items():
            if isinstance(v, int):
                totals[k] = totals.get(k, 0) + v
        for reason, n in counts.get("rejects", {}).items():
            totals["rejects"][reason] = totals["rejects"].get(reason, 0) + n
    # only outputs that match their marker's sizes: a damaged file of another shard is
    # redone by that shard, and is checked again before any later stage reads it
    papers = []
    for marker in sorted((base / MARKERS).glob("*.json")):
        data = read_record(marker)
        if data is not None and map_output_problem(out, STAGE.name, data, checksum=False) is None:
            papers.append(base / "papers" / f"{marker.stem}.parquet")
    if papers:
        ids = pl.scan_parquet(papers).select(S.PAPER_ID)
        stats = ids.select(
            pl.len().alias("rows"), pl.col(S.PAPER_ID).n_unique().alias("unique")
        ).collect()
        totals["duplicate_papers_across_files"] = int(stats["rows"][0] - stats["unique"][0])
        totals["unique_papers"] = int(stats["unique"][0])
    members: dict[str, int] = {}
    for path in sorted((base / ARCHIVES).glob("*.json")):
        record = read_record(path, "members")
        with contextlib.suppress(ValueError, TypeError, AttributeError):
            for kind, n in (record or {}).get("members", {}).items():
                members[kind] = members.get(kind, 0) + int(n)
    if members:
        # archives' members by kind: JSONL members (read), empty and non-JSONL members and
        # directories (skipped), over every archive read to its end
        totals["archive_members"] = dict(sorted(members.items()))
    write_json(summary_path(out, STAGE.name), totals)
    return totals
