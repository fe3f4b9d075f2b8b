"""Section roles: section heading -> one of ``schema.ROLES``, and the role of every
section occurrence of a paper from its structure.

One table (:data:`ROLE_TABLE`), applied by one Polars expression (:func:`role_expr`)
to the *unique* headings of a table, then joined back (:func:`heading_roles_frame`).
:func:`heading_roles` is the same expression on a list of headings, and
:func:`heading_report` what the ``roles`` command prints, so there is no second
implementation to drift.

Matching runs on the *normalised* heading (:func:`normalize_expr`): citation
markers ``{{cite:...}}``, inline math ``$...$`` and LaTeX commands are removed
(a command's braced argument is kept: ``\\emph{Related} Work`` -> ``related work``),
the text is lower-cased, a leading number is stripped (``1``, ``2.3``, ``IV.``,
``A.``, ``A.1``, ``3)``) and every run of other characters becomes one space.
Patterns are Rust-regex syntax (Polars), tried in table order; the first match
wins; no match is ``other``. ``roles.overrides`` (regex -> role, same syntax, on
the same normalised text) are tried before the table.

Which heading decides (:func:`section_roles`, on the ``sections`` table that
``extract`` writes): the top-level section's. In a survey a subsection
"Methodology" under a reviewed tool describes that tool, not the survey's own
method. The structure adds what a heading alone cannot say:

* an appendix (a top-level section numbered with a letter, or any top-level section
  after the first conclusion or back-matter section) is ``back_matter``;
* an unnamed top-level section (known only from its subsections' numbers) takes the
  role that at least half of its subsections share when it is not ``other``, else
  ``other`` (topical); it never takes the role of the previous section; right after the
  introduction, one whose first subsection is background (definitions, notation, problem
  statement) or a history (:data:`HISTORY`) is ``background``;
* a heading with "conclusion(s)"/"concluding" ends the body like a conclusion
  (:data:`ENDS_BODY`), whatever its role ("Discussion and Conclusions" is ``discussion``);
* in a survey, a "Summary" (or "Summary and Discussion", :data:`SUMMARY`) that a topical
  or discussion section follows is mid-survey: ``discussion``, and it does not end the body;
* a subsection whose own heading is related work ("1.2 Related works") under an
  introduction or background section is ``related_work``;
* 2024 layout (no hierarchy), only with ``roles.background_run_2024`` (off by
  default: on the real sample it helps the one survey and hurts the rest, see the
  card): after a background key that precedes the paper's body, the following
  ``other`` keys are ``background`` until a key with another role or a key that
  opens a survey's core (:data:`CORE_OPENER`: "Overview of ...", "... approaches",
  "taxonomy", ...).

In a survey (``survey=True``), with ``roles.survey_core_is_related_work``: the roles in
``roles.survey_core_roles`` (topical ``other``, ``discussion``: the curated core, open
challenges, future directions) count as related work, and so do method sections wherever
they stand ("2 Architecture" of a model survey; not one that can name the survey's own
method, :data:`OWN_METHOD`: "Methodology") and the other method/experiment sections after
the core has started (a reviewed tool's "Evaluation"), except the
survey's own protocol headings (:data:`PROTOCOL`: research questions, search
strategy, study selection, inclusion/exclusion criteria, data extraction, quality
assessment, review method, threats to validity), which stay ``method`` wherever
they are (:func:`survey_role_expr`).

Abstract: ``extract`` records citations in the abstract under the heading
``Abstract``; it maps to ``introduction``. Why each rule: the data card (``pipeline/data_cards/survey_reading_lists.md``).
"""

from __future__ import annotations

from collections.abc import Iterable

import polars as pl

from pipeline.core import schema as S
from pipeline.core.config import ConfigError, RolesConfig

OTHER = "other"

