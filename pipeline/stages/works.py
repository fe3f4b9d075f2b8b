"""Stage ``works`` (reduce): one canonical id per cited work, every bib entry resolved.

Identity. Every identifier is written as an *alias* string: ``arxiv:2104.06921``,
``doi:10.1090/tran/8674``, ``openalex:W4283717483``. Two aliases are linked when
they occur in one bib entry (its arXiv id, DOI and OpenAlex id; a DataCite arXiv
DOI ``10.48550/arxiv.<id>`` also yields its arXiv id) or in one corpus paper (its
``paper_id`` and its metadata DOI). A cited work is a connected component of that
graph, found by min-label propagation in Polars (:func:`connected_components`).

Canonical key. Aliases are numbered in sorted string order, and ``arxiv:`` <
``doi:`` < ``openalex:`` sort in the order of preference, so the smallest alias of
a component -- the label propagation converges to -- is its smallest arXiv id if it
has one, else its smallest DOI, else its smallest OpenAlex id. That alias is the
``work_id``.

Junk guard. What glues unrelated works together is an identifier shared by several
of them: a proceedings-volume DOI given to every paper of a volume, an OpenAlex id
matched to the wrong records, a wrong id copied into many entries. Works are told
apart by their strongest identifier: distinct arXiv ids are distinct works, and
among works without an arXiv id, distinct DOIs (then distinct OpenAlex ids) are.
So a DOI or OpenAlex id is *junk* when it is linked to more than
``works.max_alias_partners`` distinct arXiv ids, or to more than that many distinct
DOIs (or OpenAlex ids) that are themselves linked to no arXiv id (when no arXiv id
is involved, those are the works' keys). A junk identifier's links are dropped: it
stays a work of its own, reached only by entries that carry nothing else. An arXiv
id is never junk: a popular arXiv paper is cited under several DOIs (journal,
conference, DataCite) and OpenAlex ids (preprint and published records), and all of
them must stay linked to it, or the entries citing it by DOI would resolve to a
separate work (and make it a "hard negative" of a survey that cites it). The
partners of a DOI or OpenAlex id that are linked to an arXiv id are not counted as
DOIs/OpenAlex ids: they are that arXiv work's other names. The largest component is
reported in the counts.

Resolution. A bib entry resolves to the component of its non-junk aliases (they
are all linked to each other, so there is one), else of its junk alias. An entry
with no identifier is unresolved (``work_id`` null in ``cites``); it is counted per
paper and is never a candidate. Several entries of one paper may resolve to the
same work; ``labels`` sums their mentions.

Outputs: ``works.parquet`` (schema ``WORKS``, one row per work cited by at least
one kept paper, sorted by ``work_id``) and ``cites.parquet`` (schema ``CITES``, one
row per bib entry of every kept paper, sorted by ``paper_id, ref_id``). A work whose
component holds a corpus paper's ``arxiv:<paper_id>`` carries that paper's id, title,
abstract, categories and first version date; any other work carries an example
``raw`` bib string (the longest; the smallest of those on ties; kept for the judgment
side only) and a ``parsed_title``: of the title keys (:mod:`pipeline.rules.titles`) of the
entries citing it, the most common (the smallest on ties), null when no entry's string
gives a title. That is the text the release shows for it: lower-cased, punctuation
collapsed, with no numbering, quotes, casing, authors, venue, URL or export tail of any
citing paper's style, the same whether the survey or another paper cited it.
``known_date`` is
the paper's first version date, else the month of the work's arXiv id, else January 1
of the earliest year its raw references give (the last 19xx/20xx word of each raw
string), else null; ``date_source`` says which (``corpus``, ``arxiv_id``,
``reference_year``). Without the reference year, an undated work could be a hard
negative only when something cited it before the survey, so "undated and never cited
before" would have meant "positive".
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import polars as pl

from pipeline.core import schema as S
from pipeline.core.errors import StageError
from pipeline.core.progress import steps
from pipeline.engine.context import ReduceContext
from pipeline.engine.stage import Stage
from pipeline.rules import aliases as A
from pipeline.rules import titles as T
from pipeline.rules.aliases import ALIAS, ARXIV_PREFIX, OTHER
from pipeline.rules.tables import (
    duplicate_papers,
    scan_extract,
    scan_extract_files,
)

# internal columns (never written)
NODE = "node"
COMPONENT = "component"
JUNK = "junk"
KIND = "kind"
_FROM_CORPUS = "_from_corpus"
_REF_YEAR = "_reference_year"
_RAW_BYTES = "_raw_bytes"
PARSED_COUNT = "_parsed_count"
_RANGE = "_paper_range"
_EMPTY_KEYS = pl.DataFrame(schema={S.WORK_ID: pl.String, T.KEY: pl.String})
_EMPTY_CITES = pl.DataFrame(
    schema={S.PAPER_ID: pl.String, S.REF_ID: pl.String, S.WORK_ID: pl.String,
            S.RESOLVED_BY: pl.String}
)  # fmt: skip
# A year in a raw reference: the last 19xx/20xx word of the string (the publication year
# in every style of the real sample; arXiv ids such as 2104.06921 do not match).
REFERENCE_YEAR = r"\b(19[5-9]\d|20[0-4]\d)\b"
DATE_FROM_CORPUS, DATE_FROM_ARXIV_ID, DATE_FROM_REFERENCE_YEAR = (
    "corpus",
    "arxiv_id",
    "reference_year",
)
CS_PREFIX = "cs."  # resolution rates are reported for CS papers and the others
RESOLVED_BY_ID = "identifier"
RESOLVED_BY_TITLE = "title"


def junk_aliases(links: pl.LazyFrame, max_partners: int) -> pl.LazyFrame:
    """``(alias,)`` of the DOIs and OpenAlex ids that glue unrelated works (module docstring).

    A non-arXiv alias is junk when it is linked to more than ``max_partners`` distinct
    arXiv ids, or to more than ``max_partners`` distinct DOIs (or OpenAlex ids) that
    have no arXiv id among their own partners. arXiv ids are never junk.
    """
    both = pl.concat([links, links.select(pl.col(OTHER).alias(ALIAS), pl.col(ALIAS).alias(OTHER))])
    is_arxiv = pl.col(OTHER).str.starts_with(ARXIV_PREFIX)
    with_arxiv = (  # aliases with at least one arXiv partner: named by that arXiv work
        both.filter(is_arxiv).select(pl.col(ALIAS).alias(OTHER)).unique()
    )
    counted = pl.concat(
        [
            both.filter(is_arxiv),
            both.filter(~is_arxiv).join(with_arxiv, on=OTHER, how="anti"),
        ]
    )
    return (
        counted.filter(~pl.col(ALIAS).str.starts_with(ARXIV_PREFIX))
        .with_columns(A.id_kind(pl.col(OTHER)).alias(KIND))
        .group_by(ALIAS, KIND)
        .agg(pl.col(OTHER).n_unique().alias("n"))
        .filter(pl.col("n") > max_partners)
        .select(ALIAS)
        .unique()
    )


# --------------------------------------------------------------------- components
def connected_components(edges: pl.DataFrame, max_iterations: int) -> tuple[pl.DataFrame, int]:
    """Connected components of an undirected graph by min-label propagation.

    Each round, every node takes the smallest label among itself and its neighbours,
    then jumps to its label's label (pointer jumping, which shortens long chains to
    a logarithmic number of rounds). It stops when no label changes.

    Args:
        edges: columns ``node`` and ``other_alias`` (both integer node ids), one row per
            undirected edge.
        max_iterations: rounds after which it gives up.

    Returns:
        ``(node, component)`` for every node that has an edge (component = smallest node
        id in its component), and the number of rounds run.

    Raises:
        RuntimeError: no convergence after ``max_iterations`` rounds.
    """
    u, v = NODE, OTHER
    both = pl.concat([edges.select(u, v), edges.select(pl.col(v).alias(u), pl.col(u).alias(v))])
    labels = both.select(pl.col(u).unique()).with_columns(pl.col(u).alias(COMPONENT))
    for rounds in range(1, max_iterations + 1):
        best = (
            both.join(labels, left_on=v, right_on=u, how="inner")
            .group_by(u)
            .agg(pl.col(COMPONENT).min().alias("best"))
        )
        step = labels.join(best, on=u, how="left").select(
            u, pl.min_horizontal(COMPONENT, "best").alias(COMPONENT)
        )
        jumped = step.join(
            step.rename({u: COMPONENT, COMPONENT: "hop"}), on=COMPONENT, how="left"
        ).select(u, pl.col("hop").alias(COMPONENT))
        changed = (
            labels.join(jumped, on=u, suffix="_new")
            .filter(pl.col(COMPONENT) != pl.col(f"{COMPONENT}_new"))
            .height
        )
        labels = jumped
        if changed == 0:
            return labels.sort(u), rounds
    raise StageError(
        f"works: connected components did not converge in {max_iterations} rounds "
        f"({labels.height} linked nodes); raise works.max_label_iterations"
    )


# --------------------------------------------------------------------- dates
def arxiv_month_expr(alias: pl.Expr) -> pl.Expr:
    """First day of the month encoded in an ``arxiv:`` alias, else null.

    ``arxiv:2104.06921`` -> 2021-04-01; ``arxiv:hep-th/9901001`` -> 1999-01-01 (two-digit
    years from 91 are 19xx: arXiv began in August 1991).
    """
    new = alias.str.extract_groups(r"^arxiv:(?P<yy>\d{2})(?P<mm>\d{2})\.\d{4,5}$")
    old = alias.str.extract_groups(r"^arxiv:[a-z-]+/(?P<yy>\d{2})(?P<mm>\d{2})\d{3}$")
    yy = pl.coalesce(new.struct.field("yy"), old.struct.field("yy")).cast(pl.Int32)
    mm = pl.coalesce(new.struct.field("mm"), old.struct.field("mm")).cast(pl.Int32)
    is_old = old.struct.field("yy").is_not_null()
    year = pl.when(is_old & (yy >= 91)).then(1900 + yy).otherwise(2000 + yy)
    return pl.when(mm.is_between(1, 12)).then(pl.date(year, mm, 1)).otherwise(None)


# --------------------------------------------------------------------- titles
def known_title_keys(entry_keys: pl.LazyFrame, entry_work: pl.LazyFrame) -> pl.LazyFrame:
    """``(work_id, title_key)``: the title key of every entry resolved by identifier."""
    return (
        entry_keys.filter(pl.col(T.SEGMENT_RANK) == 0)
        .join(entry_work, on=[S.PAPER_ID, S.REF_ID], how="inner")
        .select(S.WORK_ID, T.KEY)
        .unique()
    )


def title_map(corpus: pl.LazyFrame, known: pl.LazyFrame) -> pl.DataFrame:
    """``(title_key, work_id, _from_corpus)`` of the keys that name exactly one work.

    Args:
        corpus: ``(work_id, title, ...)`` of the works that are corpus papers.
        known: :func:`known_title_keys` of every entry.
    """
    return (  # a key naming two works links nothing
        pl.concat(
            [
                T.corpus_title_keys(corpus).with_columns(pl.lit(True).alias(_FROM_CORPUS)),
                known.with_columns(pl.lit(False).alias(_FROM_CORPUS)),
            ]
        )
        .unique()
        .group_by(T.KEY)
        .agg(
            pl.col(S.WORK_ID).first(),
            pl.col(S.WORK_ID).n_unique().alias("_n"),
            pl.col(_FROM_CORPUS).any(),
        )
        .filter(pl.col("_n") == 1)
        .drop("_n")
        .collect(engine="streaming")
    )


def resolve_by_title(
    entry_keys: pl.LazyFrame, entry_work: pl.LazyFrame, titles: pl.LazyFrame
) -> tuple[pl.LazyFrame, pl.LazyFrame]:
    """Resolve entries without identifier by title (:mod:`pipeline.rules.titles`).

    Args:
        entry_keys: :func:`pipeline.rules.titles.segment_keys` of bib entries.
        entry_work: ``(paper_id, ref_id, work_id)`` of those entries resolved by identifier.
        titles: :func:`title_map`.

    Returns:
        ``(paper_id, ref_id, work_id)`` of the entries resolved by title, and
        ``(work_id, title_key)``: their title keys (with :func:`known_title_keys` and the
        corpus titles, every title key known for a work, for the negatives' title rule).
    """
    hits = (
        entry_keys.join(entry_work, on=[S.PAPER_ID, S.REF_ID], how="anti")
        .join(titles, on=T.KEY, how="inner")
        # any segment may equal a corpus title; only the title key links to other entries
        .filter(pl.col(_FROM_CORPUS) | (pl.col(T.SEGMENT_RANK) == 0))
        .group_by(S.PAPER_ID, S.REF_ID)
        .agg(pl.col(S.WORK_ID).first(), pl.col(S.WORK_ID).n_unique().alias("_n"))
        .filter(pl.col("_n") == 1)
        .select(S.PAPER_ID, S.REF_ID, S.WORK_ID)
    )
    more_keys = (
        entry_keys.filter(pl.col(T.SEGMENT_RANK) == 0)
        .join(hits, on=[S.PAPER_ID, S.REF_ID], how="inner")
        .select(S.WORK_ID, T.KEY)
    )
    return hits, more_keys


# --------------------------------------------------------------------- per-work partials
def _compact(df: pl.DataFrame) -> pl.DataFrame:
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
            pl.col(S.RAW).filter(pl.col(_RAW_BYTES) == pl.col(_RAW_BYTES).max()).min(),
            pl.col(_RAW_BYTES).max(),
            pl.col(_REF_YEAR).min(),
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


def _entry_counts(cites: pl.DataFrame) -> pl.DataFrame:
    """One row: entries, unresolved entries, papers with one, entries merged within a paper."""
    return (
        cites.lazy()
        .group_by(S.PAPER_ID)
        .agg(
            pl.len().alias("entries"),
            pl.col(S.WORK_ID).is_null().sum().alias("unresolved"),
            (
                pl.col(S.WORK_ID).is_not_null().sum() - pl.col(S.WORK_ID).drop_nulls().n_unique()
            ).alias("merged"),
        )
        .select(
            pl.col("entries").sum().cast(pl.Int64),
            pl.col("unresolved").sum().cast(pl.Int64),
            (pl.col("unresolved") > 0).sum().cast(pl.Int64).alias("papers_with_unresolved"),
            pl.col("merged").sum().cast(pl.Int64),
        )
        .collect()
    )


def _rate_counts(cites: pl.DataFrame, cs: pl.DataFrame) -> pl.DataFrame:
    """Entries, and those resolved by identifier and by title, of CS papers and the others."""
    return (
        cites.lazy()
        .join(cs.lazy(), on=S.PAPER_ID, how="left")
        .group_by(pl.col("_cs").fill_null(False))
        .agg(
            pl.len().cast(pl.Int64).alias("entries"),
            (pl.col(S.RESOLVED_BY) == RESOLVED_BY_ID).sum().cast(pl.Int64).alias("by_identifier"),
            (pl.col(S.RESOLVED_BY) == RESOLVED_BY_TITLE).sum().cast(pl.Int64).alias("by_title"),
        )
        .collect()
    )


# --------------------------------------------------------------------- the stage
def build_works(ctx: ReduceContext) -> dict[str, Any]:
    """Resolve every bib entry to a canonical work; write ``works``, ``cites``, ``title_keys``
    and ``links``.

    Held in memory: the alias graph (aliases, links, labels), the title map, and
    per-work partials (counts, an example raw string). Per-entry work (aliases, title
    keys, resolution) runs one extract file at a time, into scratch files next to the
    outputs (``ctx.scratch()``, which the runner removes); ``cites`` is sorted in paper-id ranges. None of the
    outputs depends on the files' sizes or on the number of ranges.
    """
    scratch = ctx.scratch()
    wcfg = ctx.cfg.works
    # extract already normalises DOIs; lower-casing again keeps aliases right for any input
    doi = pl.col(S.DOI).str.to_lowercase()
    extract = ctx.files_by_table("extract")
    ref_files = [
        lf.select(S.PAPER_ID, S.REF_ID, S.ARXIV_ID, doi, S.OPENALEX_ID, S.RAW)
        for lf in scan_extract_files(extract, "references")
    ]
    papers = scan_extract(extract, "papers")

    def part(name: str, i: int) -> Path:
        (scratch / name).mkdir(exist_ok=True)
        return scratch / name / f"{i:06d}.parquet"

    # pass 1, per file: every identifier of every entry, and the links between them
    paper_aliases = A.paper_aliases(papers.select(S.PAPER_ID, doi)).collect(engine="streaming")
    link_parts = [A.paper_links(paper_aliases.lazy()).collect(engine="streaming")]
    alias_parts = [paper_aliases.select(ALIAS).unique()]
    for i, refs in enumerate(
        steps(ref_files, "works: pass 1/3 (aliases), reference files", unit="file")
    ):
        aliases_i = A.entry_aliases(refs).collect(engine="streaming")
        aliases_i.write_parquet(part("entry_aliases", i))
        link_parts.append(A.entry_links(aliases_i.lazy()).collect(engine="streaming"))
        alias_parts.append(aliases_i.select(ALIAS).unique())
        del aliases_i
    links = pl.concat(link_parts).unique().sort(ALIAS, OTHER)
    del link_parts
    ctx.write("links", links)
    junk = junk_aliases(links.lazy(), wcfg.max_alias_partners).collect(engine="streaming")

    # Node ids in sorted alias order: the minimum node of a component is its canonical alias.
    nodes = (
        pl.concat(alias_parts)
        .unique()
        .sort(ALIAS)
        .with_row_index(NODE)
        .with_columns(pl.col(NODE).cast(pl.Int64))
    )
    del alias_parts
    edges = (
        links.lazy()
        .join(junk.lazy(), on=ALIAS, how="anti")
        .join(junk.lazy().rename({ALIAS: OTHER}), on=OTHER, how="anti")
        .join(nodes.lazy(), on=ALIAS)
        .join(nodes.lazy().rename({ALIAS: "o", NODE: "other_node"}), left_on=OTHER, right_on="o")
        .select(NODE, pl.col("other_node").alias(OTHER))
        .collect(engine="streaming")
    )
    n_links = edges.height
    del links
    components, rounds = connected_components(edges, wcfg.max_label_iterations)
    del edges
    alias_work = (
        nodes.join(components, on=NODE, how="left")
        .with_columns(pl.col(COMPONENT).fill_null(pl.col(NODE)))
        .join(nodes.rename({NODE: COMPONENT, ALIAS: S.WORK_ID}), on=COMPONENT)
        .join(junk.with_columns(pl.lit(True).alias(JUNK)), on=ALIAS, how="left")
        .select(ALIAS, S.WORK_ID, pl.col(JUNK).fill_null(False))
    )
    n_aliases = nodes.height
    del nodes, components

    corpus = (
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

    # pass 2, per file: resolution by identifier, title keys
    known_parts = []
    for i, refs in enumerate(
        steps(ref_files, "works: pass 2/3 (by identifier), reference files", unit="file")
    ):
        entry_work = (
            pl.scan_parquet(part("entry_aliases", i))
            .join(alias_work.lazy(), on=ALIAS)
            .group_by(S.PAPER_ID, S.REF_ID)
            .agg(
                pl.coalesce(
                    pl.col(S.WORK_ID).filter(~pl.col(JUNK)).min(), pl.col(S.WORK_ID).min()
                ).alias(S.WORK_ID)
            )
            .collect(engine="streaming")
        )
        entry_work.write_parquet(part("entry_work", i))
        keys = T.segment_keys_per_string(
            refs.select(S.PAPER_ID, S.REF_ID, S.RAW).drop_nulls(S.RAW).collect(engine="streaming"),
            S.RAW,
            [S.PAPER_ID, S.REF_ID],
        ).collect(engine="streaming")
        keys.write_parquet(part("entry_keys", i))
        # to scratch: kept in memory, each part's key strings (views into the file's whole
        # segment-key table) held every file's keys alive (12 GB at the end of this pass at
        # 2.3M papers)
        known_title_keys(keys.lazy(), entry_work.lazy()).collect(engine="streaming").write_parquet(
            part("known_keys", i)
        )
        known_parts.append(part("known_keys", i))
        part("entry_aliases", i).unlink()
        del entry_work, keys
    known = (
        pl.concat(
            [_EMPTY_KEYS.lazy(), *(pl.scan_parquet(p) for p in known_parts)], how="vertical_relaxed"
        )
        .unique()
        .collect(engine="streaming")
    )
    del known_parts
    titles = title_map(corpus, known.lazy())

    # pass 3, per file: resolution by title; cites rows cut in paper-id ranges; per-work partials
    paper_ids = papers.select(S.PAPER_ID).sort(S.PAPER_ID).collect(engine="streaming")[S.PAPER_ID]
    n_ranges = max(1, min(64, len(ref_files)))
    bounds = [paper_ids[(len(paper_ids) * k) // n_ranges] for k in range(1, n_ranges)]
    range_of = pl.lit(0, pl.Int32)
    for bound in bounds:  # the range of a paper id: how many bounds are <= it
        range_of = range_of + (pl.col(S.PAPER_ID) >= bound).cast(pl.Int32)
    title_key_parts = [T.corpus_title_keys(corpus).collect(engine="streaming"), known]
    del known  # held by title_key_parts until title_keys is written, not to the end (~0.4 GB at 1M)
    examples: list[pl.DataFrame] = []
    citing: list[pl.DataFrame] = []
    parsed: list[pl.DataFrame] = [
        pl.DataFrame(schema={S.WORK_ID: pl.String, T.KEY: pl.String, PARSED_COUNT: pl.Int64})
    ]
    raw_bytes = pl.col(S.RAW).str.len_bytes()
    ref_year = pl.col(S.RAW).str.extract_all(REFERENCE_YEAR).list.last().cast(pl.Int32)
    for i, refs in enumerate(
        steps(ref_files, "works: pass 3/3 (by title), reference files", unit="file")
    ):
        entry_work = pl.scan_parquet(part("entry_work", i))
        hits, more_keys = resolve_by_title(
            pl.scan_parquet(part("entry_keys", i)), entry_work, titles.lazy()
        )
        hits = hits.collect(engine="streaming")
        title_key_parts.append(_compact(more_keys.unique().collect(engine="streaming")))
        cites_i = (
            refs.select(S.PAPER_ID, S.REF_ID)
            .join(
                pl.concat(
                    [
                        entry_work.with_columns(pl.lit(RESOLVED_BY_ID).alias(S.RESOLVED_BY)),
                        hits.lazy().with_columns(pl.lit(RESOLVED_BY_TITLE).alias(S.RESOLVED_BY)),
                    ]
                ),
                on=[S.PAPER_ID, S.REF_ID],
                how="left",
            )
            .with_columns(range_of.alias(_RANGE))
            .collect(engine="streaming")
        )
        (scratch / "cites").mkdir(exist_ok=True)
        for (r,), rows in cites_i.partition_by(_RANGE, as_dict=True).items():
            rows.drop(_RANGE).write_parquet(scratch / "cites" / f"{r:04d}-{i:06d}.parquet")
        cited_i = cites_i.lazy().drop_nulls(S.WORK_ID).select(S.PAPER_ID, S.REF_ID, S.WORK_ID)
        examples.append(
            refs.select(S.PAPER_ID, S.REF_ID, S.RAW)
            .join(cited_i, on=[S.PAPER_ID, S.REF_ID])
            .drop_nulls(S.RAW)
            .group_by(S.WORK_ID)
            .agg(  # the longest raw string; the smallest of those on ties
                pl.col(S.RAW).filter(raw_bytes == raw_bytes.max()).min(),
                raw_bytes.max().alias(_RAW_BYTES),
                ref_year.min().alias(_REF_YEAR),
            )
            .collect(engine="streaming")
        )
        parsed.append(
            pl.scan_parquet(part("entry_keys", i))
            .filter(pl.col(T.SEGMENT_RANK) == 0)
            .join(cited_i, on=[S.PAPER_ID, S.REF_ID])
            .group_by(S.WORK_ID, T.KEY)
            .agg(pl.len().cast(pl.Int64).alias(PARSED_COUNT))
            .collect(engine="streaming")
        )
        citing.append(
            cited_i.group_by(S.WORK_ID)
            .agg(pl.col(S.PAPER_ID).n_unique().cast(pl.Int64).alias(S.N_CITING_PAPERS))
            .collect(engine="streaming")
        )
        if len(examples) >= ctx.limits.works_merge_every:
            examples = [_compact(_merge_examples(examples))]
            citing = [_compact(_merge_citing(citing))]
            parsed = [_compact(_merge_parsed(parsed))]
        del hits, cites_i
    example_raw = _merge_examples(examples) if examples else None
    n_citing = _merge_citing(citing) if citing else None
    parsed_title = parsed_titles(_merge_parsed(parsed).lazy()).collect()
    del examples, citing, titles, parsed

    title_keys = pl.concat(title_key_parts).unique().sort(S.WORK_ID, T.KEY)
    del title_key_parts
    ctx.write("title_keys", title_keys)
    n_title_keys = title_keys.height
    del title_keys

    writer = ctx.writer("cites")
    cs = papers.select(
        S.PAPER_ID,
        pl.col(S.PRIMARY_CATEGORY).str.starts_with(CS_PREFIX).alias("_cs"),
    ).collect(engine="streaming")
    # a paper's rows are all in one range, so per-paper counts summed over ranges are exact
    entry_counts, rate_counts = [_entry_counts(_EMPTY_CITES)], [_rate_counts(_EMPTY_CITES, cs)]
    for r in range(n_ranges):
        parts = sorted((scratch / "cites").glob(f"{r:04d}-*.parquet"))
        if parts:
            rows = pl.scan_parquet(parts).sort(S.PAPER_ID, S.REF_ID).collect(engine="streaming")
            writer.write(rows)
            entry_counts.append(_entry_counts(rows))
            rate_counts.append(_rate_counts(rows, cs))
            del rows
    writer.close()
    shutil.rmtree(scratch / "cites", ignore_errors=True)
    entries = pl.concat(entry_counts).sum().row(0, named=True)
    rates = pl.concat(rate_counts).group_by("_cs").agg(pl.all().sum())
    del cs, entry_counts, rate_counts

    arxiv_month = arxiv_month_expr(pl.col(S.WORK_ID))
    if n_citing is None:
        n_citing = pl.DataFrame(schema={S.WORK_ID: pl.String, S.N_CITING_PAPERS: pl.Int64})
    if example_raw is None:
        example_raw = pl.DataFrame(
            schema={S.WORK_ID: pl.String, S.RAW: pl.String, _RAW_BYTES: pl.UInt32,
                    _REF_YEAR: pl.Int32}
        )  # fmt: skip
    ctx.sink(
        "works",
        n_citing.lazy()
        .join(
            alias_work.lazy().group_by(S.WORK_ID).agg(pl.col(ALIAS).sort().alias(S.ALIASES)),
            on=S.WORK_ID,
            how="left",
        )
        .join(corpus.select(S.WORK_ID, S.PAPER_ID, S.FIRST_VERSION_DATE), on=S.WORK_ID, how="left")
        .join(example_raw.lazy().drop(_RAW_BYTES), on=S.WORK_ID, how="left")
        .join(parsed_title.lazy(), on=S.WORK_ID, how="left")
        .with_columns(
            pl.when(pl.col(S.PAPER_ID).is_null()).then(pl.col(S.RAW)).alias(S.RAW),
            pl.when(pl.col(S.PAPER_ID).is_null())
            .then(pl.col(S.PARSED_TITLE))
            .alias(S.PARSED_TITLE),
            pl.coalesce(
                pl.col(S.FIRST_VERSION_DATE), arxiv_month, pl.date(pl.col(_REF_YEAR), 1, 1)
            ).alias(S.KNOWN_DATE),
            pl.when(pl.col(S.FIRST_VERSION_DATE).is_not_null())
            .then(pl.lit(DATE_FROM_CORPUS))
            .when(arxiv_month.is_not_null())
            .then(pl.lit(DATE_FROM_ARXIV_ID))
            .when(pl.col(_REF_YEAR).is_not_null())
            .then(pl.lit(DATE_FROM_REFERENCE_YEAR))
            .alias(S.DATE_SOURCE),
        )
        .sort(S.WORK_ID)
        # the wide columns after the sort, in its order: sorting them would copy every abstract
        .join(
            papers.select(S.PAPER_ID, S.TITLE, S.ABSTRACT, S.CATEGORIES),
            on=S.PAPER_ID,
            how="left",
            maintain_order="left",
        ),
    )
    del n_citing, example_raw, parsed_title

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
    largest = (
        alias_work.group_by(S.WORK_ID)
        .len()
        .sort("len", S.WORK_ID, descending=[True, False])
        .head(1)
    )
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
        "papers": int(papers.select(pl.len()).collect().item()),
        "duplicate_papers_dropped": duplicate_papers(ctx.read("extract", "papers")),
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
        "aliases": n_aliases,
        "links": n_links,
        "junk_aliases": junk.height,
        "label_rounds": rounds,
        "works": int(works["works"]),
        "works_in_corpus": int(works["in_corpus"]),
        # works outside the corpus whose bib strings gave a title (the rest show no text)
        "works_outside_corpus_with_parsed_title": int(works["parsed"]),
        "merged_groups": int(works["merged_groups"]),
        "largest_component": int(largest["len"].item()) if largest.height else 0,
        "largest_component_work_id": largest[S.WORK_ID].item() if largest.height else None,
    }


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
