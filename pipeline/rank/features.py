"""Ranking features of a (survey, candidate) pair, from the answer-free ``candidates`` view only.

Every feature reads only columns of :data:`pipeline.core.schema.CANDIDATES_VIEW` (the
release's ``candidates`` config: no label, no mention counts, no negative source, no
popularity) and only the rows of its own survey: a survey's features do not change when other
surveys (earlier or later) are added, removed or altered, so nothing dated after a
survey reaches it.

What is deliberately not used: the candidate lists of other surveys (they hold hard
negatives chosen with the judgments, so co-occurrence across lists would leak them),
corpus co-citation (the release carries no citation edges), and popularity: the prior
counts (``candidate_prior_citations``, ``n_citing_surveys``) are judgment-side columns,
because a field's landmark works have no negative as popular and would rank the head of
every list (``pipeline.core.schema.JUDGMENT_COLUMNS``).

Feature kinds: ``text`` reads the survey's or the candidate's words; ``metadata``
reads dates, categories, what text exists and the id's form; ``format`` places the
candidate within its own survey's list without reading a word
(:data:`pipeline.rules.leak_audit.RELATIVE_FEATURES`: the shape of its text, its length, date
and text kind against the survey's other candidates). The ``metadata`` feature set
(:data:`METADATA_SET`) is every ``metadata`` feature: a model on it is the leak probe of the
report. The ``reading-free`` set (:data:`READING_FREE_SET`) adds the ``format`` features: a
model on it is the probe of the release's relative audit, which must not beat BM25 either.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from pipeline.core.errors import PipelineError
from pipeline.core.schema import (
    CANDIDATE_ABSTRACT,
    CANDIDATE_CATEGORIES,
    CANDIDATE_DATE,
    CANDIDATE_ID,
    CANDIDATE_TITLE,
    CANDIDATES_VIEW,
    IN_DOMAIN,
    SURVEY_ABSTRACT,
    SURVEY_CATEGORIES,
    SURVEY_DATE,
    SURVEY_ID,
    SURVEY_TITLE,
)
from pipeline.rules.leak_audit import (
    FULL_TEXT,
    FULL_TEXT_DOCS,
    RELATIVE_DOCS,
    RELATIVE_FEATURES,
    relative_values,
)
from pipeline.rules.text_match import (
    bm25_by_block,
    candidate_text,
    candidate_text_tokens,
    survey_blocks,
    survey_query_tokens,
    token_count,
    tokenize,
)

FEATURE_SET_VERSION = 3  # bump when a feature changes (2: text without the raw string;
# 3: no popularity features, the view no longer shows popularity)
TEXT, METADATA, FORMAT = "text", "metadata", "format"
FULL_SET, METADATA_SET, READING_FREE_SET = "full", "metadata", "reading-free"
ID_KINDS = ("arxiv", "doi", "openalex")  # id_kind = index in this tuple, len(ID_KINDS) otherwise

_QUERY, _TITLE_QUERY, _DOC = "_query", "_title_query", "_doc"


class FeatureError(PipelineError, ValueError):
    """The input lacks a column of the candidates view, or a feature set is unknown."""


@dataclass(frozen=True)
class Feature:
    """One feature: its name, kind and definition (the docstring of the report and model JSON)."""

    name: str
    kind: str
    doc: str


FEATURES: tuple[Feature, ...] = (
    Feature(
        "bm25",
        TEXT,
        "BM25 (bm25s, Lucene, k1=1.5, b=0.75, idf over this survey's candidates) of the candidate "
        "text (title + abstract, else the title alone) against the survey title + "
        "abstract; the bm25 baseline's score",
    ),
    Feature("bm25_title", TEXT, "the same BM25 with the survey title alone as the query"),
    Feature(
        "bm25_relative", TEXT, "bm25 / the largest bm25 among the survey's candidates (0 if 0)"
    ),
    Feature(
        "query_coverage",
        TEXT,
        "share of the distinct tokens of the survey title + abstract that occur in the candidate text",
    ),
    Feature(
        "title_coverage",
        TEXT,
        "share of the distinct tokens of the survey title that occur in the candidate text",
    ),
    Feature("age_days", METADATA, "survey_date - candidate_date in days (missing when undated)"),
    Feature(
        "category_overlap",
        METADATA,
        "|survey categories & candidate categories| / |survey categories| (missing when the "
        "candidate has no categories)",
    ),
    Feature(
        "in_domain", METADATA, "1 if the candidate's categories include the survey's primary one"
    ),
    Feature("has_abstract", METADATA, "1 if the candidate has a non-empty abstract"),
    Feature("has_title", METADATA, "1 if the candidate has a non-empty title"),
    Feature("text_tokens", METADATA, "number of tokens of the candidate text"),
    Feature(
        "id_kind",
        METADATA,
        f"form of the candidate id: index in {list(ID_KINDS)} of its prefix, {len(ID_KINDS)} otherwise",
    ),
    *(Feature(name, FORMAT, RELATIVE_DOCS[name]) for name in RELATIVE_FEATURES),
)
FEATURE_NAMES = tuple(f.name for f in FEATURES)
AVAILABILITY = "availability"
# features no column of the view holds: given by the caller as ``extra`` columns (the leak
# audit's probe reads the release's corpus_sections for them); in no named set
EXTRA_FEATURES: tuple[Feature, ...] = (Feature(FULL_TEXT, AVAILABILITY, FULL_TEXT_DOCS[FULL_TEXT]),)
EXTRA_NAMES = tuple(f.name for f in EXTRA_FEATURES)
FEATURE_SETS: dict[str, tuple[str, ...]] = {
    FULL_SET: FEATURE_NAMES,
    METADATA_SET: tuple(f.name for f in FEATURES if f.kind == METADATA),
    READING_FREE_SET: tuple(f.name for f in FEATURES if f.kind != TEXT),
}


def feature_set(name: str) -> tuple[str, ...]:
    """The feature names of a named set.

    Raises:
        FeatureError: unknown set; the message lists the sets.
    """
    if name not in FEATURE_SETS:
        raise FeatureError(f"unknown feature set {name!r}; available: {', '.join(FEATURE_SETS)}")
    return FEATURE_SETS[name]


def _nonempty(column: str) -> pl.Expr:
    return pl.col(column).fill_null("").str.strip_chars() != ""


def _coverage(query: str) -> pl.Expr:
    distinct = pl.col(query).list.unique()
    hits = distinct.list.set_intersection(pl.col(_DOC)).list.len()
    return (
        pl.when(distinct.list.len() > 0)
        .then(hits.cast(pl.Float64) / distinct.list.len())
        .otherwise(0.0)
    )


def _id_kind() -> pl.Expr:
    prefix = pl.col(CANDIDATE_ID).str.extract(r"^([a-z]+):", 1)
    return prefix.replace_strict(
        list(ID_KINDS), list(range(len(ID_KINDS))), default=len(ID_KINDS), return_dtype=pl.Int64
    )


# the features that read the candidate's token list (text_tokens counts them without it)
_DOC_FEATURES = frozenset(
    {"bm25", "bm25_title", "bm25_relative", "query_coverage", "title_coverage"}
)


def _block_queries(view: pl.DataFrame, tokens: pl.Expr) -> list[list[str]]:
    """``tokens`` of the first row of each survey block of ``view``: the query BM25 reads."""
    starts, _ = survey_blocks(view[SURVEY_ID])
    return view[starts].select(tokens).to_series().to_list()


def _per_query_run(view: pl.DataFrame, tokens: pl.Expr) -> pl.Series:
    """``tokens`` of every row of ``view``, computed once per run of rows with the same survey
    title and abstract (a survey's rows are contiguous and share them) and repeated."""
    same = [
        pl.col(c).eq_missing(pl.col(c).shift(1)) for c in (SURVEY_ID, SURVEY_TITLE, SURVEY_ABSTRACT)
    ]
    new_run = ~pl.all_horizontal(same)
    run = view.select((new_run.cum_sum() - 1).alias("_run")).to_series()
    firsts = view.filter(view.select(new_run).to_series()).select(tokens).to_series()
    return firsts.gather(run)


# Column expressions of the features that need no per-survey index (all row-local or
# windowed over the survey's own rows).
_EXPRESSIONS: dict[str, Callable[[], pl.Expr]] = {
    "query_coverage": lambda: _coverage(_QUERY),
    "title_coverage": lambda: _coverage(_TITLE_QUERY),
    "age_days": lambda: (pl.col(SURVEY_DATE) - pl.col(CANDIDATE_DATE)).dt.total_days(),
    "category_overlap": lambda: (
        pl.when(pl.col(CANDIDATE_CATEGORIES).list.len() > 0)
        .then(
            pl.col(SURVEY_CATEGORIES)
            .list.set_intersection(pl.col(CANDIDATE_CATEGORIES))
            .list.len()
            .cast(pl.Float64)
            / pl.col(SURVEY_CATEGORIES).list.len()
        )
        .otherwise(None)
    ),
    "in_domain": lambda: pl.col(IN_DOMAIN).cast(pl.Int64),
    "has_abstract": lambda: _nonempty(CANDIDATE_ABSTRACT).cast(pl.Int64),
    "has_title": lambda: _nonempty(CANDIDATE_TITLE).cast(pl.Int64),
    "text_tokens": lambda: token_count(candidate_text()),
    "id_kind": _id_kind,
}


def candidates_view(frame: pl.DataFrame, where: str = "input") -> pl.DataFrame:
    """The candidates-view columns of ``frame`` only, in canonical (survey_id, candidate_id) order.

    Raises:
        FeatureError: a view column is missing (names the missing columns and ``where``).
    """
    missing = [c for c in CANDIDATES_VIEW.names if c not in frame.columns]
    if missing:
        raise FeatureError(f"{where}: missing candidates-view column(s) {missing}")
    return frame.select(CANDIDATES_VIEW.names).sort(SURVEY_ID, CANDIDATE_ID)


def compute_features(
    frame: pl.DataFrame, names: Sequence[str] = FEATURE_NAMES, extra: pl.DataFrame | None = None
) -> pl.DataFrame:
    """Features of every (survey, candidate) row, from the candidates-view columns alone (and
    the ``extra`` columns given, :data:`EXTRA_FEATURES`).

    Args:
        frame: rows with every column of ``CANDIDATES_VIEW`` (other columns, judgments
            included, are dropped before anything is computed).
        names: features to compute, in the order of the output columns.
        extra: ``survey_id``, ``candidate_id`` and a column per :data:`EXTRA_FEATURES` name
            of ``names``, for every row of ``frame``.

    Returns:
        ``survey_id``, ``candidate_id`` then one Float64 column per feature (null =
        missing), sorted by (survey_id, candidate_id).

    Raises:
        FeatureError: a view column is missing or a feature name is unknown.
    """
    unknown = [n for n in names if n not in FEATURE_NAMES + EXTRA_NAMES]
    if unknown:
        raise FeatureError(f"unknown feature(s) {unknown}; available: {', '.join(FEATURE_NAMES)}")
    given = [n for n in names if n in EXTRA_NAMES]
    if given and (extra is None or any(n not in extra.columns for n in given)):
        raise FeatureError(f"feature(s) {given} are not in the view; give them as extra columns")
    view = candidates_view(frame)
    wanted = set(names)
    # token lists only where a feature reads them: a survey's query tokens repeated on each of
    # its rows are most of the memory and time (the probe reads 500k rows a split)
    per_row = {
        _QUERY: ("query_coverage" in wanted, survey_query_tokens()),
        _TITLE_QUERY: ("title_coverage" in wanted, tokenize(pl.col(SURVEY_TITLE).fill_null(""))),
        _DOC: (bool(wanted & _DOC_FEATURES), candidate_text_tokens()),
    }
    tokens = view.with_columns(
        _per_query_run(view, expr).alias(c) if c != _DOC else expr.alias(c)
        for c, (needed, expr) in per_row.items()
        if needed
    )
    computed: dict[str, pl.Series | np.ndarray] = {}
    if {"bm25", "bm25_relative"} & wanted:
        computed["bm25"] = bm25_by_block(
            tokens[SURVEY_ID], _block_queries(view, survey_query_tokens()), tokens[_DOC]
        )
    if "bm25_title" in wanted:
        computed["bm25_title"] = bm25_by_block(
            tokens[SURVEY_ID],
            _block_queries(view, tokenize(pl.col(SURVEY_TITLE).fill_null(""))),
            tokens[_DOC],
        )
    if "bm25_relative" in wanted:
        bm25 = pl.Series("b", computed["bm25"], dtype=pl.Float64)
        top = (
            pl.DataFrame({SURVEY_ID: tokens[SURVEY_ID], "b": bm25})
            .select(pl.col("b").max().over(SURVEY_ID))
            .to_series()
        )
        computed["bm25_relative"] = (
            pl.DataFrame({"b": bm25, "t": top})
            .select(pl.when(pl.col("t") > 0).then(pl.col("b") / pl.col("t")).otherwise(0.0))
            .to_series()
        )
    out = tokens.select(
        pl.col(SURVEY_ID),
        pl.col(CANDIDATE_ID),
        *[_EXPRESSIONS[n]().cast(pl.Float64).alias(n) for n in names if n in _EXPRESSIONS],
    )
    if set(RELATIVE_FEATURES) & set(names):
        relative = relative_values(view)
        computed.update({n: relative[n] for n in RELATIVE_FEATURES})
    out = out.with_columns(
        [pl.Series(n, computed[n], dtype=pl.Float64) for n in names if n in computed]
    )
    if given and extra is not None:
        out = out.join(
            extra.select(SURVEY_ID, CANDIDATE_ID, *[pl.col(n).cast(pl.Float64) for n in given]),
            on=[SURVEY_ID, CANDIDATE_ID],
            how="left",
            maintain_order="left",
        )
    return out.select(SURVEY_ID, CANDIDATE_ID, *names)


def feature_docs(names: Sequence[str] = FEATURE_NAMES) -> dict[str, dict[str, str]]:
    """``{name: {"kind": ..., "doc": ...}}`` of the named features (for the model JSON)."""
    by_name = {f.name: f for f in FEATURES + EXTRA_FEATURES}
    return {n: {"kind": by_name[n].kind, "doc": by_name[n].doc} for n in names}
