"""The three passes over the reference files, one extract file at a time, each leaving its
per-file tables in the stage's scratch folder for the next (:class:`Scratch`).

Resolution. A bib entry resolves to the component of its non-junk aliases (they
are all linked to each other, so there is one), else of its junk alias
(:mod:`~pipeline.stages.works.identity`); an entry with no identifier, to the work its
title names (:mod:`~pipeline.stages.works.by_title`), else it is unresolved (``work_id``
null in ``cites``); it is counted per paper and is never a candidate. Several entries of
one paper may resolve to the same work; ``labels`` sums their mentions.

1. :func:`alias_pass`: every identifier of every entry, and the links between them;
2. :func:`identifier_pass`: each entry's work by identifier, and its title keys;
3. :func:`title_pass`: the rest by title; ``cites`` rows cut in paper-id ranges
   (:func:`paper_ranges`); per-work partials (:mod:`~pipeline.stages.works.partials`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import polars as pl

from pipeline.core import schema as S
from pipeline.core.progress import steps
from pipeline.rules import aliases as A
from pipeline.rules import titles as T
from pipeline.rules.aliases import ALIAS, OTHER
from pipeline.stages.works.by_title import entry_title_keys, resolve_by_title
from pipeline.stages.works.identity import ENTRY, WorkLookup, alias_nodes
from pipeline.stages.works.partials import PARSED_COUNT, WorkPartials, compact

RESOLVED_BY_ID = "identifier"
RESOLVED_BY_TITLE = "title"
_RANGE = "_paper_range"  # internal column (never written)
_EMPTY_KEYS = pl.DataFrame(schema={S.WORK_ID: pl.String, T.KEY: pl.String, PARSED_COUNT: pl.Int64})
CITES_PARTS = "cites"  # scratch folder of the cites rows, by paper-id range and file


@dataclass(frozen=True)
class Scratch:
    """The passes' per-file tables, in the stage's scratch folder (``ctx.scratch()``, which
    the runner removes)."""

    folder: Path

    @staticmethod
    def write(df: pl.DataFrame, path: Path) -> None:
        """Write a scratch table. LZ4, not the outputs' zstd: each is read back once or
        twice and deleted, and zstd cost twice as much CPU to write (measured on the
        300k bench's entry keys: 0.25 s -> 0.19 s, and 0.07 s -> 0.04 s to read)."""
        df.write_parquet(path, compression="lz4")

    def part(self, name: str, i: int) -> Path:
        """Where table ``name`` of reference file ``i`` goes."""
        (self.folder / name).mkdir(exist_ok=True)
        return self.folder / name / f"{i:06d}.parquet"

    def cites_part(self, paper_range: int, i: int) -> Path:
        """Where the ``cites`` rows of paper-id range ``paper_range`` from file ``i`` go."""
        (self.folder / CITES_PARTS).mkdir(exist_ok=True)
        return self.folder / CITES_PARTS / f"{paper_range:04d}-{i:06d}.parquet"

    def cites_parts(self, paper_range: int) -> list[Path]:
        """Every file's ``cites`` rows of paper-id range ``paper_range``, in file order."""
        return sorted((self.folder / CITES_PARTS).glob(f"{paper_range:04d}-*.parquet"))


def alias_pass(
    ref_files: list[pl.LazyFrame], paper_aliases: pl.DataFrame, scratch: Scratch, merge_every: int
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Pass 1, per file: every identifier of every entry (to scratch ``entry_aliases``), and
    the links between them. The files' distinct aliases and links are made distinct across
    files every ``merge_every`` files: held per file to the end, they were 7.7 GB at 2.3M
    papers, for 11.4M distinct aliases.

    Returns:
        The links (:data:`pipeline.core.schema.LINKS`, sorted), with the corpus papers'
        own, and every alias numbered (:func:`~pipeline.stages.works.identity.alias_nodes`).
    """
    link_parts = [A.paper_links(paper_aliases.lazy()).collect(engine="streaming")]
    alias_parts = [paper_aliases.select(ALIAS).unique()]
    for i, refs in enumerate(
        steps(ref_files, "works: pass 1/3 (aliases), reference files", unit="file")
    ):
        aliases_i = A.entry_aliases(refs, (ENTRY,)).collect(engine="streaming")
        scratch.write(aliases_i, scratch.part("entry_aliases", i))
        link_parts.append(A.entry_links(aliases_i.lazy(), (ENTRY,)).collect(engine="streaming"))
        alias_parts.append(aliases_i.select(ALIAS).unique())
        del aliases_i
        if (i + 1) % merge_every == 0:
            link_parts = [compact(pl.concat(link_parts).unique())]
            alias_parts = [compact(pl.concat(alias_parts).unique())]
    links = pl.concat(link_parts).unique().sort(ALIAS, OTHER)
    del link_parts
    nodes = alias_nodes(alias_parts)
    return links, nodes


def identifier_pass(
    ref_files: list[pl.LazyFrame], lookup: WorkLookup, scratch: Scratch, memo_strings: int
) -> pl.DataFrame:
    """Pass 2, per file: each entry's work by identifier (scratch ``entry_work``:
    :meth:`~pipeline.stages.works.identity.WorkLookup.entry_works`) and the title keys of
    its raw string (scratch ``entry_keys``; each distinct raw string's computed once over
    the files while at most ``memo_strings`` are held:
    :class:`~pipeline.rules.titles.SegmentKeyMemo`).

    Returns:
        ``(work_id, title_key, _parsed_count)``: the title key of every entry resolved by
        identifier, with the number of those entries that give it
        (:func:`~pipeline.stages.works.by_title.entry_title_keys`).
    """
    known_parts = []
    memo = T.SegmentKeyMemo(memo_strings)
    for i, refs in enumerate(
        steps(ref_files, "works: pass 2/3 (by identifier), reference files", unit="file")
    ):
        entry_work = lookup.entry_works(pl.scan_parquet(scratch.part("entry_aliases", i)))
        scratch.write(entry_work, scratch.part("entry_work", i))
        keys = memo.keys(
            refs.select(ENTRY, S.RAW).drop_nulls(S.RAW).collect(engine="streaming"),
            S.RAW,
            [ENTRY],
        )
        scratch.write(keys, scratch.part("entry_keys", i))
        # to scratch: kept in memory, each part's key strings (views into the file's whole
        # segment-key table) held every file's keys alive (12 GB at the end of this pass at
        # 2.3M papers)
        scratch.write(
            entry_title_keys(keys.lazy(), entry_work.lazy()).collect(engine="streaming"),
            scratch.part("known_keys", i),
        )
        known_parts.append(scratch.part("known_keys", i))
        scratch.part("entry_aliases", i).unlink()
        del entry_work, keys
    del memo
    return (
        pl.concat(
            [_EMPTY_KEYS.lazy(), *(pl.scan_parquet(p) for p in known_parts)], how="vertical_relaxed"
        )
        .group_by(S.WORK_ID, T.KEY)
        .agg(pl.col(PARSED_COUNT).sum())
        .collect(engine="streaming")
    )


def paper_ranges(papers: pl.LazyFrame, n_files: int) -> tuple[int, pl.Expr]:
    """How many paper-id ranges ``cites`` is sorted in (one per file, at most 64), and the
    expression giving a paper id's range: how many range bounds are <= it (a binary search
    in the sorted bounds, not one comparison per bound: 63 string comparisons an entry at
    64 ranges)."""
    paper_ids = papers.select(S.PAPER_ID).sort(S.PAPER_ID).collect(engine="streaming")[S.PAPER_ID]
    n_ranges = max(1, min(64, n_files))
    bounds = pl.Series(
        [paper_ids[(len(paper_ids) * k) // n_ranges] for k in range(1, n_ranges)], dtype=pl.String
    )
    return n_ranges, pl.lit(bounds).search_sorted(pl.col(S.PAPER_ID), side="right")


def title_pass(
    ref_files: list[pl.LazyFrame],
    titles: pl.DataFrame,
    range_of: pl.Expr,
    scratch: Scratch,
    merge_every: int,
) -> tuple[list[pl.DataFrame], WorkPartials]:
    """Pass 3, per file: resolution by title of the entries pass 2 left, every entry's
    ``cites`` row (to scratch, by paper-id range ``range_of``), and the per-work partials.

    Args:
        titles: :func:`~pipeline.stages.works.by_title.title_map`.
        merge_every: files whose partials are held before they are combined.

    Returns:
        ``(work_id, title_key)`` parts: the title keys of the entries resolved by title;
        and the partials of every file (their parsed-title counts: those of the entries
        resolved by title; :meth:`WorkPartials.combined` adds pass 2's).
    """
    more_key_parts = []
    partials = WorkPartials(merge_every)
    for i, refs in enumerate(
        steps(ref_files, "works: pass 3/3 (by title), reference files", unit="file")
    ):
        entry_work = pl.scan_parquet(scratch.part("entry_work", i))
        entry_keys = pl.scan_parquet(scratch.part("entry_keys", i))
        hits = resolve_by_title(entry_keys, entry_work, titles.lazy()).collect(engine="streaming")
        more_keys = entry_title_keys(entry_keys, hits.lazy()).collect(engine="streaming")
        more_key_parts.append(compact(more_keys.select(S.WORK_ID, T.KEY)))
        # read once for the cites rows and the partials' raw strings
        refs_i = refs.select(ENTRY, S.PAPER_ID, S.REF_ID, S.RAW).collect(engine="streaming")
        cites_i = (
            refs_i.lazy()
            .select(ENTRY, S.PAPER_ID, S.REF_ID)
            .join(
                pl.concat(
                    [
                        entry_work.with_columns(pl.lit(RESOLVED_BY_ID).alias(S.RESOLVED_BY)),
                        hits.lazy().with_columns(pl.lit(RESOLVED_BY_TITLE).alias(S.RESOLVED_BY)),
                    ]
                ),
                on=ENTRY,
                how="left",
            )
            .with_columns(range_of.alias(_RANGE))
            .collect(engine="streaming")
        )
        for (r,), rows in cites_i.partition_by(_RANGE, as_dict=True).items():
            scratch.write(rows.drop(_RANGE, ENTRY), scratch.cites_part(r, i))
        cited_i = cites_i.lazy().drop_nulls(S.WORK_ID).select(ENTRY, S.PAPER_ID, S.WORK_ID)
        partials.add(refs_i.lazy(), cited_i, more_keys)
        del hits, cites_i, more_keys, refs_i
    return more_key_parts, partials
