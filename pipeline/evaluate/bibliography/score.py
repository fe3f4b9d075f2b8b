"""Bibliographies of generated surveys, scored against the expert's reading lists.

A system that writes a survey prints a bibliography; that bibliography is a reading
list. This module resolves each of its references to a work of the release and scores
the result against the survey's own list, tier by tier, and against the survey's hard
negatives (the field's works the expert left out).

**Input.** JSONL, one line per survey: ``{"survey_id": ..., "references": [...]}``.
A reference is a raw string (as a generated survey prints it), a string holding one
BibTeX entry (starting with ``@``), or an object with any of ``title``, ``doi``,
``arxiv_id``, ``openalex_id``, ``year`` (``year`` is read and not used: the release has no
year for most candidates outside OpenAlex; a year has at most four digits). Or a folder with one reference list per
survey, named ``<survey_id>.bib`` (BibTeX) or ``<survey_id>.md`` (Markdown), parsed by
:mod:`pipeline.evaluate.bibliography.formats`; other files are counted and not read. Either way
the references keep their order. Files are UTF-8 (a BOM at the start is dropped); a byte
that is not, a number of more than :data:`MAX_NUMBER_DIGITS` digits or nesting deeper than the
JSON reader's limit is an error naming the file and line.

**Resolution** uses the release files alone and the pipeline's own identity rules. A
reference may name any work of the release's works table (:data:`WORKS_TABLE_FILE`, written
by the release stage): every work the corpus knows, the corpus papers and the works they
cite, whether or not it is a candidate of some survey, keyed as the reading lists key their
candidates:

1. Identifiers first. An object's ``doi``, ``arxiv_id`` and ``openalex_id``, and the
   DOI, arXiv id and OpenAlex id written in a raw string (an arXiv id only after the
   word "arxiv", an OpenAlex id only in an ``openalex.org`` URL: a bare ``1234.5678`` is a
   page range as often as an id), are normalised by :mod:`pipeline.rules.ids` and
   prefixed as aliases (:mod:`pipeline.rules.aliases`, an arXiv DOI also as its arXiv
   id). They are looked up in the works' ``aliases`` (a candidate's ``candidate_aliases``).
2. Then title keys (:mod:`pipeline.rules.titles`). A work's keys are the key of the title
   the release shows for it (``candidate_title``; when long enough to identify a work, as
   ``works`` keys the corpus titles) and the title key of its bib string (``works.raw``, a
   candidate's ``candidate_raw``): :func:`pipeline.rules.titles.work_title_keys`. An
   object's title gives one key; a raw string gives its segment keys (URLs cut out first: a
   URL is no title, and glued to one it hides it). As in ``works``, any segment key may
   equal a work's title, and only the string's own title key may equal another bib
   string's title key.

The works table is joined on the references' aliases and keys in one streaming pass
(:meth:`ReleaseWorks.index`), so millions of works are never held as Python objects. A
release built before the table is read all the same, its candidates keyed the same way, with
one warning: a reference to any other work of the corpus is then unmatched.

A reference whose identifiers or keys name two or more works names the survey's own
candidate when exactly one of them is one (listed or hard negative): the reference is scored
against that list, and a title the list holds is the work the list means, whether the corpus
also keeps a preprint and its published version apart or another work shares the title.
Hard negatives are preferred as listed works are, so the rule favours no class. Otherwise
the reference is *ambiguous*; one that names none is *unmatched*, with its reason (:data:`UNMATCHED_REASONS`). A reference naming
a work an earlier reference of the same bibliography named is a *duplicate*, and so is an unresolved one whose title key (else
the key of its whole text) an earlier one had. Every other reference is, for its
survey, a *listed* work (label >= 1, with its tier), a *hard negative* (label 0), or a
*known* work: any other work the corpus knows, a candidate of another survey or not. One
class, not two: whether a work made some other survey's list is a fact of the sample of
surveys the release detected, not of the reference, and both kinds count the same in the
metrics (a real work of the field or corpus that the expert did not list).

**Metrics** (per survey; ``unique`` = references minus duplicates):

* ``R(rel=t)``, t = 1..4: listed works of tier t matched / listed works of tier t
  (undefined for a list without tier t);
* ``recall``: listed works matched / listed works; ``weighted_recall``: sum of the
  labels of the listed works matched / sum of the labels of all listed works;
* ``precision``: listed works matched / unique references (0 for an empty bibliography);
* ``f1``: harmonic mean of ``precision`` and ``recall`` (0 when both are 0);
* ``hard_negative_rate``: hard negatives matched / references that matched a listed
  work, a hard negative or a known work (undefined when none did);
* ``unmatched_rate``: unmatched references / unique references (undefined when empty).

Macro means are over the scored surveys for which a metric is defined, with bootstrap
intervals over surveys (:func:`with_intervals`); two bibliographies of the same surveys
are compared by :func:`paired_tests`. The whole report, with the baselines and per-section
coverage, is :func:`pipeline.evaluate.bibliography.report.evaluate_file`.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from pipeline.core import schema as S
from pipeline.core.errors import PipelineError
from pipeline.core.release_files import READING_LISTS_FILE, WORKS_TABLE_FILE
from pipeline.corpus.sources import regular_file_problem
from pipeline.evaluate.bibliography.formats import (
    BIBTEX_SUFFIX,
    MARKDOWN_SUFFIXES,
    BibFormatError,
    bibtex_entry,
    markdown_links,
    parse_bibtex,
    parse_markdown,
)
from pipeline.evaluate.scoring.stats import bootstrap_means, holm, paired_test, rng_for
from pipeline.rules import aliases as A
from pipeline.rules import ids
from pipeline.rules import titles as T

log = logging.getLogger("pipeline")

REFERENCE_FIELDS = ("title", "doi", "arxiv_id", "openalex_id", "year")
TIERS = (1, 2, 3, 4)

LISTED = "listed"
HARD_NEGATIVE = "hard_negative"
KNOWN = "known"
UNMATCHED = "unmatched"
AMBIGUOUS = "ambiguous"
DUPLICATE = "duplicate"
CLASSES = (LISTED, HARD_NEGATIVE, KNOWN, UNMATCHED, AMBIGUOUS, DUPLICATE)

# Why a reference is unmatched, first that applies: it holds nothing to resolve; an
# identifier it writes names no work of the release's works table (a work the corpus does
# not know, or a made-up id); it has no title-like text (no id either); its title keys name
# no work.
EMPTY = "empty"
UNKNOWN_IDENTIFIER = "identifier not in the release"
NO_TITLE = "no title-like text"
UNKNOWN_TITLE = "title not in the release"
UNMATCHED_REASONS = (EMPTY, UNKNOWN_IDENTIFIER, NO_TITLE, UNKNOWN_TITLE)

RECALL = "recall"
WEIGHTED_RECALL = "weighted_recall"
PRECISION = "precision"
F1 = "f1"
HARD_NEGATIVE_RATE = "hard_negative_rate"
UNMATCHED_RATE = "unmatched_rate"
METRICS = (
    *(f"R(rel={t})" for t in TIERS),
    RECALL,
    WEIGHTED_RECALL,
    PRECISION,
    F1,
    HARD_NEGATIVE_RATE,
    UNMATCHED_RATE,
)

_URL = re.compile(r"(?:https?|ftp)://\S+|\bwww\.\S+")
MAX_YEAR = 9999
# A bibliography's numbers are years: a longer one is refused while it is read (Python
# refuses to read an integer of more than 4,300 digits, with a ValueError of its own).
MAX_NUMBER_DIGITS = 20
# a JSONL line holds one survey's references (the longest real list, about 1,100 works, is
# under 1 MB), a list file one survey's: a larger one is refused before it is held whole
MAX_LINE_BYTES = 64 << 20
_ROW = "_row"
_RAW = "_raw"
_FROM_TITLE = "_from_title"


class BibliographyError(PipelineError, ValueError):
    """A bibliography file that cannot be read or names what the release lacks (the
    message says which line)."""


@dataclass(frozen=True)
class Reference:
    """One reference of a bibliography: its raw text or its fields."""

    raw: str | None = None
    title: str | None = None
    doi: str | None = None
    arxiv_id: str | None = None
    openalex_id: str | None = None
    year: int | None = None
    section: str | None = None  # the heading it is listed under, when given per section


@dataclass(frozen=True)
class Bibliography:
    """A survey's bibliography as the generator ordered it."""

    survey_id: str
    references: tuple[Reference, ...]
    where: str = ""  # file:line, for messages
    dropped: dict[str, int] = field(default_factory=dict)  # reason -> items not read


