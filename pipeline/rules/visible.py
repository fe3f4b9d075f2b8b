"""What a system can see about a (survey, candidate) pair without reading: one owner.

The benchmark must not be solvable from metadata, so the features a system sees
next to a candidate are defined once, here, and used by ``negatives`` (to draw hard
negatives whose distribution over them matches the positives'), ``split`` and
``release`` (to publish them) and the leak audit (to prove the match).

Dates. A survey is read as of its **text date** (``text_version_date``: the last
version in its record's ``versions``, the one whose text the corpus holds; the first
version date when the record has only one). Every date rule uses it: candidates are
strictly older than it, popularity is counted before it, the split follows it.
Citing papers and citing surveys are dated by their first version (when they first
existed).

Popularity as of the survey (no information from after it). The negatives are matched on
it, but the release shows it judgment-side only (``schema.POPULARITY_COLUMNS``): a field's
landmark works leave no negative as popular, so shown, it ranks the head of every list.

* ``n_citing_surveys``: other detected surveys citing the work, first posted
  strictly before the survey's text date (the survey never counts itself);
* ``n_citing_surveys_same_category``: those of them with the survey's primary
  category;
* ``candidate_prior_citations``: distinct corpus papers citing the work, first
  posted strictly before the survey's text date.

Strata (:func:`stratum_columns`): ``text_kind`` (``abstract`` for a corpus paper, which
shows its arXiv abstract; otherwise ``abstract_`` when it shows an OpenAlex abstract,
``title_`` when it shows a title (OpenAlex's, or the title parsed from the bib strings
citing it) and ``none_`` when it has neither, then the form of its id: ``abstract_doi``,
``title_doi``, ``none_arxiv``, ...: what text a system gets, and the id's form; so a
failed title parse is matched like any other text kind, never a sign of who cited the
work, and a work outside the corpus with an OpenAlex abstract is matched with its like,
not with corpus papers, which show arXiv categories it lacks), ``in_domain``, ``age_bin`` (years between the candidate's date and the survey's
text date: unknown, <1, 1-2, 2-4, 4-8, 8-16, 16+), ``citations_bin`` (prior corpus
citations: 0, 1, 2-3, 4-7, 8-15, 16-31, 32+) and ``surveys_bin`` (prior citing
surveys: 0, 1, 2-3, 4-7, 8-15, 16+).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.core import schema as S
from pipeline.rules.aliases import id_kind
from pipeline.rules.fields import FIELD_CATEGORIES

WORK_PAPER = "_work_paper_id"
TEXT_KIND = "text_kind"
AGE_BIN = "age_bin"
CITATIONS_BIN = "citations_bin"
SURVEYS_BIN = "surveys_bin"
STRATUM_COLUMNS = (TEXT_KIND, S.IN_DOMAIN, AGE_BIN, CITATIONS_BIN, SURVEYS_BIN)
_DATE = "_cited_on"
_RUNNING = "_running"


def survey_date_expr() -> pl.Expr:
    """The survey's text date, else its first version date."""
    return pl.coalesce(pl.col(S.TEXT_DATE), pl.col(S.FIRST_VERSION_DATE))


def running_counts(cited: pl.LazyFrame, keys: list[str]) -> pl.LazyFrame:
    """``(*keys, _cited_on, _running)``: distinct citers of ``keys`` dated on or before ``_cited_on``.

    Args:
        cited: distinct ``(citer, *keys, date)`` rows (undated rows never count).
    """
    return _running_totals(_daily_counts(cited, keys), keys).sort(_DATE, *keys)


def collected_running_counts(cited: pl.LazyFrame, keys: list[str]) -> pl.DataFrame:
    """:func:`running_counts`, collected in three steps: the counts per key and date, each
    key's running total over them, and the sort by date. One query with all three took
    about 1.4 times as long (one part of the 2.3M bench corpus's citations, 8.9M rows: 9.6
    against 6.6 s wall), its final sort slower after the window than alone."""
    counted = _daily_counts(cited, keys).collect(engine="streaming")
    return _running_totals(counted.lazy(), keys).collect().sort(_DATE, *keys)


