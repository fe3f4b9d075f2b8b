"""The ``works`` stage: reads the extract tables, runs the passes over the reference files
(:mod:`~pipeline.stages.works.passes`) around the alias graph
(:mod:`~pipeline.stages.works.identity`), and writes its four tables.

Outputs: ``works.parquet`` (schema ``WORKS``, one row per work cited by at least
one kept paper, sorted by ``work_id``) and ``cites.parquet`` (schema ``CITES``, one
row per bib entry of every kept paper, sorted by ``paper_id, ref_id``), with ``links``
(the alias graph's edges) and ``title_keys`` (every title key known for a work, for the
negatives' title rule). A work whose
component holds a corpus paper's ``arxiv:<paper_id>`` carries that paper's id, title,
abstract, categories and first version date; any other work carries an example
``raw`` bib string (the longest; the smallest of those on ties; kept for the judgment
side only) and a ``parsed_title``: of the title keys (:mod:`pipeline.rules.titles`) of the
entries citing it, the most common (the smallest on ties), null when no entry's string
gives a title. That is the text the release shows for it: lower-cased, punctuation
collapsed, with no numbering, quotes, casing, authors, venue, URL or export tail of any
citing paper's style, the same whether the survey or another paper cited it.
``known_date`` and ``date_source``: :mod:`~pipeline.stages.works.dates`.
"""

from __future__ import annotations

import shutil
from typing import Any

import polars as pl

from pipeline.core import schema as S
from pipeline.engine.context import ReduceContext
from pipeline.engine.stage import Stage
from pipeline.rules import aliases as A
from pipeline.rules import titles as T
from pipeline.rules.aliases import ALIAS, ARXIV_PREFIX
from pipeline.rules.tables import duplicate_papers, scan_extract, scan_extract_files
from pipeline.stages.works.by_title import title_map
from pipeline.stages.works.dates import (
    DATE_FROM_ARXIV_ID,
    DATE_FROM_CORPUS,
    DATE_FROM_REFERENCE_YEAR,
    arxiv_month_expr,
)
from pipeline.stages.works.identity import (
    ENTRY,
    WorkLookup,
    alias_works,
    connected_components,
    junk_aliases,
    work_edges,
)
from pipeline.stages.works.partials import RAW_BYTES, REF_YEAR
from pipeline.stages.works.passes import (
    CITES_PARTS,
    RESOLVED_BY_ID,
    RESOLVED_BY_TITLE,
    Scratch,
    alias_pass,
    identifier_pass,
    paper_ranges,
    title_pass,
)

CS_PREFIX = "cs."  # resolution rates are reported for CS papers and the others
_EMPTY_CITES = pl.DataFrame(
    schema={S.PAPER_ID: pl.String, S.REF_ID: pl.String, S.WORK_ID: pl.String,
            S.RESOLVED_BY: pl.String}
)  # fmt: skip