@dataclass(frozen=True)
class BibliographyInput:
    """The bibliographies of a file or folder and the folder's files not read.

    Attributes:
        bibliographies: one per survey, in file (or sorted file name) order.
        skipped_files: reason -> how many files of a folder were not read.
    """

    bibliographies: tuple[Bibliography, ...]
    skipped_files: dict[str, int]


@dataclass(frozen=True)
class Resolved:
    """What one reference resolved to: its class and, when matched, the work and its label."""

    position: int
    cls: str
    work_id: str | None = None
    label: int | None = None
    resolved_by: str | None = None  # "identifier", "title" or None
    reason: str | None = None  # why an unmatched reference is (:data:`UNMATCHED_REASONS`)


@dataclass(frozen=True)
class SurveyScore:
    """Counts and metrics of one survey's bibliography."""

    survey_id: str
    n_references: int
    counts: dict[str, int]
    matched_per_tier: dict[int, int]
    listed_per_tier: dict[int, int]
    metrics: dict[str, float | None]
    resolved: tuple[Resolved, ...] = field(repr=False)


# --------------------------------------------------------------------- reading the file
def _reference(value: Any, where: str) -> Reference:
    if isinstance(value, str):
        if value.lstrip().startswith("@"):
            try:
                return Reference(**bibtex_entry(value, where))
            except BibFormatError as e:
                raise BibliographyError(str(e)) from e
        return Reference(raw=markdown_links(value))  # generators print Markdown links too
    if not isinstance(value, dict):
        raise BibliographyError(
            f"{where}: a reference must be a string or an object, not {type(value).__name__}"
        )
    unknown = sorted(set(value) - set(REFERENCE_FIELDS))
    if unknown:
        raise BibliographyError(
            f"{where}: unknown reference field(s) {unknown}; known: {', '.join(REFERENCE_FIELDS)}"
        )
    texts = {}
    for name in ("title", "doi", "arxiv_id", "openalex_id"):
        text = value.get(name)
        if text is not None and not isinstance(text, str):
            raise BibliographyError(f"{where}: {name} must be a string")
        texts[name] = text or None
    year = value.get("year")
    if year is not None and (isinstance(year, bool) or not isinstance(year, int)):
        raise BibliographyError(f"{where}: year must be an integer")
    if year is not None and abs(year) > MAX_YEAR:
        raise BibliographyError(f"{where}: year {year} is no year (at most {MAX_YEAR})")
    return Reference(year=year, **texts)


