"""The demo's OpenAlex works file: the synthetic works its papers cite, in snapshot format.

``make demo`` reads it through the snapshot route (``[openalex_lookup] snapshot``), so the
demo shows candidates described by OpenAlex records with no network and no server. One
record per outside work of the synthetic corpus model that a demo paper cites by DOI or
OpenAlex id, with the model's title, venue and year, a topic named after the work's
discipline, and for half of them (by the id's CRC-32: a fixed pick, not a file hash) an abstract under a CC BY licence,
so the release's abstract rule (:mod:`pipeline.rules.described`) has both cases. Works of
the real samples get no record: their real records are not at hand, and inventing them
would be wrong. Same arguments, same bytes.
"""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Iterable
from pathlib import Path

from pipeline.core.files import atomic_path
from pipeline.synth.corpus_model import TOPICS, _Corpus, _topic_sentences

UPDATED = "2024-06-01"


def _cited_ids(lines: Iterable[bytes]) -> set[str]:
    ids: set[str] = set()
    for line in lines:
        try:
            rec = json.loads(line)
        except ValueError:
            continue  # the generator's deliberately broken lines
        if not isinstance(rec, dict):
            continue
        for entry in (rec.get("bib_entries") or {}).values():
            got = entry.get("ids") or {}
            if got.get("doi"):
                ids.add("doi:" + got["doi"].removeprefix("https://doi.org/").lower())
            if got.get("open_alex_id"):
                ids.add("oa:" + got["open_alex_id"].rsplit("/", 1)[-1])
    return ids


def _index(text: str) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for i, word in enumerate(text.split()):
        out.setdefault(word, []).append(i)
    return out


def write_works_file(
    root: Path, corpus_lines: Iterable[bytes], papers: int, seed: int = 0, small: bool = True
) -> Path:
    """Write ``root/works/updated_date=.../part_000.gz`` for the works ``corpus_lines`` cite
    (the corpus model of ``generate(papers, seed, small)`` with its default shares)."""
    cited = _cited_ids(corpus_lines)
    corpus = _Corpus(papers, seed, small, 0.08, 0.7)
    records = []
    for topic in TOPICS:
        for w in corpus.pool(topic.index).works:
            wid = f"W{w.openalex}" if w.openalex else None
            if not (f"doi:{w.doi}" in cited or (wid and f"oa:{wid}" in cited)):
                continue
            if wid is None:  # a work the citers name by DOI only still has an OpenAlex id
                wid = f"W9{zlib.crc32(w.doi.encode()):010d}"
            open_text = zlib.crc32(wid.encode()) % 2 == 0
            sentences = _topic_sentences(topic.index)
            pick = zlib.crc32(w.title.encode())
            abstract = (
                ". ".join(sentences[(pick + k) % len(sentences)].text for k in range(3)) + "."
            )
            records.append(
                {
                    "id": f"https://openalex.org/{wid}",
                    "doi": f"https://doi.org/{w.doi}" if w.doi else None,
                    "title": w.title,
                    "display_name": w.title,
                    "publication_year": w.year,
                    "publication_date": f"{w.year}-01-01",
                    "type": "article",
                    "language": "en",
                    "is_retracted": False,
                    "updated_date": f"{UPDATED}T00:00:00.000000",
                    "ids": {"openalex": f"https://openalex.org/{wid}"},
                    "primary_location": {
                        "source": {"display_name": w.venue},
                        "license": "cc-by" if open_text else None,
                    },
                    "primary_topic": {
                        "display_name": topic.name,
                        "subfield": {"display_name": topic.name},
                        "field": {"display_name": w.discipline},
                        "domain": {"display_name": "Physical Sciences"},
                    },
                    "abstract_inverted_index": _index(abstract),
                }
            )
    records.sort(key=lambda r: r["id"])
    path = root / "works" / f"updated_date={UPDATED}" / "part_000.gz"
    body = "".join(json.dumps(r, sort_keys=True) + "\n" for r in records).encode("utf-8")
    with atomic_path(path) as tmp:
        tmp.write_bytes(gzip.compress(body, mtime=0))
    return path