def _daily_counts(cited: pl.LazyFrame, keys: list[str]) -> pl.LazyFrame:
    """``(*keys, _cited_on, _running)``: the citers of each key on each date (not yet summed)."""
    return (
        cited.drop_nulls(_DATE).group_by(*keys, _DATE).agg(pl.len().cast(pl.Int64).alias(_RUNNING))
    )


def _running_totals(counts: pl.LazyFrame, keys: list[str]) -> pl.LazyFrame:
    """:func:`_daily_counts` summed over each key's dates up to each row's."""
    return counts.with_columns(pl.col(_RUNNING).cum_sum().over(keys, order_by=_DATE))


def prior_rows_between(table: pl.LazyFrame, start: date | None, end: date | None) -> pl.LazyFrame:
    """Rows of a running-count table (:func:`running_counts`) dated in ``[start, end)``
    (``None``: unbounded). On a table written sorted by date, a scan reads only the row
    groups of those dates."""
    keep = pl.lit(True)
    if start is not None:
        keep &= pl.col(_DATE) >= start
    if end is not None:
        keep &= pl.col(_DATE) < end
    return table.filter(keep)


def sorted_prior_rows(table: pl.LazyFrame) -> pl.LazyFrame:
    """A running-count table in its order: by date, then work (what
    :func:`prior_rows_between` reads fastest)."""
    return table.sort(_DATE, S.WORK_ID)


def last_prior_rows(rows: pl.LazyFrame, keys: list[str] | None = None) -> pl.LazyFrame:
    """Per key (default ``work_id``), the last row of a running-count table: its count up to its
    latest date. With the rows dated before ``d`` it answers every :func:`with_prior_counts`
    lookup at a date on or after the latest one, as the rows themselves would."""
    keys = keys or [S.WORK_ID]
    return rows.group_by(keys).agg(pl.col(_DATE).max(), pl.col(_RUNNING).max())


class CarriedPriorRows:
    """:func:`last_prior_rows` of a running-count table keyed by a work index (an integer
    ``0 <= work_id < n_works``), held by index and carried forward batch after batch.

    A batch that reads the counts of its own works gets their rows by position, and the
    rows of the next dates update the works they name only: kept as a table, every batch
    joined and re-grouped the last rows of every cited work of the corpus (6M at 2.3M
    papers), a cost of batches times the works.
    """

    _NONE = np.iinfo(np.int32).min  # no row yet

    def __init__(self, n_works: int, schema: pl.Schema) -> None:
        self.schema = schema
        self.date = np.full(n_works, self._NONE, np.int32)  # days since 1970-01-01
        self.running = np.zeros(n_works, np.int64)

    def update(self, rows: pl.DataFrame) -> None:
        """Take in rows of a running-count table dated after every row held."""
        last = last_prior_rows(rows.lazy()).collect()
        at = last.get_column(S.WORK_ID).to_numpy()
        self.date[at] = last.get_column(_DATE).cast(pl.Int32).to_numpy()
        self.running[at] = last.get_column(_RUNNING).to_numpy()

    def rows(self, works: pl.Series) -> pl.DataFrame:
        """The held row of each of ``works`` (distinct indices) that has one."""
        at = works.to_numpy()
        at = at[self.date[at] != self._NONE]
        return pl.DataFrame({S.WORK_ID: at, _DATE: self.date[at], _RUNNING: self.running[at]}).cast(
            {S.WORK_ID: self.schema[S.WORK_ID], _DATE: pl.Date, _RUNNING: pl.Int64}
        )


def dated_paper_citations(paper_citations: pl.LazyFrame) -> pl.LazyFrame:
    """``(paper_id, work_id, _cited_on)`` of :func:`paper_citations`: the rows the corpus
    running count (``candidate_prior_citations``) counts."""
    return paper_citations.select(S.PAPER_ID, S.WORK_ID, pl.col(S.FIRST_VERSION_DATE).alias(_DATE))


def survey_prior_tables(survey_citations: pl.LazyFrame) -> dict[str, pl.LazyFrame]:
    """The two survey running-count tables of :func:`prior_tables`."""
    sc = survey_citations.select(
        S.SURVEY_ID, S.WORK_ID, S.PRIMARY_CATEGORY, pl.col(S.FIRST_VERSION_DATE).alias(_DATE)
    )
    return {
        S.N_CITING_SURVEYS: running_counts(sc, [S.WORK_ID]),
        S.N_CITING_SURVEYS_SAME_CATEGORY: running_counts(sc, [S.WORK_ID, S.PRIMARY_CATEGORY]),
    }


