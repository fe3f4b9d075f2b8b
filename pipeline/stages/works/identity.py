"""Which identifiers name one work: the alias graph, its junk guard and its components.

Identity. Every identifier is written as an *alias* string: ``arxiv:2104.06921``,
``doi:10.1090/tran/8674``, ``openalex:W4283717483``. Two aliases are linked when
they occur in one bib entry (its arXiv id, DOI and OpenAlex id; a DataCite arXiv
DOI ``10.48550/arxiv.<id>`` also yields its arXiv id) or in one corpus paper (its
``paper_id`` and its metadata DOI). A cited work is a connected component of that
graph (:func:`connected_components`).

Canonical key. Aliases are numbered in sorted string order, and ``arxiv:`` <
``doi:`` < ``openalex:`` sort in the order of preference, so the smallest alias of
a component -- its smallest node -- is its smallest arXiv id if it
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
"""

from __future__ import annotations

import numpy as np
import polars as pl
from scipy import sparse
from scipy.sparse import csgraph

from pipeline.core import schema as S
from pipeline.rules import aliases as A
from pipeline.rules.aliases import ALIAS, ARXIV_PREFIX, OTHER

# internal columns (never written)
NODE = "node"
COMPONENT = "component"
JUNK = "junk"
KIND = "kind"
WORK_NODE = "_work_node"  # a work's node: its component's smallest, whose alias is the work_id
_KEY = "_alias_key"
# a bib entry's row number in its reference file: the key of every per-file table of the
# passes (one integer to join and group on, not the two strings paper id and ref id)
ENTRY = "_entry"


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


def connected_components(edges: pl.DataFrame) -> pl.DataFrame:
    """Connected components of an undirected graph, in one pass
    (:func:`scipy.sparse.csgraph.connected_components` on the nodes renumbered 0..n-1).

    Args:
        edges: columns ``node`` and ``other_alias`` (both integer node ids), one row per
            undirected edge.

    Returns:
        ``(node, component)`` for every node that has an edge, sorted by node (component =
        smallest node id in its component).
    """
    if edges.height == 0:
        return pl.DataFrame(schema={NODE: pl.Int64, COMPONENT: pl.Int64})
    u = edges[NODE].to_numpy()
    v = edges[OTHER].to_numpy()
    ids = np.unique(np.concatenate([u, v]))  # sorted: position i is the i-th smallest node
    n = len(ids)
    graph = sparse.coo_matrix(
        (np.ones(len(u), dtype=np.int8), (np.searchsorted(ids, u), np.searchsorted(ids, v))),
        shape=(n, n),
    ).tocsr()
    _, label = csgraph.connected_components(graph, directed=False)
    # the first position of each label is its smallest node, as ids are sorted
    _, first = np.unique(label, return_index=True)
    return pl.DataFrame(
        {NODE: ids, COMPONENT: ids[first[label]]}, schema={NODE: pl.Int64, COMPONENT: pl.Int64}
    )


def alias_nodes(alias_parts: list[pl.DataFrame]) -> pl.DataFrame:
    """``(node, alias)``: every alias once, numbered in sorted alias order, so the minimum node
    of a component is its canonical alias."""
    return (
        pl.concat(alias_parts)
        .unique()
        .sort(ALIAS)
        .with_row_index(NODE)
        .with_columns(pl.col(NODE).cast(pl.Int64))
    )


def work_edges(links: pl.DataFrame, nodes: pl.DataFrame, junk: pl.DataFrame) -> pl.DataFrame:
    """``(node, other_alias)``: the links between aliases, as node ids, without junk's."""
    return (
        links.lazy()
        .join(junk.lazy(), on=ALIAS, how="anti")
        .join(junk.lazy().rename({ALIAS: OTHER}), on=OTHER, how="anti")
        .join(nodes.lazy(), on=ALIAS)
        .join(nodes.lazy().rename({ALIAS: "o", NODE: "other_node"}), left_on=OTHER, right_on="o")
        .select(NODE, pl.col("other_node").alias(OTHER))
        .collect(engine="streaming")
    )


def alias_works(nodes: pl.DataFrame, components: pl.DataFrame, junk: pl.DataFrame) -> pl.DataFrame:
    """``(alias, work_id, junk, _work_node)``: every alias with the canonical alias of its
    component (an alias without links is a work of its own) and that alias's node."""
    return (
        nodes.join(components, on=NODE, how="left")
        .with_columns(pl.col(COMPONENT).fill_null(pl.col(NODE)))
        .join(nodes.rename({NODE: COMPONENT, ALIAS: S.WORK_ID}), on=COMPONENT)
        .join(junk.with_columns(pl.lit(True).alias(JUNK)), on=ALIAS, how="left")
        .select(ALIAS, S.WORK_ID, pl.col(JUNK).fill_null(False), pl.col(COMPONENT).alias(WORK_NODE))
    )


class WorkLookup:
    """Each bib entry's work from its aliases (:func:`entry_works`), by integers.

    The per-file join on alias strings hashed the whole alias table once per reference file
    (11.4M aliases at 2.3M papers: 1.4 s a file, growing with the corpus); a 64-bit hash of
    each alias joins in a quarter of that, and the entry's work is chosen among node numbers,
    whose order is the work ids' (:func:`alias_nodes`). The hash names an alias only when
    no two aliases share one, which is checked; if two do, the aliases are joined as strings.
    """

    SEED = 20240101

    def __init__(self, alias_work: pl.DataFrame, nodes: pl.DataFrame) -> None:
        hashed = alias_work.select(self.hash(pl.col(ALIAS)).alias(_KEY), WORK_NODE, JUNK)
        self.by_hash = hashed[_KEY].n_unique() == hashed.height
        self.table = (
            hashed
            if self.by_hash
            else alias_work.select(pl.col(ALIAS).alias(_KEY), WORK_NODE, JUNK)
        )
        # row i is node i (nodes are numbered in their sorted order)
        self.work_ids = nodes.get_column(ALIAS)

    def hash(self, alias: pl.Expr) -> pl.Expr:
        """The 64-bit hash an alias is joined by."""
        return alias.hash(self.SEED)

    def entry_works(self, entry_aliases: pl.LazyFrame) -> pl.DataFrame:
        """``(_entry, work_id)`` of ``(_entry, alias)`` rows: the work of an entry's non-junk
        aliases, else of its junk ones (the smallest work id, in either case)."""
        key = self.hash(pl.col(ALIAS)) if self.by_hash else pl.col(ALIAS)
        nodes = (
            entry_aliases.select(ENTRY, key.alias(_KEY))
            .join(self.table.lazy(), on=_KEY)
            .group_by(ENTRY)
            .agg(  # a when, not a filter: one pass over the column, not one per group
                pl.coalesce(
                    pl.when(~pl.col(JUNK)).then(pl.col(WORK_NODE)).min(), pl.col(WORK_NODE).min()
                ).alias(WORK_NODE)
            )
            .collect(engine="streaming")
        )
        return nodes.select(ENTRY, self.work_ids.gather(nodes[WORK_NODE]).alias(S.WORK_ID))
