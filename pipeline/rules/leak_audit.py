"""Leak audit: can any visible feature alone tell positives from hard negatives?

For every column of the answer-free ``candidates`` view, and simple features derived
from them (string and list lengths, the id's form, a missing date, the candidate's
age at the survey's text date), the audit computes the AUC of that feature alone for
telling positives (label >= 1) from hard negatives (label 0):

* ``pooled``: over all (survey, candidate) rows of the split;
* ``per_survey``: the mean of per-survey AUCs, over surveys with both classes (a
  feature constant within a survey scores 0.5 there).

AUC is the Mann-Whitney statistic with ties counted one half: 0.5 means the feature
carries no information, 1.0 that it ranks every positive above every negative, 0.0
the reverse (which is as informative: a model learns the inverse). A feature with
missing values is audited where it is defined, and its missingness is a feature of its
own. ``release`` writes the table into ``eval_metadata.json`` and the card, and warns
(or fails, ``release.leak_audit = "error"``) when any AUC lies outside
``release.leak_auc_bounds`` and beyond chance.

Chance. Beside each AUC the audit gives ``<scope>_chance``: the half-width of the 95% range
of that AUC for a feature that carries no information, at this sample's sizes (the
Mann-Whitney null variance with ties, per group, then over the groups' mean). At 14
positives and 48 negatives it is 0.17: a feature independent of the labels lands outside
[0.40, 0.60] about one time in four, so an AUC there is not evidence. An AUC is flagged only
when it lies outside the bounds and outside ``0.5 +- chance``; one outside the bounds and
within chance is listed as such (:func:`within_chance`), never passed over in silence. In a
release of thousands of surveys the chance half-width is below 0.01 and the bounds decide.

Rows that share a value are not independent observations of it: a survey's feature is one value
over all its candidates, an aspect's over its list, and in the aspect view a candidate's over
each of its survey's aspects, whose lists are the same candidates. The null variance of each
group is multiplied by its rows' mean cluster size (``sum(k^2) / sum(k)`` over the clusters of
rows sharing the value, :data:`SURVEY_LEVEL_FEATURES`, :data:`ASPECT_LEVEL_FEATURES`, else the
candidate in its survey), as if every row of a cluster repeated one observation; and the
per-aspect mean adds the half-widths of a survey's aspects before it combines surveys, as if
one survey's aspects moved together. Both bounds are conservative: the chance they give is
never narrower than the sample's own.
"""

from __future__ import annotations

from collections.abc import Callable

import polars as pl

from pipeline.core import schema as S
from pipeline.rules.aliases import id_kind

_GROUP = "_group"
_Y = "_positive"
_CLUSTER = "_cluster"  # prefix: rows sharing one observation of a feature (module docstring)
_BLOCK = "_block"  # groups whose AUCs move together (the aspects of one survey)
_CANDIDATE = "_candidate"  # the candidate of an aspect-view row (its value in every aspect)
CHANCE_Z = 1.96  # two-sided 95% range of an uninformative feature's AUC


def features(rows: pl.DataFrame) -> dict[str, pl.Expr]:
    """Feature name -> expression over a ``candidates`` frame (numeric or boolean)."""

    def length(col: str) -> pl.Expr:
        return pl.col(col).str.len_chars().fill_null(0)

    def missing(col: str) -> pl.Expr:
        # the release writes a missing text as '' (schema.TEXT_COLUMNS); null counts too
        return pl.col(col).fill_null("") == ""

    kind = id_kind(pl.col(S.CANDIDATE_ID))
    out: dict[str, pl.Expr] = {
        S.N_CITING_SURVEYS: pl.col(S.N_CITING_SURVEYS),
        S.CANDIDATE_PRIOR_CITATIONS: pl.col(S.CANDIDATE_PRIOR_CITATIONS),
        S.IN_DOMAIN: pl.col(S.IN_DOMAIN),
        S.CANDIDATE_DATE: pl.col(S.CANDIDATE_DATE).cast(pl.Int32),
        "candidate_date_missing": pl.col(S.CANDIDATE_DATE).is_null(),
        "candidate_age_days": (pl.col(S.SURVEY_DATE) - pl.col(S.CANDIDATE_DATE)).dt.total_days(),
        "candidate_id_length": length(S.CANDIDATE_ID),
        "candidate_id_arxiv": kind == "arxiv",
        "candidate_id_doi": kind == "doi",
        "candidate_id_openalex": kind == "openalex",
        "candidate_title_length": length(S.CANDIDATE_TITLE),
        "candidate_title_missing": missing(S.CANDIDATE_TITLE),
        "candidate_abstract_length": length(S.CANDIDATE_ABSTRACT),
        "candidate_abstract_missing": missing(S.CANDIDATE_ABSTRACT),
        "candidate_categories_count": pl.col(S.CANDIDATE_CATEGORIES).list.len().fill_null(0),
        S.SURVEY_DATE: pl.col(S.SURVEY_DATE).cast(pl.Int32),
        "survey_title_length": length(S.SURVEY_TITLE),
        "survey_abstract_length": length(S.SURVEY_ABSTRACT),
        "survey_categories_count": pl.col(S.SURVEY_CATEGORIES).list.len().fill_null(0),
    }
    return {k: v for k, v in out.items() if all(c in rows.columns for c in v.meta.root_names())}


