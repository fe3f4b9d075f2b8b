"""Typed pipeline configuration.

Every field has a default and a one-line help (``field(metadata={"help": ...})``).
A config file is TOML with one table per section, e.g.::

    [surveys]
    min_resolved_refs = 30

Nothing is read at import time. Each stage declares which sections affect its
output; its completion marker is keyed by the hash of exactly those sections,
so changing a survey rule reruns ``surveys`` and what follows, never ``extract``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
import tomllib
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

from pipeline.core.errors import PipelineError


# --------------------------------------------------------------------- validation
# Every field is checked when the config is made, before any stage runs: by the rule its
# declaration names (``_f(..., check=...)``), else by the default rule for its type
# (DEFAULT_CHECKS), so a new field is validated from the start.
@dataclass(frozen=True)
class Check:
    """A rule for a config field's value.

    Attributes:
        allowed: what is allowed, as the error message states it.
        test: ``test(value)`` is true when the value is allowed.
        invalid: values the rule refuses (the config test walks them for every field).
    """

    allowed: str | Callable[[], str]
    test: Callable[[Any], bool]
    invalid: tuple[Any, ...] = ()

    def says(self) -> str:
        """``allowed: ...``, or ``available: [...]`` for a choice read from a registry."""
        return self.allowed() if callable(self.allowed) else f"allowed: {self.allowed}"


_CONTROL = frozenset(chr(c) for c in (*range(32), 127))


def _plain_text(value: str) -> bool:
    return not _CONTROL.intersection(value)


# Integers are stored as Int64 by Arrow, Polars and numpy: a config value past that range
# used to pass and then overflow inside a stage. LightGBM's parameters are C ints.
INT64_MAX = 2**63 - 1
C_INT_MAX = 2**31 - 1


def _int_at_least(low: int, high: int = INT64_MAX) -> Check:
    """An integer in ``[low, high]`` (``high``: Int64's largest by default)."""
    return Check(
        f"an integer from {low} to {high}", lambda v: low <= v <= high, (low - 1, high + 1)
    )


# what the release does when a reading-free feature's AUC leaves release.leak_auc_bounds
LEAK_AUDIT_MODES = ("warn", "error")


def _one_of(choices: Callable[[], tuple[str, ...]], invalid: tuple[str, ...]) -> Check:
    """A choice among registry names; ``choices`` reads the registry when the check runs."""
    return Check(lambda: f"available: {list(choices())}", lambda v: v in choices(), invalid)


def _pattern(regex_text: str, allowed: str, invalid: tuple[str, ...]) -> Check:
    import re

    rx = re.compile(regex_text)
    return Check(allowed, lambda v: rx.fullmatch(v) is not None, invalid)


def _compiles(engine: str) -> Callable[[str], bool]:
    def ok(pattern: str) -> bool:
        try:
            if engine == "polars":
                import polars as pl

                pl.select(pl.lit("").str.contains(pattern))
            else:
                import regex

                regex.compile(pattern)
        except Exception:  # noqa: BLE001 - any compile error means "not a valid regex"
            return False
        return True

    return ok


def _iso_date(value: str) -> bool:
    try:
        return len(value) == 10 and date.fromisoformat(value) is not None
    except ValueError:
        return False


def _roles() -> tuple[str, ...]:
    from pipeline.core.schema import ROLES

    return ROLES


# codecs that both pyarrow's writer and Polars' sink_parquet accept
PARQUET_CODECS = ("zstd", "snappy", "gzip", "brotli", "lz4")

_python_regex = _compiles("regex")
_polars_regex = _compiles("polars")

DEFAULT_CHECKS: dict[type, Check] = {
    bool: Check("true or false", lambda v: True),
    int: _int_at_least(0),
    float: Check("a finite number >= 0", lambda v: math.isfinite(v) and v >= 0, (-1.0, math.nan)),
    str: Check("text without control characters", _plain_text, ("a\nb", "a\x00b")),
    tuple: Check(
        "a list of text without control characters",
        lambda v: all(_plain_text(str(x)) for x in v),
        (("a\tb",),),
    ),
    dict: Check(
        "a table of text without control characters",
        lambda v: all(_plain_text(str(k)) and _plain_text(str(x)) for k, x in v.items()),
        ({"a\nb": "c"},),
    ),
}


def _f(default: Any, help: str, check: Check | None = None, **kw: Any) -> Any:  # noqa: A002
    """A config field: its default, its help line and its rule (``check``; the default rule
    of its type when None, :data:`DEFAULT_CHECKS`), all in the field's metadata."""
    meta = {"help": help, "check": check}
    if isinstance(default, (list, dict, tuple)) and not isinstance(default, tuple):
        return field(default_factory=lambda: type(default)(default), metadata=meta, **kw)
    return field(default=default, metadata=meta, **kw)


@dataclass(frozen=True)
class CommonConfig:
    # every stage's config key holds this section (pipeline.engine.stage.Stage.hashed_sections)
    compression: str = _f(
        "zstd",
        "Parquet compression codec of every table the pipeline writes",
        check=_one_of(lambda: PARQUET_CODECS, ("ZSTD", "none", "")),
    )


@dataclass(frozen=True)
class ExtractConfig:
    batch_papers: int = _f(
        1000,
        "papers buffered before a batch of rows is handed to the Parquet writer",
        check=_int_at_least(1),
    )
    row_group_rows: int = _f(
        200_000, "maximum rows per Parquet row group in extract outputs", check=_int_at_least(1)
    )
    max_line_bytes: int = _f(
        256 * 1024 * 1024,
        "lines longer than this are rejected as 'line_too_long'",
        check=_int_at_least(2),
    )
    reject_head_bytes: int = _f(200, "bytes of a rejected line kept in the rejects table")


@dataclass(frozen=True)
class ArchiveConfig:
    # Not among extract's config sections: a unit's marker is keyed by its members' header
    # fields, so units of another size are redone by that alone.
    unit_mb: int = _f(
        64,
        "an archive's members are extracted in units of consecutive members holding at least "
        "this many MB of JSONL (each unit: one set of outputs, one marker); 1.5 units per "
        "worker are buffered while the archive streams",
        check=_int_at_least(1),
    )


@dataclass(frozen=True)
class WorksConfig:
    max_alias_partners: int = _f(
        3,
        "a DOI or OpenAlex id linked to more than this many distinct arXiv ids, or to more than "
        "this many distinct DOIs (or OpenAlex ids) that have no arXiv id, glues unrelated works "
        "(e.g. a proceedings-volume DOI): its links are dropped; arXiv ids are never junk, so a "
        "paper cited under several DOIs and OpenAlex ids keeps them all",
    )
    max_label_iterations: int = _f(
        200,
        "not used: connected components are found in one pass (scipy's csgraph); kept so "
        "that config files naming it still load",
        check=_int_at_least(1),
    )


@dataclass(frozen=True)
class SurveysConfig:
    category_prefix: str = _f(
        "cs.",
        "primary category prefix of candidate survey papers",
        check=_pattern(
            r"[A-Za-z0-9.-]*", "letters, digits, '.' and '-' (e.g. 'cs.')", ("cs*", "c s")
        ),
    )
    min_resolved_refs: int = _f(20, "minimum number of resolved cited works for a survey")
    min_resolved_frac: float = _f(
        0.5,
        "minimum share of a survey's bib entries resolved to a work (by identifier or title); "
        "surveys below it are left out (counted): their reading lists are too incomplete",
        check=Check("a share between 0 and 1", lambda v: 0 <= v <= 1, (-0.1, 1.5, float("nan"))),
    )
    max_surveys: int = _f(
        0, "cap on surveys kept, by (first_version_date, paper_id) order; 0 = no cap"
    )
    use_abstract_cues: bool = _f(
        True, "also accept surveys by abstract cues ('in this survey', ...)"
    )
    extra_title_cues: tuple[str, ...] = _f(
        (),
        "additional title regexes counted as survey cues",
        check=Check(
            "a list of valid regular expressions (Python `regex` syntax)",
            lambda v: all(_plain_text(p) and _python_regex(p) for p in v),
            (("(unclosed",),),
        ),
    )
    extra_exclusions: tuple[str, ...] = _f(
        (),
        "additional regexes that veto a survey cue",
        check=Check(
            "a list of valid regular expressions (Python `regex` syntax)",
            lambda v: all(_plain_text(p) and _python_regex(p) for p in v),
            (("[z-a]",),),
        ),
    )


@dataclass(frozen=True)
class RolesConfig:
    overrides: dict[str, str] = _f(
        {},
        "extra heading regex -> role entries, checked before the built-in table",
        check=Check(
            "a table of heading regex (Polars syntax, no look-around) -> role, role one of "
            "schema.ROLES",
            lambda v: all(
                _plain_text(p) and _polars_regex(p) and r in _roles() for p, r in v.items()
            ),
            ({"(?=x)": "method"}, {"survey": "not_a_role"}),
        ),
    )
    survey_core_is_related_work: bool = _f(
        True, "in surveys, topical sections (role 'other') count as related work"
    )
    survey_core_roles: tuple[str, ...] = _f(
        ("other", "discussion"),
        "heading roles that form a survey's curated core (counted as related work when "
        "survey_core_is_related_work)",
        check=Check(
            "a list of roles, each one of schema.ROLES",
            lambda v: all(r in _roles() for r in v),
            (("not_a_role",),),
        ),
    )
    survey_late_method_is_core: bool = _f(
        True,
        "in surveys, method/experiment sections after the first core section describe reviewed "
        "works and count as core",
    )
    survey_method_is_core: bool = _f(
        True,
        "in surveys, a method section that is not the survey's own protocol (e.g. 'Architecture') "
        "describes reviewed works and counts as core wherever it stands, also before the first "
        "topical section",
    )
    background_run_2024: bool = _f(
        False,
        "2024 layout: topical keys right after a Background/Preliminaries key count as "
        "background until a key with another role (on the real sample: the survey 2212.11774 "
        "agrees with its 2022 labels on 29/31 pairs instead of 26/31, all papers treated as "
        "surveys on 0.936 instead of 0.961 of pairs; it can swallow a survey's whole core)",
    )


@dataclass(frozen=True)
class LabelsConfig:
    essential_total_mentions: int = _f(
        3, "a work cited this many times in total is tier 4", check=_int_at_least(1)
    )
    essential_related_mentions: int = _f(
        2,
        "a work cited this many times in related work is tier 4",
        check=_int_at_least(1),
    )


# How the negatives stage may draw its negatives (its docstring says what each does); kept
# here, not in the stage, so config checks them without importing a stage.
NEGATIVE_SAMPLINGS = ("hash", "hardest")


@dataclass(frozen=True)
class NegativesConfig:
    negatives_per_positive: float = _f(
        1.0, "hard negatives per positive, per survey (rounded down)"
    )
    negative_sampling: str = _f(
        "hash",
        "'hash' (seeded hash order) or 'hardest' (most co-cited with its positives first)",
        check=_one_of(lambda: NEGATIVE_SAMPLINGS, ("best", "")),
    )
    seed: int = _f(13, "seed of the deterministic hash used to pick negatives")
    survey_batch_size: int = _f(
        4096,
        "surveys whose candidate pairs are built at once (also capped at 5M pairs)",
        check=_int_at_least(1),
    )
    # multiplied by the negatives wanted in an Int64 expression (negatives.sampling.windows)
    candidates_per_negative: int = _f(
        25,
        "works of each pool considered per negative wanted (at least 1000; 0: the whole pool)",
        check=_int_at_least(0, C_INT_MAX),
    )
    # pipeline.rules.fields states the rule; docs/scale.md the figures behind the default
    subfield_as_field: bool = _f(
        False,
        "a work without arXiv categories takes the categories whose subfields its OpenAlex "
        "subfield is (in-domain and own_category for them); off: it has no field",
    )
    subfield_min_share: float = _f(
        0.25,
        "a category's subfields: those of at least this share of its corpus papers' records",
        check=Check("a number above 0 and at most 1", lambda v: 0 < v <= 1, (0.0, 1.5)),
    )
    subfield_min_papers: int = _f(
        20,
        "a category learns subfields only from at least this many corpus papers with a record",
        check=_int_at_least(1),
    )


@dataclass(frozen=True)
class AspectsConfig:
    min_works: int = _f(
        5,
        "a survey section is an aspect query when it cites at least this many positives",
        check=_int_at_least(1),
    )


@dataclass(frozen=True)
class OpenAlexConfig:
    abstracts: str = _f(
        "open",
        "which OpenAlex abstracts a release carries: 'open' (the work's OpenAlex location names "
        "a Creative Commons or public-domain licence), 'all', or 'none' (the card says why)",
        check=_one_of(lambda: OPENALEX_ABSTRACTS, ("some", "")),
    )


# what a release carries of OpenAlex's abstracts (pipeline.rules.described says why)
OPENALEX_ABSTRACTS = ("open", "all", "none")


@dataclass(frozen=True)
class OpenAlexLookupConfig:
    # Not among any stage's config sections: where the answers come from changes only the
    # lookup cache, and the openalex stage's key follows the records it writes from it.
    snapshot: str = _f(
        "",
        "folder of the OpenAlex works snapshot (works/**/*.gz or data/works/, with "
        "merged_ids/works/*.csv.gz); empty: the API at OPENALEX_URL "
        "when OPENALEX_API_KEY is set, else no lookups",
    )
    budget_usd: float = _f(
        1.0,
        "the API lookups of one run stop before their documented cost passes this (USD; a "
        "free key's daily allowance is $1); a rerun goes on from the cache",
    )
    max_calls: int = _f(
        1_000_000, "the API lookups of one run stop after this many calls", check=_int_at_least(1)
    )
    batch_ids: int = _f(
        100,
        "ids OR-ed in one filter call (at most 100, OpenAlex's documented limit)",
        check=_int_at_least(1, 100),
    )
    timeout_s: float = _f(30.0, "seconds before a call is abandoned and retried")
    max_retries: int = _f(4, "retries of a call on 429, 5xx, a timeout or a cut answer")
    backoff_s: float = _f(1.0, "first backoff in seconds, doubled at each retry")
    max_wait_s: float = _f(
        120.0,
        "a Retry-After longer than this ends the run's lookups (the daily allowance is spent)",
    )
    requests_per_second: float = _f(
        100.0, "at most this many calls per second (OpenAlex's documented limit is 100)"
    )
    flush_keys: int = _f(
        1000, "answers buffered before a cache segment is written", check=_int_at_least(1)
    )


@dataclass(frozen=True)
class SplitConfig:
    eval_from: str = _f(
        "2023-01-01",
        "surveys first posted on or after this date go to eval, earlier to train",
        check=Check("a date YYYY-MM-DD", _iso_date, ("2023-13-01", "soon", "")),
    )


@dataclass(frozen=True)
class ReleaseConfig:
    dataset_name: str = _f(
        "survey-reading-lists",
        "name used in the dataset card",
        check=_pattern(
            r"[A-Za-z0-9][A-Za-z0-9 ._()+-]{0,99}",
            "1-100 letters, digits, spaces and ._()+- (starting with a letter or digit)",
            ("x\n---\nowner: y", "name: value", ""),
        ),
    )
    repo_id: str = _f(
        "",
        "Hub dataset repo (OWNER/NAME) the release is published to, named by the card's "
        "load_dataset snippet and evaluation command ('' = OWNER/<dataset_name>)",
        check=_pattern(
            r"([\w.-]+/[\w.-]+)?", "'' or a Hub repo id OWNER/NAME", ("owner", "a/b/c", "a b/c")
        ),
    )
    code_url: str = _f(
        "",
        "URL of this pipeline's source code, linked from the card ('' = none)",
        check=_pattern(r"(https?://\S+)?", "'' or an http(s) URL", ("github.com/x", "https://a b")),
    )
    authors: tuple[str, ...] = _f(
        (),
        "authors of the dataset as the card's citation names them, each 'Last, First' "
        "(empty: the card says {AUTHORS} and push refuses it)",
        check=Check(
            "a list of names of letters, spaces and .,'- (e.g. 'Doe, Jane')",
            lambda v: all(re.fullmatch(r"[^\W\d_][\w .,'-]{0,99}", a) for a in v),
            (("Doe, {Jane}",), ("",)),
        ),
    )
    year: int = _f(
        0,
        "year of the card's citation (0: the card says {YEAR} and push refuses it)",
        check=Check(
            "0 (not set) or a year from 1991 to 9999",
            lambda v: v == 0 or 1991 <= v <= 9999,
            (1990,),
        ),
    )
    contact: str = _f(
        "",
        "how to reach the maintainers, an e-mail address or an http(s) URL, named by the card "
        "('' = the Community tab of the dataset's Hub page)",
        check=_pattern(
            r"(https?://\S+|[^@\s{}]+@[^@\s{}]+\.[^@\s{}]+)?",
            "'' or an e-mail address or an http(s) URL",
            ("someone", "a b@c.d"),
        ),
    )
    version: str = _f(
        "0.1.0",
        "release version written into metadata and card",
        check=_pattern(
            r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}",
            "1-64 letters, digits and ._+- (e.g. 0.1.0)",
            ("1.0 beta", "{v}", ""),
        ),
    )
    input_revision: str = _f(
        "",
        "revision of the input corpus, when not resolved from hf:// inputs",
        check=_pattern(
            r"[A-Za-z0-9._/+-]{0,200}", "letters, digits and ._/+- (a commit sha or tag)", ("a b",)
        ),
    )
    leak_audit: str = _f(
        "warn",
        "'warn' or 'error' when a visible feature alone tells positives from hard negatives "
        "(its AUC outside leak_auc_bounds)",
        check=_one_of(lambda: LEAK_AUDIT_MODES, ("fail", "")),
    )
    leak_auc_bounds: tuple[float, ...] = _f(
        (0.40, 0.60),
        "[low, high]: the AUC range of a single visible feature that passes the audit",
        check=Check(
            "[low, high] with 0 <= low <= 0.5 <= high <= 1",
            lambda v: len(v) == 2 and 0 <= v[0] <= 0.5 <= v[1] <= 1,
            ((0.6, 0.4), (0.4,), (0.55, 0.6)),
        ),
    )
    audit_sample_rows: int = _f(
        500_000,
        "most rows of a split each leak audit and the reading-free probe read: above it they "
        "read a sample of whole surveys (pipeline.rules.audit_sample), so their memory is "
        "bounded by it, not by the corpus",
        check=_int_at_least(1000),
    )
    non_commercial: bool = _f(
        False,
        "the release is declared non-commercial: the full-text view (corpus_sections) also "
        "carries papers under NC licences (pipeline.rules.licences); false refuses them",
    )


