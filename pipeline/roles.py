"""Section roles: section heading -> one of ``schema.ROLES``.

One table (:data:`ROLE_TABLE`), applied by one Polars expression (:func:`role_expr`)
to the *unique* headings of a mentions table, then joined back
(:func:`heading_roles_frame`). :func:`heading_role` is the same expression on one
heading, for tests and ad-hoc use, so there is no second implementation to drift.

Matching runs on the *normalised* heading (:func:`normalize_expr`): citation
markers ``{{cite:...}}``, inline math ``$...$`` and LaTeX commands are removed
(a command's braced argument is kept: ``\\emph{Related} Work`` -> ``related work``),
the text is lower-cased, a leading number is stripped (``1``, ``2.3``, ``IV.``,
``A.``, ``A.1``, ``3)``) and every run of other characters becomes one space.
Patterns are Rust-regex syntax (Polars), tried in table order; the first match
wins; no match is ``other``. ``roles.overrides`` (regex -> role, same syntax, on
the same normalised text) are tried before the table.

Which heading: stages pass ``top_section`` (the enclosing top-level heading). In a
survey a subsection "Methodology" under a reviewed tool describes that tool, not
the survey's own method, so the top-level heading decides. In a survey the
topical sections (role ``other``: "Deep learning approaches", "BLUiR") are the
curated core; ``roles.survey_core_is_related_work`` makes ``labels`` count them (and
the survey's discussion, and method/experiment headings that come after the core
has started) as related work (:func:`survey_role_expr`).

Abstract: ``extract`` records citations in the abstract under the heading
``Abstract``; it maps to ``introduction``.
"""

from __future__ import annotations

from collections.abc import Iterable

import polars as pl

from pipeline import schema as S
from pipeline.config import RolesConfig

OTHER = "other"