def field_prior_table(paper_citations: pl.LazyFrame) -> pl.LazyFrame:
    """The running-count table of ``candidate_prior_citations`` counted per field: distinct
    corpus papers citing the work, by the citers' primary category.

    Args:
        paper_citations: :func:`paper_citations` (``paper_id, work_id, primary_category,
            first_version_date``), the citer's category and date.
    """
    pc = paper_citations.select(
        S.PAPER_ID, S.WORK_ID, S.PRIMARY_CATEGORY, pl.col(S.FIRST_VERSION_DATE).alias(_DATE)
    )
    return running_counts(pc, [S.WORK_ID, S.PRIMARY_CATEGORY])


def count_before(
    pairs: pl.LazyFrame, table: pl.LazyFrame, by: list[str], name: str
) -> pl.LazyFrame:
    """``pairs`` (sorted by ``survey_date``) with column ``name``: the running count of
    ``table`` (:func:`running_counts` keyed by ``by``) strictly before the pair's
    ``survey_date``; 0 when none (an undated survey too)."""
    return (
        pairs.join_asof(
            table,
            left_on=S.SURVEY_DATE,
            right_on=_DATE,
            by=by,
            strategy="backward",
            allow_exact_matches=False,
            check_sortedness=False,
        )
        .drop(_DATE)
        .with_columns(pl.col(_RUNNING).fill_null(0).alias(name))
        .drop(_RUNNING)
    )


def counts_itself(cites_it: pl.Expr) -> pl.Expr:
    """1 where a running count of a pair holds the survey itself, else 0: it cites the work
    (``cites_it``) and its own first version precedes its text date."""
    return (
        (cites_it & (pl.col(S.FIRST_VERSION_DATE) < pl.col(S.SURVEY_DATE)))
        .fill_null(False)
        .cast(pl.Int64)
    )


def with_prior_counts(
    pairs: pl.LazyFrame, tables: dict[str, pl.LazyFrame], cites_it: pl.Expr
) -> pl.LazyFrame:
    """``pairs`` (``survey_id, work_id, primary_category, first_version_date, survey_date``)
    with the three counts.

    Each counts citers first posted strictly before the pair's ``survey_date``; an
    undated survey gets 0. The survey never counts itself: when it cites the work
    (``cites_it``, true for positives) and its own first version precedes its text date,
    the running tables hold it, so it is taken off. Row order is not kept.
    """
    own = counts_itself(cites_it)
    out = pairs.sort(S.SURVEY_DATE, nulls_last=False)
    for name, table in tables.items():
        by = (
            [S.WORK_ID, S.PRIMARY_CATEGORY]
            if name == S.N_CITING_SURVEYS_SAME_CATEGORY
            else [S.WORK_ID]
        )
        out = count_before(out, table, by, name).with_columns(pl.col(name) - own)
    return out


def work_features(works: pl.LazyFrame) -> pl.LazyFrame:
    """``(work_id, _work_paper_id, known_date, candidate categories, text_kind)`` of every work."""
    has_abstract = pl.col(S.ABSTRACT).str.strip_chars().fill_null("") != ""
    has_title = shown_title().str.strip_chars().fill_null("") != ""
    kind = id_kind(pl.col(S.WORK_ID))
    return works.select(
        S.WORK_ID,
        pl.col(S.PAPER_ID).alias(WORK_PAPER),
        S.KNOWN_DATE,
        S.DATE_SOURCE,
        pl.col(S.CATEGORIES).alias(S.CANDIDATE_CATEGORIES),
        pl.when(has_abstract & pl.col(S.PAPER_ID).is_not_null())
        .then(pl.lit("abstract"))
        .otherwise(
            pl.when(has_abstract)
            .then(pl.lit("abstract_"))
            .when(has_title)
            .then(pl.lit("title_"))
            .otherwise(pl.lit("none_"))
            + kind.fill_null("other")
        )
        .alias(TEXT_KIND),
    )


def shown_title() -> pl.Expr:
    """The title a candidate is shown with (over ``works``): a corpus paper's own title, else
    the title parsed from the bib strings citing it (``works.parsed_title``)."""
    return pl.coalesce(pl.col(S.TITLE), pl.col(S.PARSED_TITLE))


