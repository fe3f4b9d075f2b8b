"""Per-work partials of the last pass over the reference files, each over a disjoint set of
entries, combined every few files (:class:`WorkPartials`): an example raw string and the
earliest reference year, the citing papers, the parsed title's counts."""

from __future__ import annotations

import polars as pl

from pipeline.core import schema as S
from pipeline.rules import titles as T
from pipeline.stages.works.dates import REFERENCE_YEAR
from pipeline.stages.works.identity import ENTRY

# internal columns (never written)
REF_YEAR = "_reference_year"
RAW_BYTES = "_raw_bytes"
PARSED_COUNT = "_parsed_count"


def compact(df: pl.DataFrame) -> pl.DataFrame:
    """``df`` in buffers of its own. A string column that a join or group-by picked from a
    larger table is views into that table's buffers, which stay alive while it does: held
    over every reference file, such columns kept every file's raw strings and segment keys
    in memory (12 GB at 2.3M papers). Arrow's plain strings copy only the bytes used."""
    return pl.from_arrow(df.to_arrow())  # type: ignore[return-value]


def _merge_examples(parts: list[pl.DataFrame]) -> pl.DataFrame:
    """Combine ``(work_id, _raw_bytes, raw, _reference_year)`` partials of disjoint entries.

    Each partial holds, per work, its longest raw string (the smallest on ties) and
    its earliest reference year; the combination is that of all the entries.
    """
    return (
        pl.concat(parts)
        .group_by(S.WORK_ID)
        .agg(
            pl.col(S.RAW).filter(pl.col(RAW_BYTES) == pl.col(RAW_BYTES).max()).min(),
            pl.col(RAW_BYTES).max(),
            pl.col(REF_YEAR).min(),
        )
    )


def _merge_parsed(parts: list[pl.DataFrame]) -> pl.DataFrame:
    """Sum ``(work_id, title_key, _parsed_count)`` partials of disjoint sets of entries."""
    return pl.concat(parts).group_by(S.WORK_ID, T.KEY).agg(pl.col(PARSED_COUNT).sum())


def parsed_titles(counts: pl.LazyFrame) -> pl.LazyFrame:
    """``(work_id, parsed_title)``: of the title keys the entries citing a work give, the most
    common (the smallest on ties). A majority of citers, not the longest string (one
    citer), decides, so the text does not tell whose bibliography it came from."""
    return counts.group_by(S.WORK_ID).agg(
        pl.col(T.KEY)
        .sort_by([pl.col(PARSED_COUNT), pl.col(T.KEY)], descending=[True, False])
        .first()
        .alias(S.PARSED_TITLE)
    )


def _merge_citing(parts: list[pl.DataFrame]) -> pl.DataFrame:
    """Sum per-work citing-paper counts of disjoint sets of papers."""
    return pl.concat(parts).group_by(S.WORK_ID).agg(pl.col(S.N_CITING_PAPERS).sum())


class WorkPartials:
    """The per-work partials of the files added so far, combined every ``merge_every`` files
    so that memory holds a few files' partials, never one per file."""

    def __init__(self, merge_every: int) -> None:
        self.merge_every = merge_every
        self.examples: list[pl.DataFrame] = []
        self.citing: list[pl.DataFrame] = []
        self.parsed: list[pl.DataFrame] = [
            pl.DataFrame(schema={S.WORK_ID: pl.String, T.KEY: pl.String, PARSED_COUNT: pl.Int64})
        ]

    def add(self, refs: pl.LazyFrame, cited: pl.LazyFrame, parsed: pl.DataFrame) -> None:
        """Add one file's entries: ``refs`` its references (with their ``_entry``), ``cited``
        the ``(_entry, paper_id, work_id)`` of those resolved, ``parsed`` the
        ``(work_id, title_key, _parsed_count)`` of those resolved by title
        (:func:`~pipeline.stages.works.by_title.entry_title_keys`; pass 2 gives those
        resolved by identifier, to :meth:`combined`)."""
        raw_bytes = pl.col(S.RAW).str.len_bytes()
        ref_year = pl.col(S.RAW).str.extract_all(REFERENCE_YEAR).list.last().cast(pl.Int32)
        self.examples.append(
            refs.select(ENTRY, S.RAW)
            .join(cited, on=ENTRY)
            .drop_nulls(S.RAW)
            # no unique (work, raw) first: hashing every raw string cost more than the year
            # regex and the longest-string filter it saved (300k bench: 0.91 -> 0.79 s a file)
            .group_by(S.WORK_ID)
            .agg(  # the longest raw string; the smallest of those on ties
                pl.col(S.RAW).filter(raw_bytes == raw_bytes.max()).min(),
                raw_bytes.max().alias(RAW_BYTES),
                ref_year.min().alias(REF_YEAR),
            )
            .collect(engine="streaming")
        )
        self.parsed.append(parsed)
        self.citing.append(
            cited.group_by(S.WORK_ID)
            .agg(pl.col(S.PAPER_ID).n_unique().cast(pl.Int64).alias(S.N_CITING_PAPERS))
            .collect(engine="streaming")
        )
        if len(self.examples) >= self.merge_every:
            self.examples = [compact(_merge_examples(self.examples))]
            self.citing = [compact(_merge_citing(self.citing))]
            self.parsed = [compact(_merge_parsed(self.parsed))]

    def combined(self, known: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
        """``(n_citing, example_raw, parsed_title)`` over every file added: per work, its
        citing papers; its example raw string, its length in bytes and its earliest
        reference year; its parsed title (:func:`parsed_titles`), of the entries resolved by
        title and of ``known``: ``(work_id, title_key, _parsed_count)`` of those resolved by
        identifier (pass 2's: counted there, as pass 2 joins them to their title keys)."""
        if self.citing:
            n_citing = _merge_citing(self.citing)
        else:
            n_citing = pl.DataFrame(schema={S.WORK_ID: pl.String, S.N_CITING_PAPERS: pl.Int64})
        if self.examples:
            example_raw = _merge_examples(self.examples)
        else:
            example_raw = pl.DataFrame(
                schema={S.WORK_ID: pl.String, S.RAW: pl.String, RAW_BYTES: pl.UInt32,
                        REF_YEAR: pl.Int32}
            )  # fmt: skip
        parsed_title = parsed_titles(_merge_parsed([known, *self.parsed]).lazy()).collect()
        return n_citing, example_raw, parsed_title