class _LongNumber(ValueError):
    """A JSON number of more than :data:`MAX_NUMBER_DIGITS` digits."""


def _json_int(text: str) -> int:
    if len(text) > MAX_NUMBER_DIGITS + text.startswith("-"):
        raise _LongNumber(text)
    return int(text)


def _text(data: bytes, where: str, *, first_line: int = 1) -> str:
    """``data`` as UTF-8 text, without the BOM some editors put at a file's start.

    Raises:
        BibliographyError: a byte that is not UTF-8 (names its line and the byte).
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = first_line + data.count(b"\n", 0, e.start)
        column = e.start - data.rfind(b"\n", 0, e.start)
        raise BibliographyError(
            f"{where}:{line}: not UTF-8 text (byte {data[e.start]:#04x} at column {column}); "
            "save the file as UTF-8"
        ) from None
    return text.removeprefix("\ufeff") if first_line == 1 else text


def _json_line(line: str, where: str) -> Any:
    """One JSONL line decoded (module docstring: what is refused).

    Raises:
        BibliographyError: not JSON, a number too long, or nested too deep.
    """
    try:
        return json.loads(line, parse_int=_json_int)
    except json.JSONDecodeError as e:
        raise BibliographyError(f"{where}: not JSON ({e.msg})") from None
    except _LongNumber as e:
        raise BibliographyError(
            f"{where}: a number of {len(str(e)):,} digits; a bibliography's numbers are years "
            f"(at most {MAX_NUMBER_DIGITS} digits are read)"
        ) from None
    except RecursionError:
        raise BibliographyError(
            f"{where}: JSON nested deeper than the reader's limit ({sys.getrecursionlimit():,} "
            "levels); a bibliography line nests four"
        ) from None


def read_bibliographies(path: Path) -> list[Bibliography]:
    """The bibliographies of a JSONL file, in file order.

    Raises:
        BibliographyError: a line that is not UTF-8 or not a JSON object, without a string
            ``survey_id`` or a ``references`` list, a malformed reference, or a survey
            given twice.
        FileNotFoundError: no such file.
    """
    out: list[Bibliography] = []
    seen: dict[str, int] = {}
    with open(path, "rb") as f:
        for number, data in enumerate(iter(lambda: f.readline(MAX_LINE_BYTES + 1), b""), 1):
            if len(data) > MAX_LINE_BYTES:
                raise BibliographyError(
                    f"{path}:{number}: a line of more than {MAX_LINE_BYTES >> 20} MB; a line "
                    "holds one survey's references"
                )
            line = _text(data, str(path), first_line=number)
            if not line.strip():
                continue
            where = f"{path}:{number}"
            record = _json_line(line, where)
            if not isinstance(record, dict):
                raise BibliographyError(f"{where}: a line must be a JSON object")
            survey_id = record.get(S.SURVEY_ID)
            if not isinstance(survey_id, str) or not survey_id:
                raise BibliographyError(f"{where}: no survey_id (a non-empty string)")
            if survey_id in seen:
                raise BibliographyError(
                    f"{where}: survey {survey_id!r} again (first on line {seen[survey_id]})"
                )
            seen[survey_id] = number
            out.append(Bibliography(survey_id, _line_references(record, where), where))
    return out


def _line_references(record: dict[str, Any], where: str) -> tuple[Reference, ...]:
    """A line's ``references`` list, or its ``sections`` (heading -> list) in order, each
    reference tagged with its heading."""
    refs, sections = record.get("references"), record.get("sections")
    if sections is None:
        if not isinstance(refs, list):
            raise BibliographyError(f"{where}: no references list (or sections object)")
        return tuple(_reference(r, f"{where}: reference {i}") for i, r in enumerate(refs, 1))
    if refs is not None:
        raise BibliographyError(f"{where}: references and sections both given; give one")
    if not isinstance(sections, dict) or not all(isinstance(v, list) for v in sections.values()):
        raise BibliographyError(f"{where}: sections must map each heading to a list")
    tagged = [(heading, r) for heading, listed in sections.items() for r in listed]
    return tuple(
        replace(_reference(r, f"{where}: reference {i}"), section=heading)
        for i, (heading, r) in enumerate(tagged, 1)
    )


NOT_A_LIST_FILE = "not a .bib or .md file"
HIDDEN_FILE = "hidden file"
FOLDER_IN_FOLDER = "a folder"


def read_folder(folder: Path) -> BibliographyInput:
    """One bibliography per ``<survey_id>.bib`` or ``<survey_id>.md`` file of a folder, in
    sorted name order; other entries of the folder are counted by reason.

    Raises:
        BibliographyError: two files for one survey, a list that is not a regular file or
            not UTF-8, or a BibTeX file that does not parse.
    """
    skipped: Counter[str] = Counter()
    out: list[Bibliography] = []
    seen: dict[str, str] = {}
    for path in sorted(folder.iterdir()):
        suffix = path.suffix.lower()
        if path.name.startswith("."):
            skipped[HIDDEN_FILE] += 1
        elif path.is_dir():
            skipped[FOLDER_IN_FOLDER] += 1
        elif suffix != BIBTEX_SUFFIX and suffix not in MARKDOWN_SUFFIXES:
            skipped[NOT_A_LIST_FILE] += 1
        else:
            survey_id = path.name[: -len(suffix)]
            if survey_id in seen:
                raise BibliographyError(
                    f"{path}: survey {survey_id!r} again (also in {seen[survey_id]})"
                )
            seen[survey_id] = path.name
            problem = regular_file_problem(path)
            if problem is not None:  # a FIFO blocks a reader, /dev/zero never ends
                raise BibliographyError(f"{path}: {problem}: not a regular file, not read")
            if path.stat().st_size > MAX_LINE_BYTES:
                raise BibliographyError(
                    f"{path}: {path.stat().st_size:,} bytes, more than {MAX_LINE_BYTES >> 20} "
                    "MB; a list file holds one survey's references"
                )
            text = _text(path.read_bytes(), str(path))
            try:
                parsed = (
                    parse_bibtex(text, str(path))
                    if suffix == BIBTEX_SUFFIX
                    else parse_markdown(text)
                )
            except BibFormatError as e:
                raise BibliographyError(str(e)) from e
            refs = tuple(Reference(**fields) for fields in parsed.references)
            out.append(Bibliography(survey_id, refs, str(path), dict(parsed.dropped)))
    return BibliographyInput(tuple(out), dict(sorted(skipped.items())))


def read_input(path: Path) -> BibliographyInput:
    """The bibliographies of a JSONL file or of a folder of lists (module docstring).

    Raises:
        BibliographyError: a malformed line, entry or reference, or a survey given twice.
        FileNotFoundError: no such file or folder.
    """
    if path.is_dir():
        return read_folder(path)
    return BibliographyInput(tuple(read_bibliographies(path)), {})


# --------------------------------------------------------------------- the release's works
@dataclass(frozen=True)
class WorkIndex:
    """The works some references can name: alias or title key -> the works carrying it.

    Built for the aliases and keys of the references at hand (:meth:`ReleaseWorks.index`),
    never for the whole works table, which holds millions of works.

    Attributes:
        by_alias: alias (or work id) -> the works carrying it.
        by_title: key of a work's title -> the works.
        by_raw_title: title key of a work's bib string -> the works.
    """

    by_alias: dict[str, frozenset[str]] = field(default_factory=dict)
    by_title: dict[str, frozenset[str]] = field(default_factory=dict)
    by_raw_title: dict[str, frozenset[str]] = field(default_factory=dict)


def _index(pairs: pl.DataFrame, key: str) -> dict[str, frozenset[str]]:
    grouped = pairs.group_by(key).agg(pl.col(S.WORK_ID).unique())
    return {k: frozenset(v) for k, v in grouped.iter_rows()}


@dataclass(frozen=True)
class ReleaseWorks:
    """What resolution and scoring read from a release.

    Attributes:
        labels: survey_id -> {work_id: label} of every survey of the release.
        eval_surveys: the surveys of the eval split.
        table: the works a reference may name, with ``schema.WORKS_TABLE``'s columns: the
            release's works table (every work the corpus knows), or for a release without
            one, its candidates keyed the same way.
        complete: whether ``table`` is the release's works table.
    """

    labels: dict[str, dict[str, int]]
    eval_surveys: frozenset[str]
    table: pl.LazyFrame
    complete: bool = True

    def index(self, aliases: Iterable[str], keys: Iterable[str]) -> WorkIndex:
        """The works of :attr:`table` carrying any of ``aliases`` (or one of them as its id)
        or any of the title ``keys``: a join on the references' keys, read in one streaming
        pass."""
        wanted_aliases = pl.Series(sorted(set(aliases)), dtype=pl.String).implode()
        wanted_keys = pl.Series(sorted(set(keys)), dtype=pl.String).implode()
        table = self.table
        alias_pairs = pl.concat(
            [
                table.select(S.WORK_ID, pl.col(S.WORK_ID).alias(A.ALIAS)),
                table.select(S.WORK_ID, pl.col(S.ALIASES).alias(A.ALIAS)).explode(A.ALIAS),
            ]
        ).filter(pl.col(A.ALIAS).is_in(wanted_aliases))
        title_pairs = table.select(S.WORK_ID, T.KEY).filter(pl.col(T.KEY).is_in(wanted_keys))
        raw_pairs = table.select(S.WORK_ID, pl.col(S.RAW_TITLE_KEY).alias(T.KEY)).filter(
            pl.col(T.KEY).is_in(wanted_keys)
        )
        found = pl.collect_all([alias_pairs, title_pairs, raw_pairs], engine="streaming")
        return WorkIndex(
            _index(found[0], A.ALIAS), _index(found[1], T.KEY), _index(found[2], T.KEY)
        )


def load_release_works(release: Path) -> ReleaseWorks:
    """Read the labels of every split of a release folder and find its works table.

    A release built before the works table (:data:`WORKS_TABLE_FILE`) is read all the same,
    its candidates keyed as the table keys them, with one warning: a reference to another
    work of the corpus is then unmatched.

    Raises:
        FileNotFoundError: the folder has no eval reading lists.
    """
    files = [release / READING_LISTS_FILE.format(split=split) for split in S.SPLIT_NAMES]
    eval_file = release / READING_LISTS_FILE.format(split="eval")
    if not eval_file.is_file():
        raise FileNotFoundError(f"{release}: no {eval_file.name} (not a release folder)")
    works_file = release / WORKS_TABLE_FILE
    columns = [S.SURVEY_ID, S.CANDIDATE_ID, S.LABEL]
    if not works_file.is_file():
        columns += [S.CANDIDATE_ALIASES, S.CANDIDATE_TITLE, S.CANDIDATE_RAW]
    rows = pl.concat([pl.read_parquet(f, columns=columns) for f in files if f.is_file()]).rename(
        {S.CANDIDATE_ID: S.WORK_ID}
    )
    labels: dict[str, dict[str, int]] = {}
    for survey_id, work_id, label in rows.select(S.SURVEY_ID, S.WORK_ID, S.LABEL).iter_rows():
        labels.setdefault(survey_id, {})[work_id] = int(label)
    eval_surveys = frozenset(pl.read_parquet(eval_file, columns=[S.SURVEY_ID])[S.SURVEY_ID])
    if works_file.is_file():
        return ReleaseWorks(labels, eval_surveys, S.scan(works_file, S.WORKS_TABLE))
    log.warning(
        "%s: no %s (a release built before it): references resolve to the release's "
        "candidates only, and one to another work of the corpus is unmatched",
        release,
        WORKS_TABLE_FILE,
    )
    works = rows.select(S.WORK_ID, S.CANDIDATE_ALIASES, S.CANDIDATE_TITLE, S.CANDIDATE_RAW).unique(
        S.WORK_ID
    )
    keys = T.work_title_keys(works, S.CANDIDATE_TITLE, S.CANDIDATE_RAW)
    table = works.select(S.WORK_ID, pl.col(S.CANDIDATE_ALIASES).alias(S.ALIASES)).join(
        keys, on=S.WORK_ID, how="left"
    )
    return ReleaseWorks(labels, eval_surveys, table.lazy(), complete=False)


def references_index(bibliographies: Sequence[Bibliography], works: ReleaseWorks) -> WorkIndex:
    """:meth:`ReleaseWorks.index` of every alias and title key the bibliographies' references
    give."""
    aliases: set[str] = set()
    keys: set[str] = set()
    for bibliography in bibliographies:
        for ref, ref_keys in zip(
            bibliography.references, _title_keys(bibliography.references), strict=True
        ):
            aliases.update(reference_aliases(ref))
            keys.update(key for key, _ in ref_keys)
    return works.index(aliases, keys)


# --------------------------------------------------------------------- resolution
def reference_aliases(ref: Reference) -> list[str]:
    """The prefixed aliases a reference carries (its fields, or what its raw text writes)."""
    text = ref.raw or ""
    lower = text.lower()
    arxiv = ids.normalize_arxiv(ref.arxiv_id) or (
        ids.normalize_arxiv(text) if "arxiv" in lower else None
    )
    doi = ids.normalize_doi(ref.doi) or ids.normalize_doi(text)
    openalex = ids.normalize_openalex(ref.openalex_id) or (
        ids.normalize_openalex(text.split("openalex.org/", 1)[1].split()[0])
        if "openalex.org/" in lower
        else None
    )
    found = []
    if arxiv:
        found.append(A.ARXIV_PREFIX + arxiv)
    if doi:
        found.append(A.DOI_PREFIX + doi)
        arxiv_doi = pl.select(pl.lit(doi).str.extract(A.ARXIV_DOI, 1)).item()
        if arxiv_doi:
            found.append(A.ARXIV_PREFIX + arxiv_doi)
    if openalex:
        found.append(A.OPENALEX_PREFIX + openalex)
    return found


def _title_keys(refs: Sequence[Reference]) -> list[list[tuple[str, bool]]]:
    """Per reference, ``(key, is_its_title_key)`` pairs: an object's title gives its key; a
    raw string its segment keys, the title key flagged."""
    keys: list[list[tuple[str, bool]]] = [[] for _ in refs]
    titled = [(i, r.title) for i, r in enumerate(refs) if r.title]
    if titled:
        frame = pl.DataFrame(
            {_ROW: [i for i, _ in titled], _RAW: [t for _, t in titled]},
            schema={_ROW: pl.Int64, _RAW: pl.String},
        )
        for row, key in frame.select(_ROW, T.title_key(pl.col(_RAW))).iter_rows():
            if key is not None:
                keys[row].append((key, True))
    # a URL is no title: glued to one (``Title https://...``, a Markdown link) it would fail
    # the segment's venue-word test, so it ends the segment instead (its ids are read apart)
    raws = [(i, _URL.sub(". ", r.raw)) for i, r in enumerate(refs) if r.raw and not r.title]
    if raws:
        frame = pl.DataFrame(
            {_ROW: [i for i, _ in raws], _RAW: [t for _, t in raws]},
            schema={_ROW: pl.Int64, _RAW: pl.String},
        )
        segments = T.segment_keys_per_string(frame, _RAW, [_ROW]).sort(_ROW, T.KEY).collect()
        for row, key, rank in segments.iter_rows():
            keys[row].append((key, rank == 0))
    return keys


def _whole_key(ref: Reference) -> str | None:
    """The key of a reference's whole text: what tells two unresolved references apart."""
    text = ref.raw or ref.title
    if not text:
        return None
    return pl.select(T.title_key(pl.lit(text, dtype=pl.String))).item()


