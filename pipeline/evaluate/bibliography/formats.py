"""Bibliographies as generators write them: BibTeX and Markdown reference lists.

Both parsers are small and strict. They return each reference as a mapping of the
fields :class:`pipeline.evaluate.bibliography.score.Reference` takes, in file order, and
count with a reason everything of the text they do not turn into a reference.

**BibTeX.** An entry is ``@type{key, name = value, ...}`` (or ``@type(...)``); a value is
``{...}`` (braces nested), ``"..."``, a number or a ``@string`` macro name, joined by
``#``. ``@comment``, ``@preamble`` and ``@string`` are not references (counted), and text
between entries is a comment, as BibTeX reads it (counted by non-blank lines). An entry
gives ``title`` (LaTeX accents and braces removed: ``Schr\\"{o}dinger`` is
``Schrodinger``), ``doi``, ``arxiv_id`` (``eprint``, read as an arXiv id), ``year`` (when
one to four digits), and ``raw``: its field values joined, where an identifier written in a
``url``, ``journal`` or ``note`` is found as in a raw string. An entry whose braces or
quotes do not close, or without the ``=`` of a field, is an error naming its line: past
it, where the next entry starts is a guess. An entry without a key (``@article{title = ...``)
is read from its first field. Macros add at most :data:`MACRO_TEXT_RATIO` times the text's
own size: ``@string`` macros that double at each level (a few hundred bytes that expand to
gigabytes) are refused, naming the line and the macro, before they grow.

**Markdown.** One reference per list item: a line starting with ``-``, ``*``, ``+``,
``1.``, ``1)`` or ``[1]``; an indented or unbroken line after an item continues it.
Headings (``#``) and lines outside items are not references (counted); each reference
keeps the heading above it as its ``section``. A file with no list item at all holds one
reference per non-blank line. A link ``[text](url)`` and an
autolink ``<url>`` become ``text url``, so the URL's DOI or arXiv id is read; emphasis
marks and backticks are dropped. The reader is linear in the text: a list item of 80,000
``[`` or ``_`` is read as fast as any other text of its size.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from pipeline.core.errors import PipelineError

BIBTEX_SUFFIX = ".bib"
MARKDOWN_SUFFIXES = (".md", ".markdown")

# what is counted rather than read as a reference
OUTSIDE_ENTRY = "bibtex text outside an entry (lines)"
NOT_A_REFERENCE = "bibtex @{kind}"
HEADING = "markdown heading"
OUTSIDE_ITEM = "markdown line outside a list item"

# The text @string macros may add to one BibTeX text, as a multiple of the text's size. A
# real library's macros (venue names) add less than the entries that use them hold; macros
# that double at each level add 2**levels characters from a few hundred bytes.
MACRO_TEXT_RATIO = 16

_ENTRY_START = re.compile(r"@\s*([A-Za-z][\w-]*)\s*([{(])")
_BARE_VALUE = re.compile(r"[\w:.+-]+")  # a number or a @string macro name
_FIELD_NAME = re.compile(r"\s*([A-Za-z][\w:.+-]*)\s*")
_KEY_END = {"}": re.compile(r"[,}]"), ")": re.compile(r"[,)]")}  # after an entry's key
_YEAR = re.compile(r"[0-9]{1,4}")
_LATEX_ACCENT = re.compile(r"\\[`'^\"~=.]|\\[uvHckbdrt](?=[{\s])")
_LATEX_COMMAND = re.compile(r"\\[A-Za-z]+\s*")
_ITEM = re.compile(r"^\s{0,3}(?:[-*+]|\d{1,4}[.)]|\[\d{1,4}\])\s+")
_HEADING = re.compile(r"^\s{0,3}#{1,6}(?:\s|$)")
_LINK_URL_END = re.compile(r"[)\s]")  # what ends a link's URL: its ')', or a space
# CommonMark's autolink: no '<' inside (with one, every '<' of a run would scan to its end)
_AUTOLINK = re.compile(r"<((?:https?|ftp)://[^<>\s]+)>")
# a run of '_' is dropped when a word does not touch it on one side; tried at its first '_'
# only, else each '_' of a run glued to words at both ends would scan the run to its end
_EMPHASIS = re.compile(r"\*+|`+|(?<!\w)_+|(?<!_)_+(?!\w)")


class BibFormatError(PipelineError, ValueError):
    """A BibTeX file that cannot be read as entries (the message names file and line)."""


@dataclass
class Parsed:
    """References of one file, as field mappings in file order, and what was dropped.

    Attributes:
        references: one mapping per reference (keys of ``Reference``).
        dropped: reason -> how many of the file's items were not references.
    """

    references: list[dict[str, Any]] = field(default_factory=list)
    dropped: Counter[str] = field(default_factory=Counter)


# --------------------------------------------------------------------- BibTeX
def latex_to_text(value: str) -> str:
    """A BibTeX value as plain text: accents, commands, braces and ties removed."""
    text = _LATEX_ACCENT.sub("", value)
    text = _LATEX_COMMAND.sub("", text)
    return " ".join(text.replace("{", "").replace("}", "").replace("~", " ").split())


class _Scanner:
    """A cursor over one BibTeX text that knows its line numbers."""

    def __init__(self, text: str, where: str) -> None:
        self.text = text
        self.where = where
        self.pos = 0
        self.macro_text = 0  # characters the macros expanded so far added
        self.macro_limit = MACRO_TEXT_RATIO * len(text)

    def line(self, pos: int | None = None) -> int:
        return self.text.count("\n", 0, self.pos if pos is None else pos) + 1

    def fail(self, message: str, pos: int | None = None) -> BibFormatError:
        return BibFormatError(f"{self.where}:{self.line(pos)}: {message}")

    def skip_space(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def delimited(self) -> str:
        """The text inside ``{...}`` or ``"..."`` starting at the cursor: braces nest, and a
        quote closes a quoted value only outside them."""
        start = self.pos
        quoted = self.text[start] == '"'
        self.pos += quoted
        depth = 0
        while self.pos < len(self.text):
            char = self.text[self.pos]
            if char == "\\":
                self.pos += 2
                continue
            self.pos += 1
            if char == "{":
                depth += 1
            elif char == "}":
                depth -= 1
                if depth == 0 and not quoted:
                    return self.text[start + 1 : self.pos - 1]
            elif char == '"' and quoted and depth == 0:
                return self.text[start + 1 : self.pos - 1]
        raise self.fail(f"a {self.text[start]!r} that never closes", start)

    def value(self, macros: dict[str, str]) -> str:
        """A field value: pieces joined by ``#``."""
        pieces = []
        while True:
            self.skip_space()
            char = self.peek()
            if char in ("{", '"'):
                pieces.append(self.delimited())
            else:
                match = _BARE_VALUE.match(self.text, self.pos)
                if match is None:
                    raise self.fail(f"a field value expected, found {char or 'the end'!r}")
                word = match.group()
                expansion = macros.get(word.lower())
                if expansion is None:  # a number, or a name no @string defines
                    expansion = word
                else:
                    # counted before it is joined, so a macro bomb stops while it is small
                    self.macro_text += len(expansion)
                    if self.macro_text > self.macro_limit:
                        raise self.fail(
                            f"macro {word!r}: the text @string macros add passes "
                            f"{self.macro_limit:,} characters, {MACRO_TEXT_RATIO} times the "
                            "text's size (the limit: macros that double at each level are "
                            "not read)"
                        )
                self.pos = match.end()
                pieces.append(expansion)
            self.skip_space()
            if self.peek() != "#":
                return "".join(pieces)
            self.pos += 1

    def fields(self, close: str, macros: dict[str, str], *, keyed: bool) -> dict[str, str]:
        """``key, name = value, ...`` up to the entry's closing delimiter (consumed)."""
        start = self.pos
        name = _FIELD_NAME.match(self.text, self.pos)
        if keyed and name and self.text.startswith("=", name.end()):
            keyed = False  # no key: the entry opens with its first field (generators do this)
        if keyed:
            # the first ',' or closing delimiter: a find of each would scan to the text's
            # end for every entry of a file without commas
            end = _KEY_END[close].search(self.text, self.pos)
            if end is None:
                raise self.fail("an entry that never closes", start)
            self.pos = end.end()
            if end.group() == close:  # an entry with a key only
                return {}
        out: dict[str, str] = {}
        while True:
            self.skip_space()
            if self.peek() == close:
                self.pos += 1
                return out
            if not self.peek():
                raise self.fail("an entry that never closes", start)
            match = _FIELD_NAME.match(self.text, self.pos)
            if match is None or match.end() >= len(self.text) or self.text[match.end()] != "=":
                raise self.fail("a field 'name = value' expected")
            self.pos = match.end() + 1
            out[match.group(1).lower()] = self.value(macros)
            self.skip_space()
            if self.peek() == ",":
                self.pos += 1
            elif self.peek() != close:
                # the line of the field: an unclosed brace in its value runs on to later lines
                raise self.fail(
                    f"',' or {close!r} expected after field {match.group(1)!r}", match.start(1)
                )