def _auc(values: pl.DataFrame) -> pl.DataFrame:
    """Per ``_group``: AUC of column ``x`` for ``y`` (bool), over rows with ``x`` not null,
    and ``var0``, its variance when ``y`` is independent of ``x`` (the Mann-Whitney null
    variance with the tie correction: ``(N + 1 - sum(t^3 - t) / (N (N - 1))) / (12 p n)``),
    times the group's mean cluster size, clusters being the rows equal in every ``_cluster*``
    column (each row its own without one; module docstring);
    ``_block`` is carried through (the group itself without one)."""
    cluster = [c for c in values.columns if c.startswith(_CLUSTER)]
    if not cluster:
        cluster = [f"{_CLUSTER}0"]
        values = values.with_columns(pl.int_range(pl.len(), dtype=pl.Int64).alias(cluster[0]))
    if _BLOCK not in values.columns:
        values = values.with_columns(pl.col(_GROUP).alias(_BLOCK))
    defined = values.drop_nulls("x").with_columns(pl.col("x").cast(pl.Float64))
    clusters = (
        defined.group_by(_GROUP, *cluster)
        .agg(pl.len().cast(pl.Float64).alias("_k"))
        .group_by(_GROUP)
        .agg(((pl.col("_k") ** 2).sum() / pl.col("_k").sum()).alias("_deff"))
    )
    ties = (
        defined.group_by(_GROUP, "x")
        .agg(pl.len().cast(pl.Float64).alias("_t"))
        .group_by(_GROUP)
        .agg((pl.col("_t") ** 3 - pl.col("_t")).sum().alias("_ties"))
    )
    return (
        defined.with_columns(pl.col("x").rank("average").over(_GROUP).alias("_r"))
        .group_by(_GROUP)
        .agg(
            pl.col("y").sum().cast(pl.Float64).alias("_p"),
            (~pl.col("y")).sum().cast(pl.Float64).alias("_n"),
            pl.col("_r").filter(pl.col("y")).sum().alias("_rp"),
            pl.col(_BLOCK).first(),
        )
        .filter((pl.col("_p") > 0) & (pl.col("_n") > 0))
        .join(ties, on=_GROUP, how="left")
        .join(clusters, on=_GROUP, how="left")
        .with_columns(
            (
                (pl.col("_rp") - pl.col("_p") * (pl.col("_p") + 1) / 2)
                / (pl.col("_p") * pl.col("_n"))
            ).alias("auc"),
            (pl.col("_p") + pl.col("_n")).alias("_N"),
        )
        .with_columns(
            # never negative in exact arithmetic; a group of one tied value past ~330k rows
            # (t^3 past 2^53) comes out a hair below 0 in floats, and its square root complex
            (
                (pl.col("_N") + 1 - pl.col("_ties") / (pl.col("_N") * (pl.col("_N") - 1)))
                / (12 * pl.col("_p") * pl.col("_n"))
                * pl.col("_deff")
            )
            .clip(lower_bound=0.0)
            .alias("var0")
        )
    )


def _chance(aucs: pl.DataFrame) -> float:
    """Half-width of the 95% chance range of the mean of the AUCs of :func:`_auc` (null
    variances ``var0``): independent between blocks, moving together within one."""
    sd = aucs.group_by(_BLOCK).agg(pl.col("var0").sqrt().sum().alias("_sd"))
    return round(CHANCE_Z * float((sd["_sd"] ** 2).sum()) ** 0.5 / aucs.height, 4)


SURVEY_LEVEL_FEATURES = (
    S.SURVEY_DATE,
    "survey_title_length",
    "survey_abstract_length",
    "survey_categories_count",
)


