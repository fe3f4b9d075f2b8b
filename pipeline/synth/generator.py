"""Deterministic synthetic corpus in the unarXive record format.

The real corpus (2.28M papers) cannot be shipped with the tests, and the two real
samples are far too small to exercise labels, hard negatives or throughput. This
module writes JSONL files whose records mirror the real 2022 layout field by field
(and, with ``layout="2024"``, the same records passed through
:func:`pipeline.corpus.layout.to_2024_layout`), with the structure later stages depend on:

* arXiv ids ``YYMM.NNNNN`` that match the first version date (2015-01..2025-12),
  increasing with submission time inside a month; CS and non-CS categories with
  cross-lists; some metadata DOIs.
* surveys (a ``survey_share`` of CS papers) with an introduction, 3-8 topical
  sections with subsections (some headings carrying a ``{{cite:..}}`` marker that is
  not a cite span), Discussion, Conclusion and an Acknowledgment numbered ``-1``;
  regular papers with Introduction / Related Work / Method / Experiments /
  Conclusion; non-surveys whose titles look like surveys ("Survey Propagation ...").
* a topic model: every topic has a pool of outside works with skewed popularity,
  and papers cite earlier corpus papers of their topic, so surveys of one category
  share cited works (what hard negatives are made of).
* bib entries with a realistic identifier mix (arXiv id in ``ids`` or only in the
  raw string, bare or URL DOIs, OpenAlex ids, several, none), where one work is
  cited by DOI only in one paper and by arXiv id only in another.
* 1-6 mentions per cited work (skewed) spread over sections.

Everything is drawn from ``random.Random`` instances seeded from ``seed``: equal
arguments give byte-identical files on the same Python version. Text is assembled
from filler chunks built once per process, so generation runs at tens of MB/s.
"""

from __future__ import annotations

import random
from pathlib import Path

from pipeline.core.errors import UsageError
from pipeline.core.files import atomic_path
from pipeline.corpus.layout import to_2024_layout
from pipeline.synth.corpus_model import (
    _Corpus,
)
from pipeline.synth.records import (
    _build_record,
    _dumps,
    _malformed_line,
)

LAYOUTS = ("2022", "2024")


MALFORMED_KINDS = (
    "truncated",
    "array",
    "no_metadata",
    "null_categories",
    "invalid_utf8",
    "duplicate",
)


def _check_args(
    papers: int, layout: str, survey_share: float, malformed: int, files: int, cs_share: float
) -> None:
    if papers < 0:
        raise UsageError(f"papers must be >= 0, got {papers}")
    if layout not in LAYOUTS:
        raise UsageError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    if not 0.0 <= survey_share <= 1.0:
        raise UsageError(f"survey_share must be in [0, 1], got {survey_share}")
    if not 0.0 <= cs_share <= 1.0:
        raise UsageError(f"cs_share must be in [0, 1], got {cs_share}")
    if malformed < 0:
        raise UsageError(f"malformed must be >= 0, got {malformed}")
    if files < 1:
        raise UsageError(f"files must be >= 1, got {files}")


def generate(
    out_dir: Path,
    papers: int,
    layout: str = "2022",
    seed: int = 0,
    small: bool = False,
    survey_share: float = 0.08,
    malformed: int = 0,
    files: int = 1,
    cs_share: float = 0.7,
) -> list[Path]:
    """Write a synthetic unarXive corpus as JSONL files.

    Papers are written in arXiv id order and split into ``files`` contiguous runs,
    so the concatenation of the files does not depend on ``files``; the malformed
    lines come from their own random stream, so asking for them does not change
    the papers.

    Args:
        out_dir: directory for the files (created if missing).
        papers: number of corpus papers.
        layout: ``"2022"`` (``body_text`` list) or ``"2024"`` (``sections`` dict).
        seed: seed of every random choice; same arguments give byte-identical files.
        small: ~5-15 KB records (few paragraphs, fewer references) instead of ~200 KB.
        survey_share: share of CS papers that are surveys (non-CS reviews occur at
            half this rate).
        malformed: number of broken lines (truncated JSON, ``[]``, no ``metadata``,
            ``categories: null``, invalid UTF-8, exact duplicate of an earlier paper
            line, in that rotation) inserted at deterministic positions.
        files: number of output files, ``synth_<layout>_<seed>_<i:03d>.jsonl``.
        cs_share: probability that a paper's primary category is ``cs.*``.

    Returns:
        Paths of the files written, in order.

    Raises:
        ValueError: an argument is out of range.
    """
    _check_args(papers, layout, survey_share, malformed, files, cs_share)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    corpus = _Corpus(papers, seed, small, survey_share, cs_share)
    rng = corpus.rng
    extra_rng = random.Random(seed + 2_000_003)  # 2024-only fields, so layouts share content
    bad_rng = random.Random(seed + 1_000_003)
    order = sorted(corpus.plan, key=lambda p: (p.stamp, p.arxiv_id))
    bounds = [papers * i // files for i in range(files + 1)]

    # Malformed line j goes to file j % files, after paper line `pos` of that file.
    schedule: dict[int, list[tuple[int, str, int]]] = {}
    for j in range(malformed):
        f = j % files
        n_f = bounds[f + 1] - bounds[f]
        kind = MALFORMED_KINDS[j % len(MALFORMED_KINDS)]
        if kind == "duplicate" and n_f == 0:
            kind = "truncated"
        pos = bad_rng.randint(1, n_f) if n_f else 0
        src = bad_rng.randrange(pos) if kind == "duplicate" else -1
        schedule.setdefault(f, []).append((pos, kind, src))

    paths = []
    serial = 0
    for f in range(files):
        path = out_dir / f"synth_{layout}_{seed}_{f:03d}.jsonl"
        todo = sorted(schedule.get(f, []), key=lambda x: x[0])
        keep = {src for _, _, src in todo if src >= 0}
        kept: dict[int, bytes] = {}
        with atomic_path(path) as tmp, open(tmp, "wb") as out:
            buf: list[bytes] = []
            size = 0
            t_i = 0
            for pos in range(bounds[f + 1] - bounds[f] + 1):
                while t_i < len(todo) and todo[t_i][0] == pos:
                    _, kind, src = todo[t_i]
                    if kind == "array":
                        line = b"[]"
                    elif kind == "duplicate":
                        line = kept[src]
                    else:
                        line = _malformed_line(kind, corpus, bad_rng, layout, serial)
                        serial += 1
                    buf.append(line + b"\n")
                    t_i += 1
                if pos == bounds[f + 1] - bounds[f]:
                    break
                p = order[bounds[f] + pos]
                record = _build_record(corpus, p, rng, small)
                salt = f"{rng.getrandbits(32):08x}"
                if layout == "2024":
                    record = to_2024_layout(record)
                    count = int(extra_rng.paretovariate(1.1)) - 1
                    record["metadata"]["cited_by_count"] = count * (4 if p.kind == "survey" else 1)
                line = _dumps(record, salt).encode("utf-8")
                if pos in keep:
                    kept[pos] = line
                buf.append(line + b"\n")
                size += len(line)
                if size > 8 << 20:
                    out.writelines(buf)
                    buf, size = [], 0
            out.writelines(buf)
        paths.append(path)
    return paths