def resolve(
    bibliography: Bibliography, works: ReleaseWorks, index: WorkIndex | None = None
) -> list[Resolved]:
    """Resolve every reference of one bibliography (module docstring) and classify it.

    ``index``: the works its references can name (:func:`references_index` of these
    bibliographies or more); looked up in ``works.table`` when not given.

    Raises:
        BibliographyError: the survey is not in the release.
    """
    labels = works.labels.get(bibliography.survey_id)
    if labels is None:
        raise BibliographyError(
            f"{bibliography.where}: survey {bibliography.survey_id!r} is not in the release"
        )
    if index is None:
        index = references_index([bibliography], works)
    refs = bibliography.references
    keys = _title_keys(refs)
    seen_works: set[str] = set()
    seen_keys: set[str] = set()
    out: list[Resolved] = []
    for position, (ref, ref_keys) in enumerate(zip(refs, keys, strict=True), start=1):
        aliases = reference_aliases(ref)
        named = set().union(*(index.by_alias.get(a, frozenset()) for a in aliases))
        by = "identifier"
        if not named:
            by = "title"
            for key, is_title_key in ref_keys:
                named |= index.by_title.get(key, frozenset())
                if is_title_key:
                    named |= index.by_raw_title.get(key, frozenset())
        if len(named) > 1:
            own = named.intersection(labels)
            if len(own) == 1:  # the survey's own candidate (module docstring)
                named = own
        if len(named) == 1:
            work_id = next(iter(named))
            if work_id in seen_works:
                out.append(Resolved(position, DUPLICATE, work_id, labels.get(work_id), by))
                continue
            seen_works.add(work_id)
            label = labels.get(work_id)
            cls = KNOWN if label is None else LISTED if label >= 1 else HARD_NEGATIVE
            out.append(Resolved(position, cls, work_id, label, by))
            continue
        own_key = next((k for k, is_title in ref_keys if is_title), None) or _whole_key(ref)
        if own_key is not None and own_key in seen_keys:
            out.append(Resolved(position, DUPLICATE))
            continue
        if own_key is not None:
            seen_keys.add(own_key)
        if named:
            out.append(Resolved(position, AMBIGUOUS))
            continue
        reason = (
            EMPTY if not (ref.raw or ref.title or "").strip() and not aliases
            else UNKNOWN_IDENTIFIER if aliases
            else NO_TITLE if not ref_keys
            else UNKNOWN_TITLE
        )  # fmt: skip
        out.append(Resolved(position, UNMATCHED, reason=reason))
    return out


