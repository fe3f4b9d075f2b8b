"""What a work directory says about its stages: per stage, done or not for a config, with
its counts (:func:`status`, what ``status`` prints), and a map stage's totals over its
manifests (:func:`map_totals`, :func:`map_summary`). Every record is read through
:mod:`pipeline.engine.workdir`."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pipeline.core import schema as S
from pipeline.core.config import Config
from pipeline.core.files import write_json
from pipeline.engine.stage import FAILED, Stage
from pipeline.engine.workdir import (
    archive_record_paths,
    failed_inputs,
    manifest_paths,
    map_output,
    map_output_problem,
    marker_path,
    marker_paths,
    read_record,
    reduce_counts,
    reduce_done,
    stage_dir,
    stage_key,
    summary_path,
)


def map_totals(out: Path, stage: str) -> tuple[int, dict[str, int]]:
    """Finished (not failed) manifests of a map stage, and the sum of their integer counts."""
    manifests = [read_record(p, "counts") for p in manifest_paths(out, stage)]
    manifests = [m for m in manifests if m is not None and m.get("status") != FAILED]
    totals: dict[str, int] = {}
    for m in manifests:
        for k, v in m["counts"].items():
            if isinstance(v, int):
                totals[k] = totals.get(k, 0) + v
    return len(manifests), totals


def status(out: Path, cfg: Config, stages: Mapping[str, Stage]) -> dict[str, dict[str, Any]]:
    """Per stage, in pipeline order: whether it is done for ``cfg``, with its counts.

    A map stage: ``files_done``, ``current``, ``files_failed`` and its count totals; a
    reduce stage: ``done`` and, when it ever finished, ``counts``.
    """
    report: dict[str, dict[str, Any]] = {}
    for name, stage in stages.items():
        if stage.kind == "map":
            files_done, totals = map_totals(out, name)
            report[name] = {
                "files_done": files_done,
                "current": stage_key(out, name, cfg, stages) is not None,
                "files_failed": [
                    {k: f[k] for k in ("file", "reason", "lines_read")}
                    for f in failed_inputs(out, stage, cfg)
                ],
                **totals,
            }
        else:
            entry: dict[str, Any] = {"done": reduce_done(out, name, cfg, stages)}
            counts = reduce_counts(out, name)
            if counts is not None:
                entry["counts"] = counts
            report[name] = entry
    return report


def has_work(out: Path, stages: Mapping[str, Stage]) -> bool:
    """Whether any stage has a folder in ``out``."""
    return any(stage_dir(out, name).is_dir() for name in stages)


def map_summary(out: Path, name: str = "extract") -> dict[str, Any]:
    """Totals over every finished input file of a map stage, plus papers (its ``papers``
    table's ``paper_id``) present in more than one file.

    Written to ``<out>/extract/_summary.json`` after each extract run (``api.extract``).
    The copy kept for a paper found in several files is the one whose ``source_file`` sorts
    first (:func:`pipeline.rules.tables.papers_winner`).
    """
    import polars as pl  # here: every command reads this module, few sum a map stage

    totals: dict[str, Any] = {"files": 0, "rejects": {}, "failed_files": []}
    for path in manifest_paths(out, name):
        manifest = read_record(path, "counts")
        if manifest is None:  # damaged: its file is redone (map_files.run_files)
            continue
        if manifest.get("status") == FAILED:
            if not marker_path(out, name, path.stem).exists():
                totals["failed_files"].append({"file": manifest["source_file"], **manifest[FAILED]})
            continue
        counts = manifest["counts"]
        totals["files"] += 1
        for k, v in counts.items():
            if isinstance(v, int):
                totals[k] = totals.get(k, 0) + v
        for reason, n in counts.get("rejects", {}).items():
            totals["rejects"][reason] = totals["rejects"].get(reason, 0) + n
    # only outputs that match their marker's sizes: a damaged file of another shard is
    # redone by that shard, and is checked again before any later stage reads it
    papers = []
    for marker in marker_paths(out, name):
        data = read_record(marker)
        if data is not None and map_output_problem(out, name, data, checksum=False) is None:
            papers.append(map_output(out, name, "papers", marker.stem))
    if papers:
        ids = pl.scan_parquet(papers).select(S.PAPER_ID)
        stats = ids.select(
            pl.len().alias("rows"), pl.col(S.PAPER_ID).n_unique().alias("unique")
        ).collect()
        totals["duplicate_papers_across_files"] = int(stats["rows"][0] - stats["unique"][0])
        totals["unique_papers"] = int(stats["unique"][0])
    members: dict[str, int] = {}
    for path in archive_record_paths(out, name):
        record = read_record(path, "members")
        with contextlib.suppress(ValueError, TypeError, AttributeError):
            for kind, n in (record or {}).get("members", {}).items():
                members[kind] = members.get(kind, 0) + int(n)
    if members:
        # archives' members by kind: JSONL members (read), empty and non-JSONL members and
        # directories (skipped), over every archive read to its end
        totals["archive_members"] = dict(sorted(members.items()))
    write_json(summary_path(out, name), totals)
    return totals
