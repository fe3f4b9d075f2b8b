"""A reference query for each reduce stage: what Polars alone does with the stage's inputs.

For each reduce stage, the plainest Polars query that reads the same input tables from a
bench-scale work dir and writes output of the same size: a handful of scans, group-bys and
joins, streamed to Parquet, with none of the stage's rules. ``make bench-scale`` runs it in
its own process right after its stage, on the same work dir and in the same way
(:func:`bench.measure.run_measured`), and prints the stage's wall and CPU time as a ratio to
it: the machine's load weighs on both, so the ratio says how far the stage is from what
its inputs cost to read, join and write, whatever the load.

The shapes, stage by stage:

* ``works``: scan the extract references, key each entry by its first identifier (else
  its lower-cased raw string), one group-by on the keys (the works), one join with the
  corpus papers (their text), sink ``works`` and ``cites`` (one row per entry).
* ``openalex``: scan ``works``, one lookup key per work, write as many records as the stage.
* ``surveys``: filter the CS papers on a cue word, one group-by of ``cites`` per paper, join.
* ``labels``: the surveys' mentions, one group-by per bib entry, joined to ``cites``, one
  group-by per (survey, work).
* ``negatives``: the positives joined to ``works`` on their year, one work drawn per
  positive by an index join, as many rows as the stage wrote.
* ``split``: the positives and negatives stacked, joined to their survey's date and the
  work's date, one group-by per survey.
* ``aspects``: the surveys' sections, one group-by per top section, joined to the survey's
  candidates (the aspect candidates), with the mentions counted per section.
* ``release``: read the split tables and ``works``, write per split the reading lists,
  candidates, qrels, corpus and queries, and the aspect reading lists.

Run alone (what the benchmark does):
``python bench/stage_references.py works --out bench_out/scale/n100000 --scratch DIR``;
it writes under ``DIR`` (created, then deleted) and prints one JSON line with the rows it
wrote per file.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from pipeline.core import schema as S  # noqa: E402

KEY = "_key"
SPLITS = ("train", "eval")


def _scan(work: Path, stage: str, table: str) -> pl.LazyFrame:
    """A table of the work dir: a reduce stage's one file or a map stage's files."""
    folder = work / stage / table
    if folder.is_dir():
        return pl.scan_parquet(sorted(folder.glob("*.parquet")))
    return pl.scan_parquet(work / stage / f"{table}.parquet")


def _rows(path: Path) -> int:
    return pq.ParquetFile(path).metadata.num_rows


def _sink(frame: pl.LazyFrame, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    frame.sink_parquet(path)


def ref_works(work: Path, out: Path) -> None:
    refs = _scan(work, "extract", "references").select(
        S.PAPER_ID, S.REF_ID, S.ARXIV_ID, S.DOI, S.OPENALEX_ID, S.RAW
    )
    keyed = refs.with_columns(
        pl.coalesce(
            pl.lit("arxiv:") + pl.col(S.ARXIV_ID),
            pl.lit("doi:") + pl.col(S.DOI).str.to_lowercase(),
            pl.lit("openalex:") + pl.col(S.OPENALEX_ID),
            pl.col(S.RAW).str.to_lowercase(),
        ).alias(KEY)
    )
    papers = _scan(work, "extract", "papers").select(
        (pl.lit("arxiv:") + pl.col(S.PAPER_ID)).alias(KEY), S.TITLE, S.ABSTRACT, S.CATEGORIES
    )
    works = (
        keyed.group_by(KEY)
        .agg(pl.len().alias("n_citing"), pl.col(S.RAW).max())
        .join(papers, on=KEY, how="left")
    )
    _sink(works, out / "works.parquet")
    _sink(keyed.select(S.PAPER_ID, S.REF_ID, pl.col(KEY).alias(S.WORK_ID)), out / "cites.parquet")


def ref_openalex(work: Path, out: Path) -> None:
    target = _rows(work / "openalex" / "records.parquet")
    records = (
        _scan(work, "works", "works")
        .select(S.WORK_ID, pl.col(S.ALIASES).list.first().alias("lookup_key"))
        .head(target)
    )
    _sink(records, out / "records.parquet")


def ref_surveys(work: Path, out: Path) -> None:
    target = _rows(work / "surveys" / "surveys.parquet")
    papers = _scan(work, "extract", "papers").filter(
        pl.col(S.PRIMARY_CATEGORY).str.starts_with("cs.")
        & pl.col(S.TITLE).str.to_lowercase().str.contains("survey|review|overview")
    )
    refs = (
        _scan(work, "works", "cites")
        .group_by(S.PAPER_ID)
        .agg(pl.len().alias("n_refs"), pl.col(S.WORK_ID).n_unique().alias("n_resolved"))
    )
    surveys = (
        papers.select(S.PAPER_ID, S.TITLE, S.PRIMARY_CATEGORY, S.FIRST_VERSION_DATE)
        .join(refs, on=S.PAPER_ID)
        .sort(S.PAPER_ID)
        .head(target)
    )
    _sink(surveys, out / "surveys.parquet")


def _survey_ids(work: Path) -> pl.LazyFrame:
    return _scan(work, "surveys", "surveys").select(S.PAPER_ID)


def ref_labels(work: Path, out: Path) -> None:
    surveys = _survey_ids(work)
    mentions = (
        _scan(work, "extract", "mentions")
        .join(surveys, on=S.PAPER_ID, how="semi")
        .group_by(S.PAPER_ID, S.REF_ID)
        .agg(pl.col(S.N_MENTIONS).sum(), pl.col("top_section").n_unique().alias("n_sections"))
    )
    labels = (
        _scan(work, "works", "cites")
        .join(surveys, on=S.PAPER_ID, how="semi")
        .drop_nulls(S.WORK_ID)
        .join(mentions, on=[S.PAPER_ID, S.REF_ID], how="left")
        .group_by(pl.col(S.PAPER_ID).alias(S.SURVEY_ID), S.WORK_ID)
        .agg(pl.col(S.N_MENTIONS).sum(), pl.col("n_sections").max())
        .with_columns(pl.col("n_sections").clip(1, 4).alias(S.LABEL))
    )
    _sink(labels, out / "labels.parquet")


def ref_negatives(work: Path, out: Path) -> None:
    target = _rows(work / "negatives" / "negatives.parquet")
    year = pl.col(S.KNOWN_DATE).dt.year().alias("_year")
    works = (
        _scan(work, "works", "works")
        .select(S.WORK_ID, S.KNOWN_DATE, year)
        .drop_nulls("_year")
        .with_columns(pl.int_range(pl.len()).over("_year").alias("_pick"))
    )
    per_year = works.group_by("_year").agg(pl.len().alias("_n"))
    positives = (
        _scan(work, "labels", "labels")
        .select(S.SURVEY_ID, S.WORK_ID)
        .join(works.select(S.WORK_ID, "_year"), on=S.WORK_ID)
        .join(per_year, on="_year")
        .with_columns(
            (pl.struct(S.SURVEY_ID, S.WORK_ID).hash(7) % pl.col("_n")).cast(pl.Int64).alias("_pick")
        )
    )
    negatives = (
        positives.select(S.SURVEY_ID, "_year", "_pick")
        .join(works.with_columns(pl.col("_pick").cast(pl.Int64)), on=["_year", "_pick"])
        .select(S.SURVEY_ID, S.WORK_ID, S.KNOWN_DATE, pl.lit(0, pl.Int8).alias(S.LABEL))
        .head(target)
    )
    _sink(negatives, out / "negatives.parquet")


def ref_split(work: Path, out: Path) -> None:
    surveys = _scan(work, "surveys", "surveys").select(
        pl.col(S.PAPER_ID).alias(S.SURVEY_ID), pl.col(S.FIRST_VERSION_DATE).alias(S.SURVEY_DATE)
    )
    cutoff = surveys.select(pl.col(S.SURVEY_DATE).sort().quantile(0.7, "nearest"))
    stacked = pl.concat(
        [
            _scan(work, "labels", "labels").select(S.SURVEY_ID, S.WORK_ID, S.LABEL),
            _scan(work, "negatives", "negatives").select(S.SURVEY_ID, S.WORK_ID, S.LABEL),
        ],
        how="vertical_relaxed",
    )
    candidates = (
        stacked.join(surveys, on=S.SURVEY_ID)
        .join(cutoff.rename({S.SURVEY_DATE: "_cutoff"}), how="cross")
        .with_columns(
            pl.when(pl.col(S.SURVEY_DATE) >= pl.col("_cutoff"))
            .then(pl.lit("eval"))
            .otherwise(pl.lit("train"))
            .alias(S.SPLIT)
        )
        .drop("_cutoff")
        .join(
            _scan(work, "works", "works").select(
                S.WORK_ID, pl.col(S.KNOWN_DATE).alias(S.CANDIDATE_DATE)
            ),
            on=S.WORK_ID,
            how="left",
        )
    )
    _sink(candidates, out / "candidates.parquet")
    per_survey = (
        pl.scan_parquet(out / "candidates.parquet")
        .group_by(S.SURVEY_ID, S.SPLIT)
        .agg((pl.col(S.LABEL) > 0).sum().alias("n_positives"), (pl.col(S.LABEL) == 0).sum())
    )
    _sink(per_survey, out / "split_surveys.parquet")


def ref_aspects(work: Path, out: Path) -> None:
    surveys = _survey_ids(work)
    sections = (
        _scan(work, "extract", "sections")
        .join(surveys, on=S.PAPER_ID, how="semi")
        .group_by(S.PAPER_ID, "top_index")
        .agg(pl.col(S.SECTION).first(), pl.len().alias("n_sections"))
        .rename({S.PAPER_ID: S.SURVEY_ID})
    )
    _sink(sections, out / "aspects.parquet")
    mentions = (
        _scan(work, "extract", "mentions")
        .join(surveys, on=S.PAPER_ID, how="semi")
        .join(_scan(work, "works", "cites"), on=[S.PAPER_ID, S.REF_ID])
        .group_by(pl.col(S.PAPER_ID).alias(S.SURVEY_ID), "top_section", S.WORK_ID)
        .agg(pl.col(S.N_MENTIONS).sum())
    )
    candidates = _scan(work, "split", "candidates").select(S.SURVEY_ID, S.WORK_ID, S.LABEL, S.SPLIT)
    aspect_candidates = (
        pl.scan_parquet(out / "aspects.parquet")
        .join(candidates, on=S.SURVEY_ID)
        .join(
            mentions,
            left_on=[S.SURVEY_ID, S.SECTION, S.WORK_ID],
            right_on=[S.SURVEY_ID, "top_section", S.WORK_ID],
            how="left",
        )
    )
    _sink(aspect_candidates, out / "aspect_candidates.parquet")


def ref_release(work: Path, out: Path) -> None:
    papers = _scan(work, "extract", "papers").select(
        pl.col(S.PAPER_ID).alias(S.SURVEY_ID),
        pl.col(S.TITLE).alias("survey_title"),
        pl.col(S.ABSTRACT).alias("survey_abstract"),
    )
    works = _scan(work, "works", "works").select(
        S.WORK_ID,
        S.ALIASES,
        pl.coalesce(S.TITLE, S.PARSED_TITLE).alias("candidate_title"),
        pl.col(S.ABSTRACT).alias("candidate_abstract"),
        pl.col(S.RAW).alias("candidate_raw"),
        S.KNOWN_DATE,
    )
    surveys = _scan(work, "split", "split_surveys").select(S.SURVEY_ID, S.SPLIT)
    aspects = _scan(work, "aspects", "aspects").select("aspect_id", "aspect_heading", "aspect_rank")
    for split in SPLITS:
        rows = (
            _scan(work, "split", "candidates")
            .filter(pl.col(S.SPLIT) == split)
            .join(papers, on=S.SURVEY_ID, how="left")
            .join(works, on=S.WORK_ID, how="left")
            .sort(S.SURVEY_ID, S.WORK_ID)
        )
        _sink(rows, out / f"{split}_survey_reading_lists.parquet")
        lists = pl.scan_parquet(out / f"{split}_survey_reading_lists.parquet")
        _sink(
            lists.select(S.SURVEY_ID, "survey_title", S.WORK_ID, "candidate_title"),
            out / "candidates" / f"{split}.parquet",
        )
        _sink(lists.select(S.SURVEY_ID, S.WORK_ID, S.LABEL), out / "qrels" / f"{split}.parquet")
        _sink(
            lists.group_by(S.WORK_ID).agg(
                pl.col("candidate_title").first(), pl.col("candidate_abstract").first()
            ),
            out / "corpus" / f"{split}.parquet",
        )
        _sink(
            surveys.filter(pl.col(S.SPLIT) == split).join(papers, on=S.SURVEY_ID, how="left"),
            out / "queries" / f"{split}.parquet",
        )
        aspect_rows = (
            _scan(work, "aspects", "aspect_candidates")
            .filter(pl.col(S.SPLIT) == split)
            .join(aspects, on="aspect_id", how="left")
            .join(papers, on=S.SURVEY_ID, how="left")
            .join(works, on=S.WORK_ID, how="left")
        )
        _sink(aspect_rows, out / "aspects" / f"{split}_survey_reading_lists.parquet")
    _sink(
        _scan(work, "works", "works").select(S.WORK_ID, S.ALIASES, S.PARSED_TITLE),
        out / "works.parquet",
    )


REFERENCES: dict[str, Callable[[Path, Path], None]] = {
    "works": ref_works,
    "openalex": ref_openalex,
    "surveys": ref_surveys,
    "labels": ref_labels,
    "negatives": ref_negatives,
    "split": ref_split,
    "aspects": ref_aspects,
    "release": ref_release,
}


def run_reference(stage: str, work: Path, scratch: Path) -> dict[str, int]:
    """Run ``stage``'s reference on ``work``, writing under ``scratch`` (created, then
    deleted); return the rows of every file it wrote, by path relative to ``scratch``."""
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    try:
        REFERENCES[stage](work, scratch)
        return {str(p.relative_to(scratch)): _rows(p) for p in sorted(scratch.rglob("*.parquet"))}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("stage", choices=sorted(REFERENCES))
    ap.add_argument("--out", type=Path, required=True, help="the work dir the stage ran on")
    ap.add_argument("--scratch", type=Path, required=True, help="written, then deleted")
    args = ap.parse_args()
    print(json.dumps({"rows": run_reference(args.stage, args.out, args.scratch)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