# --------------------------------------------------------------------- metrics
def _ratio(numerator: float, denominator: float) -> float | None:
    return numerator / denominator if denominator else None


def score_survey(
    survey_id: str, resolved: Sequence[Resolved], labels: Mapping[str, int]
) -> SurveyScore:
    """Counts and metrics (module docstring) of one survey's resolved bibliography."""
    counts = Counter(r.cls for r in resolved)
    listed = {w: g for w, g in labels.items() if g >= 1}
    matched = {r.work_id for r in resolved if r.cls == LISTED}
    listed_per_tier = {t: sum(1 for g in listed.values() if g == t) for t in TIERS}
    matched_per_tier = {t: sum(1 for w in matched if listed[w] == t) for t in TIERS}
    unique = len(resolved) - counts[DUPLICATE]
    recall = _ratio(len(matched), len(listed))
    precision = len(matched) / unique if unique else 0.0
    metrics: dict[str, float | None] = {
        f"R(rel={t})": _ratio(matched_per_tier[t], listed_per_tier[t]) for t in TIERS
    }
    metrics[RECALL] = recall
    metrics[WEIGHTED_RECALL] = _ratio(sum(listed[w] for w in matched), sum(listed.values()))
    metrics[PRECISION] = precision
    r = recall or 0.0
    metrics[F1] = 2 * precision * r / (precision + r) if precision + r else 0.0
    metrics[HARD_NEGATIVE_RATE] = _ratio(
        counts[HARD_NEGATIVE], counts[LISTED] + counts[HARD_NEGATIVE] + counts[KNOWN]
    )
    metrics[UNMATCHED_RATE] = _ratio(counts[UNMATCHED], unique)
    return SurveyScore(
        survey_id,
        len(resolved),
        {c: counts[c] for c in CLASSES},
        matched_per_tier,
        listed_per_tier,
        metrics,
        tuple(resolved),
    )


