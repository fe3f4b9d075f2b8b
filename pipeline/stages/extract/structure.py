"""Section occurrences of a paper and its top-level structure (rows of ``sections``).

Both record layouts are read:

* 2022: ``body_text`` is a list of paragraphs with ``section``/``sec_number``/
  ``sec_type``. A *section occurrence* is a run of consecutive paragraphs with the
  same (section, sec_type, sec_number). Its top-level section is rebuilt by
  :func:`structure` (the rules are in its docstring): a dotted number names its
  top-level section ("2.1" is in 2), a section that has no paragraph of its own
  becomes an *unnamed* top-level section, paragraph-level headings (empty
  ``sec_type``) stay inside their section, letter numbers mark appendices.
* 2024: ``sections`` is a dict keyed by heading; each key is one occurrence and its
  own top section (the 2024 release has no hierarchy).

A ``{{cite:<ref_id>}}`` marker inside a heading counts once per section occurrence.
"""

from __future__ import annotations

import operator
from typing import Any

from pipeline.stages.extract.records import CITE_MARKER, Abstract, Record, clean_heading

_UNSET = object()

_REF_ID = operator.attrgetter("ref_id")


def _heading_refs(heading: str) -> list[str]:
    """Ref ids of the citation markers in a heading, once each (a marker counts once per
    section occurrence)."""
    return list(dict.fromkeys(CITE_MARKER.findall(heading)))


_LEVELS = {"section": 1, "subsection": 2, "subsubsection": 3}


class Occurrence:
    """One section occurrence in paper order (a row of ``sections``)."""

    __slots__ = ("section", "number", "level", "top", "unnamed", "appendix", "cited", "body")

    def __init__(
        self,
        section: str,
        number: str,
        level: int,
        cited: list[str | None],
        unnamed: bool = False,
        body: bool = False,
    ) -> None:
        self.section = section
        self.number = number
        self.level = level
        self.top = -1  # index of the enclosing top-level occurrence, set by structure()
        self.unnamed = unnamed
        self.appendix = False
        # ref ids as cited here, in order (bib entry or not): the writer thread counts them
        self.cited = cited
        # read from the record's own text (a run of paragraphs, a 2024 key): it has a text
        # (pipeline.stages.extract.texts); the abstract and unnamed sections have none
        self.body = body


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


def occurrences(rec: Record) -> list[Occurrence]:
    """Section occurrences in paper order, with ``top`` set and the ref ids cited in each."""
    occs: list[Occurrence] = []
    ab = rec.abstract
    if isinstance(ab, Abstract) and ab.cite_spans:
        occs.append(Occurrence("Abstract", "", 1, list(map(_REF_ID, ab.cite_spans))))
    if rec.body_text is not None:
        # Hot loop (about 100 paragraphs and 90 cite spans per paper): fields compared one
        # by one, ref ids gathered in C (map), counted later in Polars (rows.mentions).
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
                    Occurrence(
                        clean_heading(heading),
                        number,
                        _LEVELS.get(prev_type, 4),  # type: ignore[arg-type]
                        cited,
                        body=True,
                    )
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
            occs.append(Occurrence(clean_heading(heading), "", 0, cited, body=True))
    for i, o in enumerate(occs):
        if o.top < 0:
            o.top = i
    return occs