# A systematic review's own protocol (its method): the works cited there are guidelines
# and search tools (tier 2), never the curated core. Whole headings only, so a topical
# "Image Quality Assessment" or "Data Extraction from PDFs" section is not protocol.
PROTOCOL = (
    r"^(?:(?:the |our )?research questions?(?: rqs?)?|search (?:strateg(?:y|ies)|process|strings?"
    r"|terms|queries|query|and selection(?: process| strategy)?)|literature search(?: strategy)?"
    r"|(?:study|studies|paper|papers|article|literature) selection(?: process| criteria)?"
    r"|selection (?:criteria|process|procedure)|inclusion (?:and|&) exclusion criteria"
    r"|exclusion (?:and|&) inclusion criteria|(?:inclusion|exclusion|eligibility) criteria"
    r"|data (?:extraction|synthesis|collection)(?: (?:and|&) (?:synthesis|analysis))?"
    r"|(?:study )?quality (?:assessment|appraisal)(?: criteria)?|review (?:method|methods"
    r"|methodology|protocol|process|design)|survey (?:method|methods|methodology|protocol|design)"
    r"|(?:research|study) (?:method|methods|methodology|design)|methodology of (?:the|this)"
    r" (?:survey|review|study)|threats to (?:the )?validity|validity threats"
    r"|limitations of (?:this|the|our) (?:survey|review|study))$"
)

# A method heading that can name a survey's own method ("Methodology", "Our Approach"):
# before the survey's core it keeps the role ``method``. Any other method heading
# ("Architecture", "Framework", "Algorithms") describes the reviewed works (survey rule);
# a proof is the paper's own argument.
OWN_METHOD = r"\bmethods?\b|\bmethodology\b|\bapproach(?:es)?\b|\bproposed\b|^our\b|^proofs?\b"

# A 2024-layout key that opens a survey's core (ends a run of background keys).
# The keys unarXive 2024's grouping gives paragraphs without a heading: "Unknown Section"
# (no ``section`` field) and "null" (a null one, as JSON writes a None key). They say
# nothing of where a citation sits, so in a survey they are never its curated core.
PLACEHOLDER = r"^(?:unknown section|null)$"

CORE_OPENER = (
    r"^(?:an )?overview\b|\b(?:survey|taxonomy|classification|categori[sz]ation)\b"
    r"|\b(?:approaches|techniques)$"
)

# A heading that ends the paper's body even when its role is not ``conclusion``
# ("Discussion and Conclusions" is ``discussion``): top-level sections after it are appendices.
ENDS_BODY = r"\b(?:conclusions?|concluding)\b"

# A survey's "Summary" (or "Summary and Discussion"), not a conclusion: when a topical or
# discussion section follows it, it summarises the part of the review before it.
SUMMARY = r"^summary(?: and discussions?)?$"

# A subsection that opens the background of a survey: definitions, terminology, notation,
# problem formulation (role ``background``), or the field's history.
HISTORY = r"^(?:a )?(?:brief |short )?(?:history|historical)\b|\bhistory$"