def _scope(
    values: pl.DataFrame, name: str, group: str | None, block: str | None = None
) -> tuple[float | None, int, float | None]:
    """(mean AUC, groups, chance) of feature ``name`` of ``values`` per ``group`` (one group:
    pooled), groups in one ``block`` moving together."""
    cluster: list[pl.Expr] = [pl.int_range(pl.len(), dtype=pl.Int64)]
    if name in SURVEY_LEVEL_FEATURES:
        cluster = [pl.col(S.SURVEY_ID)]
    elif name in ASPECT_LEVEL_FEATURES and _ASPECT_GROUP in values.columns:
        cluster = [pl.col(_ASPECT_GROUP)]
    elif _CANDIDATE in values.columns:
        cluster = [pl.col(S.SURVEY_ID), pl.col(_CANDIDATE)]
    frame = values.select(
        pl.col(name).alias("x"),
        pl.col(_Y).alias("y"),
        (pl.col(group) if group else pl.lit(0)).alias(_GROUP),
        *([pl.col(block).alias(_BLOCK)] if block else []),
        *[c.alias(f"{_CLUSTER}{i}") for i, c in enumerate(cluster)],
    )
    aucs = _auc(frame)
    if not aucs.height:
        return None, 0, None
    return round(float(aucs["auc"].mean()), 4), aucs.height, _chance(aucs)


def audit(rows: pl.DataFrame, labels: pl.Series) -> dict[str, dict[str, float | None]]:
    """``{feature: {"pooled": auc, "per_survey": mean auc, "surveys": n}}`` for one split.

    Args:
        rows: the split's ``candidates`` rows.
        labels: their labels, in the same order.
    """
    return audit_values(feature_values(rows, labels))


def feature_values(rows: pl.DataFrame, labels: pl.Series) -> pl.DataFrame:
    """``(survey_id, _y, <feature>...)``: what :func:`audit_values` needs of ``rows``, without
    their text (so a split can be audited batch by batch: concatenate the batches' values)."""
    return rows.select(
        S.SURVEY_ID,
        (labels >= 1).alias(_Y),
        *[expr.cast(pl.Float64).alias(name) for name, expr in features(rows).items()],
    )


def audit_values(values: pl.DataFrame) -> dict[str, dict[str, float | None]]:
    """:func:`audit` of the :func:`feature_values` of a split."""
    return _audit_scopes(values, {"pooled": (None, None), "per_survey": (S.SURVEY_ID, None)})


# the count of groups a scope reports, under its own key
_GROUPS_KEY = {"per_survey": "surveys", "per_aspect": "aspects"}


def _audit_scopes(
    values: pl.DataFrame, scopes: dict[str, tuple[str | None, str | None]]
) -> dict[str, dict[str, float | None]]:
    """``{feature: {scope, <scope>_chance, groups}}`` for each ``scope: (group, block)``
    (:func:`_scope`)."""
    # the ids as integer codes (one to one): each feature's scopes group and cluster by them
    # again, and grouping by strings was most of the audit's time
    ids = [c for c in (S.SURVEY_ID, _ASPECT_GROUP, _CANDIDATE) if c in values.columns]
    values = values.with_columns(pl.col(ids).rank("dense"))
    result: dict[str, dict[str, float | None]] = {}
    for name in _features_of(values):
        row: dict[str, float | None] = {}
        for scope, (group, block) in scopes.items():
            auc, groups, chance = _scope(values, name, group, block)
            row[scope], row[f"{scope}_chance"] = auc, chance
            if scope in _GROUPS_KEY:
                row[_GROUPS_KEY[scope]] = groups
        result[name] = row
    return result


def _features_of(values: pl.DataFrame) -> list[str]:
    return [c for c in values.columns if c not in (S.SURVEY_ID, _ASPECT_GROUP, _CANDIDATE, _Y)]


def outside(
    table: dict[str, dict[str, float | None]],
    low: float,
    high: float,
    scopes: tuple[str, ...] = ("pooled", "per_survey"),
) -> list[str]:
    """``feature (scope) = auc`` for every AUC of ``table`` outside ``[low, high]`` and
    beyond chance (module docstring)."""
    return [f"{name} ({scope}) = {v}"
            for name, scope, v, h in _outside_bounds(table, low, high, scopes) if h is None]  # fmt: skip


def within_chance(
    table: dict[str, dict[str, float | None]],
    low: float,
    high: float,
    scopes: tuple[str, ...] = ("pooled", "per_survey"),
) -> list[str]:
    """``feature (scope) = auc (chance +-h)`` for every AUC outside ``[low, high]`` that an
    uninformative feature reaches at this sample size: reported, not flagged."""
    return [f"{name} ({scope}) = {v} (chance +-{h})"
            for name, scope, v, h in _outside_bounds(table, low, high, scopes) if h is not None]  # fmt: skip


def _outside_bounds(
    table: dict[str, dict[str, float | None]], low: float, high: float, scopes: tuple[str, ...]
) -> list[tuple[str, str, float, float | None]]:
    """``(feature, scope, auc, h)`` of every AUC outside the bounds: ``h`` the chance
    half-width when chance explains the AUC, None when the AUC is beyond chance."""
    out: list[tuple[str, str, float, float | None]] = []
    for name, row in sorted(table.items()):
        for scope in scopes:
            v = row.get(scope)
            if v is None or low <= v <= high:
                continue
            h = row.get(f"{scope}_chance")
            out.append((name, scope, v, h if h is not None and abs(v - 0.5) <= h else None))
    return out