@dataclass(frozen=True)
class EvaluateConfig:
    bootstrap_samples: int = _f(
        1000,
        "bootstrap resamples of surveys for confidence intervals and paired tests",
        check=_int_at_least(1),
    )
    seed: int = _f(7, "seed for bootstrap, randomisation tests and the random baseline")
    random_seeds: int = _f(
        10, "the random baseline is the mean over this many seeds", check=_int_at_least(1)
    )
    ks: tuple[int, ...] = _f(
        (5, 10, 20, 50, 100),
        "cutoffs for ndcg@K and recall@K",
        check=Check(
            f"a non-empty list of distinct integers from 1 to {INT64_MAX}",
            lambda v: len(v) > 0 and len(set(v)) == len(v) and all(1 <= k <= INT64_MAX for k in v),
            ((), (0, 5), (5, 5), (5, 2**64)),
        ),
    )


@dataclass(frozen=True)
class TrainConfig:
    learning_rate: float = _f(
        0.05,
        "LightGBM learning rate (shrinkage)",
        check=Check("a number in (0, 1]", lambda v: 0 < v <= 1, (0.0, 1.5, float("nan"))),
    )
    num_leaves: int = _f(15, "LightGBM leaves per tree", check=_int_at_least(2, C_INT_MAX))
    min_data_in_leaf: int = _f(
        20, "LightGBM minimum rows per leaf", check=_int_at_least(1, C_INT_MAX)
    )
    max_rounds: int = _f(
        500,
        "boosting rounds at most (early stopping usually ends sooner)",
        check=_int_at_least(1, C_INT_MAX),
    )
    early_stopping_rounds: int = _f(
        30,
        "stop when validation ndcg@10 has not improved for this many rounds",
        check=_int_at_least(1, C_INT_MAX),
    )
    validation_share: float = _f(
        0.2,
        "share of the train surveys, the latest by survey date, held out for early stopping",
        check=Check("a share in (0, 1)", lambda v: 0 < v < 1, (0.0, 1.0, float("nan"))),
    )
    seed: int = _f(13, "seed of every LightGBM random generator", check=_int_at_least(0, C_INT_MAX))
    num_threads: int = _f(
        1,
        "LightGBM threads; fixed so the model file is byte-identical on any machine",
        check=_int_at_least(1, C_INT_MAX),
    )