# (pattern on the normalised heading, role); first match wins. Order matters:
# back matter before everything ("Appendix B: Related work" is an appendix),
# related work before background ("Background and related work"), conclusion
# before discussion ("Discussion and conclusions"), experiment before discussion
# ("Results and discussion") and before method ("Evaluation methodology").
ROLE_TABLE: tuple[tuple[str, str], ...] = (
    (
        r"^(?:acknowledge?ments?|funding|appendix|appendices|supplementary|supplemental"
        r"|references|bibliography|author contributions?|authors? contributions?"
        r"|author contribution statement|conflicts? of interests?|competing interests?"
        r"|declarations?|declaration of competing interests?|data availability"
        r"|code availability|ethics statement|ethical considerations?|broader impacts?"
        r"|biograph(?:y|ies)|captions for supplementa\w*)\b",
        "back_matter",
    ),
    (PROTOCOL, "method"),
    # a proof is the paper's own argument; "results" here is its object, not an experiment
    (r"^proofs?\b|^extension of (?:the )?(?:main )?results?\b", "method"),
    (
        r"\b(?:related works?|prior works?|previous works?|related literature|related research"
        r"|related studies|related approaches|literature reviews?|literature surveys?"
        r"|review of (?:the )?(?:related )?literature|state of (?:the )?art"
        r"|existing (?:works?|approaches|methods|literature|studies|solutions)"
        r"|previous (?:studies|approaches|research)|prior (?:studies|approaches|research|art))\b",
        "related_work",
    ),
    # "Discussion and Conclusions" is where a survey discusses what it reviewed: its
    # citations are the core's (it still ends the body: see :data:`ENDS_BODY`)
    (r"^discussions? and (?:conclusions?|concluding remarks)$", "discussion"),
    (
        r"\b(?:conclusions?|concluding|final remarks|closing remarks)\b|^summary\b",
        "conclusion",
    ),
    (
        r"^(?:abstract|introduction|motivations?|scope|(?:paper )?organi[sz]ation|outline)\b"
        r"|\bintroduction$|^(?:our |main |summary of )?contributions?$",
        "introduction",
    ),
    # "Preliminary results" is an experiment; any other "Preliminary ..." (a subtitle:
    # "Preliminary: From LLM RL to Agentic RL") is background
    (
        r"^preliminary (?:results?|experiments?|experimental|evaluations?|stud(?:y|ies)"
        r"|analys[ie]s|findings|tests?|simulations?)\b",
        "experiment",
    ),
    (
        r"^(?:backgrounds?|preliminaries|preliminary|notations?|definitions?(?:$| and )"
        r"|basic (?:concepts|knowledge|notions|definitions)|basics|fundamentals|terminology"
        r"|theoretical background"
        r"|technical background"
        r"|problem (?:statement|formulation|definition|setting|setup|description))\b"
        r"|\b(?:background|preliminaries|basics|fundamentals)$",
        "background",
    ),
    # "Evaluation of Action Density" computes a quantity; "Evaluation of the proposed
    # model" is an experiment (Rust regex has no look-ahead: two entries)
    (
        r"^evaluation of (?:the |our |a )?(?:proposed|predicted|performance|models?|methods?"
        r"|approach|system|different|results|baselines?|[\w-]+ (?:models?|methods?|systems?)$)",
        "experiment",
    ),
    (r"^evaluation of\b", OTHER),
    (
        r"\b(?:experiments?|experimental|evaluations?|empirical|benchmarks?"
        r"|benchmarking|ablations?|ablation stud(?:y|ies)|case stud(?:y|ies)|datasets?"
        r"|performance comparison|implementation details|simulations?|baselines?"
        r"|(?:quantitative|qualitative) (?:analysis|evaluation|comparison))\b|^setup$"
        # "Results", "Numerical results and discussion", "Modeling Results"; not the
        # mathematician's "Approximation Results for Discrete Derivatives"
        r"|^(?:(?:numerical|experimental|empirical|simulation|main|evaluation|modell?ing"
        r"|additional|further|quantitative|qualitative|preliminary) )?results?\b|\bresults?$",
        "experiment",
    ),
    (
        r"^(?:methods?|methodology|approach|approaches|model|models|the model|framework"
        r"|(?:[\w-]+ )?architecture|design|system design|system overview"
        r"|implementation|algorithms?|technical approach"
        r"|(?:our|the proposed|proposed) \w+(?: \w+)?)$|\bmethodology\b|\bproposed\b"
        # "Cross-correlation method", "First method: ..."; not a survey's "... Methods"
        r"|\bmethod$|^(?:first|second|third|our|a new|new) (?:method|approach)\b",
        "method",
    ),
    (
        r"\b(?:discussions?|limitations?|threats to (?:the )?validity|validity threats"
        r"|lessons learn(?:ed|t)|implications|open (?:problems|issues|questions|challenges)"
        r"|challenges|future works?|future directions?|future research|future perspectives?"
        r"|research directions?|research agenda|outlook)\b",
        "discussion",
    ),
)


def role_table(cfg: RolesConfig | None = None) -> list[tuple[str, str]]:
    """Overrides first, then :data:`ROLE_TABLE`.

    Raises:
        ValueError: an override maps to a role that is not in ``schema.ROLES``.
    """
    overrides = list((cfg.overrides if cfg is not None else {}).items())
    for pattern, role in overrides:
        if role not in S.ROLES:
            raise ConfigError(
                f"roles.overrides[{pattern!r}] = {role!r}: unknown role; available: {list(S.ROLES)}"
            )
    return overrides + list(ROLE_TABLE)