# --------------------------------------------------------------------- relative audit
# A real bibliography is written in one style (quotes, title case, "In:", "pp.", URL tails,
# numbering), so a candidate whose text came from the survey's own bib entry looks like the
# survey's other such candidates. The single-column audit above cannot see that: these
# features place a candidate within its own survey's list. The two formatting features read
# no word, and compare a candidate with the survey's candidates of its own text kind (an
# abstract with abstracts, a title with titles: the kinds are matched by ``negatives``).
SHAPE_PREFIX_CHARS = 300  # of the candidate text (an abstract's opening is its shape)
SHAPE_CHARS = 120  # of the shape
SHAPE_NGRAM = 3
PUNCTUATION_NGRAM = 4
RELATIVE_SHAPE = "relative_shape_similarity"
RELATIVE_PUNCTUATION = "relative_punctuation_similarity"
RELATIVE_LENGTH = "relative_length_gap"
RELATIVE_DATE = "relative_date_gap_days"
RELATIVE_KIND = "relative_text_kind_share"
RELATIVE_FEATURES = (
    RELATIVE_SHAPE,
    RELATIVE_PUNCTUATION,
    RELATIVE_LENGTH,
    RELATIVE_DATE,
    RELATIVE_KIND,
)
RELATIVE_DOCS = {
    RELATIVE_SHAPE: "cosine of the character-class shape 3-grams of the candidate text "
    "(letters, digits and spaces collapsed to classes, punctuation kept: reads no word) with "
    "those of the survey's other candidates of the same text kind together (leave one out)",
    RELATIVE_PUNCTUATION: "the same with the punctuation 4-grams of the text (every letter, "
    "digit and space removed); missing when the text has no punctuation",
    RELATIVE_LENGTH: "|log(1 + characters of the candidate text) - its mean over the survey's "
    "other candidates of the same text kind|",
    RELATIVE_DATE: "|candidate_date - the mean candidate_date of the survey's other dated "
    "candidates| in days",
    RELATIVE_KIND: "share of the survey's other candidates with the same text kind (abstract, "
    "title only, no text; times the id's form)",
}
_ROW, _G, _SHAPE, _GRAM = "_row", "_g", "_shape", "_gram"


def shape(text: pl.Expr) -> pl.Expr:
    """The character-class shape of a text: a run of capitals -> ``A``, of other letters -> ``a``,
    of digits -> ``0``, of whitespace -> one space; punctuation kept as it is.

    ``“Legion: Massively Composable Fuzzing,” in Proc. ASE, pp. 1–12, 2020.`` ->
    ``“Aa: Aa Aa Aa,” a Aa. A, a. 0–0, 0.`` It reads no word.
    """
    return (
        text.str.slice(0, SHAPE_PREFIX_CHARS)
        .str.replace_all(r"\p{Lu}+", "A")
        .str.replace_all(r"[\p{Ll}\p{Lt}\p{Lm}\p{Lo}]+", "a")
        .str.replace_all(r"\p{N}+", "0")
        .str.replace_all(r"\s+", " ")
        .str.slice(0, SHAPE_CHARS)
    )


def punctuation(text: pl.Expr) -> pl.Expr:
    """The punctuation of a text, in order (every letter, digit and space removed):
    ``“Legion: Massively Composable Fuzzing,” in Proc. ASE, pp. 1–12, 2020.`` -> ``“:,”.,.–,.``."""
    return (
        text.str.slice(0, SHAPE_PREFIX_CHARS)
        .str.replace_all(r"[\p{L}\p{M}\p{N}\s]+", "")
        .str.slice(0, SHAPE_CHARS)
    )