def build_works(ctx: ReduceContext) -> dict[str, Any]:
    """Resolve every bib entry to a canonical work; write ``works``, ``cites``, ``title_keys``
    and ``links``.

    Held in memory: the alias graph (aliases, links, labels), the title map, and
    per-work partials (counts, an example raw string). Per-entry work (aliases, title
    keys, resolution) runs one extract file at a time, into scratch files next to the
    outputs (``ctx.scratch()``, which the runner removes); ``cites`` is sorted in paper-id
    ranges. None of the outputs depends on the files' sizes or on the number of ranges.
    """
    scratch = Scratch(ctx.scratch())
    wcfg = ctx.cfg.works
    # extract already normalises DOIs; lower-casing again keeps aliases right for any input
    doi = pl.col(S.DOI).str.to_lowercase()
    extract = ctx.files_by_table("extract")
    ref_files = [
        lf.select(ENTRY, S.PAPER_ID, S.REF_ID, S.ARXIV_ID, doi, S.OPENALEX_ID, S.RAW)
        for lf in scan_extract_files(extract, "references", row_index=ENTRY)
    ]
    papers = scan_extract(extract, "papers")
    paper_aliases = A.paper_aliases(papers.select(S.PAPER_ID, doi)).collect(engine="streaming")

    links, nodes = alias_pass(ref_files, paper_aliases, scratch, ctx.limits.works_merge_every)
    ctx.write("links", links)
    junk = junk_aliases(links.lazy(), wcfg.max_alias_partners).collect(engine="streaming")
    edges = work_edges(links, nodes, junk)
    n_links = edges.height
    del links
    components = connected_components(edges)
    del edges
    alias_work = alias_works(nodes, components, junk)
    n_aliases = nodes.height
    lookup = WorkLookup(alias_work, nodes)
    del nodes, components
    corpus = corpus_works(paper_aliases, alias_work, papers)

    known = identifier_pass(ref_files, lookup, scratch, ctx.limits.works_title_memo_strings)
    del lookup
    titles = title_map(corpus, known.lazy().select(S.WORK_ID, T.KEY))
    title_key_parts = [
        T.corpus_title_keys(corpus).collect(engine="streaming"),
        known.select(S.WORK_ID, T.KEY),
    ]

    n_ranges, range_of = paper_ranges(papers, len(ref_files))
    more_key_parts, partials = title_pass(
        ref_files, titles, range_of, scratch, ctx.limits.works_merge_every
    )
    del titles
    n_citing, example_raw, parsed_title = partials.combined(known)
    del partials, known  # known's keys held by title_key_parts until title_keys is written

    title_keys = pl.concat([*title_key_parts, *more_key_parts]).unique().sort(S.WORK_ID, T.KEY)
    del title_key_parts, more_key_parts
    ctx.write("title_keys", title_keys)
    n_title_keys = title_keys.height
    del title_keys
    entries, rates = write_cites(ctx, scratch, papers, n_ranges)
    write_works_table(ctx, alias_work, corpus, papers, n_citing, example_raw, parsed_title)
    del n_citing, example_raw, parsed_title

    largest = (
        alias_work.group_by(S.WORK_ID)
        .len()
        .sort("len", S.WORK_ID, descending=[True, False])
        .head(1)
    )
    return {
        "papers": int(papers.select(pl.len()).collect().item()),
        "duplicate_papers_dropped": duplicate_papers(ctx.read("extract", "papers")),
        **resolution_counts(entries, rates, n_title_keys),
        "aliases": n_aliases,
        "links": n_links,
        "junk_aliases": junk.height,
        **works_counts(ctx),
        "largest_component": int(largest["len"].item()) if largest.height else 0,
        "largest_component_work_id": largest[S.WORK_ID].item() if largest.height else None,
    }


def corpus_works(
    paper_aliases: pl.DataFrame, alias_work: pl.DataFrame, papers: pl.LazyFrame
) -> pl.LazyFrame:
    """``(work_id, paper_id, title, abstract, categories, first_version_date)`` of the works
    that are corpus papers: whose component holds a paper's ``arxiv:<paper_id>`` (the
    smallest such paper id)."""
    return (
        paper_aliases.lazy()
        .join(alias_work.lazy(), on=ALIAS)
        .filter(pl.col(ALIAS) == pl.lit(ARXIV_PREFIX) + pl.col(S.PAPER_ID))
        .group_by(S.WORK_ID)
        .agg(pl.col(S.PAPER_ID).min())
        .join(
            papers.select(S.PAPER_ID, S.TITLE, S.ABSTRACT, S.CATEGORIES, S.FIRST_VERSION_DATE),
            on=S.PAPER_ID,
        )
    )


def write_cites(
    ctx: ReduceContext, scratch: Scratch, papers: pl.LazyFrame, n_ranges: int
) -> tuple[dict[str, Any], pl.DataFrame]:
    """Write ``cites`` from pass 3's rows, one paper-id range at a time, sorted.

    Returns:
        The entry counts (:func:`_entry_counts`) and the resolution rates of CS papers and
        the others (:func:`_rate_counts`), of every paper's counts
        (:func:`_paper_counts`).
    """
    writer = ctx.writer("cites")
    cs = papers.select(
        S.PAPER_ID,
        pl.col(S.PRIMARY_CATEGORY).str.starts_with(CS_PREFIX).alias("_cs"),
    ).collect(engine="streaming")
    # a paper's rows are all in one range, so per-paper counts over ranges are exact
    paper_counts = [_paper_counts(_EMPTY_CITES)]
    for r in range(n_ranges):
        parts = scratch.cites_parts(r)
        if parts:
            rows = pl.scan_parquet(parts).sort(S.PAPER_ID, S.REF_ID).collect(engine="streaming")
            writer.write(rows)
            paper_counts.append(_paper_counts(rows))
            del rows
    writer.close()
    shutil.rmtree(scratch.folder / CITES_PARTS, ignore_errors=True)
    papers_counted = pl.concat(paper_counts)
    return _entry_counts(papers_counted), _rate_counts(papers_counted, cs)