# (pattern on the normalised heading, role); first match wins. Order matters:
# back matter before everything ("Appendix B: Related work" is an appendix),
# related work before background ("Background and related work"), conclusion
# before discussion ("Discussion and conclusions"), experiment before discussion
# ("Results and discussion") and before method ("Evaluation methodology").
ROLE_TABLE: tuple[tuple[str, str], ...] = (
    (
        r"^(?:acknowledge?ments?|funding|appendix|appendices|supplementary|supplemental"
        r"|references|bibliography|author contributions?|authors? contributions?"
        r"|conflicts? of interests?|competing interests?|declarations?|data availability"
        r"|code availability|ethics statement|ethical considerations?|broader impacts?)\b",
        "back_matter",
    ),
    (
        r"\b(?:related works?|prior works?|previous works?|related literature|related research"
        r"|related studies|related approaches|literature reviews?|literature surveys?"
        r"|review of (?:the )?(?:related )?literature|state of (?:the )?art"
        r"|existing (?:works?|approaches|methods|literature|studies|solutions)"
        r"|previous (?:studies|approaches|research)|prior (?:studies|approaches|research|art))\b",
        "related_work",
    ),
    (
        r"\b(?:conclusions?|concluding|final remarks|closing remarks|future works?"
        r"|future directions?|future research|future perspectives?|outlook)\b|^summary\b",
        "conclusion",
    ),
    (
        r"^(?:abstract|introduction|motivations?|(?:our |main )?contributions?|scope"
        r"|(?:paper )?organi[sz]ation|outline)\b|\bintroduction$",
        "introduction",
    ),
    (
        r"^(?:background|preliminaries|preliminary|notations?|definitions?|basic concepts"
        r"|fundamentals|terminology|theoretical background|technical background"
        r"|problem (?:statement|formulation|definition|setting|setup|description))\b"
        r"|\b(?:background|preliminaries)$",
        "background",
    ),
    (
        r"\b(?:experiments?|experimental|evaluations?|results?|empirical|benchmarks?"
        r"|benchmarking|ablations?|ablation stud(?:y|ies)|case stud(?:y|ies)|datasets?"
        r"|performance comparison|implementation details|simulations?)\b|^setup$",
        "experiment",
    ),
    (
        r"^(?:methods?|methodology|approach|approaches|model|models|the model|framework"
        r"|architecture|model architecture|design|system design|system overview"
        r"|system architecture|implementation|algorithms?|technical approach"
        r"|(?:our|the proposed|proposed) \w+(?: \w+)?)$|\bmethodology\b|\bproposed\b",
        "method",
    ),
    (
        r"\b(?:discussions?|limitations?|threats to (?:the )?validity|validity threats"
        r"|lessons learn(?:ed|t)|implications|open (?:problems|issues|questions|challenges)"
        r"|challenges)\b",
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
            raise ValueError(
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


def survey_role_expr(cfg: RolesConfig) -> pl.Expr:
    """Role used for labelling a mention inside a survey.

    Works on rows with ``role`` (the heading role of the mention's ``top_section``),
    ``section_index`` and ``paper_id``. When ``roles.survey_core_is_related_work`` is set:

    * roles in ``roles.survey_core_roles`` (default ``other`` and ``discussion``: the
      topical sections and the survey's discussion of what it reviewed) become
      ``related_work``;
    * with ``roles.survey_late_method_is_core``, a ``method`` or ``experiment`` section
      that comes after the survey's first core section also becomes ``related_work``:
      a survey's own method (search protocol) precedes what it reviews, so a later
      "Methodology"/"Evaluation" heading describes a reviewed work. This matters when
      the hierarchy is lost (2024 layout: "Methodology" under a reviewed tool becomes
      its own top-level key) or when a survey puts such headings at top level.

    Every other role is unchanged; with the option off, roles are unchanged.

    Raises:
        ValueError: ``roles.survey_core_roles`` names a role not in ``schema.ROLES``.
    """
    role = pl.col(S.ROLE)
    if not cfg.survey_core_is_related_work:
        return role
    unknown = [r for r in cfg.survey_core_roles if r not in S.ROLES]
    if unknown:
        raise ValueError(
            f"roles.survey_core_roles: unknown role(s) {unknown}; available: {list(S.ROLES)}"
        )
    core = role.is_in(list(cfg.survey_core_roles))
    expr = pl.when(core).then(pl.lit("related_work"))
    if cfg.survey_late_method_is_core:
        first_core = pl.col(S.SECTION_INDEX).filter(core).min().over(S.PAPER_ID)
        late = role.is_in(["method", "experiment"]) & (pl.col(S.SECTION_INDEX) > first_core)
        expr = expr.when(late).then(pl.lit("related_work"))
    return expr.otherwise(role).alias(S.ROLE)


def heading_roles_frame(headings: pl.LazyFrame, column: str, cfg: RolesConfig) -> pl.LazyFrame:
    """``(column, role)`` for the unique values of ``column`` in ``headings``."""
    return (
        headings.select(pl.col(column))
        .unique()
        .with_columns(role_expr(pl.col(column), cfg).alias(S.ROLE))
    )


def heading_role(heading: str | None, cfg: RolesConfig | None = None) -> str:
    """Role of one heading (the same expression the stages apply)."""
    return heading_roles([heading], cfg)[0]


def heading_roles(headings: Iterable[str | None], cfg: RolesConfig | None = None) -> list[str]:
    """Roles of several headings, in order."""
    s = pl.Series("h", list(headings), dtype=pl.String)
    return pl.DataFrame(s).select(role_expr(pl.col("h"), cfg).alias("h"))["h"].to_list()


def normalize_heading(heading: str | None) -> str:
    """The normalised text the role patterns see (for tests and debugging)."""
    s = pl.Series("h", [heading], dtype=pl.String)
    return pl.DataFrame(s).select(normalize_expr(pl.col("h")))["h"].item()


def role_distribution(mentions: pl.LazyFrame, cfg: RolesConfig) -> dict[str, int]:
    """Mentions per role of their ``top_section`` (every role present, 0 when unused).

    Args:
        mentions: rows with ``top_section`` and ``n_mentions`` (an extract ``mentions``
            table, possibly filtered to some papers).
        cfg: roles config (overrides apply; the survey-core rule does not: these are the
            roles of the headings themselves).
    """
    # one pass: mentions summed per heading first, then the (fewer) headings classified
    got = (
        mentions.group_by(S.TOP_SECTION)
        .agg(pl.col(S.N_MENTIONS).sum())
        .with_columns(role_expr(pl.col(S.TOP_SECTION), cfg).alias(S.ROLE))
        .group_by(S.ROLE)
        .agg(pl.col(S.N_MENTIONS).sum())
        .collect(engine="streaming")
    )
    counts = dict(zip(got[S.ROLE].to_list(), got[S.N_MENTIONS].to_list(), strict=True))
    return {r: int(counts.get(r, 0) or 0) for r in S.ROLES}