@dataclass(frozen=True)
class Config:
    common: CommonConfig = field(default_factory=CommonConfig)
    extract: ExtractConfig = field(default_factory=ExtractConfig)
    archive: ArchiveConfig = field(default_factory=ArchiveConfig)
    works: WorksConfig = field(default_factory=WorksConfig)
    surveys: SurveysConfig = field(default_factory=SurveysConfig)
    roles: RolesConfig = field(default_factory=RolesConfig)
    labels: LabelsConfig = field(default_factory=LabelsConfig)
    openalex: OpenAlexConfig = field(default_factory=OpenAlexConfig)
    openalex_lookup: OpenAlexLookupConfig = field(default_factory=OpenAlexLookupConfig)
    negatives: NegativesConfig = field(default_factory=NegativesConfig)
    split: SplitConfig = field(default_factory=SplitConfig)
    aspects: AspectsConfig = field(default_factory=AspectsConfig)
    release: ReleaseConfig = field(default_factory=ReleaseConfig)
    evaluate: EvaluateConfig = field(default_factory=EvaluateConfig)
    train: TrainConfig = field(default_factory=TrainConfig)

    def to_dict(self) -> dict[str, Any]:
        """Plain, JSON-serialisable view of the resolved config."""
        return json.loads(json.dumps(dataclasses.asdict(self), sort_keys=True, default=list))

    def section_hash(self, *sections: str) -> str:
        """sha256 (16 hex) over the named sections; all sections when none are named."""
        d = self.to_dict()
        names = sorted(sections) if sections else sorted(d)
        blob = json.dumps({n: d[n] for n in names}, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    @property
    def hash(self) -> str:
        return self.section_hash()


# settings that moved to another section: a config file naming the old place is told the new one
MOVED_FIELDS = {"extract.compression": ("common", "compression")}


class ConfigError(PipelineError, ValueError):
    """A config file names an unknown section or field, or a value of the wrong type."""


def _build(cls: type, values: Any, where: str) -> Any:
    if not isinstance(values, dict):
        raise ConfigError(
            f"{where}: expected a table of fields, got {type(values).__name__} {values!r}"
        )
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - set(fields))
    for name in unknown:
        moved = MOVED_FIELDS.get(f"{where.rsplit('.', 1)[-1]}.{name}")
        if moved:
            raise ConfigError(f"{where}.{name}: this setting is now [{moved[0]}] {moved[1]}")
    if unknown:
        raise ConfigError(f"{where}: unknown field(s) {unknown}; available: {sorted(fields)}")
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for name, value in values.items():
        default = getattr(cls(), name)
        if dataclasses.is_dataclass(default):
            kwargs[name] = _build(type(default), value, f"{where}.{name}")
            continue
        if isinstance(default, tuple) and isinstance(value, list):
            value = tuple(value)
        if not _has_type(value, hints[name]):
            raise ConfigError(
                f"{where}.{name}: expected {_type_name(hints[name])}, got "
                f"{type(value).__name__} {value!r}; allowed: "
                f"{field_check(where.rsplit('.', 1)[-1], name, default).says().split(': ', 1)[1]}"
            )
        kwargs[name] = float(value) if isinstance(default, float) else value
    return cls(**kwargs)


