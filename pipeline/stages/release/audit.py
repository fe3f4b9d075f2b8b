"""The release's leak audit: whether anything a model may read separates positives from hard
negatives, in the reading lists and in the aspects, and the one verdict that fails the build
(``release.leak_audit = "error"``) or warns.

Each audit reads the visible features of every split (pooled and per survey, per aspect for
the aspects: :mod:`pipeline.rules.leak_audit`), the relative features (a candidate's place in
its list) and the reading-free probe (:func:`pipeline.evaluate.audit.reading_free_probe`) on
the written files.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import polars as pl

from pipeline.core import schema as S
from pipeline.core.errors import StageError
from pipeline.core.release_files import ASPECTS_DIR, RETRIEVAL_SPLITS, beir_file
from pipeline.engine.context import ReduceContext
from pipeline.evaluate.audit import reading_free_probe
from pipeline.rules.document_text import mteb_checks
from pipeline.rules.leak_audit import ASPECT_SCOPES, outside, within_chance
from pipeline.stages.release.counts import EMPTY_ASPECTS, aspect_split_counts
from pipeline.stages.release.splits import Written

log = logging.getLogger("pipeline")


def _probe_beats(probe: dict[str, Any]) -> str:
    return "the reading-free probe beats BM25: " + ", ".join(
        f"{m} {r[probe['probe']]} > {r[probe['reference']]}"
        for m, r in probe["metrics"].items()
        if r["beats"]
    )


@dataclass(frozen=True)
class Audit:
    """One leak audit: the scopes its tables are read in and how its problems read
    (``{bounds}`` is the AUC bounds, ``[low, high]``)."""

    scopes: tuple[str, ...]
    feature: str
    relative: str
    probe: Callable[[dict[str, Any]], str]


READING_LISTS = Audit(
    scopes=("pooled", "per_survey"),
    feature="a visible feature alone separates positives from hard negatives "
    "(AUC outside {bounds})",
    relative="a candidate's place in its survey's list separates them "
    "(relative AUC outside {bounds})",
    probe=_probe_beats,
)
ASPECTS = Audit(
    scopes=ASPECT_SCOPES,
    feature="a visible feature of the aspect view separates positives from negatives "
    "(AUC outside {bounds})",
    relative="a candidate's place in its aspect's list separates them",
    probe=lambda probe: "the reading-free probe beats BM25 on the aspects",
)


def verdict(
    audit: Audit,
    tables: dict[str, Any],
    relative: dict[str, Any],
    probe: dict[str, Any],
    low: float,
    high: float,
) -> tuple[dict[str, Any], list[str]]:
    """The record of one audit (each split's tables, what falls outside ``[low, high]`` and
    whether it is within chance, the probe, ``passed``) and its problems."""
    flagged = _per_split(outside, tables, low, high, audit.scopes)
    relative_flagged = _per_split(outside, relative, low, high, audit.scopes)
    bounds = f"[{low}, {high}]"
    problems = []
    if flagged:
        problems.append(f"{audit.feature.format(bounds=bounds)}: {_listing(flagged)}")
    if relative_flagged:
        problems.append(f"{audit.relative.format(bounds=bounds)}: {_listing(relative_flagged)}")
    if probe.get("flagged"):
        problems.append(audit.probe(probe))
    record = {
        "bounds": [low, high],
        "splits": tables,
        "outside_bounds": flagged,
        "outside_bounds_within_chance": _per_split(within_chance, tables, low, high, audit.scopes),
        "relative": {
            "splits": relative,
            "outside_bounds": relative_flagged,
            "outside_bounds_within_chance": _per_split(
                within_chance, relative, low, high, audit.scopes
            ),
        },
        "reading_free_probe": probe,
        "passed": not problems,
    }
    return record, problems


def leak_audits(ctx: ReduceContext, written: Written) -> tuple[dict[str, Any], dict[str, Any]]:
    """The metadata's ``leak_audit`` (the reading lists) and ``aspects`` entries, after the
    verdict of both: under ``release.leak_audit = "error"`` a problem in either fails the
    build, else it is logged.

    Raises:
        StageError: a problem, in error mode.
    """
    low, high = ctx.cfg.release.leak_auc_bounds
    sample_rows = ctx.cfg.release.audit_sample_rows
    probe = reading_free_probe(ctx.tmp_dir, ctx.cfg.train, sample_rows, written.full_text_ids)
    record, problems = verdict(READING_LISTS, written.audit, written.relative, probe, low, high)
    aspects = aspect_audit_meta(
        ctx, written.aspect_counts, written.aspect_audit, low, high, written.full_text_ids
    )
    every = problems + [f"aspects: {p}" for p in aspects["leak_audit"]["problems"]]
    if every:
        if ctx.cfg.release.leak_audit == "error":
            raise StageError(f"release: leak audit: {'; '.join(every)}")
        log.warning("release: LEAK AUDIT: %s", "; ".join(every))
    return {**record, "sample": written.samples}, aspects


def aspect_audit_meta(
    ctx: ReduceContext,
    splits: dict[str, Any],
    leak: dict[str, Any],
    low: float,
    high: float,
    full_text: dict[str, pl.Series] | None = None,
) -> dict[str, Any]:
    """The ``aspects`` entry of the metadata: the aspects stage's counts, the released
    aspects per split, and their leak audit (visible features per aspect, per survey and
    pooled; the relative features; the reading-free probe on the aspects folder), with the
    judgment-side counts beside it."""
    stage = ctx.counts("aspects")
    probe = reading_free_probe(
        ctx.tmp_dir / ASPECTS_DIR, ctx.cfg.train, ctx.cfg.release.audit_sample_rows, full_text
    )
    record, problems = verdict(ASPECTS, leak["splits"], leak["relative"], probe, low, high)
    return {
        "min_works": ctx.cfg.aspects.min_works,
        "stage": {k: v for k, v in stage.items() if k not in S.SPLIT_NAMES},
        "splits": {s: splits.get(s, aspect_split_counts(EMPTY_ASPECTS)) for s in S.SPLIT_NAMES},
        "splits_written": [s for s in S.SPLIT_NAMES if s in splits],
        "leak_audit": {
            **record,
            "scopes": list(ASPECT_SCOPES),
            "judgment_side": leak["judgment_side"],
            "sample": leak["sample"],
            "problems": problems,
        },
    }


def _listing(found: dict[str, list[str]]) -> str:
    return "; ".join(f"{s}: {', '.join(b)}" for s, b in sorted(found.items()))


def _per_split(
    check: Callable[..., list[str]],
    tables: dict[str, Any],
    low: float,
    high: float,
    scopes: tuple[str, ...],
) -> dict[str, list[str]]:
    """``check`` (``leak_audit.outside`` or ``within_chance``) of each split's audit table,
    for the splits where it finds something."""
    found = {s: check(tbl, low, high, scopes) for s, tbl in tables.items()}
    return {s: hits for s, hits in found.items() if hits}


def mteb_audit(ctx: ReduceContext, splits: list[str]) -> dict[str, Any]:
    """MTEB's data checks (:func:`pipeline.rules.document_text.mteb_checks`) of each written
    split's BEIR files, by retrieval split name (``test``, ``train``), and ``passed``. A
    failed check is logged: the release is what MTEB would read, and the card says so."""
    scan = lambda view, split: pl.scan_parquet(ctx.output(beir_file(view, split)))  # noqa: E731
    checks = {
        RETRIEVAL_SPLITS[split]: mteb_checks(
            scan("queries", split), scan("corpus", split), scan("qrels", split)
        )
        for split in splits
    }
    problems = [f"{s}: {p}" for s, c in checks.items() for p in c["problems"]]
    if problems:
        log.warning("release: MTEB's data checks: %s", "; ".join(problems))
    return {"splits": checks, "passed": not problems}