def shape_similarity(
    groups: pl.Series, texts: pl.Series, form: Callable[[pl.Expr], pl.Expr] = shape,
    ngram: int = SHAPE_NGRAM,
) -> pl.Series:  # fmt: skip
    """Cosine of each row's ``form`` (:func:`shape`, :func:`punctuation`) n-gram counts with the
    summed counts of the other rows of its group (null for a form shorter than ``ngram``
    characters, or a group with nothing else to compare with)."""
    rows = pl.DataFrame({_G: groups, _SHAPE: texts}).select(
        pl.int_range(pl.len(), dtype=pl.Int64).alias(_ROW),
        pl.col(_G),
        form(pl.col(_SHAPE).fill_null("")).alias(_SHAPE),
    )
    starts = (pl.col(_SHAPE).str.len_chars().cast(pl.Int64) - ngram + 1).clip(0)
    grams = (
        rows.with_columns(pl.int_ranges(0, starts).alias("_o"))
        .explode("_o")
        .drop_nulls("_o")
        .select(_G, _ROW, pl.col(_SHAPE).str.slice(pl.col("_o"), ngram).alias(_GRAM))
        .group_by(_G, _ROW, _GRAM)
        .agg(pl.len().cast(pl.Float64).alias("_c"))
    )
    totals = grams.group_by(_G, _GRAM).agg(pl.col("_c").sum().alias("_t"))
    squares = totals.group_by(_G).agg((pl.col("_t") ** 2).sum().alias("_s2"))
    per = (
        grams.join(totals, on=[_G, _GRAM])
        .group_by(_G, _ROW)
        .agg(
            (pl.col("_c") * pl.col("_t")).sum().alias("_ct"),
            (pl.col("_c") ** 2).sum().alias("_cc"),
        )
        .join(squares, on=_G)
        .with_columns((pl.col("_s2") - 2 * pl.col("_ct") + pl.col("_cc")).alias("_oo"))
        .select(
            _ROW,
            pl.when((pl.col("_cc") > 0) & (pl.col("_oo") > 0))
            .then((pl.col("_ct") - pl.col("_cc")) / (pl.col("_cc") * pl.col("_oo")).sqrt())
            .alias("_sim"),
        )
    )
    return rows.select(_ROW).join(per, on=_ROW, how="left").sort(_ROW)["_sim"].round(9)


def _leave_one_out_gap(x: pl.Expr, group: str) -> pl.Expr:
    """|x - the mean of x over the other rows of the group where x is defined|."""
    n = x.count().over(group)
    others = (x.sum().over(group) - x) / (n - 1)
    return pl.when(x.is_not_null() & (n > 1)).then((x - others).abs())


def text_kind(text_of: dict[str, pl.Expr], candidate_id: pl.Expr) -> pl.Expr:
    """What text a candidate shows (``abstract``, ``title``, ``none``) and the id's form."""
    kind = (
        pl.when(text_of["abstract"].fill_null("").str.strip_chars() != "")
        .then(pl.lit("abstract"))
        .when(text_of["title"].fill_null("").str.strip_chars() != "")
        .then(pl.lit("title"))
        .otherwise(pl.lit("none"))
    )
    return kind + pl.lit("_") + id_kind(candidate_id).fill_null("other")


def relative_values(rows: pl.DataFrame, text: pl.Expr | None = None) -> pl.DataFrame:
    """The :data:`RELATIVE_FEATURES` of each row of a ``candidates`` frame (same order).

    Each compares a candidate with the other candidates of its own survey (query) only.
    Queries that list the same candidates (the aspects of one survey) get the same values:
    each such list is computed once, on its first query, and the values are shared (the
    aspects' lists are many copies of few lists; their n-grams held 7 GB at 20k papers).

    Args:
        rows: ``candidates`` rows (``survey_id``, ``candidate_id``, ``candidate_title``,
            ``candidate_abstract``, ``candidate_date``); the rows of a survey all present.
        text: the candidate text the formatting and length features read; the text
            systems are given (:func:`pipeline.rules.text_match.candidate_text`) when None.
    """
    lists = rows.group_by(S.SURVEY_ID, maintain_order=True).agg(
        pl.col(S.CANDIDATE_ID).sort().str.join("\x1f").alias("_list")
    )
    if lists["_list"].n_unique() == lists.height:
        return _relative_values(rows, text)
    first = lists.group_by("_list", maintain_order=True).agg(pl.col(S.SURVEY_ID).first())
    of = lists.join(first.rename({S.SURVEY_ID: "_first"}), on="_list").select(S.SURVEY_ID, "_first")
    once = rows.filter(pl.col(S.SURVEY_ID).is_in(first[S.SURVEY_ID].implode()))
    values = pl.concat(
        [once.select(pl.col(S.SURVEY_ID).alias("_first"), S.CANDIDATE_ID),
         _relative_values(once, text)],
        how="horizontal",
    )  # fmt: skip
    return (
        rows.select(S.SURVEY_ID, S.CANDIDATE_ID)
        .join(of, on=S.SURVEY_ID, how="left", maintain_order="left")
        .join(values, on=["_first", S.CANDIDATE_ID], how="left", maintain_order="left")
        .select(RELATIVE_FEATURES)
    )


