"""The release's full-text view: config ``corpus_sections``, ``corpus_sections/{split}.parquet``
(``schema.CORPUS_SECTIONS``), beside ``corpus/`` and named by the same retrieval split
(:func:`pipeline.core.release_files.beir_file`).

One row per section of every document of a split's ``corpus`` that is a corpus paper
whose licence the release may carry (:func:`pipeline.rules.licences.permitted`, with
``[release] non_commercial``), in document order. The text is extract's ``section_texts``
(every marker a neutral token, :mod:`pipeline.stages.extract.texts`); heading, level and
parent come from extract's ``sections`` of the same copy of the paper, the role from
:func:`pipeline.rules.roles.section_roles`, as the labels read it. ``section_order`` counts
a document's rows (0 = first); an occurrence without text of its own (the abstract, an
unnamed section) has no row.

Rows are written extract file by extract file, in the files' order and paper order inside
each, :data:`BATCH_DOCUMENTS` documents at a time, so memory is bounded by a batch's texts
and the row group (:data:`GROUP_ROWS`), never by the split or a file; the bytes do not
depend on the batching. A split whose view has no row gets no file (``datasets`` cannot
read a Parquet file with no rows); its counts are 0.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa

from pipeline.core import schema as S
from pipeline.core.parquet import RowGroupWriter
from pipeline.core.release_files import FULL_TEXT_VIEW, beir_file
from pipeline.engine.context import ReduceContext
from pipeline.rules.licences import name_expr, normalise_expr, permitted_urls
from pipeline.rules.roles import section_roles
from pipeline.rules.tables import papers_winner, scan_extract

VIEW = FULL_TEXT_VIEW
# sections run to about 3,000 characters on the real sample (42,500 per paper): a group of
# 2,000 rows holds a few MB of text, where the release's 100,000-row groups would hold 300 MB
GROUP_ROWS = 2_000
_KEY = "_extract_key"  # papers_winner's column: the extract file (its key) of the kept copy
_ROW = "_row"
# documents read at once from one extract file: their sections and texts are in memory
# together (about 2,000 x 42,500 characters on the real sample's means)
BATCH_DOCUMENTS = 2_000
_PARENT_INDEX = "_parent_index"


def sections_file(split: str) -> str:
    """The view's file of release split ``split`` (``corpus_sections/{train,test}.parquet``)."""
    return beir_file(VIEW, split)


def corpus_documents(
    corpus: pl.LazyFrame, works: pl.LazyFrame, papers: pl.LazyFrame, non_commercial: bool
) -> pl.LazyFrame:
    """``(corpus-id, paper_id, license)`` of the documents of ``corpus`` (BEIR ``_id``) that are
    corpus papers (``works.paper_id``) whose licence (``papers``: extract's, winning copies)
    the release may carry."""
    return (
        corpus.select(pl.col(S.BEIR_ID).alias(S.BEIR_CORPUS_ID))
        .join(
            works.select(pl.col(S.WORK_ID).alias(S.BEIR_CORPUS_ID), S.PAPER_ID).drop_nulls(),
            on=S.BEIR_CORPUS_ID,
        )
        .join(papers.select(S.PAPER_ID, S.LICENSE), on=S.PAPER_ID)
        .filter(normalise_expr(pl.col(S.LICENSE)).is_in(permitted_urls(non_commercial)))
        .unique(S.PAPER_ID, keep="first", maintain_order=True)
        .sort(S.BEIR_CORPUS_ID)
    )


def section_rows(
    docs: pl.DataFrame, sections: pl.DataFrame, texts: pl.LazyFrame, roles_cfg: Any
) -> pl.DataFrame:
    """The view's rows of ``docs`` (:func:`corpus_documents`) from one extract file's
    ``sections`` and ``section_texts`` (its winning copies only), in the texts' order."""
    roles = section_roles(sections.lazy(), roles_cfg)
    heads = sections.select(
        S.PAPER_ID,
        S.SECTION_INDEX,
        pl.col(S.SECTION).alias(S.HEADING),
        # a 2022-layout occurrence inside a top-level section: that section's heading
        pl.when((pl.col(S.LEVEL) > 0) & (pl.col(S.TOP_INDEX) != pl.col(S.SECTION_INDEX)))
        .then(pl.col(S.TOP_INDEX))
        .alias(_PARENT_INDEX),
    )
    parents = sections.select(
        S.PAPER_ID,
        pl.col(S.SECTION_INDEX).alias(_PARENT_INDEX),
        # an unnamed top-level section has no heading to give
        pl.col(S.SECTION).replace("", None).alias(S.PARENT_HEADING),
    )
    return (
        texts.join(docs.lazy(), on=S.PAPER_ID, maintain_order="left")
        .join(heads.lazy(), on=[S.PAPER_ID, S.SECTION_INDEX], how="left", maintain_order="left")
        .join(parents.lazy(), on=[S.PAPER_ID, _PARENT_INDEX], how="left", maintain_order="left")
        .join(roles, on=[S.PAPER_ID, S.SECTION_INDEX], how="left", maintain_order="left")
        .with_columns(
            pl.int_range(pl.len(), dtype=pl.Int32).over(S.PAPER_ID).alias(S.SECTION_ORDER),
            pl.col(S.HEADING).fill_null(""),
            pl.col(S.ROLE).fill_null("other"),
        )
        .select(S.CORPUS_SECTIONS.names)
        .collect()
    )


