"""The release's splits: each split's reading lists, candidates view, BEIR views and aspects,
written a batch of surveys at a time, with the counts and audit values of what was written.

A batch holds at most ``ctx.limits.release_batch_rows`` reading-list rows and
``release_batch_aspect_rows`` aspect rows, in survey order, so every file has the rows, order
and bytes of the whole split written at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import polars as pl
import pyarrow as pa

from pipeline.core import schema as S
from pipeline.core.parquet import RowGroupWriter, write_table
from pipeline.core.progress import steps
from pipeline.core.release_files import (
    ASPECT_CANDIDATES_FILE,
    ASPECT_READING_LISTS_FILE,
    ASPECTS_DIR,
    CANDIDATES_FILE,
    READING_LISTS_FILE,
    beir_file,
)
from pipeline.engine.context import ReduceContext
from pipeline.rules.audit_sample import keep, sample_record, sample_surveys
from pipeline.rules.described import TEXT_SOURCE
from pipeline.rules.leak_audit import (
    aspect_audit,
    aspect_feature_values,
    aspect_judgment_values,
    aspect_relative_audit,
    aspect_relative_values,
    audit_values,
    feature_values,
    relative_audit,
    relative_feature_values,
    with_candidate,
    with_full_text,
)
from pipeline.rules.tables import id_batches
from pipeline.stages.corpus_sections import sections_file, write_corpus_sections
from pipeline.stages.release.counts import (
    ASPECT_LIGHT_COLUMNS,
    LIGHT_COLUMNS,
    POSITIVE,
    TEXT,
    aspect_split_counts,
    split_counts,
    text_counts,
    text_summary,
)
from pipeline.stages.release.tables import (
    aspect_rows,
    beir_views,
    candidate_works,
    reading_lists,
)

# the BEIR views written batch by batch; the corpus is deduplicated across batches
_BATCH_VIEWS = ("queries", "qrels", "top_ranked")
_BEIR_SCHEMAS = {
    "queries": S.BEIR_QUERIES,
    "corpus": S.BEIR_CORPUS,
    "qrels": S.BEIR_QRELS,
    "top_ranked": S.BEIR_TOP_RANKED,
}


@dataclass
class Written:
    """What the splits left for the metadata, by split: counts (every split), and for the
    splits written, their audit tables, text sources, audit samples and aspects."""

    counts: dict[str, Any] = field(default_factory=dict)
    present: list[str] = field(default_factory=list)
    audit: dict[str, Any] = field(default_factory=dict)
    relative: dict[str, Any] = field(default_factory=dict)
    texts: dict[str, Any] = field(default_factory=dict)
    samples: dict[str, Any] = field(default_factory=dict)
    aspect_counts: dict[str, Any] = field(default_factory=dict)
    aspect_audit: dict[str, Any] = field(
        default_factory=lambda: {"splits": {}, "relative": {}, "judgment_side": {}, "sample": {}}
    )
    full_text: dict[str, Any] = field(default_factory=dict)  # corpus_sections' counts
    # the works left out for their text (pipeline.rules.document_text), counted
    text_exclusion: dict[str, Any] = field(default_factory=dict)
    mteb_checks: dict[str, Any] = field(default_factory=dict)  # of the BEIR files written
    # the candidates with full text (corpus_sections' ids), per split: the probe's feature
    full_text_ids: dict[str, pl.Series] = field(default_factory=dict)


def write_splits(
    ctx: ReduceContext, cands: pl.LazyFrame, surveys: pl.DataFrame, excluded: pl.DataFrame
) -> Written:
    """Write every split that has surveys (a Parquet file with no rows cannot be read by
    ``datasets``) of ``cands`` (:func:`pipeline.stages.release.tables.kept_candidates`, without
    the ``excluded`` works); count every split."""
    out = Written()
    scratch = ctx.scratch() / "candidate_works.parquet"
    try:
        works = candidate_works(ctx, cands, scratch)
        for split in S.SPLIT_NAMES:
            _write_or_count(ctx, out, split, cands, works, surveys, excluded)
    finally:
        # the release's files are listed (and hashed) before the runner removes the scratch
        scratch.unlink(missing_ok=True)
    return out


def _write_or_count(
    ctx: ReduceContext,
    out: Written,
    split: str,
    cands: pl.LazyFrame,
    works: pl.LazyFrame,
    surveys: pl.DataFrame,
    excluded: pl.DataFrame,
) -> None:
    """Write split ``split``'s files and record them in ``out``; a split without surveys is
    only counted."""
    per_survey = (
        cands.filter(pl.col(S.SPLIT) == split)
        .group_by(S.SURVEY_ID)
        .len()
        .sort(S.SURVEY_ID)
        .collect(engine="streaming")
    )
    if per_survey.height == 0:
        empty = (
            reading_lists(ctx, per_survey[S.SURVEY_ID], cands, works)
            .drop(S.SPLIT, TEXT_SOURCE)
            .collect()
        )
        out.counts[split] = split_counts(empty, surveys)
        return
    out.present.append(split)
    written = _write_split(ctx, split, per_survey, cands, works, excluded)
    # it reads the split's corpus and qrels files, written just above; the audits then
    # read which candidates it gave full text
    out.full_text[split] = write_corpus_sections(ctx, split)
    out.full_text_ids[split] = full_text_ids(ctx, split)
    _summarize(out, split, written, surveys, out.full_text_ids[split])


def full_text_ids(ctx: ReduceContext, split: str) -> pl.Series:
    """The document ids of split ``split``'s written ``corpus_sections`` file (none without
    one: a split whose view has no row gets no file)."""
    path = ctx.output(sections_file(split))
    if not path.is_file():
        return pl.Series(S.BEIR_CORPUS_ID, [], pl.String)
    ids = pl.scan_parquet(path).select(pl.col(S.BEIR_CORPUS_ID).unique().sort())
    return ids.collect(engine="streaming").to_series()


def _summarize(
    out: Written, split: str, written: dict[str, Any], surveys: pl.DataFrame, with_text: pl.Series
) -> None:
    """Record one written split's counts and audit tables in ``out`` (its frames are freed
    when this returns, before the next split's are built); ``with_text``: the candidates
    with full text, audited as a feature (:func:`pipeline.rules.leak_audit.with_full_text`)."""
    out.counts[split] = split_counts(written["light"], surveys)
    out.audit[split] = audit_values(with_full_text(written["audit"], with_text))
    out.relative[split] = relative_audit(
        with_full_text(written["relative"], with_text, relative=True)
    )
    out.texts[split] = text_summary(written["texts"])
    out.samples[split] = written["sample"]
    if "aspect_light" in written:
        out.aspect_counts[split] = aspect_split_counts(written["aspect_light"])
        out.aspect_audit["splits"][split] = aspect_audit(
            with_full_text(written["aspect_audit"], with_text, keep_key=True)
        )
        out.aspect_audit["relative"][split] = aspect_relative_audit(
            with_full_text(written["aspect_relative"], with_text, relative=True, keep_key=True)
        )
        out.aspect_audit["judgment_side"][split] = aspect_audit(written["aspect_hidden"])
        out.aspect_audit["sample"][split] = written["aspect_sample"]


def survey_batches(
    per_survey: pl.DataFrame,
    max_rows: int,
    aspect_per_survey: pl.DataFrame | None = None,
    max_aspect_rows: int = 1,
) -> list[pl.Series]:
    """``(survey_id, len)`` rows cut into consecutive batches of at most ``max_rows``
    reading-list rows and at most ``max_aspect_rows`` aspect rows (``aspect_per_survey``:
    ``(survey_id, len)``; a survey with more gets a batch of its own). A survey's aspect rows
    are about ten times its list, so a batch bounded by its list alone would hold the aspect
    rows of a whole split."""
    if aspect_per_survey is None or aspect_per_survey.height == 0:
        return id_batches(per_survey.select(S.SURVEY_ID, "len"), max_rows)
    # one integer weight: a batch is full when either count reaches its limit
    aspect_len = aspect_per_survey.select(S.SURVEY_ID, pl.col("len").alias("_aspect_len"))
    weights = (
        per_survey.select(S.SURVEY_ID, "len")
        .join(aspect_len, on=S.SURVEY_ID, how="left", maintain_order="left")
        .select(
            S.SURVEY_ID,
            pl.max_horizontal(
                pl.col("len").cast(pl.Int64) * max_aspect_rows,
                pl.col("_aspect_len").fill_null(0).cast(pl.Int64) * max_rows,
            ).alias("_weight"),
        )
    )
    return id_batches(weights, max_rows * max_aspect_rows)


def _write_split(
    ctx: ReduceContext,
    split: str,
    per_survey: pl.DataFrame,
    cands: pl.LazyFrame,
    works: pl.LazyFrame,
    excluded: pl.DataFrame,
) -> dict[str, Any]:
    """Write one split's files batch by batch; return its light columns, the audit values of
    the surveys the audits sample, and what they sampled."""
    files = _SplitFiles(ctx, split, per_survey, cands, works, excluded)
    for ids in steps(files.batches, f"release: {split} survey batches"):
        files.write_batch(ids)
    return files.close()


def _writer(ctx: ReduceContext, name: str, schema: pa.Schema, what: str) -> RowGroupWriter:
    return RowGroupWriter(ctx.output(name), schema, ctx.cfg, what)


class _SplitFiles:
    """One split's open files and what its batches leave for its counts and audits (the
    audits read a bounded sample of whole surveys: :mod:`pipeline.rules.audit_sample`)."""

    def __init__(
        self,
        ctx: ReduceContext,
        split: str,
        per_survey: pl.DataFrame,
        cands: pl.LazyFrame,
        works: pl.LazyFrame,
        excluded: pl.DataFrame,
    ) -> None:
        self.ctx, self.split, self.per_survey, self.cands = ctx, split, per_survey, cands
        self.works = works  # the candidates' columns (tables.candidate_works)
        self.aspects = ctx.read("aspects", "aspects").filter(pl.col(S.SPLIT) == split)
        # the works the release leaves out leave the aspects' lists too
        self.aspect_cands = ctx.read("aspects", "aspect_candidates").join(
            excluded.lazy().select(S.SPLIT, S.WORK_ID), on=[S.SPLIT, S.WORK_ID], how="anti"
        )
        self.with_aspects = self.aspects.select(pl.len()).collect().item() > 0
        self.aspect_writers = self._aspect_writers() if self.with_aspects else {}
        self.writers = {
            "rows": _writer(ctx, READING_LISTS_FILE.format(split=split), S.READING_LISTS, split),
            "view": _writer(
                ctx, CANDIDATES_FILE.format(split=split), S.CANDIDATES_VIEW, "candidates"
            ),
            **{
                view: _writer(
                    ctx,
                    beir_file(view, split),
                    _BEIR_SCHEMAS[view],
                    beir_file(view, split).removesuffix(".parquet"),
                )
                for view in _BATCH_VIEWS
            },
        }
        self.light: list[pl.DataFrame] = []
        self.values: list[pl.DataFrame] = []
        self.corpus: list[pl.DataFrame] = []
        self.relative: list[pl.DataFrame] = []
        self.texts: list[pl.DataFrame] = []
        self.aspect_light: list[pl.DataFrame] = []
        self.aspect_values: list[pl.DataFrame] = []
        self.aspect_relative: list[pl.DataFrame] = []
        self.aspect_hidden: list[pl.DataFrame] = []
        self.cap = ctx.cfg.release.audit_sample_rows
        self.audited = sample_surveys(per_survey, self.cap)
        self.aspect_per_survey = (
            self.aspect_cands.filter(pl.col(S.SURVEY_ID).is_in(per_survey[S.SURVEY_ID].implode()))
            .group_by(S.SURVEY_ID)
            .len()
            .sort(S.SURVEY_ID)
            .collect(engine="streaming")
            if self.with_aspects
            else per_survey.clear()
        )
        self.aspect_audited = sample_surveys(self.aspect_per_survey, self.cap)
        self.batches = survey_batches(
            per_survey,
            ctx.limits.release_batch_rows,
            self.aspect_per_survey,
            ctx.limits.release_batch_aspect_rows,
        )

    def _aspect_writers(self) -> dict[str, RowGroupWriter]:
        split = self.split
        return {
            "rows": _writer(
                self.ctx,
                ASPECT_READING_LISTS_FILE.format(split=split),
                S.ASPECT_READING_LISTS,
                f"{ASPECTS_DIR} {split}",
            ),
            "view": _writer(
                self.ctx,
                ASPECT_CANDIDATES_FILE.format(split=split),
                S.ASPECT_CANDIDATES_VIEW,
                f"{ASPECTS_DIR} candidates",
            ),
        }

    def write_batch(self, ids: pl.Series) -> None:
        """Write the rows of the surveys ``ids`` to every file of the split."""
        part = (
            reading_lists(self.ctx, ids, self.cands, self.works)
            .filter(pl.col(S.SPLIT) == self.split)
            .drop(S.SPLIT)
            .collect(engine="streaming")
        )
        self.texts.append(text_counts(part))
        part = part.drop(TEXT_SOURCE)
        self.writers["rows"].write(part)
        survey_view = part.select(S.CANDIDATES_VIEW.names)
        self.writers["view"].write(survey_view)
        self._audit(part)
        self.light.append(part.select(LIGHT_COLUMNS))
        beir = beir_views(part)
        for view in _BATCH_VIEWS:
            self.writers[view].write(beir[view])
        self.corpus.append(beir["corpus"])
        del beir
        if self.with_aspects:
            self._write_aspects(part, survey_view)

    def _audit(self, part: pl.DataFrame) -> None:
        """The audit values of the batch's sampled surveys."""
        sample = keep(part, self.audited)
        if sample.height:
            sample_view = sample.select(S.CANDIDATES_VIEW.names)
            audited_columns = sample.select(*S.CANDIDATES_VIEW.names, *S.POPULARITY_COLUMNS)
            ids = sample[S.CANDIDATE_ID]
            self.values.append(
                with_candidate(feature_values(audited_columns, sample[S.LABEL]), ids)
            )
            self.relative.append(
                with_candidate(relative_feature_values(sample_view, sample[S.LABEL]), ids)
            )

    def _write_aspects(self, part: pl.DataFrame, survey_view: pl.DataFrame) -> None:
        """The batch's aspect rows and their view, and the audit values of its sampled
        surveys' aspects."""
        rows = aspect_rows(self.aspects, self.aspect_cands, part)
        if not rows.height:
            return
        self.aspect_writers["rows"].write(rows)
        self.aspect_writers["view"].write(rows.select(S.ASPECT_CANDIDATES_VIEW.names))
        self.aspect_light.append(rows.select(ASPECT_LIGHT_COLUMNS))
        rows = keep(rows, self.aspect_audited)
        if rows.height:
            aspect_view = rows.select(*S.ASPECT_CANDIDATES_VIEW.names, *S.POPULARITY_COLUMNS)
            self.aspect_values.append(aspect_feature_values(aspect_view, rows[S.LABEL]))
            held = survey_view.join(rows.select(S.SURVEY_ID).unique(), on=S.SURVEY_ID, how="semi")
            self.aspect_relative.append(aspect_relative_values(held, rows))
            self.aspect_hidden.append(aspect_judgment_values(rows, part))

    def close(self) -> dict[str, Any]:
        """Close the files, write the deduplicated BEIR corpus; return what the batches left."""
        for writer in [*self.writers.values(), *self.aspect_writers.values()]:
            writer.close()
        corpus = beir_file("corpus", self.split)
        write_table(
            pl.concat(self.corpus).unique(S.BEIR_ID).sort(S.BEIR_ID),
            self.ctx.output(corpus),
            _BEIR_SCHEMAS["corpus"],
            self.ctx.cfg,
            corpus.removesuffix(".parquet"),
        )
        written: dict[str, Any] = {
            "light": pl.concat(self.light),
            "audit": pl.concat(self.values),
            "relative": pl.concat(self.relative),
            "sample": sample_record(self.per_survey, self.audited, self.cap),
            "aspect_sample": sample_record(self.aspect_per_survey, self.aspect_audited, self.cap),
            "texts": pl.concat(self.texts).group_by(TEXT, POSITIVE).agg(pl.col("len").sum()),
        }
        if self.aspect_light:
            written |= {
                "aspect_light": pl.concat(self.aspect_light),
                "aspect_audit": pl.concat(self.aspect_values),
                "aspect_relative": pl.concat(self.aspect_relative),
                "aspect_hidden": pl.concat(self.aspect_hidden),
            }
        return written