def write_works_table(
    ctx: ReduceContext,
    alias_work: pl.DataFrame,
    corpus: pl.LazyFrame,
    papers: pl.LazyFrame,
    n_citing: pl.DataFrame,
    example_raw: pl.DataFrame,
    parsed_title: pl.DataFrame,
) -> None:
    """Write ``works``: one row per cited work, with its aliases, its corpus paper's text
    or its example raw string and parsed title, and its known date.

    Written in work-id ranges of ``ctx.limits.works_table_batch_rows`` works, each sorted
    and joined to its own papers' texts: the whole table sorted, then joined to every
    paper's title and abstract, peaked at 9.9 GB at 2.3M papers (4.9 GB over the tables
    it reads). Each range scans the papers' texts again (about 3 s at 2.3M papers), so
    ranges are large.
    """
    bounds = _range_bounds(n_citing.get_column(S.WORK_ID), ctx.limits.works_table_batch_rows)
    batch = pl.lit(bounds).search_sorted(pl.col(S.WORK_ID), side="right").alias(_BATCH)
    corpus_rows = corpus.select(S.WORK_ID, S.PAPER_ID, S.FIRST_VERSION_DATE).collect(
        engine="streaming"
    )
    # each table's ranges found once (a binary search among the bounds per row), then
    # cut by an integer per range
    tables = [
        df.with_columns(batch)
        for df in (n_citing, alias_work, corpus_rows, example_raw, parsed_title)
    ]
    texts = papers.select(S.PAPER_ID, S.TITLE, S.ABSTRACT, S.CATEGORIES)
    writer = ctx.writer("works")
    for i in range(len(bounds) + 1):
        citing_b, aliases_b, corpus_batch, raw_b, parsed_b = (
            df.filter(pl.col(_BATCH) == i).drop(_BATCH) for df in tables
        )
        rows = (
            _works_rows(citing_b, aliases_b, corpus_batch, raw_b, parsed_b)
            # the wide columns after the sort, in its order: sorting them would copy every
            # abstract
            .join(
                texts.join(corpus_batch.lazy(), on=S.PAPER_ID, how="semi"),
                on=S.PAPER_ID,
                how="left",
                maintain_order="left",
            )
            .collect(engine="streaming")
        )
        writer.write(rows)
        del rows
    writer.close()


_BATCH = "_batch"  # internal column (never written)


def _range_bounds(work_ids: pl.Series, batch_rows: int) -> pl.Series:
    """The sorted work ids that start a range of ``batch_rows`` works (after the first)."""
    ids = work_ids.sort()
    return pl.Series([ids[k] for k in range(batch_rows, len(ids), batch_rows)], dtype=pl.String)


def _works_rows(
    n_citing: pl.DataFrame,
    alias_work: pl.DataFrame,
    corpus_rows: pl.DataFrame,
    example_raw: pl.DataFrame,
    parsed_title: pl.DataFrame,
) -> pl.LazyFrame:
    """The works of one range, sorted, with every column but their papers' texts."""
    arxiv_month = arxiv_month_expr(pl.col(S.WORK_ID))
    return (
        n_citing.lazy()
        .join(
            alias_work.lazy().group_by(S.WORK_ID).agg(pl.col(ALIAS).sort().alias(S.ALIASES)),
            on=S.WORK_ID,
            how="left",
        )
        .join(corpus_rows.lazy(), on=S.WORK_ID, how="left")
        .join(example_raw.lazy().drop(RAW_BYTES), on=S.WORK_ID, how="left")
        .join(parsed_title.lazy(), on=S.WORK_ID, how="left")
        .with_columns(
            pl.when(pl.col(S.PAPER_ID).is_null()).then(pl.col(S.RAW)).alias(S.RAW),
            pl.when(pl.col(S.PAPER_ID).is_null())
            .then(pl.col(S.PARSED_TITLE))
            .alias(S.PARSED_TITLE),
            pl.coalesce(
                pl.col(S.FIRST_VERSION_DATE), arxiv_month, pl.date(pl.col(REF_YEAR), 1, 1)
            ).alias(S.KNOWN_DATE),
            pl.when(pl.col(S.FIRST_VERSION_DATE).is_not_null())
            .then(pl.lit(DATE_FROM_CORPUS))
            .when(arxiv_month.is_not_null())
            .then(pl.lit(DATE_FROM_ARXIV_ID))
            .when(pl.col(REF_YEAR).is_not_null())
            .then(pl.lit(DATE_FROM_REFERENCE_YEAR))
            .alias(S.DATE_SOURCE),
        )
        .sort(S.WORK_ID)
    )


