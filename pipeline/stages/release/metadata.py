"""The release's ``eval_metadata.json`` (counts, audit, resolved config, input revision,
code version, sha256 and row count of every Parquet file) and its dataset card
(:mod:`pipeline.hub.card`), with numbers taken from the metadata."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from pipeline import __version__
from pipeline.core import schema as S
from pipeline.core.files import sha256_file, write_json
from pipeline.core.release_files import CARD_FILE, METADATA_FILE
from pipeline.corpus.provenance import summarize as summarize_provenance
from pipeline.engine.context import ReduceContext
from pipeline.engine.stage import Stage
from pipeline.hub.card import render_release_card
from pipeline.stages.release.counts import resolution, role_distribution
from pipeline.stages.release.splits import Written


def write_metadata_and_card(
    ctx: ReduceContext,
    written: Written,
    leak_audit: dict[str, Any],
    aspects: dict[str, Any],
    files: dict[str, Any],
) -> dict[str, Any]:
    """Write :data:`METADATA_FILE` and the card (:data:`CARD_FILE`, with the figure and notes
    it links); return the metadata."""
    meta = release_metadata(ctx, written, leak_audit, aspects, files)
    write_json(ctx.output(METADATA_FILE), meta)
    card = render_release_card(meta, written.present, ctx.tmp_dir)
    ctx.output(CARD_FILE).write_text(card, encoding="utf-8")
    return meta


def release_metadata(
    ctx: ReduceContext,
    written: Written,
    leak_audit: dict[str, Any],
    aspects: dict[str, Any],
    files: dict[str, Any],
) -> dict[str, Any]:
    """The metadata: what was written (``written``, ``files``), its audits, and the counts,
    config and provenance of the stages it was built from."""
    sections = upstream_sections(ctx.stages, ctx.stage.name)
    return {
        "dataset": ctx.cfg.release.dataset_name,
        "version": ctx.cfg.release.version,
        "code_version": __version__,
        "environment": writer_environment(),
        "input": input_provenance(ctx),
        "provenance": paper_provenance(ctx),
        # input files that could not be read to their end: not in this release
        "failed_inputs": [
            {k: f[k] for k in ("file", "reason", "lines_read")}
            for f in ctx.failed_inputs("extract")
        ],
        "config": {k: v for k, v in ctx.cfg.to_dict().items() if k in sections},
        "config_hash": ctx.cfg.section_hash(*sections),
        "splits": written.counts,
        "splits_written": written.present,
        "totals": {
            k: sum(written.counts[s][k] for s in S.SPLIT_NAMES)
            for k in ("surveys", "rows", "positives", "negatives")
        },
        "leakage": ctx.counts("split").get("leakage", {}),
        "leak_audit": leak_audit,
        "candidate_text": written.texts,
        "text_exclusion": written.text_exclusion,
        "mteb_checks": written.mteb_checks,
        # what the records say, never how this run got them (calls and cost: openalex/_summary.json)
        "openalex": {
            **{k: v for k, v in ctx.counts("openalex").items() if k != "lookups"},
            "abstracts": ctx.cfg.openalex.abstracts,
            "records_sha256": sha256_file(ctx.files("openalex", "records")[0]),
        },
        "negatives": ctx.counts("negatives"),
        "resolution": resolution(ctx),
        "works_resolution": ctx.counts("works").get("resolution", {}),
        "surveys_counts": {
            k: v
            for k, v in ctx.counts("surveys").items()
            if k.startswith("rejected") or k in ("kept", "candidates")
        },
        "roles": role_distribution(ctx),
        "aspects": aspects,
        "corpus_sections": written.full_text,
        "files": files,
    }


def input_provenance(ctx: ReduceContext) -> dict[str, Any]:
    """Input files (names only) and their revision, from the manifests of the current extract outputs."""
    keys = {p.stem for p in ctx.files("extract", "papers")}
    files = []
    revisions = set()
    for m in ctx.manifests("extract"):
        if m.get("source_key") not in keys:
            continue
        revisions.add(m.get("revision") or "")
        c = m.get("counts", {})
        name = str(m.get("source", "")).rstrip("/").rsplit("/", 1)[-1]
        files.append(
            {
                "file": name,
                "revision": m.get("revision") or "",
                "lines_read": c.get("lines_read"),
                "papers_written": c.get("papers_written"),
                "rejects_total": c.get("rejects_total"),
            }
        )
    files.sort(key=lambda f: (f["file"], f["revision"]))
    resolved = sorted(r for r in revisions if r)
    revision = ",".join(resolved) or ctx.cfg.release.input_revision or "unknown"
    return {"revision": revision, "files": files}


def paper_provenance(ctx: ReduceContext) -> dict[str, Any]:
    """Synthetic, real or unknown: :func:`pipeline.corpus.provenance.summarize` over the manifests
    of the extract outputs this release read (an output without a manifest is unknown)."""
    papers = {p.stem: p for p in ctx.files("extract", "papers")}
    manifests = {}
    for m in ctx.manifests("extract"):
        if m.get("source_key") in papers:
            manifests[m["source_key"]] = m.get("counts")
    unlisted = sum(
        pq.ParquetFile(path).metadata.num_rows
        for key, path in papers.items()
        if key not in manifests
    )
    return summarize_provenance(manifests.values(), unlisted)


def writer_environment() -> dict[str, str]:
    """Versions that decide the release's bytes (Parquet footers name the writer).

    A rebuild is byte-identical with these versions; ``constraints.txt`` pins them.
    """
    import platform
    from importlib.metadata import version

    return {
        "python": platform.python_version(),
        **{name: version(name) for name in ("polars", "pyarrow", "msgspec", "regex")},
    }


def upstream_sections(stages: Mapping[str, Stage], stage: str) -> list[str]:
    """Config sections of ``stage`` and of every stage it reads, transitively (sorted)."""
    seen: set[str] = set()
    sections: set[str] = set()
    todo = [stage]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        sections.update(stages[name].hashed_sections)
        todo.extend(stages[name].reads)
    return sorted(sections)


def file_entry(path: Path) -> dict[str, Any]:
    """sha256, size and (for Parquet) row count of a release file."""
    entry: dict[str, Any] = {"sha256": sha256_file(path), "bytes": path.stat().st_size}
    if path.suffix == ".parquet":
        entry["rows"] = pq.ParquetFile(path).metadata.num_rows
    return entry


def file_entries(release: Path) -> dict[str, dict[str, Any]]:
    """:func:`file_entry` of every Parquet file under ``release``, by relative path."""
    return {str(p.relative_to(release)): file_entry(p) for p in sorted(release.rglob("*.parquet"))}
