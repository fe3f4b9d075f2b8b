"""A bench corpus of real records: the bundled unarXive papers in the form the Hub publishes.

The synthetic bench corpus proves the mechanics, not the cost per MB: its bytes hold more
of what extract turns into rows (bib entries, cite spans) and more non-ASCII bib strings
(each one re-encoded to UTF-8 for Arrow) than the real records, and they compress better
(:func:`shape` and the archive figures say by how much). So ``make bench`` also
measures on the real records (``pipeline/demo_data``): the 49 papers of the 2022 sample,
converted to the 2024 layout by the publisher's grouping rule
(:func:`pipeline.corpus.layout.convert_line`, as the demo does), and the 2024-layout
preview paper.

Fifty papers make 10 MB, so the corpus repeats them: copy ``k`` of paper ``j`` is the
same line with ``paper_id`` and ``metadata.id`` set to the arXiv id ``<9000 + k>.<j>``
(``9003.00017``: every copy is a distinct paper to extract, none a duplicate; a suffix on
the real id would not do, ids are normalised to their arXiv form). Each ~100 MB file holds
every paper once per copy, in order, so a paper's copies are 10 MB apart: further than
gzip's 32 KB window, and the archive compresses as the papers do.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.resources
import json
import shutil
from pathlib import Path

from pipeline.corpus.layout import convert_line
from pipeline.synth.demo_corpus import REAL_FILES, demo_data

FILE_MB = 100


def real_lines() -> list[bytes]:
    """The bundled real records, one line each, in the 2024 layout (no newline)."""
    lines: list[bytes] = []
    for rel in REAL_FILES:
        with importlib.resources.as_file(demo_data().joinpath(*rel.split("/"))) as local:
            data = Path(local).read_bytes()
        if rel.endswith(".gz"):
            data = gzip.decompress(data)
        for line in data.splitlines():
            if line.strip():
                lines.append(convert_line(line)[0])
    return lines


def _copy(line: bytes, j: int, k: int) -> bytes:
    """``line`` (paper ``j``) as copy ``k``: its ``paper_id`` and ``metadata.id`` rewritten."""
    if not 0 <= k < 1000:
        raise ValueError(f"real bench corpus: copy {k} has no id (at most 1000 copies)")
    old = json.loads(line)["paper_id"]
    new = f"{9000 + k}.{j:05d}"
    out = line
    for key in ("paper_id", "id"):
        token = f'"{key}": {json.dumps(old)}'.encode()
        out = out.replace(token, f'"{key}": {json.dumps(new)}'.encode())
    if out.count(new.encode()) < 2:  # a layout whose ids are written otherwise
        raise ValueError(f"real bench corpus: the ids of {old} were not found to rewrite")
    return out


def real_corpus(dir_: Path, size_mb: float, file_mb: float = FILE_MB) -> list[Path]:
    """About ``size_mb`` MB of the real records in files of about ``file_mb`` MB, each a
    whole number of copies of every paper (cached between runs)."""
    lines = real_lines()
    digest = hashlib.sha256(b"\n".join(lines)).hexdigest()[:12]
    stamp = dir_ / f".done-{size_mb}-{file_mb}-{digest}"
    if not stamp.exists():
        shutil.rmtree(dir_, ignore_errors=True)
        dir_.mkdir(parents=True)
        one = sum(len(line) + 1 for line in lines)  # bytes of one copy of every paper
        per_file = max(1, round(file_mb * 1e6 / one))
        files = max(1, round(size_mb * 1e6 / one / per_file))
        for i in range(files):
            with open(dir_ / f"real_2024_{i:03d}.jsonl", "wb") as f:
                for k in range(i * per_file, (i + 1) * per_file):
                    for j, line in enumerate(lines):
                        f.write(_copy(line, j, k) + b"\n")
        stamp.touch()
    return sorted(dir_.glob("*.jsonl"))


def shape(files: list[Path]) -> dict[str, float]:
    """Per MB of the first file: papers, bib entries, cite spans; the share of bib strings
    that are ASCII (what extract's cost per MB follows, besides the bytes)."""
    from pipeline.stages.extract.records import DECODER

    papers = bib = spans = ascii_raw = raw = 0
    size = files[0].stat().st_size
    with open(files[0], "rb") as f:
        for line in f:
            rec = DECODER.decode(line)
            papers += 1
            entries = (rec.bib_entries or {}).values()
            bib += len(entries)
            raw += sum(1 for e in entries if e.bib_entry_raw)
            ascii_raw += sum(1 for e in entries if e.bib_entry_raw and e.bib_entry_raw.isascii())
            for part in (rec.body_text or []) + list((rec.sections or {}).values()):
                spans += len(part.cite_spans or [])
    mb = size / 1e6
    return {
        "papers_per_mb": round(papers / mb, 2),
        "bib_entries_per_mb": round(bib / mb, 1),
        "cite_spans_per_mb": round(spans / mb, 1),
        "ascii_bib_strings": round(ascii_raw / max(raw, 1), 3),
    }