def _file_order(papers: Path, own: pl.DataFrame) -> pl.DataFrame:
    """``(paper_id, source_file)`` of the papers of ``own`` in one extract file, in the file's
    order; of a paper two members of an archive's unit hold, the copy whose ``source_file``
    sorts first (the rule of :func:`pipeline.rules.tables.papers_winner` between files)."""
    return (
        S.scan(papers, S.PAPERS)
        .select(S.PAPER_ID, S.SOURCE_FILE)
        .with_row_index(_ROW)
        .join(own.lazy().select(S.PAPER_ID), on=S.PAPER_ID, how="semi")
        .sort(S.SOURCE_FILE, _ROW)
        .unique(S.PAPER_ID, keep="first", maintain_order=True)
        .sort(_ROW)
        .drop(_ROW)
        .collect()
    )


def _rows_of(path: Path, schema: pa.Schema, keep: pl.DataFrame) -> pl.LazyFrame:
    """The rows of one extract file's table of the copies ``keep`` names (``(paper_id,
    source_file)``), in file order; filtered by id as the file is read."""
    return (
        S.scan(path, schema)
        .filter(pl.col(S.PAPER_ID).is_in(keep[S.PAPER_ID].implode()))
        .join(keep.lazy(), on=[S.PAPER_ID, S.SOURCE_FILE], how="semi", maintain_order="left")
    )


def _by_key(paths: list[Path]) -> dict[str, Path]:
    return {re.sub(r"\.parquet$", "", p.name): p for p in paths}


def write_corpus_sections(ctx: ReduceContext, split: str) -> dict[str, Any]:
    """Write split ``split``'s view (its ``corpus`` file must be written) and return its
    counts: documents with full text (by licence), sections, characters, and the share of
    positives and of hard negatives (``qrels`` rows) whose document has full text."""
    extract = ctx.files_by_table("extract")
    corpus_path = ctx.output(beir_file("corpus", split))
    docs = corpus_documents(
        pl.scan_parquet(corpus_path),
        ctx.read("works", "works"),
        scan_extract(extract, "papers"),
        ctx.cfg.release.non_commercial,
    ).collect(engine="streaming")
    winners = papers_winner(extract, docs[S.PAPER_ID]).collect(engine="streaming")
    papers_by_key = _by_key(extract["papers"])
    sections_by_key = _by_key(extract["sections"])
    texts_by_key = _by_key(extract["section_texts"])
    writer = RowGroupWriter(ctx.output(sections_file(split)), S.CORPUS_SECTIONS, ctx.cfg,
                            sections_file(split).removesuffix(".parquet"), GROUP_ROWS)  # fmt: skip
    by_licence: Counter[str] = Counter()
    with_text: list[pl.Series] = []
    n_rows = n_chars = 0
    for key in sorted(texts_by_key):
        own = docs.join(winners.filter(pl.col(_KEY) == key), on=S.PAPER_ID, how="semi")
        if own.height == 0 or key not in sections_by_key or key not in papers_by_key:
            continue
        for chunk in _file_order(papers_by_key[key], own).iter_slices(BATCH_DOCUMENTS):
            keep = chunk.select(S.PAPER_ID, S.SOURCE_FILE)
            rows = section_rows(
                own.join(keep, on=S.PAPER_ID, how="semi"),
                _rows_of(sections_by_key[key], S.SECTIONS, keep).collect(),
                _rows_of(texts_by_key[key], S.SECTION_TEXTS, keep),
                ctx.cfg.roles,
            )
            if rows.height == 0:
                continue
            writer.write(rows)
            n_rows += rows.height
            n_chars += int(rows[S.SECTION_TEXT].str.len_chars().sum())
            docs_here = rows.unique(S.BEIR_CORPUS_ID, maintain_order=True)
            with_text.append(docs_here[S.BEIR_CORPUS_ID])
            by_licence.update(docs_here.select(name_expr(pl.col(S.LICENSE)))[S.LICENSE].to_list())
            del rows
    if writer.close() == 0:
        ctx.output(sections_file(split)).unlink()
    ids_with_text = (
        pl.concat(with_text) if with_text else pl.Series(S.BEIR_CORPUS_ID, [], pl.String)
    )
    qrels = pl.scan_parquet(ctx.output(beir_file("qrels", split))).select(
        (pl.col(S.BEIR_SCORE) > 0).alias("_positive"),
        pl.col(S.BEIR_CORPUS_ID).is_in(ids_with_text.implode()).alias("_text"),
    )
    shares = qrels.group_by("_positive").agg(pl.col("_text").mean()).collect()
    share = dict(zip(shares["_positive"].to_list(), shares["_text"].to_list(), strict=True))
    return {
        "documents": ids_with_text.len(),
        "documents_by_licence": dict(sorted(by_licence.items())),
        "documents_permitted": docs.height,
        "sections": n_rows,
        "characters": n_chars,
        "positives_with_text": round(share[True], 6) if True in share else None,
        "hard_negatives_with_text": round(share[False], 6) if False in share else None,
        "non_commercial": ctx.cfg.release.non_commercial,
    }