def macro_means(scores: Iterable[SurveyScore]) -> dict[str, dict[str, float | int | None]]:
    """Per metric, its mean over the surveys where it is defined and how many those are."""
    scores = list(scores)
    out: dict[str, dict[str, float | int | None]] = {}
    for metric in METRICS:
        defined = [v for s in scores if (v := s.metrics[metric]) is not None]
        out[metric] = {
            "mean": sum(defined) / len(defined) if defined else None,
            "n_surveys": len(defined),
        }
    return out


def run_scores(scores: Iterable[SurveyScore]) -> dict[str, dict[str, float]]:
    """The bibliographies as a run: ``{survey_id: {work_id: -position}}`` of the judged works
    (listed or hard negative) each names, first reference first."""
    return {
        s.survey_id: {
            r.work_id: -float(r.position)
            for r in s.resolved
            if r.cls in (LISTED, HARD_NEGATIVE) and r.work_id is not None
        }
        for s in scores
    }


@dataclass(frozen=True)
class BibliographyEvaluation:
    """Every survey's score, the macro means and what the file lacked."""

    scores: tuple[SurveyScore, ...]
    means: dict[str, dict[str, float | int | None]]
    missing_surveys: tuple[str, ...]
    counts: dict[str, int]
    dropped: dict[str, int] = field(default_factory=dict)  # reason -> items not references

    def unmatched_reasons(self) -> dict[str, int]:
        """Unmatched references counted by reason, over every survey."""
        counts = Counter(r.reason for s in self.scores for r in s.resolved if r.cls == UNMATCHED)
        return {reason: counts[reason] for reason in UNMATCHED_REASONS}

    def report(self, inputs: Mapping[str, Any]) -> dict[str, Any]:
        """The JSON report: inputs, totals, means and one entry per survey."""
        return {
            "inputs": dict(inputs),
            "n_surveys": len(self.scores),
            "missing_surveys": list(self.missing_surveys),
            "n_missing_surveys": len(self.missing_surveys),
            "counts": self.counts,
            "unmatched_reasons": self.unmatched_reasons(),
            "dropped": self.dropped,
            "metrics": self.means,
            "per_survey": {
                s.survey_id: {
                    "n_references": s.n_references,
                    "counts": s.counts,
                    "matched_per_tier": {str(t): n for t, n in s.matched_per_tier.items()},
                    "listed_per_tier": {str(t): n for t, n in s.listed_per_tier.items()},
                    "metrics": s.metrics,
                    "references": [
                        {
                            "position": r.position,
                            "class": r.cls,
                            "work_id": r.work_id,
                            "label": r.label,
                            "resolved_by": r.resolved_by,
                            "reason": r.reason,
                        }
                        for r in s.resolved
                    ],
                }
                for s in self.scores
            },
        }


