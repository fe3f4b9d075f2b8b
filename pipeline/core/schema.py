"""Every table the pipeline writes: column names and Arrow types, in one place.

Stages cast on read (``scan``) and check on write (``check``); nobody else spells
a column name as a fresh literal when a constant exists here.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pyarrow as pa

SCHEMA_VERSION = 7  # 2: extract sections table; 3: text_version_date, title keys, resolved_by;
# 4: works.parsed_title, candidate text without its citer's string; 5: openalex records,
# candidate text and judgment-side columns from them; 6: popularity judgment-side only;
# 7: extract section_texts table

# ----------------------------------------------------------------- column names
PAPER_ID = "paper_id"
TITLE = "title"
ABSTRACT = "abstract"
CATEGORIES = "categories"
PRIMARY_CATEGORY = "primary_category"
FIRST_VERSION_DATE = "first_version_date"
# date of the last version in the record's ``versions``: the version whose text the corpus holds
TEXT_DATE = "text_version_date"
UPDATE_DATE = "update_date"
LICENSE = "license"
DOI = "doi"
N_BIB_ENTRIES = "n_bib_entries"
LAYOUT = "layout"
SOURCE_FILE = "source_file"
LINE_NUMBER = "line_number"

REF_ID = "ref_id"
ARXIV_ID = "arxiv_id"
OPENALEX_ID = "openalex_id"
RAW = "raw"
PARSED_TITLE = "parsed_title"

SECTION = "section"
TOP_SECTION = "top_section"
SECTION_INDEX = "section_index"
N_MENTIONS = "n_mentions"
SEC_NUMBER = "sec_number"
LEVEL = "level"
TOP_INDEX = "top_index"
UNNAMED = "unnamed"
APPENDIX = "appendix"

REASON = "reason"
HEAD = "head"

WORK_ID = "work_id"
ALIASES = "aliases"
KNOWN_DATE = "known_date"
N_CITING_PAPERS = "n_citing_papers"
RESOLVED_BY = "resolved_by"
TITLE_KEY = "title_key"
RAW_TITLE_KEY = "raw_title_key"
DATE_SOURCE = "date_source"

SURVEY_ID = "survey_id"
N_REFS = "n_refs"
N_RESOLVED = "n_resolved"
RESOLVED_FRAC = "resolved_frac"

ROLE = "role"
LABEL = "label"
LABEL_REASON = "label_reason"
HARD_NEGATIVE_REASON = "hard negative"  # the label_reason of a hard negative (tier 0)
LABEL_NAME = "label_name"

ROLES = (
    "introduction",
    "background",
    "related_work",
    "method",
    "experiment",
    "discussion",
    "conclusion",
    "back_matter",
    "other",
)
ROLE_COUNT_COLUMNS = tuple(f"n_{r}" for r in ROLES)

LABEL_NAMES = {
    0: "hard_negative",
    1: "background",
    2: "tool_method",
    3: "related_work",
    4: "essential",
}

NEGATIVE_SOURCE = "negative_source"
N_CITING_SURVEYS = "n_citing_surveys"
N_CITING_SURVEYS_SAME_CATEGORY = "n_citing_surveys_same_category"
SPLIT = "split"
CANDIDATE_ID = "candidate_id"
IN_DOMAIN = "in_domain"
CANDIDATE_PRIOR_CITATIONS = "candidate_prior_citations"
BASELINE = "baseline"
BASELINE_RANK = "rank"

# ----------------------------------------------------------------- extract tables
PAPERS = pa.schema(
    [
        (PAPER_ID, pa.string()),
        (TITLE, pa.string()),
        (ABSTRACT, pa.string()),
        (CATEGORIES, pa.list_(pa.string())),
        (PRIMARY_CATEGORY, pa.string()),
        (FIRST_VERSION_DATE, pa.date32()),
        (TEXT_DATE, pa.date32()),
        (UPDATE_DATE, pa.date32()),
        (LICENSE, pa.string()),
        (DOI, pa.string()),
        (N_BIB_ENTRIES, pa.int32()),
        (LAYOUT, pa.string()),
        (SOURCE_FILE, pa.string()),
        (LINE_NUMBER, pa.int64()),
    ]
)

REFERENCES = pa.schema(
    [
        (PAPER_ID, pa.string()),
        (REF_ID, pa.string()),
        (ARXIV_ID, pa.string()),
        (DOI, pa.string()),
        (OPENALEX_ID, pa.string()),
        (RAW, pa.string()),
        (SOURCE_FILE, pa.string()),
    ]
)

MENTIONS = pa.schema(
    [
        (PAPER_ID, pa.string()),
        (REF_ID, pa.string()),
        (SECTION, pa.string()),
        (TOP_SECTION, pa.string()),
        (SECTION_INDEX, pa.int32()),
        (N_MENTIONS, pa.int32()),
        (SOURCE_FILE, pa.string()),
    ]
)

# one row per section occurrence of every paper (including those without citations), in
# paper order; mentions join it on (paper_id, section_index). See pipeline/stages/extract/.
SECTIONS = pa.schema(
    [
        (PAPER_ID, pa.string()),
        (SECTION_INDEX, pa.int32()),
        (SECTION, pa.string()),
        (SEC_NUMBER, pa.string()),
        (LEVEL, pa.int8()),  # 1 section, 2 subsection, 3 subsubsection, 4 paragraph; 0 = 2024 key
        (TOP_INDEX, pa.int32()),  # section_index of the enclosing top-level section
        (UNNAMED, pa.bool_()),  # a top-level section known only from its subsections' numbers
        (APPENDIX, pa.bool_()),  # a top-level section numbered with a letter ("A", "D.1")
        (SOURCE_FILE, pa.string()),
    ]
)

# the text of every section occurrence of a paper whose licence some release may carry
# (pipeline.rules.licences.extractable), markers rendered neutral
# (pipeline.stages.extract.texts); joins ``sections`` on (paper_id, section_index). An
# occurrence without a paragraph of its own (an unnamed section, the abstract) has no row.
SECTION_TEXT = "text"
SECTION_TEXTS = pa.schema(
    [
        (PAPER_ID, pa.string()),
        (SECTION_INDEX, pa.int32()),
        (SECTION_TEXT, pa.string()),
        (SOURCE_FILE, pa.string()),
    ]
)

REJECTS = pa.schema(
    [
        (SOURCE_FILE, pa.string()),
        (LINE_NUMBER, pa.int64()),
        (REASON, pa.string()),
        (HEAD, pa.binary()),
    ]
)

EXTRACT_TABLES = {
    "papers": PAPERS,
    "references": REFERENCES,
    "mentions": MENTIONS,
    "sections": SECTIONS,
    "section_texts": SECTION_TEXTS,
    "rejects": REJECTS,
}

# ----------------------------------------------------------------- later stages
WORKS = pa.schema(
    [
        (WORK_ID, pa.string()),
        (ALIASES, pa.list_(pa.string())),
        (PAPER_ID, pa.string()),  # the corpus paper this work is, else null
        (TITLE, pa.string()),
        (ABSTRACT, pa.string()),
        (CATEGORIES, pa.list_(pa.string())),
        (FIRST_VERSION_DATE, pa.date32()),
        (RAW, pa.string()),
        # works outside the corpus: the title parsed from the bib strings citing it, as a
        # title key (pipeline.rules.titles): what the release shows, whoever cited it
        (PARSED_TITLE, pa.string()),
        (KNOWN_DATE, pa.date32()),
        (DATE_SOURCE, pa.string()),  # "corpus", "arxiv_id", "reference_year" (works/dates.py)
        (N_CITING_PAPERS, pa.int64()),
    ]
)

# every bib entry of every (kept) paper with the work it resolves to (null: no identifier)
CITES = pa.schema(
    [
        (PAPER_ID, pa.string()),
        (REF_ID, pa.string()),
        (WORK_ID, pa.string()),
        (
            RESOLVED_BY,
            pa.string(),
        ),  # "identifier", "title" (pipeline.rules.titles), null: unresolved
    ]
)

# works' raw identifier links (before junk identifiers lose theirs): two aliases carried
# by one bib entry or one corpus paper, alias < other_alias (stages/works/identity.py)
LINK_ALIAS = "alias"
LINK_OTHER_ALIAS = "other_alias"
LINKS = pa.schema([(LINK_ALIAS, pa.string()), (LINK_OTHER_ALIAS, pa.string())])

# every title key known for a work: its corpus title, the title key of each entry citing it
# ----------------------------------------------------------------- openalex
# One row per work of ``works`` that has an answer in the lookup cache (stage ``openalex``).
LOOKUP_KEY = "lookup_key"  # the alias the work was looked up by
OA_FOUND = "openalex_found"  # false: OpenAlex has no work for the key (deleted or unknown)
OA_SOURCE = "openalex_source"  # api or snapshot
OA_ANSWERED_ID = "openalex_answered_id"  # the id the record answers with (merged works)
OA_TITLE = "oa_title"
OA_PUBLICATION_DATE = "oa_publication_date"
OA_YEAR = "oa_year"
OA_TYPE = "oa_type"
OA_VENUE = "oa_venue"
OA_TOPIC = "oa_topic"
OA_SUBFIELD = "oa_subfield"
OA_FIELD = "oa_field"
OA_DOMAIN = "oa_domain"
OA_LANGUAGE = "oa_language"
OA_RETRACTED = "oa_is_retracted"
OA_DOI = "oa_doi"
OA_ARXIV_ID = "oa_arxiv_id"
OA_PMID = "oa_pmid"
OA_ABSTRACT = "oa_abstract"  # as the release may carry it ([openalex] abstracts), else null
OA_HAS_ABSTRACT = "oa_has_abstract"  # the record has an abstract, carried or not
OA_LICENSE = "oa_license"
OA_UPDATED_DATE = "oa_updated_date"
OPENALEX_RECORDS = pa.schema(
    [
        (WORK_ID, pa.string()),
        (LOOKUP_KEY, pa.string()),
        (OA_FOUND, pa.bool_()),
        (OA_SOURCE, pa.string()),
        (OA_ANSWERED_ID, pa.string()),
        (OA_TITLE, pa.string()),
        (OA_PUBLICATION_DATE, pa.date32()),
        (OA_YEAR, pa.int32()),
        (OA_TYPE, pa.string()),
        (OA_VENUE, pa.string()),
        (OA_TOPIC, pa.string()),
        (OA_SUBFIELD, pa.string()),
        (OA_FIELD, pa.string()),
        (OA_DOMAIN, pa.string()),
        (OA_LANGUAGE, pa.string()),
        (OA_RETRACTED, pa.bool_()),
        (OA_DOI, pa.string()),
        (OA_ARXIV_ID, pa.string()),
        (OA_PMID, pa.string()),
        (OA_ABSTRACT, pa.string()),
        (OA_HAS_ABSTRACT, pa.bool_()),
        (OA_LICENSE, pa.string()),
        (OA_UPDATED_DATE, pa.string()),
    ]
)

TITLE_KEYS = pa.schema(
    [
        (WORK_ID, pa.string()),
        (TITLE_KEY, pa.string()),
    ]
)

# The release's works table (``release_files.WORKS_TABLE_FILE``): every work the corpus knows,
# as bibliography resolution keys it (pipeline.evaluate.bibliography.score) and nothing else. No
# count, category or date: a ranking system that reads it learns nothing about a candidate
# beyond the ids and titles the candidates view shows.
WORKS_TABLE = pa.schema(
    [
        (WORK_ID, pa.string()),
        (ALIASES, pa.list_(pa.string())),
        # the key of the title the release shows (pipeline.rules.titles.identifying_title_key)
        (TITLE_KEY, pa.string()),
        # the title key of one bib string citing the work (works.raw; null for corpus papers)
        (RAW_TITLE_KEY, pa.string()),
    ]
)

SURVEYS = pa.schema(
    [
        (PAPER_ID, pa.string()),
        (TITLE, pa.string()),
        (PRIMARY_CATEGORY, pa.string()),
        (FIRST_VERSION_DATE, pa.date32()),
        (TEXT_DATE, pa.date32()),
        (N_REFS, pa.int64()),
        (N_RESOLVED, pa.int64()),
        (RESOLVED_FRAC, pa.float64()),
        (REASON, pa.string()),
    ]
)

LABELS = pa.schema(
    [
        (SURVEY_ID, pa.string()),
        (WORK_ID, pa.string()),
        (LABEL, pa.int8()),
        (LABEL_REASON, pa.string()),
        (N_MENTIONS, pa.int64()),
        *[(c, pa.int64()) for c in ROLE_COUNT_COLUMNS],
    ]
)


def check(table: pa.Table, schema: pa.Schema, what: str) -> pa.Table:
    """Return ``table`` with columns in schema order and cast to schema types.

    Raises:
        ValueError: a column of the schema is missing (names ``what`` and the column).
    """
    missing = [n for n in schema.names if n not in table.column_names]
    if missing:
        raise ValueError(f"{what}: missing column(s) {missing}; has {table.column_names}")
    extra = [n for n in table.column_names if n not in schema.names]
    ordered = table.select(list(schema.names) + extra)
    target = pa.schema(list(schema) + [ordered.schema.field(n) for n in extra])
    return ordered.cast(target)


def polars_schema(schema: pa.Schema) -> dict[str, pl.DataType]:
    """Polars dtypes for an Arrow schema (for empty frames and casts on read)."""
    # not schema.empty_table(): it imports pandas (0.3 s, 40 MB in every worker process)
    empty = pl.from_arrow(pa.Table.from_batches([], schema=schema))
    assert isinstance(empty, pl.DataFrame)
    return dict(empty.schema)


def scan(paths: list[Path] | Path, schema: pa.Schema) -> pl.LazyFrame:
    """Lazy scan of Parquet files cast to ``schema``; an empty frame when there are none."""
    if isinstance(paths, Path):
        paths = sorted(paths.glob("*.parquet")) if paths.is_dir() else [paths]
    if not paths:
        return pl.LazyFrame(schema=polars_schema(schema))
    dtypes = polars_schema(schema)
    lf = pl.scan_parquet([str(p) for p in paths])
    return lf.with_columns([pl.col(n).cast(t) for n, t in dtypes.items()])


# ----------------------------------------------------------------- negatives, split, release
HAS_NEGATIVES = "has_negatives"
N_POSITIVES = "n_positives"
N_NEGATIVES = "n_negatives"
N_NEGATIVE_CANDIDATES = "n_negative_candidates"
EARLIEST_CITING_SURVEY_DATE = "earliest_citing_survey_date"
SURVEY_DATE = "survey_date"
CANDIDATE_DATE = "candidate_date"
SURVEY_TITLE = "survey_title"
SURVEY_ABSTRACT = "survey_abstract"
SURVEY_CATEGORIES = "survey_categories"
SURVEY_PRIMARY_CATEGORY = "survey_primary_category"
CANDIDATE_ALIASES = "candidate_aliases"
CANDIDATE_TITLE = "candidate_title"
CANDIDATE_ABSTRACT = "candidate_abstract"
CANDIDATE_CATEGORIES = "candidate_categories"
CANDIDATE_RAW = "candidate_raw"
# the papers' own arXiv licences (extract's ``license``), kept for reuse, not for ranking
SURVEY_LICENSE = "survey_license"
CANDIDATE_LICENSE = "candidate_license"
# the candidate's OpenAlex record (stage openalex): judgment side until the leak audit passes
# with them in the candidates view
CANDIDATE_OPENALEX_ID = "candidate_openalex_id"
CANDIDATE_VENUE = "candidate_venue"
CANDIDATE_YEAR = "candidate_year"
CANDIDATE_SUBFIELD = "candidate_subfield"
CANDIDATE_RETRACTED = "candidate_retracted"
SPLIT_NAMES = ("train", "eval")
# how a hard negative was admitted by the same-field rule (see stages/negatives/rules.py)
NEGATIVE_SOURCES = ("own_category", "citing_survey_category", "cited_in_category")
MATCH_ROUND = "match_round"
N_MATCHED_EXACT = "n_matched_exact"
N_SHORTFALL = "n_shortfall"
N_POSITIVES_AFTER_SURVEY = "n_positives_after_survey"
# BEIR/MTEB column names of the retrieval view of the release
BEIR_ID = "_id"
BEIR_TEXT = "text"
BEIR_TITLE = "title"
BEIR_QUERY_ID = "query-id"
BEIR_CORPUS_ID = "corpus-id"
BEIR_SCORE = "score"
BEIR_CORPUS_IDS = "corpus-ids"  # MTEB's top_ranked: a query's candidate ids

NEGATIVES = pa.schema(
    [
        (SURVEY_ID, pa.string()),
        (WORK_ID, pa.string()),
        (LABEL, pa.int8()),
        (NEGATIVE_SOURCE, pa.string()),
        (N_CITING_SURVEYS, pa.int64()),
        (N_CITING_SURVEYS_SAME_CATEGORY, pa.int64()),
        (CANDIDATE_PRIOR_CITATIONS, pa.int64()),
        (KNOWN_DATE, pa.date32()),
        (EARLIEST_CITING_SURVEY_DATE, pa.date32()),
        (MATCH_ROUND, pa.int8()),  # the matching round that drew it (negatives.sampling.ROUNDS)
    ]
)

# one row per survey: how many negatives it got (a survey without any stays, flagged)
NEGATIVE_SURVEYS = pa.schema(
    [
        (SURVEY_ID, pa.string()),
        (PRIMARY_CATEGORY, pa.string()),
        (FIRST_VERSION_DATE, pa.date32()),
        (SURVEY_DATE, pa.date32()),
        (N_POSITIVES, pa.int64()),
        (N_POSITIVES_AFTER_SURVEY, pa.int64()),
        (N_NEGATIVE_CANDIDATES, pa.int64()),
        (N_NEGATIVES, pa.int64()),
        (N_MATCHED_EXACT, pa.int64()),
        (N_SHORTFALL, pa.int64()),
        (HAS_NEGATIVES, pa.bool_()),
    ]
)

SPLIT_SURVEYS = pa.schema(
    [
        (SURVEY_ID, pa.string()),
        (SPLIT, pa.string()),
        (PRIMARY_CATEGORY, pa.string()),
        (FIRST_VERSION_DATE, pa.date32()),
        (SURVEY_DATE, pa.date32()),
        (N_POSITIVES, pa.int64()),
        (N_NEGATIVES, pa.int64()),
        (HAS_NEGATIVES, pa.bool_()),
    ]
)

# positives (labels) and hard negatives of every survey, with the survey's split
CANDIDATES = pa.schema(
    [
        (SURVEY_ID, pa.string()),
        (WORK_ID, pa.string()),
        (LABEL, pa.int8()),
        (LABEL_REASON, pa.string()),  # the rule that gave the tier; "hard negative" for 0
        (SPLIT, pa.string()),
        (SURVEY_DATE, pa.date32()),
        (CANDIDATE_DATE, pa.date32()),
        (N_MENTIONS, pa.int64()),
        *[(c, pa.int64()) for c in ROLE_COUNT_COLUMNS],
        (NEGATIVE_SOURCE, pa.string()),
        (N_CITING_SURVEYS, pa.int64()),
        (N_CITING_SURVEYS_SAME_CATEGORY, pa.int64()),
        (CANDIDATE_PRIOR_CITATIONS, pa.int64()),
    ]
)

READING_LISTS = pa.schema(
    [
        (SURVEY_ID, pa.string()),
        (SURVEY_TITLE, pa.string()),
        (SURVEY_ABSTRACT, pa.string()),
        (SURVEY_CATEGORIES, pa.list_(pa.string())),
        (SURVEY_PRIMARY_CATEGORY, pa.string()),
        (SURVEY_DATE, pa.date32()),
        (CANDIDATE_ID, pa.string()),
        (CANDIDATE_ALIASES, pa.list_(pa.string())),
        (CANDIDATE_TITLE, pa.string()),
        (CANDIDATE_ABSTRACT, pa.string()),
        (CANDIDATE_CATEGORIES, pa.list_(pa.string())),
        (CANDIDATE_DATE, pa.date32()),
        (CANDIDATE_RAW, pa.string()),
        (LABEL, pa.int8()),
        (LABEL_NAME, pa.string()),
        (LABEL_REASON, pa.string()),
        (N_MENTIONS, pa.int64()),
        *[(c, pa.int64()) for c in ROLE_COUNT_COLUMNS],
        (IN_DOMAIN, pa.bool_()),
        (NEGATIVE_SOURCE, pa.string()),
        (N_CITING_SURVEYS, pa.int64()),
        (CANDIDATE_PRIOR_CITATIONS, pa.int64()),
        (SURVEY_LICENSE, pa.string()),
        (CANDIDATE_LICENSE, pa.string()),
        (CANDIDATE_OPENALEX_ID, pa.string()),
        (CANDIDATE_VENUE, pa.string()),
        (CANDIDATE_YEAR, pa.int32()),
        (CANDIDATE_SUBFIELD, pa.string()),
        (CANDIDATE_RETRACTED, pa.bool_()),
    ]
)

BEIR_QUERIES = pa.schema(
    [
        (BEIR_ID, pa.string()),
        (BEIR_TITLE, pa.string()),
        (BEIR_TEXT, pa.string()),
        (PRIMARY_CATEGORY, pa.string()),
    ]
)

BEIR_CORPUS = pa.schema(
    [
        (BEIR_ID, pa.string()),
        (BEIR_TITLE, pa.string()),
        (BEIR_TEXT, pa.string()),
    ]
)

# The full-text view (config ``corpus_sections``, pipeline.stages.corpus_sections): one row per
# section of every document of a split's corpus that is a corpus paper whose licence the
# release may carry (pipeline.rules.licences), in document order; ``corpus-id`` is the
# ``_id`` of ``corpus`` and qrels' ``corpus-id``.
SECTION_ORDER = "section_order"
HEADING = "heading"
PARENT_HEADING = "parent_heading"
CORPUS_SECTIONS = pa.schema(
    [
        (BEIR_CORPUS_ID, pa.string()),
        (SECTION_ORDER, pa.int32()),
        (HEADING, pa.string()),
        (PARENT_HEADING, pa.string()),
        (ROLE, pa.string()),
        (SECTION_TEXT, pa.string()),
        (LICENSE, pa.string()),
    ]
)

BEIR_QRELS = pa.schema(
    [
        (BEIR_QUERY_ID, pa.string()),
        (BEIR_CORPUS_ID, pa.string()),
        (BEIR_SCORE, pa.int32()),
    ]
)

# each query's candidates (MTEB's re-ranking input), ids sorted
BEIR_TOP_RANKED = pa.schema(
    [
        (BEIR_QUERY_ID, pa.string()),
        (BEIR_CORPUS_IDS, pa.list_(pa.string())),
    ]
)

# The answer-free view (release config ``candidates``): only what a system may see.
# No label, no mention counts, no negative_source, nothing computed from labels.
CANDIDATES_VIEW = pa.schema(
    [
        (SURVEY_ID, pa.string()),
        (SURVEY_TITLE, pa.string()),
        (SURVEY_ABSTRACT, pa.string()),
        (SURVEY_CATEGORIES, pa.list_(pa.string())),
        (SURVEY_PRIMARY_CATEGORY, pa.string()),
        (SURVEY_DATE, pa.date32()),
        (CANDIDATE_ID, pa.string()),
        (CANDIDATE_TITLE, pa.string()),
        (CANDIDATE_ABSTRACT, pa.string()),
        (CANDIDATE_CATEGORIES, pa.list_(pa.string())),
        (CANDIDATE_DATE, pa.date32()),
        (IN_DOMAIN, pa.bool_()),
    ]
)

# ----------------------------------------------------------------- aspects
# One query per topical section of a survey (pipeline/stages/aspects.py says what an aspect
# is in each layout); the release config ``aspects`` and its answer-free view.
ASPECT_ID = "aspect_id"
ASPECT_HEADING = "aspect_heading"
ASPECT_PARENT_HEADING = "aspect_parent_heading"
ASPECT_KIND = "aspect_kind"
ASPECT_LEVEL = "aspect_level"
ASPECT_RANK = "aspect_rank"
N_ASPECTS = "n_aspects"
NEGATIVE_KIND = "negative_kind"
N_IN_SURVEY_NEGATIVES = "n_in_survey_negatives"
N_HARD_NEGATIVES = "n_hard_negatives"
# the heading's own role decides the kind (pipeline.rules.roles.role_expr): a related-work
# heading, a discussion / open-challenges heading, a method or experiment heading after the
# survey's core started (a reviewed method family), any other topical heading
ASPECT_KINDS = ("related_work", "discussion", "method", "topical")
# 2022 layout: a top-level section without subsections, or a subsection (with its own
# subsubsections); 2024 layout: a heading key (same-named sections merged by the publisher)
ASPECT_LEVELS = ("section", "subsection", "key")
# a candidate of an aspect that the section does not cite: another positive of the survey
# (same expert, same field, another sub-topic) or one of the survey's hard negatives
NEGATIVE_KINDS = ("in_survey", "hard")

# one row per aspect of a released survey (stage ``aspects``)
ASPECTS = pa.schema(
    [
        (ASPECT_ID, pa.string()),
        (SURVEY_ID, pa.string()),
        (SPLIT, pa.string()),
        (SECTION_INDEX, pa.int32()),  # the section occurrence that heads the aspect
        (ASPECT_RANK, pa.int32()),  # 1-based, in paper order among the survey's aspects
        (N_ASPECTS, pa.int32()),
        (ASPECT_HEADING, pa.string()),
        (ASPECT_PARENT_HEADING, pa.string()),
        (ASPECT_KIND, pa.string()),
        (ASPECT_LEVEL, pa.string()),
        (N_POSITIVES, pa.int64()),
        (N_IN_SURVEY_NEGATIVES, pa.int64()),
        (N_HARD_NEGATIVES, pa.int64()),
        (N_MENTIONS, pa.int64()),
    ]
)

# one row per (aspect, candidate): every candidate of the aspect's survey (stage ``aspects``)
ASPECT_CANDIDATES = pa.schema(
    [
        (ASPECT_ID, pa.string()),
        (SURVEY_ID, pa.string()),
        (WORK_ID, pa.string()),
        (LABEL, pa.int8()),
        (LABEL_REASON, pa.string()),
        (NEGATIVE_KIND, pa.string()),
        (N_MENTIONS, pa.int64()),  # mentions of the work within the aspect's section
        (SPLIT, pa.string()),
    ]
)

# what identifies and describes an aspect query, in both aspect configs
_ASPECT_QUERY = [
    (ASPECT_ID, pa.string()),
    (SURVEY_ID, pa.string()),
    (ASPECT_HEADING, pa.string()),
    (ASPECT_PARENT_HEADING, pa.string()),
    (ASPECT_KIND, pa.string()),
    (ASPECT_LEVEL, pa.string()),
    (ASPECT_RANK, pa.int32()),
    (N_ASPECTS, pa.int32()),
]

# Baseline bibliographies the release computes where the citations are (judgment-side: they
# are made from the corpus's citation counts, which no file a system reads shows):
# ``pipeline.evaluate.systems.field_baselines``. One row per (survey, baseline, rank), rank from 1.
EVAL_BIBLIOGRAPHY_BASELINES = pa.schema(
    [
        (SURVEY_ID, pa.string()),
        (BASELINE, pa.string()),
        (BASELINE_RANK, pa.int32()),
        (WORK_ID, pa.string()),
    ]
)

# The answer-free view of the aspects (release config ``aspect_candidates``): the aspect
# query, then the columns of the main task's answer-free view.
ASPECT_CANDIDATES_VIEW = pa.schema(
    _ASPECT_QUERY + [f for f in CANDIDATES_VIEW if f.name != SURVEY_ID]
)

# The release config ``aspects``: the view's columns, then the judgments.
ASPECT_READING_LISTS = pa.schema(
    list(ASPECT_CANDIDATES_VIEW)
    + [
        (CANDIDATE_ALIASES, pa.list_(pa.string())),
        (CANDIDATE_RAW, pa.string()),
        (LABEL, pa.int8()),
        (LABEL_NAME, pa.string()),
        (LABEL_REASON, pa.string()),
        (NEGATIVE_KIND, pa.string()),
        (N_MENTIONS, pa.int64()),
        (N_CITING_SURVEYS, pa.int64()),
        (CANDIDATE_PRIOR_CITATIONS, pa.int64()),
        (SURVEY_LICENSE, pa.string()),
        (CANDIDATE_LICENSE, pa.string()),
    ]
)

# Popularity as of the survey: judgment-side, not inputs. The hard negatives are matched on
# it, but a field's landmark works are cited by nearly all its surveys, so no negative is
# left that popular: shown, popularity ranks the head of every list without reading. The
# leak audit still checks the match on it (a system may know popularity from elsewhere).
POPULARITY_COLUMNS = (N_CITING_SURVEYS, CANDIDATE_PRIOR_CITATIONS)

# Columns of the release that are judgments (answers), not inputs: a system must not
# read them. Every other released column is an input (see the card's field table).
JUDGMENT_COLUMNS = frozenset(
    {
        LABEL,
        LABEL_NAME,
        LABEL_REASON,
        N_MENTIONS,
        *ROLE_COUNT_COLUMNS,
        NEGATIVE_SOURCE,
        NEGATIVE_KIND,
        BEIR_SCORE,
        # not an answer, but one citing paper's bib string: its style tells whose
        # bibliography it came from, often the survey's own
        CANDIDATE_RAW,
        # not answers: what OpenAlex says the work is, kept from systems until the leak
        # audit passes with them (a year, a venue or a field may tell positives apart)
        CANDIDATE_OPENALEX_ID,
        CANDIDATE_VENUE,
        CANDIDATE_YEAR,
        CANDIDATE_SUBFIELD,
        CANDIDATE_RETRACTED,
        *POPULARITY_COLUMNS,
    }
)

# Columns of the release that are neither inputs nor judgments: each paper's licence, for
# whoever reuses its text.
LICENSE_COLUMNS = frozenset({SURVEY_LICENSE, CANDIDATE_LICENSE})

# Text columns of the release. A missing text (no abstract, no title, no bib string) is the
# empty string in every config, never null: the BEIR/MTEB views need strings, and one
# representation lets a reader test ``== ""`` everywhere. Other missing values (dates,
# categories, licences) are null.
TEXT_COLUMNS = frozenset(
    {SURVEY_TITLE, SURVEY_ABSTRACT, CANDIDATE_TITLE, CANDIDATE_ABSTRACT, CANDIDATE_RAW,
     BEIR_TITLE, BEIR_TEXT}
)  # fmt: skip

# What every released column holds, one line each: the card's field table prints it next to
# the column's type and role (``config.column`` where a name means different things in two
# configs). Dates follow the card's one date rule ("Dates").
COLUMN_DOCS: dict[str, str] = {
    SURVEY_ID: "the survey's arXiv id",
    SURVEY_TITLE: "the survey's title",
    SURVEY_ABSTRACT: "the survey's abstract",
    SURVEY_CATEGORIES: "the survey's arXiv categories",
    SURVEY_PRIMARY_CATEGORY: "the survey's primary arXiv category (`cs.*`)",
    SURVEY_DATE: "the survey's text date: the date of the version whose text the corpus "
    "holds (see Dates)",
    CANDIDATE_ID: "the cited work: `arxiv:`, `doi:` or `openalex:` id",
    CANDIDATE_ALIASES: "every identifier merged into the work",
    CANDIDATE_TITLE: "the title of the work's OpenAlex record, else a corpus paper's title, "
    "else the title parsed from the bib strings citing it ('' when none gives one)",
    CANDIDATE_ABSTRACT: "a corpus paper's abstract, else its OpenAlex record's where the "
    "release carries it (see Licence; '' when none)",
    CANDIDATE_CATEGORIES: "a corpus paper's arXiv categories (null outside the corpus)",
    CANDIDATE_DATE: "the work's date: its first arXiv version, else its arXiv id's month, "
    "else January 1 of the year its references give (null: unknown)",
    CANDIDATE_RAW: "one citing paper's bibliography string for the work ('' for a corpus "
    "paper): its style tells whose bibliography it came from",
    LABEL: "the tier, 0 (hard negative) to 4 (essential)",
    LABEL_NAME: "the tier's name",
    LABEL_REASON: "the rule that gave the tier",
    N_MENTIONS: "in-text mentions of the work in the survey",
    **{
        f"n_{role}": f"of them, mentions in the survey's {role.replace('_', ' ')} sections"
        for role in ROLES
    },
    IN_DOMAIN: "the candidate is a corpus paper whose own categories include the survey's "
    "primary category (never null)",
    NEGATIVE_SOURCE: "how a hard negative was admitted by the same-field rule (null for positives)",
    N_CITING_SURVEYS: "other detected surveys citing the work, posted before the survey "
    "(see Dates)",
    CANDIDATE_PRIOR_CITATIONS: "corpus papers citing the work, posted before the survey (see "
    "Dates)",
    SURVEY_LICENSE: "the survey's licence, as its arXiv record gives it",
    CANDIDATE_LICENSE: "a corpus paper's licence, as its arXiv record gives it (null outside "
    "the corpus)",
    CANDIDATE_OPENALEX_ID: "the OpenAlex work the candidate's record answers with (null: no "
    "record)",
    CANDIDATE_VENUE: "the venue of the work's OpenAlex record (`primary_location.source`)",
    CANDIDATE_YEAR: "the publication year of the work's OpenAlex record",
    CANDIDATE_SUBFIELD: "the subfield of the primary topic of the work's OpenAlex record",
    CANDIDATE_RETRACTED: "OpenAlex marks the work retracted (false without a record)",
    "queries." + BEIR_ID: "the survey id",
    "queries." + BEIR_TITLE: "the survey's title",
    "queries." + BEIR_TEXT: "the survey's title + ' ' + abstract (the text a model reads)",
    "corpus." + BEIR_ID: "the candidate id",
    "corpus." + BEIR_TITLE: "the candidate's title, as in `candidate_title`",
    "corpus." + BEIR_TEXT: "the candidate's abstract ('' when it has none: BEIR and MTEB "
    "read title + ' ' + text)",
    PRIMARY_CATEGORY: "the survey's primary arXiv category",
    BEIR_QUERY_ID: "the survey id",
    BEIR_CORPUS_ID: "the candidate id",
    BEIR_CORPUS_IDS: "the survey's candidate ids, sorted (MTEB's re-ranking input)",
    BEIR_SCORE: "the label, 0-4 (explicit 0 rows for the hard negatives)",
    ASPECT_ID: "the aspect (query) id: the survey id, '#' and the aspect's rank",
    "aspects." + SURVEY_ID: "the survey the aspect is a section of",
    ASPECT_HEADING: "the section's heading (2024 layout: the heading key, same-named sections "
    "merged)",
    ASPECT_PARENT_HEADING: "the heading of the top-level section holding it (2022 layout "
    "subsections; null otherwise)",
    ASPECT_KIND: "the heading's kind: " + ", ".join(f"`{k}`" for k in ASPECT_KINDS),
    ASPECT_LEVEL: "what the aspect is in its layout: " + ", ".join(f"`{k}`" for k in ASPECT_LEVELS),
    ASPECT_RANK: "the aspect's place among its survey's aspects, in paper order (1 = first)",
    N_ASPECTS: "the survey's number of aspects",
    NEGATIVE_KIND: "for label 0: `in_survey` (another positive of the survey that this section "
    "does not cite) or `hard` (a hard negative of the survey); null for positives",
    "aspects." + LABEL: "the aspect tier: 4 (cited at least `labels.essential_related_mentions` "
    "times in the section), 3 (cited once in it), 0 (not cited in it)",
    "aspects." + N_MENTIONS: "in-text mentions of the work within the aspect's section",
    "aspects." + LABEL_NAME: "the tier's name; label 0 is `in_survey_negative` or "
    "`hard_negative`, as `negative_kind`",
    "aspects." + LABEL_REASON: "the rule that gave the aspect tier (`2+ in section`, `in "
    "section`, `in-survey negative`, `hard negative`)",
    "corpus_sections." + BEIR_CORPUS_ID: "the document (candidate) id, as `corpus`'s `_id`",
    SECTION_ORDER: "the section's place in its document, in paper order (0 = first)",
    HEADING: "the section's heading, citation markers removed (2024 layout: the heading key, "
    "same-named sections merged)",
    PARENT_HEADING: "the heading of the top-level section holding it (2022 layout "
    "subsections; null otherwise)",
    "corpus_sections." + ROLE: "the section's role, as the labels read it: "
    + ", ".join(f"`{r}`" for r in ROLES),
    "corpus_sections." + SECTION_TEXT: "the section's text; every citation is the token "
    "`[CITATION]`, formulas, figures and tables `[FORMULA]`, `[FIGURE]`, `[TABLE]`",
    "corpus_sections." + LICENSE: "the document's licence, as its arXiv record gives it",
}