def _relative_values(rows: pl.DataFrame, text: pl.Expr | None) -> pl.DataFrame:
    """:func:`relative_values` of rows whose queries each list their own candidates."""
    from pipeline.rules.text_match import candidate_text

    text = candidate_text() if text is None else text
    kind = text_kind(
        {"abstract": pl.col(S.CANDIDATE_ABSTRACT), "title": pl.col(S.CANDIDATE_TITLE)},
        pl.col(S.CANDIDATE_ID),
    )
    frame = rows.select(
        pl.col(S.SURVEY_ID),
        text.alias("_text"),
        pl.col(S.CANDIDATE_DATE).cast(pl.Int32).cast(pl.Float64).alias("_date"),
        kind.alias("_kind"),
        pl.concat_str([pl.col(S.SURVEY_ID), kind], separator="\x1f").alias("_survey_kind"),
    )
    n = pl.len().over(S.SURVEY_ID)
    return frame.select(
        shape_similarity(frame["_survey_kind"], frame["_text"]).alias(RELATIVE_SHAPE),
        shape_similarity(
            frame["_survey_kind"], frame["_text"], punctuation, PUNCTUATION_NGRAM
        ).alias(RELATIVE_PUNCTUATION),
        _leave_one_out_gap(
            pl.col("_text").fill_null("").str.len_chars().cast(pl.Float64).log1p(), "_survey_kind"
        ).alias(RELATIVE_LENGTH),
        _leave_one_out_gap(pl.col("_date"), S.SURVEY_ID).alias(RELATIVE_DATE),
        pl.when(n > 1)
        .then((pl.len().over(S.SURVEY_ID, "_kind") - 1).cast(pl.Float64) / (n - 1))
        .alias(RELATIVE_KIND),
    )


WITHOUT_ABSTRACT = "_without_abstract"
# the scope of the relative audit over the rows that show no abstract (a title or nothing):
# where a citing paper's string could show, so where a formatting shortcut would live
WITHOUT_ABSTRACT_SCOPE = "without_abstract"


def relative_feature_values(rows: pl.DataFrame, labels: pl.Series) -> pl.DataFrame:
    """``(survey_id, _y, <relative feature>..., _without_abstract)`` of a ``candidates`` frame
    holding whole surveys: what :func:`relative_audit` needs."""
    no_abstract = pl.col(S.CANDIDATE_ABSTRACT).fill_null("").str.strip_chars() == ""
    return pl.concat(
        [
            rows.select(S.SURVEY_ID, (labels >= 1).alias(_Y)),
            relative_values(rows),
            rows.select(no_abstract.alias(WITHOUT_ABSTRACT)),
        ],
        how="horizontal",
    )


def relative_audit(values: pl.DataFrame) -> dict[str, dict[str, float | None]]:
    """:func:`audit_values` of the :func:`relative_feature_values` of a split: each feature over
    all rows, and as ``<feature>@without_abstract`` over the rows that show no abstract."""
    table = audit_values(values.drop(WITHOUT_ABSTRACT))
    subset = audit_values(values.filter(pl.col(WITHOUT_ABSTRACT)).drop(WITHOUT_ABSTRACT))
    return table | {f"{k}@{WITHOUT_ABSTRACT_SCOPE}": v for k, v in subset.items()}


# --------------------------------------------------------------------- aspects
# The aspect view (release config ``aspect_candidates``) adds what a system learns from the
# survey's structure without reading: where the section sits, how long the lists are, and
# how many of the survey's aspect lists hold a candidate (how many sections seem to cite it,
# its popularity within the survey). Audited per aspect (the query a system ranks for), per
# survey and pooled, with every feature of the main audit.
ASPECT_SCOPES = ("pooled", "per_aspect", "per_survey")
ASPECT_POSITION = "aspect_relative_position"
CANDIDATE_ASPECT_LISTS = "candidate_aspect_lists"
CANDIDATE_ASPECT_LISTS_SHARE = "candidate_aspect_lists_share"
ASPECT_FEATURE_DOCS = {
    S.ASPECT_RANK: "the aspect's place among its survey's aspects (1 = first)",
    ASPECT_POSITION: "aspect_rank / n_aspects: where in the survey the section sits",
    S.N_ASPECTS: "the survey's number of aspects",
    "aspect_list_length": "candidates in the aspect's list",
    "aspect_heading_length": "characters of the aspect's heading",
    "aspect_parent_heading_missing": "the aspect has no parent heading",
    CANDIDATE_ASPECT_LISTS: "the survey's aspect lists holding the candidate (how many sections "
    "a system could think cite it)",
    CANDIDATE_ASPECT_LISTS_SHARE: "the same over n_aspects (the candidate's popularity within "
    "the survey, as the lists show it)",
}
# Judgment-side counts, not visible to a system: how informative the survey's own citing
# would be. Reported beside the audit, never part of its verdict.
SECTIONS_CITING = "sections_citing_work"
SURVEY_MENTIONS = "survey_mentions_of_work"
_ASPECT_GROUP = "_aspect"
# one value over an aspect's whole list (a system ranking that list cannot use it)
ASPECT_LEVEL_FEATURES = (
    S.ASPECT_RANK,
    ASPECT_POSITION,
    S.N_ASPECTS,
    "aspect_list_length",
    "aspect_heading_length",
    "aspect_parent_heading_missing",
)