def _entry_reference(fields: dict[str, str]) -> dict[str, Any]:
    """The reference fields of one BibTeX entry (module docstring)."""
    text = {name: latex_to_text(value) for name, value in fields.items()}
    year = text.get("year", "")
    eprint = text.get("eprint") or None
    if eprint and text.get("archiveprefix", "arxiv").lower() != "arxiv":
        eprint = None
    return {
        "raw": ". ".join(v for v in text.values() if v) or None,
        "title": text.get("title") or None,
        "doi": text.get("doi") or None,
        "arxiv_id": eprint,
        "year": int(year) if _YEAR.fullmatch(year) else None,  # a year is a small number
    }


def parse_bibtex(text: str, where: str) -> Parsed:
    """The entries of a BibTeX text, in order (module docstring).

    Raises:
        BibFormatError: an entry whose braces, quotes or fields do not parse.
    """
    scanner = _Scanner(text, where)
    parsed = Parsed()
    macros: dict[str, str] = {}
    while True:
        at = text.find("@", scanner.pos)
        outside = text[scanner.pos : len(text) if at == -1 else at]
        parsed.dropped[OUTSIDE_ENTRY] += sum(1 for line in outside.splitlines() if line.strip())
        if at == -1:
            break
        match = _ENTRY_START.match(text, at)
        if match is None:  # an '@' in a comment between entries, as BibTeX reads it
            scanner.pos = at + 1
            continue
        kind = match.group(1).lower()
        close = "}" if match.group(2) == "{" else ")"
        scanner.pos = match.end()
        if kind in ("comment", "preamble"):
            scanner.pos = match.start(2)
            if match.group(2) == "{":
                scanner.delimited()
            else:
                end = text.find(")", scanner.pos)
                scanner.pos = len(text) if end == -1 else end + 1
        elif kind == "string":
            macros.update(scanner.fields(close, macros, keyed=False))
        else:
            parsed.references.append(_entry_reference(scanner.fields(close, macros, keyed=True)))
            continue
        parsed.dropped[NOT_A_REFERENCE.format(kind=kind)] += 1
    parsed.dropped = +parsed.dropped
    return parsed