def resolution_counts(
    entries: dict[str, Any], rates: pl.DataFrame, n_title_keys: int
) -> dict[str, Any]:
    """The counts of bib entries: resolved or not, by identifier or by title, of CS papers
    and the others (:func:`write_cites`'s)."""
    n_entries, unresolved = int(entries["entries"] or 0), int(entries["unresolved"] or 0)

    def resolution(rows: pl.DataFrame) -> dict[str, Any]:
        n, ids, titles = (int(rows[c].sum()) for c in ("entries", "by_identifier", "by_title"))
        return {
            "bib_entries": n,
            "resolved_by_identifier": ids,
            "resolved_by_title": titles,
            "resolved_frac_identifier_only": round(ids / n, 6) if n else None,
            "resolved_frac": round((ids + titles) / n, 6) if n else None,
        }

    return {
        "bib_entries": n_entries,
        "resolved_entries": n_entries - unresolved,
        "unresolved_entries": unresolved,
        "resolution": {
            "all": resolution(rates),
            "cs": resolution(rates.filter(pl.col("_cs"))),
            "other": resolution(rates.filter(~pl.col("_cs"))),
            "title_keys": n_title_keys,
        },
        "papers_with_unresolved_entries": int(entries["papers_with_unresolved"] or 0),
        "entries_merged_within_paper": int(entries["merged"] or 0),
    }


def works_counts(ctx: ReduceContext) -> dict[str, int]:
    """The counts of the written ``works`` table: works, in the corpus, outside it with a
    parsed title, merged from several aliases."""
    works = (
        S.scan(ctx.table_path("works"), S.WORKS)
        .select(
            pl.len().alias("works"),
            pl.col(S.PAPER_ID).is_not_null().sum().alias("in_corpus"),
            (pl.col(S.PAPER_ID).is_null() & pl.col(S.PARSED_TITLE).is_not_null())
            .sum()
            .alias("parsed"),
            (pl.col(S.ALIASES).list.len() > 1).sum().alias("merged_groups"),
        )
        .collect()
        .row(0, named=True)
    )
    return {
        "works": int(works["works"]),
        "works_in_corpus": int(works["in_corpus"]),
        # works outside the corpus whose bib strings gave a title (the rest show no text)
        "works_outside_corpus_with_parsed_title": int(works["parsed"]),
        "merged_groups": int(works["merged_groups"]),
    }


def _paper_counts(cites: pl.DataFrame) -> pl.DataFrame:
    """Per paper of ``cites`` rows: entries, unresolved entries, entries merged within the
    paper (resolved to a work another entry of it resolves to), entries resolved by
    identifier and by title. One group-by for :func:`_entry_counts` and
    :func:`_rate_counts`, which read its rows (a few per paper, not one per entry)."""
    return (
        cites.lazy()
        .group_by(S.PAPER_ID)
        .agg(
            pl.len().cast(pl.Int64).alias("entries"),
            pl.col(S.WORK_ID).is_null().sum().cast(pl.Int64).alias("unresolved"),
            (pl.col(S.WORK_ID).is_not_null().sum() - pl.col(S.WORK_ID).drop_nulls().n_unique())
            .cast(pl.Int64)
            .alias("merged"),
            (pl.col(S.RESOLVED_BY) == RESOLVED_BY_ID).sum().cast(pl.Int64).alias("by_identifier"),
            (pl.col(S.RESOLVED_BY) == RESOLVED_BY_TITLE).sum().cast(pl.Int64).alias("by_title"),
        )
        .collect()
    )


def _entry_counts(papers: pl.DataFrame) -> dict[str, Any]:
    """Entries, unresolved entries, papers with one, entries merged within a paper, of
    :func:`_paper_counts`' rows."""
    return papers.select(
        pl.col("entries").sum(),
        pl.col("unresolved").sum(),
        (pl.col("unresolved") > 0).sum().cast(pl.Int64).alias("papers_with_unresolved"),
        pl.col("merged").sum(),
    ).row(0, named=True)


def _rate_counts(papers: pl.DataFrame, cs: pl.DataFrame) -> pl.DataFrame:
    """Entries, and those resolved by identifier and by title, of CS papers and the others
    (:func:`_paper_counts`' rows)."""
    return (
        papers.lazy()
        .join(cs.lazy(), on=S.PAPER_ID, how="left")
        .group_by(pl.col("_cs").fill_null(False))
        .agg(pl.col("entries", "by_identifier", "by_title").sum())
        .collect()
    )


STAGE = Stage(
    name="works",
    kind="reduce",
    reads=("extract",),
    config_sections=("works",),
    fn=build_works,
    outputs=(
        ("links", S.LINKS),
        ("title_keys", S.TITLE_KEYS),
        ("cites", S.CITES),
        ("works", S.WORKS),
    ),
    help="canonical cited works (arXiv id / DOI / OpenAlex union-find) and every bib entry resolved",
)