def normalize_expr(heading: pl.Expr) -> pl.Expr:
    """Lower-cased heading without citation markers, LaTeX, leading numbering, punctuation."""
    return (
        heading.fill_null("")
        .str.replace_all(r"\{\{cite:[^}]*\}\}", " ")
        .str.replace_all(r"\$[^$]*\$", " ")
        .str.replace_all(r"\\[A-Za-z]+\*?", " ")
        .str.replace_all(r"[{}~]", " ")
        .str.to_lowercase()
        .str.replace(
            r"^\s*(?:(?:section|chapter)\s+)?"
            r"(?:\d+(?:\.\d+)*\.?\)?|[ivxlcdm]+[.)]|[a-z][.)](?:\d+(?:\.\d+)*\.?)?|[a-z]\.?\d+(?:\.\d+)*\.?)"
            r"(?:\s+|$|:\s*|\s*-\s+)",
            "",
        )
        .str.replace_all(r"[^a-z0-9&]+", " ")
        .str.strip_chars()
    )


def role_expr(heading: pl.Expr, cfg: RolesConfig | None = None) -> pl.Expr:
    """Role of a heading column (see the module docstring for the rules)."""
    norm = normalize_expr(heading)
    table = role_table(cfg)
    expr = pl.when(norm.str.contains(table[0][0])).then(pl.lit(table[0][1]))
    for pattern, role in table[1:]:
        expr = expr.when(norm.str.contains(pattern)).then(pl.lit(role))
    return expr.otherwise(pl.lit(OTHER))


def survey_role_expr(
    cfg: RolesConfig,
    protocol: pl.Expr | None = None,
    placeholder: pl.Expr | None = None,
    own_method: pl.Expr | None = None,
) -> pl.Expr:
    """Role used for labelling a mention inside a survey.

    Works on rows with ``role`` (the role of the mention's top-level section),
    ``section_index`` and ``paper_id``; ``protocol`` (default: false everywhere) marks
    rows whose top-level heading is one of the survey's own protocol headings
    (:data:`PROTOCOL`), ``placeholder`` rows whose heading is a publisher placeholder
    (:data:`PLACEHOLDER`: they keep their role, ``other``, and count as no core),
    ``own_method`` rows whose heading can name the survey's own method. When
    ``roles.survey_core_is_related_work`` is set:

    * roles in ``roles.survey_core_roles`` (default ``other`` and ``discussion``: the
      topical sections, the survey's discussion of what it reviewed, its open
      challenges and future directions) become ``related_work``;
    * with ``roles.survey_method_is_core``, a ``method`` section that is neither a protocol
      heading nor one that can name the survey's own method (``own_method``,
      :data:`OWN_METHOD`: "Methodology", "Our Approach") becomes ``related_work`` wherever
      it stands: a survey has no method of its own outside its protocol, so "2
      Architecture" describes the reviewed models;
    * with ``roles.survey_late_method_is_core``, a ``method`` or ``experiment`` section
      that comes after the survey's first core section also becomes ``related_work``
      (a later "Methodology"/"Evaluation" heading describes a reviewed work), unless
      it is a protocol heading: "Threats to Validity" at the end of a systematic
      review is still the review's own method.

    Every other role is unchanged; with the option off, roles are unchanged.

    Raises:
        ValueError: ``roles.survey_core_roles`` names a role not in ``schema.ROLES``.
    """
    role = pl.col(S.ROLE)
    if not cfg.survey_core_is_related_work:
        return role
    unknown = [r for r in cfg.survey_core_roles if r not in S.ROLES]
    if unknown:
        raise ConfigError(
            f"roles.survey_core_roles: unknown role(s) {unknown}; available: {list(S.ROLES)}"
        )
    if protocol is None:
        protocol = pl.lit(False)
    if placeholder is None:
        placeholder = pl.lit(False)
    if own_method is None:
        own_method = pl.lit(False)
    core = role.is_in(list(cfg.survey_core_roles)) & ~placeholder
    expr = pl.when(core).then(pl.lit("related_work"))
    if cfg.survey_method_is_core:
        expr = expr.when((role == "method") & ~protocol & ~own_method).then(pl.lit("related_work"))
    if cfg.survey_late_method_is_core:
        first_core = pl.col(S.SECTION_INDEX).filter(core).min().over(S.PAPER_ID)
        late = (
            role.is_in(["method", "experiment"])
            & (pl.col(S.SECTION_INDEX) > first_core)
            & ~protocol
        )
        expr = expr.when(late).then(pl.lit("related_work"))
    return expr.otherwise(role).alias(S.ROLE)