def _has_type(value: Any, hint: Any) -> bool:
    """Whether ``value`` fits a field's annotation (int is accepted for float; bool is not int)."""
    origin = typing.get_origin(hint)
    if origin is tuple:
        (item, *_) = typing.get_args(hint)
        return isinstance(value, tuple) and all(_has_type(v, item) for v in value)
    if origin is dict:
        k, v = typing.get_args(hint)
        return isinstance(value, dict) and all(
            _has_type(a, k) and _has_type(b, v) for a, b in value.items()
        )
    if hint is bool or isinstance(value, bool):
        return hint is bool and isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float))
    return isinstance(value, hint)


def _type_name(hint: Any) -> str:
    origin = typing.get_origin(hint)
    if origin is tuple:
        return f"a list of {_type_name(typing.get_args(hint)[0])}"
    if origin is dict:
        k, v = typing.get_args(hint)
        return f"a table of {_type_name(k)} -> {_type_name(v)}"
    return hint.__name__


def load_config(path: str | Path | None = None, overrides: dict[str, Any] | None = None) -> Config:
    """Read a TOML config (or none) and apply ``{"section": {"field": value}}`` overrides."""
    values: dict[str, Any] = {}
    if path is not None:
        try:
            values = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"{path}: {e}") from e
        except UnicodeDecodeError as e:  # TOML is UTF-8 by its specification
            raise ConfigError(
                f"{path}: not a UTF-8 text file (byte {e.start}: {e.reason}); "
                "a config is TOML, which is UTF-8"
            ) from e
        except FileNotFoundError as e:
            raise ConfigError(f"config file {path} not found") from e
        except IsADirectoryError as e:
            raise ConfigError(f"config file {path} is a directory, not a TOML file") from e
    for section, fields in (overrides or {}).items():
        values.setdefault(section, {}).update(fields)
    where = str(path or "config")
    cfg = _build(Config, values, where)
    validate(cfg, where)
    return cfg


