"""Conversion of unarXive 2022-layout records into the unarXive 2024 layout.

The 2024 release replaced the ``body_text`` paragraph list by a ``sections`` dict
keyed by heading. It was built by walking ``body_text`` in order and concatenating
paragraphs that share the same ``section`` string (no separator), shifting span
offsets; ``sec_number`` and ``sec_type`` were dropped. So subsections become
separate keys, the hierarchy is lost, and two distinct sections with the same
heading ("Methodology" under two different parents) end up merged under the key
of the first one. :func:`to_2024_layout` reproduces exactly that rule, so tests
can run the same papers through both readers.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from pipeline.corpus.sources import InputError

# Top-level keys in the order the 2024 release writes them. ``sections`` goes last.
_KEY_ORDER = (
    "paper_id",
    "_pdf_hash",
    "_source_hash",
    "_source_name",
    "metadata",
    "abstract",
    "bib_entries",
    "ref_entries",
)
_DROPPED = frozenset({"body_text", "discipline", "sections"})


def _shift(spans: list[dict[str, Any]], offset: int) -> list[dict[str, Any]]:
    # dict(s, start=..) keeps the span's own key order and never touches the input span.
    return [dict(s, start=s["start"] + offset, end=s["end"] + offset) for s in spans]


def group_sections(body_text: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Group 2022 ``body_text`` paragraphs into the 2024 ``sections`` dict, as the
    publisher's ``group_sections.py`` (UnarXive-2024 repository) does, quirks included.

    Args:
        body_text: paragraphs with ``section``, ``text``, ``cite_spans`` and ``ref_spans``.

    Returns:
        ``{heading: {"text", "cite_spans", "ref_spans"}}`` in order of first appearance;
        paragraphs with the same heading are concatenated without separator, wherever
        they occur. Each paragraph's text is stripped first, but its spans are shifted
        only by the text already collected under that heading, not by what the strip
        removed (so a span can be off by the paragraph's leading whitespace). A paragraph
        without a ``section`` field goes under ``"Unknown Section"``, one whose heading
        is null under ``"null"`` (the key JSON gives Python's None).
    """
    texts: dict[str, list[str]] = {}
    lengths: dict[str, int] = {}
    cites: dict[str, list[dict[str, Any]]] = {}
    refs: dict[str, list[dict[str, Any]]] = {}
    for para in body_text:
        key = para.get("section", "Unknown Section")
        if key is None:
            key = "null"
        text = (para.get("text") or "").strip()
        if key not in texts:
            texts[key], lengths[key], cites[key], refs[key] = [], 0, [], []
        offset = lengths[key]
        texts[key].append(text)
        lengths[key] = offset + len(text)
        cites[key].extend(_shift(para.get("cite_spans") or [], offset))
        refs[key].extend(_shift(para.get("ref_spans") or [], offset))
    return {
        key: {"text": "".join(parts), "cite_spans": cites[key], "ref_spans": refs[key]}
        for key, parts in texts.items()
    }


def to_2024_layout(record: dict[str, Any]) -> dict[str, Any]:
    """Convert one 2022-layout record (with ``body_text``) into the 2024 layout.

    ``body_text`` becomes ``sections`` (see :func:`group_sections`), the top-level
    ``discipline`` moves into ``metadata`` (together with ``language: "en"`` and
    ``cited_by_count: 0`` when absent, since the 2022 layout carries neither),
    everything else is kept. Keys missing from the input stay missing, except that
    ``sections`` is always written.

    The argument is not modified. ``metadata`` and every span are fresh objects;
    other nested values (``bib_entries``, ``ref_entries``, ``abstract``) are shared
    with the input rather than deep-copied, to keep conversion cheap.

    Args:
        record: a decoded 2022-layout record.

    Returns:
        A new dict with keys in the 2024 release order, ``sections`` last.

    Raises:
        ValueError: ``record`` has no ``body_text`` list.
    """
    body = record.get("body_text")
    if not isinstance(body, list):
        raise InputError("not a 2022-layout record: 'body_text' is missing or not a list")
    out: dict[str, Any] = {}
    for key in _KEY_ORDER:
        if key in record:
            out[key] = record[key]
    # Unknown keys are carried along so the conversion never silently loses data.
    for key, value in record.items():
        if key not in out and key not in _DROPPED:
            out[key] = value
    meta = record.get("metadata")
    if isinstance(meta, dict):
        meta = dict(meta)
        meta.setdefault("language", "en")
        meta.setdefault("cited_by_count", 0)
        if "discipline" not in meta:
            meta["discipline"] = record.get("discipline") or ""
        out["metadata"] = meta
    out["sections"] = group_sections(body)
    return out


def _dumps(record: dict[str, Any]) -> str:
    return json.dumps(record, ensure_ascii=False)


def convert_line(
    line: bytes, edit: Callable[[dict[str, Any]], dict[str, Any]] | None = None
) -> tuple[bytes, bool]:
    """One JSONL line in the 2024 layout, and whether it was converted: a line that is not
    a JSON object with a ``body_text`` list comes back unchanged. ``edit`` may change the
    2022 record first (without modifying its argument)."""
    try:
        record = json.loads(line)
    except ValueError:  # includes UnicodeDecodeError
        return line, False
    if not isinstance(record, dict) or not isinstance(record.get("body_text"), list):
        return line, False
    if edit is not None:
        record = edit(record)
    return _dumps(to_2024_layout(record)).encode("utf-8"), True