def evaluate_bibliographies(
    bibliographies: Sequence[Bibliography], works: ReleaseWorks
) -> BibliographyEvaluation:
    """Resolve and score every bibliography; eval surveys without one are listed as missing.

    Raises:
        BibliographyError: a survey that is not in the release.
    """
    index = references_index(bibliographies, works)  # one pass over the works table
    scores = tuple(
        score_survey(b.survey_id, resolve(b, works, index), works.labels[b.survey_id])
        for b in bibliographies
    )
    given = {b.survey_id for b in bibliographies}
    totals = Counter[str]()
    for s in scores:
        totals.update(s.counts)
    dropped = Counter[str]()
    for b in bibliographies:
        dropped.update(b.dropped)
    return BibliographyEvaluation(
        scores,
        macro_means(scores),
        tuple(sorted(works.eval_surveys - given)),
        {c: totals[c] for c in CLASSES} | {"references": sum(s.n_references for s in scores)},
        dict(sorted(dropped.items())),
    )


# --------------------------------------------------------------------- intervals and tests
def metric_matrix(scores: Sequence[SurveyScore]) -> np.ndarray:
    """Surveys x :data:`METRICS`, NaN where a metric is undefined for a survey."""
    return np.array(
        [[np.nan if (v := s.metrics[m]) is None else v for m in METRICS] for s in scores],
        dtype=np.float64,
    ).reshape(len(scores), len(METRICS))