def _heading_facts(sections: pl.LazyFrame, cfg: RolesConfig, survey: bool) -> pl.LazyFrame:
    """``section`` -> ``_own`` (its role) and what its normalised text says (``_summary``,
    ``_ends_body``, ``_history``, ``_core_opener``; in a survey also ``_protocol``,
    ``_placeholder``, ``_own_method``), computed once per distinct heading."""
    patterns = {
        "_summary": SUMMARY,
        "_ends_body": ENDS_BODY,
        "_history": HISTORY,
        "_core_opener": CORE_OPENER,
    }
    if survey:
        patterns |= {"_protocol": PROTOCOL, "_placeholder": PLACEHOLDER, "_own_method": OWN_METHOD}
    norm = normalize_expr(pl.col(S.SECTION))
    return heading_roles_frame(sections, S.SECTION, cfg).select(
        S.SECTION,
        pl.col(S.ROLE).alias("_own"),
        *(norm.str.contains(pattern).alias(name) for name, pattern in patterns.items()),
    )


def _previous_in_paper(value: pl.Expr) -> pl.Expr:
    """``value`` of the row before, in the same paper (null on its first row), on rows
    sorted by ``(paper_id, section_index)``: ``shift(1).over(paper_id)`` in one pass."""
    return pl.when(pl.col(S.PAPER_ID).shift(1) == pl.col(S.PAPER_ID)).then(value.shift(1))


def _next_in_paper(value: pl.Expr) -> pl.Expr:
    """``value`` of the row after, in the same paper (null on its last row); rows sorted as
    for :func:`_previous_in_paper`."""
    return pl.when(pl.col(S.PAPER_ID).shift(-1) == pl.col(S.PAPER_ID)).then(value.shift(-1))


def _cum_sum_in_paper(value: pl.Expr) -> pl.Expr:
    """``value.cum_sum().over(paper_id)`` (a null stays null and adds nothing) on rows sorted
    as for :func:`_previous_in_paper`: the running total minus its value where the paper
    starts."""
    filled = value.fill_null(0)
    running = filled.cum_sum()
    starts = (pl.col(S.PAPER_ID).shift(1) != pl.col(S.PAPER_ID)).fill_null(True)
    before = pl.when(starts).then(running - filled).forward_fill()
    return pl.when(value.is_not_null()).then(running - before)


