"""The ``release`` stage: the splits, the works table and the field baselines written, then
the leak audit's verdict, then the metadata and the card that describe what was written."""

from __future__ import annotations

from typing import Any

import polars as pl

from pipeline.core import schema as S
from pipeline.core.release_files import BIBLIOGRAPHY_BASELINES_FILE
from pipeline.engine.context import ReduceContext
from pipeline.engine.stage import Stage
from pipeline.evaluate.audit import write_field_baselines
from pipeline.rules.tables import scan_extract
from pipeline.stages.release.audit import leak_audits, mteb_audit
from pipeline.stages.release.metadata import file_entries, write_metadata_and_card
from pipeline.stages.release.splits import write_splits
from pipeline.stages.release.tables import (
    check_unique_pairs,
    kept_candidates,
    text_exclusions,
    write_works_table,
)


def build_release(ctx: ReduceContext) -> dict[str, Any]:
    """Write every release file; return per-split counts.

    Raises:
        StageError: a (survey, candidate) pair appears twice (:func:`check_unique_pairs`), or
            the leak audit fails in error mode (:func:`leak_audits`).
    """
    cands = ctx.read("split", "candidates")
    check_unique_pairs(
        cands.select(S.SURVEY_ID, pl.col(S.WORK_ID).alias(S.CANDIDATE_ID)).collect(
            engine="streaming"
        )
    )
    # works whose shown text cannot stand as a document leave the release, counted
    excluded = text_exclusions(ctx, cands)
    cands, text_exclusion = kept_candidates(cands, excluded)
    surveys = ctx.read("split", "split_surveys").collect(engine="streaming")
    written = write_splits(ctx, cands, surveys, excluded)
    written.text_exclusion = text_exclusion
    write_works_table(ctx)
    write_field_baselines(
        ctx.output(BIBLIOGRAPHY_BASELINES_FILE),
        ctx.cfg,
        scan_extract(ctx.files_by_table("extract"), "papers"),
        ctx.read("works", "cites"),
        ctx.read("works", "works"),
        cands,
        ctx.read("split", "split_surveys"),
    )
    # every Parquet file written, as the metadata lists it
    files = file_entries(ctx.tmp_dir)
    leak_audit, aspects = leak_audits(ctx, written)
    written.mteb_checks = mteb_audit(ctx, written.present)
    meta = write_metadata_and_card(ctx, written, leak_audit, aspects, files)
    return {
        **{f"{s}_surveys": written.counts[s]["surveys"] for s in S.SPLIT_NAMES},
        **{f"{s}_rows": written.counts[s]["rows"] for s in S.SPLIT_NAMES},
        # the tables, the metadata, the card and the figures it links: what was written
        "files": sum(
            1 for f in ctx.tmp_dir.rglob("*") if f.is_file() and not f.name.startswith("_")
        ),
        "input_revision": meta["input"]["revision"],
    }


STAGE = Stage(
    name="release",
    kind="reduce",
    reads=("extract", "works", "openalex", "surveys", "labels", "negatives", "split", "aspects"),
    config_sections=("release", "split", "negatives", "extract", "train", "aspects"),
    fn=build_release,
    help="release files: reading lists per split, MTEB/BEIR qrels/corpus/queries/top_ranked, metadata, dataset card",
)