def bibtex_entry(text: str, where: str) -> dict[str, Any]:
    """The reference fields of a string holding exactly one BibTeX entry.

    Raises:
        BibFormatError: not exactly one entry.
    """
    parsed = parse_bibtex(text, where)
    if len(parsed.references) != 1:
        raise BibFormatError(
            f"{where}: a BibTeX reference holds one entry, found {len(parsed.references)}"
        )
    return parsed.references[0]


# --------------------------------------------------------------------- Markdown
def markdown_links(text: str) -> str:
    """Markdown links as ``text url`` and autolinks as ``url``: the ``)`` or ``>`` that closes
    a link would otherwise be read as the end of its DOI."""
    return _AUTOLINK.sub(r"\1", _inline_links(text))


def _inline_links(text: str) -> str:
    """Each ``[text](url)`` as ``text url``: the link text runs from a ``[`` to the next ``]``,
    the URL from the ``(`` right after it to a ``)`` before any space.

    One pass over the text. Every ``[`` before a ``]`` reaches that same ``]``, so when it
    does not open a link none of them does, and the search goes on after it; the end of a
    URL found once serves every later ``](`` before it. (A regular expression tries each
    ``[`` anew, to the text's end: quadratic in a run of them.)
    """
    out: list[str] = []
    done = search = 0
    url_end = -1  # the first ')' or space at or after some position, valid while ahead
    while (start := text.find("[", search)) != -1:
        close = text.find("]", start + 1)
        if close == -1:
            break
        search = close + 1
        if text.startswith("(", close + 1):
            if url_end < close + 2:
                found = _LINK_URL_END.search(text, close + 2)
                url_end = len(text) if found is None else found.start()
            if url_end < len(text) and text[url_end] == ")":
                out += (text[done:start], text[start + 1 : close], " ", text[close + 2 : url_end])
                done = search = url_end + 1
    out.append(text[done:])
    return "".join(out)


def markdown_text(line: str) -> str:
    """A Markdown line as plain text: links as ``text url``, emphasis and backticks dropped."""
    return " ".join(_EMPHASIS.sub("", markdown_links(line)).split())


def parse_markdown(text: str) -> Parsed:
    """The references of a Markdown list, in order (module docstring)."""
    lines = text.splitlines()
    parsed = Parsed()
    has_items = any(_ITEM.match(line) for line in lines)
    current: list[str] | None = None
    section: str | None = None  # the heading above, for per-section coverage

    def flush() -> None:
        if current is not None:
            raw = markdown_text(" ".join(current))
            parsed.references.append({"raw": raw or None, "section": section})

    for line in lines:
        if not line.strip():
            # a blank line ends an item; an indented line after it still continues it
            if current is not None:
                current.append("")
            continue
        if _HEADING.match(line):
            flush()
            current = None
            section = markdown_text(line.strip().lstrip("#")) or None
            parsed.dropped[HEADING] += 1
            continue
        item = _ITEM.match(line)
        if item or not has_items:
            flush()
            current = [line[item.end() :] if item else line]
            continue
        continues = current is not None and (current[-1] != "" or line[:1].isspace())
        if continues:
            current.append(line)
        else:
            flush()
            current = None
            parsed.dropped[OUTSIDE_ITEM] += 1
    flush()
    parsed.dropped = +parsed.dropped
    return parsed