def section_roles(sections: pl.LazyFrame, cfg: RolesConfig, survey: bool = False) -> pl.LazyFrame:
    """``(paper_id, section_index, role)`` for every row of an extract ``sections`` table.

    The role of an occurrence is the role of its top-level section, resolved from the
    paper's structure (the rules are in the module docstring); with ``survey`` the
    survey rule (:func:`survey_role_expr`) is applied to the top-level sections first.

    Args:
        sections: rows of ``schema.SECTIONS`` (every occurrence of each paper).
        cfg: roles config (overrides and the survey-core options).
        survey: the papers are surveys.
    """
    own = _heading_facts(sections, cfg, survey)
    rows = sections.select(
        S.PAPER_ID, S.SECTION_INDEX, S.SECTION, S.LEVEL, S.TOP_INDEX, S.UNNAMED, S.APPENDIX
    ).join(own, on=S.SECTION, how="left", nulls_equal=True)
    is_top = pl.col(S.SECTION_INDEX) == pl.col(S.TOP_INDEX)
    # the most frequent role among a top-level section's subsections, when it is not
    # ``other`` and covers at least half of them
    children = (
        rows.filter(~is_top)
        .group_by(S.PAPER_ID, S.TOP_INDEX, "_own")
        .agg(pl.len().alias("_n"), pl.col(S.SECTION_INDEX).min().alias("_first"))
        .with_columns(pl.col("_n").sum().over(S.PAPER_ID, S.TOP_INDEX).alias("_all"))
        .sort(S.PAPER_ID, S.TOP_INDEX, "_n", "_first", descending=[False, False, True, False])
        .group_by(S.PAPER_ID, S.TOP_INDEX, maintain_order=True)
        .agg(pl.col("_own", "_n", "_all").first())
        .filter((pl.col("_own") != OTHER) & (2 * pl.col("_n") >= pl.col("_all")))
        .select(S.PAPER_ID, S.TOP_INDEX, pl.col("_own").alias("_child"))
    )
    # whether a top-level section's first subsection opens a background (see HISTORY); an
    # unnamed section is inserted right before its first subsection, so that is the next row
    first_child = rows.filter(
        ~is_top & (pl.col(S.SECTION_INDEX) == pl.col(S.TOP_INDEX) + 1)
    ).select(
        S.PAPER_ID,
        S.TOP_INDEX,
        ((pl.col("_own") == "background") | pl.col("_history")).alias("_opens_background"),
    )
    by_paper = S.PAPER_ID
    # an unnamed section: the role most of its subsections share, else topical; never the
    # role of the section before it; right after the introduction, a section that opens
    # with definitions, notation, a problem statement or a history is background
    unnamed_role = (
        pl.when(
            pl.col("_opens_background").fill_null(False)
            & (_previous_in_paper(pl.col("_own")) == "introduction")
        )
        .then(pl.lit("background"))
        .otherwise(pl.coalesce(pl.col("_child"), pl.lit(OTHER)))
    )
    heading_role = pl.when(pl.col(S.UNNAMED)).then(unnamed_role).otherwise(pl.col("_own"))
    # in a survey, a "Summary" that a topical or discussion section follows is mid-survey:
    # it discusses the reviewed works before it and does not end the body
    mid_summary = (
        pl.col("_summary")
        & _next_in_paper(pl.col("_heading_role")).is_in([OTHER, "discussion", "related_work"])
        if survey
        else pl.lit(False)
    )
    anchor = (
        ~pl.col(S.UNNAMED)
        & ~pl.col("_mid_summary")
        & (pl.col("_own").is_in(["conclusion", "back_matter"]) | pl.col("_ends_body"))
    ).cast(pl.Int32)
    after_end = (_cum_sum_in_paper(anchor) - anchor) > 0
    base = (
        pl.when(pl.col(S.APPENDIX) | pl.col("_after_end"))
        .then(pl.lit("back_matter"))
        .when(pl.col("_mid_summary"))
        .then(pl.lit("discussion"))
        .otherwise(pl.col("_heading_role"))
    )
    # one sort, so every step along a paper's top-level sections is a shift or a running
    # sum over neighbouring rows: windows per paper (one nested in another) cost about ten
    # times as much and grow faster than their input
    tops = (
        rows.filter(is_top)
        .join(children, on=[S.PAPER_ID, S.TOP_INDEX], how="left")
        .join(first_child, on=[S.PAPER_ID, S.TOP_INDEX], how="left")
        .sort(S.PAPER_ID, S.SECTION_INDEX)
        .with_columns(heading_role.alias("_heading_role"))
        .with_columns(mid_summary.alias("_mid_summary"))
        .with_columns(after_end.alias("_after_end"))
        .with_columns(base.alias(S.ROLE))
    )
    if cfg.background_run_2024:
        # 2024 layout: a run of keys after a background key is background (see module
        # docstring); off by default, so its windows cost nothing then
        stop = (pl.col(S.ROLE) != OTHER) | pl.col("_core_opener")
        segment = pl.col("_stop").cast(pl.Int32).cum_sum().over(by_paper, order_by=S.SECTION_INDEX)
        # only a background key before the paper's first method/experiment/discussion/conclusion
        body_started = (
            pl.col(S.ROLE)
            .is_in(["method", "experiment", "discussion", "conclusion", "back_matter"])
            .cast(pl.Int32)
            .cum_sum()
            .over(by_paper, order_by=S.SECTION_INDEX)
            > 0
        )
        in_background_run = (
            (pl.col(S.LEVEL) == 0)
            & ~pl.col("_stop")
            & pl.col("_stop").first().over(by_paper, "_segment", order_by=S.SECTION_INDEX)
            & (
                pl.col(S.ROLE).first().over(by_paper, "_segment", order_by=S.SECTION_INDEX)
                == "background"
            )
            & ~pl.col("_body").first().over(by_paper, "_segment", order_by=S.SECTION_INDEX)
        )
        tops = (
            tops.with_columns(stop.alias("_stop"), body_started.alias("_body"))
            .with_columns(segment.alias("_segment"))
            .with_columns(
                pl.when(in_background_run)
                .then(pl.lit("background"))
                .otherwise(pl.col(S.ROLE))
                .alias(S.ROLE)
            )
        )
    if survey:
        tops = tops.with_columns(
            survey_role_expr(
                cfg, pl.col("_protocol"), pl.col("_placeholder"), pl.col("_own_method")
            )
        )
    tops = tops.select(
        S.PAPER_ID, pl.col(S.SECTION_INDEX).alias(S.TOP_INDEX), pl.col(S.ROLE).alias("_top")
    )
    return rows.join(tops, on=[S.PAPER_ID, S.TOP_INDEX], how="left").select(
        S.PAPER_ID,
        S.SECTION_INDEX,
        pl.when(
            (pl.col("_own") == "related_work")
            & pl.col("_top").is_in(["introduction", "background"])
        )
        .then(pl.lit("related_work"))
        .otherwise(pl.col("_top"))
        .fill_null(OTHER)
        .alias(S.ROLE),
    )