def aspect_features(rows: pl.DataFrame) -> dict[str, pl.Expr]:
    """Feature name -> expression over an aspect view holding whole surveys: the main
    audit's :func:`features` and the aspect features (:data:`ASPECT_FEATURE_DOCS`)."""
    lists = pl.len().over(S.SURVEY_ID, S.CANDIDATE_ID).cast(pl.Float64)
    own = {
        S.ASPECT_RANK: pl.col(S.ASPECT_RANK),
        ASPECT_POSITION: pl.col(S.ASPECT_RANK) / pl.col(S.N_ASPECTS),
        S.N_ASPECTS: pl.col(S.N_ASPECTS),
        "aspect_list_length": pl.len().over(S.ASPECT_ID),
        "aspect_heading_length": pl.col(S.ASPECT_HEADING).str.len_chars().fill_null(0),
        "aspect_parent_heading_missing": pl.col(S.ASPECT_PARENT_HEADING).fill_null("") == "",
        CANDIDATE_ASPECT_LISTS: lists,
        CANDIDATE_ASPECT_LISTS_SHARE: lists / pl.col(S.N_ASPECTS),
    }
    return {**features(rows), **own}


def aspect_feature_values(rows: pl.DataFrame, labels: pl.Series) -> pl.DataFrame:
    """``(survey_id, _aspect, _candidate, _y, <feature>...)`` of an aspect view holding whole
    surveys."""
    return rows.select(
        S.SURVEY_ID,
        pl.col(S.ASPECT_ID).alias(_ASPECT_GROUP),
        pl.col(S.CANDIDATE_ID).alias(_CANDIDATE),
        (labels >= 1).alias(_Y),
        *[e.cast(pl.Float64).alias(n) for n, e in aspect_features(rows).items()],
    )


def aspect_audit(values: pl.DataFrame) -> dict[str, dict[str, float | None]]:
    """``{feature: {pooled, per_aspect, per_survey, aspects, surveys}}`` of the
    :func:`aspect_feature_values` (or any ``(survey_id, _aspect, _candidate, _y, ...)`` frame)
    of a split. A survey's aspects list the same candidates, so their AUCs move together
    (module docstring)."""
    return _audit_scopes(
        values,
        {
            "pooled": (None, None),
            "per_aspect": (_ASPECT_GROUP, S.SURVEY_ID),
            "per_survey": (S.SURVEY_ID, None),
        },
    )


def aspect_relative_values(view: pl.DataFrame, aspect_rows: pl.DataFrame) -> pl.DataFrame:
    """``(survey_id, _aspect, _candidate, _y, <relative feature>..., _without_abstract)`` of
    aspect rows.

    Every aspect of a survey lists the survey's candidates, so a candidate's place in an
    aspect's list is its place in the survey's list: the :func:`relative_values` of the
    survey's candidates view rows (``view``), joined to each aspect row.
    """
    rel = pl.concat(
        [view.select(S.SURVEY_ID, S.CANDIDATE_ID), relative_values(view)], how="horizontal"
    )
    no_abstract = pl.col(S.CANDIDATE_ABSTRACT).fill_null("").str.strip_chars() == ""
    return (
        aspect_rows.select(
            S.SURVEY_ID,
            S.CANDIDATE_ID,
            pl.col(S.ASPECT_ID).alias(_ASPECT_GROUP),
            (pl.col(S.LABEL) >= 1).alias(_Y),
            no_abstract.alias(WITHOUT_ABSTRACT),
        )
        .join(rel, on=[S.SURVEY_ID, S.CANDIDATE_ID], how="left", maintain_order="left")
        .select(
            S.SURVEY_ID,
            _ASPECT_GROUP,
            pl.col(S.CANDIDATE_ID).alias(_CANDIDATE),
            _Y,
            *RELATIVE_FEATURES,
            WITHOUT_ABSTRACT,
        )
    )


def aspect_relative_audit(values: pl.DataFrame) -> dict[str, dict[str, float | None]]:
    """:func:`aspect_audit` of :func:`aspect_relative_values`, over all rows and as
    ``<feature>@without_abstract`` over the rows that show no abstract."""
    table = aspect_audit(values.drop(WITHOUT_ABSTRACT))
    subset = aspect_audit(values.filter(pl.col(WITHOUT_ABSTRACT)).drop(WITHOUT_ABSTRACT))
    return table | {f"{k}@{WITHOUT_ABSTRACT_SCOPE}": v for k, v in subset.items()}