def _number(value: float) -> float | None:
    return None if np.isnan(value) else float(value)


def with_intervals(
    means: Mapping[str, Mapping[str, float | int | None]],
    scores: Sequence[SurveyScore],
    n_resamples: int,
    seed: int,
    *,
    key: str,
) -> dict[str, dict[str, float | int | None]]:
    """The macro means with their 95% percentile bootstrap interval over surveys
    (:func:`pipeline.evaluate.scoring.stats.bootstrap_means`; a resample's mean of a metric is over
    its surveys where the metric is defined). ``key`` names what is resampled, so adding a
    bibliography to the report does not move another's interval."""
    summary = bootstrap_means(metric_matrix(scores), n_resamples, rng_for(seed, RUN_NAME, key))
    return {
        metric: {**means[metric], "ci_low": _number(low), "ci_high": _number(high)}
        for metric, low, high in zip(METRICS, summary.ci_low, summary.ci_high, strict=True)
    }


def paired_tests(
    scores: Sequence[SurveyScore],
    against: Sequence[SurveyScore],
    n_resamples: int,
    seed: int,
    *,
    key: str = "paired",
) -> dict[str, Any]:
    """Per metric, the first bibliography minus ``against`` on the surveys both give
    (:func:`pipeline.evaluate.scoring.stats.paired_test`: mean difference over the surveys where
    both define the metric, two-sided sign-flip p-value, paired bootstrap interval), with
    Holm's adjustment over the metrics. ``key`` names the pair for the generator's seed.

    Raises:
        BibliographyError: no survey in common.
    """
    mine = {s.survey_id: s for s in scores}
    theirs = {s.survey_id: s for s in against}
    common = sorted(mine.keys() & theirs.keys())
    if not common:
        raise BibliographyError("the two bibliographies share no survey; nothing to pair")
    test = paired_test(
        metric_matrix([mine[q] for q in common]),
        metric_matrix([theirs[q] for q in common]),
        n_resamples,
        rng_for(seed, RUN_NAME, key),
    )
    adjusted = holm(test.p_value)
    return {
        "n_surveys": len(common),
        "only_in_bibliography": len(mine.keys() - theirs.keys()),
        "only_in_against": len(theirs.keys() - mine.keys()),
        "metrics": {
            metric: {
                "diff": _number(test.diff[i]),
                "p_value": _number(test.p_value[i]),
                "p_holm": _number(adjusted[i]),
                "ci_low": _number(test.ci_low[i]),
                "ci_high": _number(test.ci_high[i]),
                "n_surveys": int(test.n[i]),
            }
            for i, metric in enumerate(METRICS)
        },
    }


# --------------------------------------------------------------------- the whole evaluation
RESULTS_FILE = "bibliography_results.json"
RUN_NAME = "bibliography"


def run_metrics(evaluation: BibliographyEvaluation, release: Path) -> dict[str, Any] | None:
    """The eval surveys' bibliographies scored as a ranked run (score = -position) by the
    evaluation's retrieval mode: a judged work a bibliography does not name counts as not
    retrieved, as trec_eval counts it; None when no eval survey has a bibliography.

    The metrics are the evaluation's own (:mod:`pipeline.evaluate.scoring.measures`), macro over
    every eval survey: a survey without a bibliography scores 0.
    """
    import warnings

    from pipeline.evaluate.evaluation import EvaluationRequest, run_evaluation
    from pipeline.evaluate.systems.runs import RunWarning

    eval_surveys = eval_survey_ids(release)
    scores = {
        survey_id: ranked
        for survey_id, ranked in run_scores(evaluation.scores).items()
        # a run has no row for a survey whose bibliography names no judged work
        if ranked and survey_id in eval_surveys
    }
    if not scores:
        return None
    with warnings.catch_warnings():
        # the missing surveys are in the report already (``missing_surveys``)
        warnings.simplefilter("ignore", RunWarning)
        request = EvaluationRequest(
            release, scores={RUN_NAME: scores}, mode="retrieval", baselines=False, learned=False
        )
        result = run_evaluation(request)
    stats = result.results["subsets"]["ALL"][RUN_NAME]
    return {
        "mode": "retrieval",
        "n_surveys": result.results["n_surveys"],
        "metrics": {name: value["mean"] for name, value in stats.items()},
    }


def eval_survey_ids(release: Path) -> frozenset[str]:
    """The survey ids of a release folder's eval split."""
    eval_file = release / READING_LISTS_FILE.format(split="eval")
    return frozenset(pl.read_parquet(eval_file, columns=[S.SURVEY_ID])[S.SURVEY_ID])