def survey_heading_role_expr(heading: pl.Expr, cfg: RolesConfig) -> pl.Expr:
    """What a top-level section with this heading counts as in a survey, before the
    structure and position rules: a core role, or a method heading that is neither
    protocol nor :data:`OWN_METHOD` -> ``related_work``; another method or an experiment
    heading that is not protocol -> ``method|related_work`` or ``experiment|related_work``
    (its own role before the survey's core, related work after it); anything else its own
    role."""
    role = role_expr(heading, cfg)
    if not cfg.survey_core_is_related_work:
        return role
    protocol = normalize_expr(heading).str.contains(PROTOCOL)
    placeholder = normalize_expr(heading).str.contains(PLACEHOLDER)
    expr = pl.when(role.is_in(list(cfg.survey_core_roles)) & ~placeholder).then(
        pl.lit("related_work")
    )
    if cfg.survey_method_is_core:
        own_method = normalize_expr(heading).str.contains(OWN_METHOD)
        expr = expr.when((role == "method") & ~protocol & ~own_method).then(pl.lit("related_work"))
    if cfg.survey_late_method_is_core:
        expr = expr.when(role.is_in(["method", "experiment"]) & ~protocol).then(
            role + pl.lit("|related_work")
        )
    return expr.otherwise(role)


def heading_report(headings: pl.LazyFrame, cfg: RolesConfig) -> pl.DataFrame:
    """``heading, normalized, role, survey_role`` (plus any other columns of ``headings``)
    for a frame with a ``heading`` column: what the ``roles`` command prints."""
    h = pl.col("heading")
    return headings.with_columns(
        normalize_expr(h).alias("normalized"),
        role_expr(h, cfg).alias(S.ROLE),
        survey_heading_role_expr(h, cfg).alias("survey_role"),
    ).collect()


def work_headings(sections: pl.LazyFrame, mentions: pl.LazyFrame) -> pl.LazyFrame:
    """Every heading of a work directory with ``occurrences``, ``papers`` and ``mentions``
    (cite spans under it), most frequent first."""
    cited = mentions.group_by(S.PAPER_ID, S.SECTION_INDEX).agg(
        pl.col(S.N_MENTIONS).sum().alias("mentions")
    )
    return (
        sections.filter(~pl.col(S.UNNAMED))
        .join(cited, on=[S.PAPER_ID, S.SECTION_INDEX], how="left")
        .group_by(pl.col(S.SECTION).alias("heading"))
        .agg(
            pl.len().alias("occurrences"),
            pl.col(S.PAPER_ID).n_unique().alias("papers"),
            pl.col("mentions").fill_null(0).sum().alias("mentions"),
        )
        .sort(["occurrences", "heading"], descending=[True, False])
    )


