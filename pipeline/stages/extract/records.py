"""The unarXive record as ``extract`` reads it: typed msgspec structs that name only the
fields used, the decoder, and how a record's values are read (dates, headings, rejects).

The records' dynamic-key dicts (``bib_entries``, ``sections``) make generic JSON readers
unusable: each line is decoded into these structs (``gc=False``: they hold no cycles).
"""

from __future__ import annotations

from datetime import date

import msgspec
import regex

from pipeline.corpus.provenance import SYNTHETIC_FIELD


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
    # set by the pipeline's own generators only (pipeline.corpus.provenance)
    synthetic: str | None = msgspec.field(default=None, name=SYNTHETIC_FIELD)


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
    except (IndexError, KeyError, ValueError, OverflowError):  # a year past C long: OverflowError
        return None


def parse_iso_date(value: str | None) -> date | None:
    """``"2022-12-22"`` (anything after the first 10 characters ignored) -> a date, else None."""
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


def decode_reason(err: Exception) -> str:
    """The reject reason of a line :data:`DECODER` refused with ``err``."""
    msg = str(err)
    if isinstance(err, msgspec.ValidationError):
        return "not_an_object" if "Expected `object`" in msg and "$." not in msg else "wrong_type"
    if "UTF-8" in msg:
        return "invalid_utf8"
    if "truncated" in msg:
        return "truncated_json"
    return "invalid_json"