def aspect_judgment_values(aspect_rows: pl.DataFrame, survey_rows: pl.DataFrame) -> pl.DataFrame:
    """``(survey_id, _aspect, _candidate, _y, sections_citing_work, survey_mentions_of_work)``:
    the judgment-side counts beside the audit (not visible to a system).

    Args:
        aspect_rows: aspect reading-list rows (``label``) of whole surveys.
        survey_rows: the same surveys' reading-list rows (``n_mentions``).
    """
    mentions = survey_rows.select(
        S.SURVEY_ID, S.CANDIDATE_ID, pl.col(S.N_MENTIONS).cast(pl.Float64).alias(SURVEY_MENTIONS)
    )
    return (
        aspect_rows.select(
            S.SURVEY_ID,
            S.CANDIDATE_ID,
            pl.col(S.ASPECT_ID).alias(_ASPECT_GROUP),
            (pl.col(S.LABEL) >= 1).alias(_Y),
            (pl.col(S.LABEL) >= 1)
            .sum()
            .over(S.SURVEY_ID, S.CANDIDATE_ID)
            .cast(pl.Float64)
            .alias(SECTIONS_CITING),
        )
        .join(mentions, on=[S.SURVEY_ID, S.CANDIDATE_ID], how="left", maintain_order="left")
        .rename({S.CANDIDATE_ID: _CANDIDATE})
    )


def columns_audit(columns: pl.DataFrame, labels: pl.Series) -> dict[str, dict[str, float | None]]:
    """:func:`audit` of given columns instead of the view's: ``columns`` holds ``survey_id``
    and one numeric column per feature (a model's own features), ``labels`` the rows' labels
    in the same order."""
    names = [c for c in columns.columns if c != S.SURVEY_ID]
    return audit_values(
        columns.select(
            S.SURVEY_ID, (labels >= 1).alias(_Y), *[pl.col(c).cast(pl.Float64) for c in names]
        )
    )


# --------------------------------------------------------------------- full-text availability
# Whether a candidate has full text (rows in the release's ``corpus_sections``) is visible to
# any system that loads that config, though no column of ``candidates`` shows it. The release
# adds it to every audit once the view is written: as a feature of its own, as a relative
# feature (how the candidate's availability compares with its survey's other candidates'),
# and as a feature of the reading-free probe (:func:`pipeline.evaluate.audit.reading_free_probe`).
CANDIDATE_KEY = _CANDIDATE  # the candidate id carried by audit values until availability joins
FULL_TEXT = "candidate_full_text"
RELATIVE_FULL_TEXT = "relative_full_text_share"
FULL_TEXT_DOCS = {
    FULL_TEXT: "1 if the candidate has full text (rows in `corpus_sections`), else 0",
    RELATIVE_FULL_TEXT: "share of the survey's other candidates whose full-text availability "
    "is the candidate's own",
}


def with_candidate(values: pl.DataFrame, candidate_ids: pl.Series) -> pl.DataFrame:
    """``values`` (one row per candidate row, same order) with the candidate id as
    :data:`CANDIDATE_KEY`, for :func:`with_full_text`."""
    return values.with_columns(candidate_ids.alias(CANDIDATE_KEY))


def with_full_text(
    values: pl.DataFrame, with_text: pl.Series, relative: bool = False, keep_key: bool = False
) -> pl.DataFrame:
    """Audit values carrying :data:`CANDIDATE_KEY` with :data:`FULL_TEXT` added (the candidate
    is in ``with_text``, the split's ``corpus_sections`` document ids), or with ``relative``
    :data:`RELATIVE_FULL_TEXT` instead: over the survey's distinct candidates (an aspect view
    lists each once per aspect), the share of the others with the same availability. The key
    is dropped unless ``keep_key`` (the aspect audits cluster on it)."""
    flag = pl.col(CANDIDATE_KEY).is_in(with_text.implode()).cast(pl.Float64)
    if not relative:
        out = values.with_columns(flag.alias(FULL_TEXT))
    else:
        n = pl.len().over(S.SURVEY_ID)
        share = (
            values.select(S.SURVEY_ID, CANDIDATE_KEY)
            .unique()
            .with_columns(flag.alias("_flag"))
            .select(
                S.SURVEY_ID,
                CANDIDATE_KEY,
                pl.when(n > 1)
                .then((pl.len().over(S.SURVEY_ID, "_flag") - 1).cast(pl.Float64) / (n - 1))
                .alias(RELATIVE_FULL_TEXT),
            )
        )
        out = values.join(share, on=[S.SURVEY_ID, CANDIDATE_KEY], how="left", maintain_order="left")
    return out if keep_key else out.drop(CANDIDATE_KEY)