def in_domain_expr(survey_category: str = S.PRIMARY_CATEGORY) -> pl.Expr:
    """The candidate is a corpus paper whose own categories include the survey's primary
    category (column ``survey_category``; the candidate's corpus paper id in :data:`WORK_PAPER`),
    or a work without one whose OpenAlex subfield gives it that category
    (``_field_categories``, null unless ``[negatives] subfield_as_field``:
    :mod:`pipeline.rules.fields`)."""
    category = pl.col(survey_category)
    own = pl.col(WORK_PAPER).is_not_null() & pl.col(S.CANDIDATE_CATEGORIES).list.contains(
        category
    ).fill_null(False)
    by_subfield = pl.col(WORK_PAPER).is_null() & pl.col(FIELD_CATEGORIES).list.contains(
        category
    ).fill_null(False)
    return (own | by_subfield).fill_null(False)


def _log2_bin(x: pl.Expr, top: int) -> pl.Expr:
    # 0 -> 0, 1 -> 1, 2-3 -> 2, 4-7 -> 3, ... capped at ``top``
    return (
        pl.when(x <= 0)
        .then(0)
        .otherwise((x.cast(pl.Float64).log(2).floor() + 1).clip(1, top))
        .cast(pl.Int8)
    )


def stratum_columns() -> list[pl.Expr]:
    """``age_bin``, ``citations_bin``, ``surveys_bin`` (``text_kind``/``in_domain`` exist already).

    Needs ``known_date``, ``survey_date`` and the prior counts.
    """
    years = (pl.col(S.SURVEY_DATE) - pl.col(S.KNOWN_DATE)).dt.total_days() / 365.25
    age = (
        pl.when(years.is_null())
        .then(-1)
        .when(years < 1)
        .then(0)
        .otherwise((years.log(2).floor() + 1).clip(1, 5))
        .cast(pl.Int8)
    )
    return [
        age.alias(AGE_BIN),
        _log2_bin(pl.col(S.CANDIDATE_PRIOR_CITATIONS), 6).alias(CITATIONS_BIN),
        _log2_bin(pl.col(S.N_CITING_SURVEYS), 5).alias(SURVEYS_BIN),
    ]


def latest_possible_date() -> pl.Expr:
    """Latest date a work may really have: its ``known_date``; the month's last day when that
    date is only the month of an arXiv id; December 31 when it is only a reference's year."""
    source = pl.col(S.DATE_SOURCE)
    return (
        pl.when(source == "arxiv_id")
        .then(pl.col(S.KNOWN_DATE).dt.month_end())
        .when(source == "reference_year")
        .then(pl.date(pl.col(S.KNOWN_DATE).dt.year(), 12, 31))
        .otherwise(pl.col(S.KNOWN_DATE))
    )


# --------------------------------------------------------------------- survey tables
def surveys_frame(surveys: pl.LazyFrame) -> pl.LazyFrame:
    """``(survey_id, primary_category, first_version_date, survey_date)`` of every detected survey
    (``surveys``: the ``surveys`` stage's table).

    ``survey_date`` is the survey's text date (:mod:`pipeline.rules.visible`).
    """
    return surveys.select(
        pl.col(S.PAPER_ID).alias(S.SURVEY_ID),
        S.PRIMARY_CATEGORY,
        S.FIRST_VERSION_DATE,
        survey_date_expr().alias(S.SURVEY_DATE),
    )


def survey_citations(surveys: pl.LazyFrame, cites: pl.LazyFrame) -> pl.LazyFrame:
    """Distinct ``(survey_id, work_id, primary_category, first_version_date)``: what each survey cites.

    Args:
        surveys: :func:`surveys_frame`.
        cites: the ``works`` stage's ``cites`` table.
    """
    surveys = surveys.drop(S.SURVEY_DATE).collect(engine="streaming")
    cites = (
        cites
        # the surveys' rows only, before the distinct: not every citation of the corpus
        .filter(
            pl.col(S.PAPER_ID).is_in(surveys[S.SURVEY_ID].implode())
            & pl.col(S.WORK_ID).is_not_null()
        )
        .select(pl.col(S.PAPER_ID).alias(S.SURVEY_ID), S.WORK_ID)
        .unique()
    )
    return cites.join(surveys.lazy(), on=S.SURVEY_ID, how="inner")