def describe() -> str:
    """Every config field with its default and help, as TOML comments (``python -m pipeline config``)."""
    lines = []
    for sec in dataclasses.fields(Config):
        lines.append(f"[{sec.name}]")
        for f in dataclasses.fields(sec.default_factory()):  # type: ignore[misc]
            default = getattr(sec.default_factory(), f.name)  # type: ignore[misc]
            lines.append(f"# {f.metadata.get('help', '')}")
            lines.append(
                f"{f.name} = {json.dumps(list(default) if isinstance(default, tuple) else default)}"
            )
        lines.append("")
    return "\n".join(lines)


def field_check(section: str, name: str, value: Any) -> Check:
    """The rule for ``[section] name``: its own (the field's metadata), else its type's."""
    sections = {f.name: f.default_factory for f in dataclasses.fields(Config)}  # type: ignore[misc]
    if section in sections:
        own = {f.name: f for f in dataclasses.fields(sections[section]())}
        if name in own and own[name].metadata.get("check") is not None:
            return own[name].metadata["check"]
    for kind, default in DEFAULT_CHECKS.items():
        if isinstance(value, kind):
            return default
    raise TypeError(f"config field {section}.{name}: no validation rule for {type(value)}")


def validate(cfg: Config, where: str = "config") -> None:
    """Check every field of ``cfg``.

    Raises:
        ConfigError: one line naming the first bad field, its value and what is allowed.
    """
    for sec in dataclasses.fields(cfg):
        section = getattr(cfg, sec.name)
        for f in dataclasses.fields(section):
            value = getattr(section, f.name)
            check = field_check(sec.name, f.name, value)
            if not check.test(value):
                raise ConfigError(
                    f"{where}: [{sec.name}] {f.name} = {value!r} is not allowed; {check.says()}"
                )
