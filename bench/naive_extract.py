"""The baseline `make bench` compares extract against: orjson + a plain dict walk.

It builds the same papers/references/mentions rows as ``pipeline.stages.extract``
(same section-occurrence rule, same heading-marker rule) the obvious way: decode the
whole line into dicts, walk them, collect row dicts, write Parquet after decoding.
It is a benchmark reference, not used by the pipeline.
"""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.core import schema as S
from pipeline.rules.ids import normalize_arxiv, normalize_doi, normalize_openalex, strip_version
from pipeline.stages.extract.records import clean_heading, parse_iso_date, parse_version_date

CITE = re.compile(r"\{\{cite:([^}]*)\}\}")


def naive_extract(path: Path, out_dir: Path) -> int:
    """Extract one plain .jsonl file; return the number of papers written."""
    papers, refs, mentions = [], [], []
    src = path.name
    with open(path, "rb") as f:
        for line_number, line in enumerate(f, 1):
            try:
                d = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            md = d.get("metadata") if isinstance(d, dict) else None
            if not md or not md.get("categories"):
                continue
            pid = strip_version(md.get("id") or d.get("paper_id"))
            bib = d.get("bib_entries") or {}
            cats = md["categories"].split()
            versions = md.get("versions") or []
            papers.append(
                {
                    S.PAPER_ID: pid,
                    S.TITLE: " ".join((md.get("title") or "").split()),
                    S.ABSTRACT: (md.get("abstract") or "").strip(),
                    S.CATEGORIES: cats,
                    S.PRIMARY_CATEGORY: cats[0],
                    S.FIRST_VERSION_DATE: parse_version_date(versions[0].get("created"))
                    if versions
                    else None,
                    S.UPDATE_DATE: parse_iso_date(md.get("update_date")),
                    S.LICENSE: md.get("license"),
                    S.DOI: normalize_doi(md.get("doi")),
                    S.N_BIB_ENTRIES: len(bib),
                    S.LAYOUT: "2022" if "body_text" in d else "2024",
                    S.SOURCE_FILE: src,
                    S.LINE_NUMBER: line_number,
                }
            )
            for rid, e in bib.items():
                ids = e.get("ids") or {}
                arxiv = normalize_arxiv(ids.get("arxiv_id"))
                if not arxiv:
                    for c in e.get("contained_arXiv_ids") or []:
                        arxiv = normalize_arxiv(c.get("id"))
                        if arxiv:
                            break
                refs.append(
                    {
                        S.PAPER_ID: pid,
                        S.REF_ID: rid,
                        S.ARXIV_ID: arxiv,
                        S.DOI: normalize_doi(ids.get("doi")),
                        S.OPENALEX_ID: normalize_openalex(ids.get("open_alex_id")),
                        S.RAW: e.get("bib_entry_raw"),
                        S.SOURCE_FILE: src,
                    }
                )
            occs = []
            if "body_text" in d:
                prev, top = None, ""
                for p in d["body_text"]:
                    key = (p.get("section"), p.get("sec_type"), p.get("sec_number"))
                    if key != prev:
                        prev = key
                        sec = clean_heading(p.get("section"))
                        if (
                            p.get("sec_type") not in ("subsection", "subsubsection", "paragraph")
                            or not top
                        ):
                            top = sec
                        counts: dict[str, int] = {}
                        occs.append((sec, top, counts))
                        for rid in set(CITE.findall(p.get("section") or "")):
                            if rid in bib:
                                counts[rid] = counts.get(rid, 0) + 1
                    for cs in p.get("cite_spans") or []:
                        if cs.get("ref_id") in bib:
                            counts[cs["ref_id"]] = counts.get(cs["ref_id"], 0) + 1
            else:
                for heading, sec in (d.get("sections") or {}).items():
                    counts = {}
                    occs.append((clean_heading(heading), clean_heading(heading), counts))
                    for rid in set(CITE.findall(heading)):
                        if rid in bib:
                            counts[rid] = counts.get(rid, 0) + 1
                    for cs in sec.get("cite_spans") or []:
                        if cs.get("ref_id") in bib:
                            counts[cs["ref_id"]] = counts.get(cs["ref_id"], 0) + 1
            for i, (sec, top, counts) in enumerate(occs):
                for rid, n in counts.items():
                    mentions.append(
                        {
                            S.PAPER_ID: pid,
                            S.REF_ID: rid,
                            S.SECTION: sec,
                            S.TOP_SECTION: top,
                            S.SECTION_INDEX: i,
                            S.N_MENTIONS: n,
                            S.SOURCE_FILE: src,
                        }
                    )
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, rows, schema in (
        ("papers", papers, S.PAPERS),
        ("references", refs, S.REFERENCES),
        ("mentions", mentions, S.MENTIONS),
    ):
        pq.write_table(
            pa.Table.from_pylist(rows, schema=schema),
            out_dir / f"{path.stem}.{name}.parquet",
            compression="zstd",
        )
    return len(papers)