def paper_citations(
    papers: pl.LazyFrame, cites: pl.LazyFrame, works: pl.LazyFrame | None = None
) -> pl.LazyFrame:
    """Distinct ``(paper_id, work_id, primary_category, first_version_date)`` of every corpus
    paper; of the works in ``works`` (a ``work_id`` column) only, when given.

    Args:
        papers: the extract ``papers`` table, winning copies
            (:func:`pipeline.rules.tables.scan_extract`).
        cites: the ``works`` stage's ``cites`` table, or a part's rows of it
            (:attr:`WorkPart.cites`).
        works: only these works' rows, when given.
    """
    papers = papers.select(S.PAPER_ID, S.PRIMARY_CATEGORY, S.FIRST_VERSION_DATE)
    cites = cites.filter(pl.col(S.WORK_ID).is_not_null())
    if works is not None:
        cites = cites.join(works.select(S.WORK_ID).unique(), on=S.WORK_ID, how="semi")
    return cites.select(S.PAPER_ID, S.WORK_ID).unique().join(papers, on=S.PAPER_ID, how="inner")


@dataclass(frozen=True)
class WorkPart:
    """A disjoint part of the corpus's works (:func:`work_parts`): ``where``, the filter on
    ``work_id`` that selects it, and ``cites``, the ``(paper_id, work_id)`` rows of ``cites``
    with a work of the part."""

    where: pl.Expr
    cites: pl.LazyFrame