def heading_roles_frame(headings: pl.LazyFrame, column: str, cfg: RolesConfig) -> pl.LazyFrame:
    """``(column, role)`` for the unique values of ``column`` in ``headings``."""
    return (
        headings.select(pl.col(column))
        .unique()
        .with_columns(role_expr(pl.col(column), cfg).alias(S.ROLE))
    )


def heading_roles(headings: Iterable[str | None], cfg: RolesConfig | None = None) -> list[str]:
    """Roles of several headings, in order."""
    s = pl.Series("h", list(headings), dtype=pl.String)
    return pl.DataFrame(s).select(role_expr(pl.col("h"), cfg).alias("h"))["h"].to_list()


def role_distribution(
    mentions: pl.LazyFrame, sections: pl.LazyFrame, cfg: RolesConfig
) -> dict[str, int]:
    """Mentions per role of their section (every role present, 0 when unused).

    Args:
        mentions: rows with ``paper_id``, ``section_index`` and ``n_mentions`` (an extract
            ``mentions`` table, possibly filtered to some papers).
        sections: the ``sections`` rows of the same papers.
        cfg: roles config (overrides apply; the survey-core rule does not: these are the
            roles of the sections themselves).
    """
    got = (
        mentions.select(S.PAPER_ID, S.SECTION_INDEX, S.N_MENTIONS)
        .join(section_roles(sections, cfg), on=[S.PAPER_ID, S.SECTION_INDEX], how="left")
        .with_columns(pl.col(S.ROLE).fill_null(OTHER))
        .group_by(S.ROLE)
        .agg(pl.col(S.N_MENTIONS).sum())
        .collect(engine="streaming")
    )
    counts = dict(zip(got[S.ROLE].to_list(), got[S.N_MENTIONS].to_list(), strict=True))
    return {r: int(counts.get(r, 0) or 0) for r in S.ROLES}


# Numbered top-level sections without text of their own, measured on real records. A
# release built from the 2024 layout (no numbering) cannot measure this on its own corpus,
# so its card states these; the tests recount them from the records (test_labels: the
# sample; test_real_survey_trees: the trees).
TEXTLESS_MEASURED: tuple[dict[str, str | int], ...] = (
    {
        "source": "the real unarXive 2022 sample (49 papers, bundled with the package)",
        "top_sections": 288,
        "textless": 31,
    },
    {
        "source": "the LaTeX sources of 13 real CS surveys (tests/fixtures/real_survey_trees.json)",
        "top_sections": 85,
        "textless": 11,
    },
)


def textless_top_sections(sections: pl.LazyFrame) -> dict[str, int]:
    """How many numbered top-level sections of the 2022 layout have no text of their own.

    unarXive 2022 records no heading for a section whose first content is a subsection;
    the structure infers it from its subsections' numbers (an *unnamed* section, whose role
    comes from its subsections, not from its heading). Counted: top-level rows numbered
    with a digit or a letter (not the abstract, not an unnumbered heading such as
    "Acknowledgment", and not 2024-layout keys, which have no levels), and the unnamed ones
    among them.

    Returns:
        ``{"top_sections": n, "textless": k}``.
    """
    got = (
        sections.filter(
            (pl.col(S.SECTION_INDEX) == pl.col(S.TOP_INDEX))
            & (pl.col(S.LEVEL) == 1)
            & ~pl.col(S.SEC_NUMBER).fill_null("").is_in(["", "-1", "0"])
        )
        .select(
            pl.len().alias("top_sections"),
            pl.col(S.UNNAMED).sum().cast(pl.Int64).alias("textless"),
        )
        .collect(engine="streaming")
    )
    return {k: int(got[k][0] or 0) for k in ("top_sections", "textless")}
