"""The text of a paper's section occurrences (rows of ``section_texts``), for papers whose
licence some release may carry (:func:`pipeline.rules.licences.extractable`).

The main decoder (:mod:`~pipeline.stages.extract.records`) names no text field: text is
most of a record's bytes, and most papers' licences refuse it. A paper that may have its
text kept is decoded a second time by :data:`TEXT_DECODER`, which reads only the fields
the occurrences are rebuilt from and the text.

* 2022 layout: an occurrence is a run of consecutive paragraphs with the same (section,
  sec_type, sec_number), as :func:`pipeline.stages.extract.structure.occurrences` reads
  it; its text is the run's paragraph texts joined by :data:`PARAGRAPH_SEPARATOR`.
* 2024 layout: an occurrence is a key of ``sections``; its text is the key's ``text``.

Every unarXive marker is rendered as a neutral token (:func:`neutral_expr`): a citation
``{{cite:<ref_id>}}`` as :data:`CITATION_TOKEN`, the same for every citation, so the text
names no cited work; a formula, figure or table marker as ``[FORMULA]``, ``[FIGURE]``,
``[TABLE]`` (their uuids are the record's own keys). unarXive's cross-reference token
``REF`` carries no identifier and stays as it is.
"""

from __future__ import annotations

from typing import Any

import msgspec
import polars as pl

PARAGRAPH_SEPARATOR = "\n\n"
CITATION_TOKEN = "[CITATION]"
# any {{kind:id}} marker; the kinds seen in the real records: cite, formula, figure, table
MARKER_PATTERN = r"\{\{[A-Za-z_]+:[^{}]*\}\}"
_TOKENS = {"cite": CITATION_TOKEN, "formula": "[FORMULA]", "figure": "[FIGURE]", "table": "[TABLE]"}
OTHER_TOKEN = "[REFERENCE]"  # a marker of a kind not listed above


class TextParagraph(msgspec.Struct, gc=False):
    section: str | None = None
    sec_type: str | None = None
    sec_number: str | int | None = None
    text: str | None = None


class TextSection(msgspec.Struct, gc=False):
    text: str | None = None


class TextRecord(msgspec.Struct, gc=False):
    body_text: list[TextParagraph] | None = None
    sections: dict[str, TextSection] | None = None


TEXT_DECODER = msgspec.json.Decoder(TextRecord)


def neutral_expr(text: pl.Expr) -> pl.Expr:
    """``text`` with every ``{{kind:id}}`` marker replaced by its neutral token: a Polars
    expression, run by extract's writer thread outside the GIL (in Python, per section on
    the decoding thread, it took as long as decoding the record's text a second time)."""
    for kind, token in _TOKENS.items():
        text = text.str.replace_all(r"\{\{" + kind + r":[^{}]*\}\}", token, literal=False)
    return text.str.replace_all(MARKER_PATTERN, OTHER_TOKEN)


def occurrence_texts(rec: TextRecord) -> list[str]:
    """The raw text of each body occurrence, in paper order (markers as in the record)."""
    if rec.body_text is not None:
        out: list[list[str]] = []
        prev: tuple[Any, Any, Any] | None = None
        for p in rec.body_text:
            key = (p.section, p.sec_type, p.sec_number)
            if key != prev:
                prev = key
                out.append([])
            out[-1].append(p.text or "")
        return [PARAGRAPH_SEPARATOR.join(run) for run in out]
    return [sec.text or "" for sec in (rec.sections or {}).values()]