def work_parts(
    cites: pl.LazyFrame,
    cites_files: list[Path],
    part_rows: int,
    batch_rows: int,
    directory: Path | None = None,
) -> list[WorkPart]:
    """The corpus's works cut into disjoint parts of about ``part_rows`` rows of
    ``cites`` (the ``works`` stage's table, read from ``cites_files``) each, by a hash of the id (one part, no filter, for a small corpus). A query
    whose rows of a work depend on that work's rows only (a group-by or join on
    ``work_id``) gives the same rows part by part.

    ``directory``: ``cites`` is split there into one file per part in a single pass, so
    that each part's queries read their own rows (reading the whole table once per part
    grows with the square of the corpus); without it a part's rows are a filter of the
    whole table. ``batch_rows``: rows read at a time while splitting.
    """
    cites = cites.filter(pl.col(S.WORK_ID).is_not_null()).select(S.PAPER_ID, S.WORK_ID)
    n = cites.select(pl.len()).collect(engine="streaming").item()
    k = max(1, -(-n // part_rows))
    if k == 1:
        return [WorkPart(pl.lit(True), cites)]
    index = pl.col(S.WORK_ID).hash(0) % k
    wheres = [index == i for i in range(k)]
    if directory is None:
        return [WorkPart(w, cites.filter(w)) for w in wheres]
    directory.mkdir(parents=True, exist_ok=True)
    paths = [directory / f"{i:05d}.parquet" for i in range(k)]
    schema = pa.schema([(S.PAPER_ID, pa.string()), (S.WORK_ID, pa.string())])
    writers = [pq.ParquetWriter(p, schema) for p in paths]
    try:
        for path in cites_files:
            for rb in pq.ParquetFile(path).iter_batches(
                batch_size=batch_rows, columns=[S.PAPER_ID, S.WORK_ID]
            ):
                chunk = (
                    pl.from_arrow(rb)
                    .drop_nulls(S.WORK_ID)
                    .with_columns(index.cast(pl.Int64).alias("_part"))
                )
                for (i,), rows in chunk.partition_by("_part", as_dict=True).items():
                    writers[i].write_table(rows.drop("_part").to_arrow().cast(schema, safe=False))
    finally:
        for w in writers:
            w.close()
    return [WorkPart(w, pl.scan_parquet(p)) for w, p in zip(wheres, paths, strict=True)]


# rows per row group of the corpus running-count parts: a reader of some dates
# (:func:`prior_rows_between`) reads their row groups only
PRIOR_ROW_GROUP = 100_000


def corpus_prior_counts(
    papers: pl.LazyFrame,
    parts: list[WorkPart],
    directory: Path,
    rekey: Callable[[pl.LazyFrame], pl.LazyFrame] | None = None,
) -> pl.LazyFrame:
    """The corpus running-count table (``candidate_prior_citations``) of every cited work,
    written to ``directory`` in parts (``parts``: :func:`work_parts`), each sorted by
    date (:func:`sorted_prior_rows`), and scanned back. ``papers``: as in
    :func:`paper_citations`.

    Its group-by over every citation of the corpus held 1.4 GB at 300k papers (10 GB
    projected at 2.3M): a work's counts depend on its own rows only, so the table does
    not depend on the parts. ``rekey``: applied to each part's citations before they are
    counted (a caller's own work keys, e.g. integers; a work's counts do not depend on its
    key, and the table is sorted by date, then that key).
    """
    directory.mkdir(parents=True, exist_ok=True)
    for i, part in enumerate(parts):
        # rekeyed before the distinct and the group-by, which then hash the caller's keys
        # (a work's counts are the same under either key)
        cites = rekey(part.cites) if rekey else part.cites
        rows = dated_paper_citations(paper_citations(papers, cites))
        # running_counts sorts by date, then work: sorted_prior_rows' order
        collected_running_counts(rows, [S.WORK_ID]).write_parquet(
            directory / f"{i:05d}.parquet", row_group_size=PRIOR_ROW_GROUP
        )
    return pl.scan_parquet(sorted(directory.glob("*.parquet")))


def prior_tables(
    citations: pl.LazyFrame,
    works: pl.LazyFrame | None = None,
    corpus: pl.LazyFrame | None = None,
    corpus_citations: pl.LazyFrame | None = None,
    survey: dict[str, pl.DataFrame] | None = None,
) -> dict[str, pl.LazyFrame]:
    """The running-count tables of :func:`pipeline.rules.visible.with_prior_counts`, collected.

    ``citations``: :func:`survey_citations`. ``works``: only these works' rows (a ``work_id``
    column), which is all a caller that counts for known works needs: the corpus-wide table
    has a row per cited work and date (60M rows at 2.3M papers), more than a stage should
    hold. ``corpus``: the corpus table of :func:`corpus_prior_counts`, when the caller made it
    already (read, not recomputed); else ``corpus_citations``: :func:`paper_citations` of the
    same ``works``, from which it is counted. ``survey``: :func:`survey_prior_tables` of the
    whole ``citations``, collected once by a caller that asks for many sets of ``works`` (a
    work's rows depend on its own citations only, so they are cut to ``works`` here instead
    of counted again: 0.6 CPU s a call at 300k papers, growing with the corpus).
    """
    sc = citations
    if works is not None:
        works = works.select(S.WORK_ID).unique()
        sc = sc.join(works, on=S.WORK_ID, how="semi")
    if survey is not None:
        cut = _cut_survey_tables(survey, works)
    if corpus is None:
        if corpus_citations is None:
            raise ValueError("prior_tables needs corpus or corpus_citations")
        tables = {
            **(survey_prior_tables(sc) if survey is None else cut),
            # counted before the others, in steps (collected_running_counts says why)
            S.CANDIDATE_PRIOR_CITATIONS: collected_running_counts(
                dated_paper_citations(corpus_citations), [S.WORK_ID]
            ).lazy(),
        }
    else:
        # the corpus table as given (its work ids may be a caller's own keys, e.g. integers)
        table = corpus if works is None else corpus.join(works, on=S.WORK_ID, how="semi")
        tables = {
            **(survey_prior_tables(sc) if survey is None else cut),
            S.CANDIDATE_PRIOR_CITATIONS: sorted_prior_rows(table),
        }
    got = pl.collect_all(list(tables.values()), engine="streaming")
    return {name: df.lazy() for name, df in zip(tables, got, strict=True)}


def _cut_survey_tables(
    survey: dict[str, pl.DataFrame], works: pl.LazyFrame | None
) -> dict[str, pl.LazyFrame]:
    """The rows of ``works`` (None: all) of each survey running-count table, in
    :func:`running_counts`' order (date, then keys; a row per key and date, so the order is
    one)."""
    if works is None:
        return {name: table.lazy() for name, table in survey.items()}
    out = {}
    for name, table in survey.items():
        keys = [c for c in table.columns if c not in (_DATE, _RUNNING)]
        out[name] = table.lazy().join(works, on=S.WORK_ID, how="semi").sort(_DATE, *keys)
    return out
