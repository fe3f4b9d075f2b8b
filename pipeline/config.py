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
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


def _f(default: Any, help: str, **kw: Any) -> Any:  # noqa: A002 - "help" reads best here
    if isinstance(default, (list, dict, tuple)) and not isinstance(default, tuple):
        return field(default_factory=lambda: type(default)(default), metadata={"help": help}, **kw)
    return field(default=default, metadata={"help": help}, **kw)


@dataclass(frozen=True)
class ExtractConfig:
    batch_papers: int = _f(
        1000, "papers buffered before a batch of rows is handed to the Parquet writer"
    )
    row_group_rows: int = _f(200_000, "maximum rows per Parquet row group in extract outputs")
    compression: str = _f("zstd", "Parquet compression codec of every table the pipeline writes")
    max_line_bytes: int = _f(
        256 * 1024 * 1024, "lines longer than this are rejected as 'line_too_long'"
    )
    reject_head_bytes: int = _f(200, "bytes of a rejected line kept in the rejects table")


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
        200, "connected components: fail after this many label-propagation rounds"
    )


@dataclass(frozen=True)
class SurveysConfig:
    category_prefix: str = _f("cs.", "primary category prefix of candidate survey papers")
    min_resolved_refs: int = _f(20, "minimum number of resolved cited works for a survey")
    max_surveys: int = _f(
        0, "cap on surveys kept, by (first_version_date, paper_id) order; 0 = no cap"
    )
    use_abstract_cues: bool = _f(
        True, "also accept surveys by abstract cues ('in this survey', ...)"
    )
    extra_title_cues: tuple[str, ...] = _f((), "additional title regexes counted as survey cues")
    extra_exclusions: tuple[str, ...] = _f((), "additional regexes that veto a survey cue")


@dataclass(frozen=True)
class RolesConfig:
    overrides: dict[str, str] = _f(
        {}, "extra heading regex -> role entries, checked before the built-in table"
    )
    survey_core_is_related_work: bool = _f(
        True, "in surveys, topical sections (role 'other') count as related work"
    )
    survey_core_roles: tuple[str, ...] = _f(
        ("other", "discussion"),
        "heading roles that form a survey's curated core (counted as related work when "
        "survey_core_is_related_work)",
    )
    survey_late_method_is_core: bool = _f(
        True,
        "in surveys, method/experiment sections after the first core section describe reviewed "
        "works and count as core",
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
    essential_total_mentions: int = _f(3, "a work cited this many times in total is tier 4")
    essential_related_mentions: int = _f(
        2, "a work cited this many times in related work is tier 4"
    )


@dataclass(frozen=True)
class NegativesConfig:
    negatives_per_positive: float = _f(
        1.0, "hard negatives per positive, per survey (rounded down)"
    )
    negative_sampling: str = _f(
        "hash", "'hash' (seeded hash order) or 'hardest' (most same-category surveys first)"
    )
    seed: int = _f(13, "seed of the deterministic hash used to pick negatives")
    survey_batch_size: int = _f(256, "surveys whose candidate pairs are built at once (memory)")


@dataclass(frozen=True)
class SplitConfig:
    eval_from: str = _f(
        "2023-01-01", "surveys first posted on or after this date go to eval, earlier to train"
    )


@dataclass(frozen=True)
class ReleaseConfig:
    dataset_name: str = _f("survey-reading-lists", "name used in the dataset card")
    version: str = _f("0.1.0", "release version written into metadata and card")
    input_revision: str = _f(
        "", "revision of the input corpus, when not resolved from hf:// inputs"
    )


@dataclass(frozen=True)
class EvaluateConfig:
    bootstrap_samples: int = _f(
        1000, "bootstrap resamples of surveys for confidence intervals and paired tests"
    )
    seed: int = _f(7, "seed for bootstrap, randomisation tests and the random baseline")
    random_seeds: int = _f(10, "the random baseline is the mean over this many seeds")
    ks: tuple[int, ...] = _f((5, 10, 20, 50, 100), "cutoffs for ndcg@K and recall@K")


@dataclass(frozen=True)
class Config:
    extract: ExtractConfig = field(default_factory=ExtractConfig)
    works: WorksConfig = field(default_factory=WorksConfig)
    surveys: SurveysConfig = field(default_factory=SurveysConfig)
    roles: RolesConfig = field(default_factory=RolesConfig)
    labels: LabelsConfig = field(default_factory=LabelsConfig)
    negatives: NegativesConfig = field(default_factory=NegativesConfig)
    split: SplitConfig = field(default_factory=SplitConfig)
    release: ReleaseConfig = field(default_factory=ReleaseConfig)
    evaluate: EvaluateConfig = field(default_factory=EvaluateConfig)

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


class ConfigError(ValueError):
    """A config file names an unknown section or field, or a value of the wrong type."""


def _build(cls: type, values: dict[str, Any], where: str) -> Any:
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - set(fields))
    if unknown:
        raise ConfigError(f"{where}: unknown field(s) {unknown}; available: {sorted(fields)}")
    kwargs = {}
    for name, value in values.items():
        default = getattr(cls(), name)
        if dataclasses.is_dataclass(default):
            kwargs[name] = _build(type(default), value, f"{where}.{name}")
            continue
        if isinstance(default, tuple) and isinstance(value, list):
            value = tuple(value)
        if isinstance(default, bool) != isinstance(value, bool) or (
            not isinstance(default, bool)
            and not isinstance(value, type(default))
            and not (isinstance(default, float) and isinstance(value, int))
        ):
            raise ConfigError(
                f"{where}.{name}: expected {type(default).__name__}, got {type(value).__name__} {value!r}"
            )
        kwargs[name] = float(value) if isinstance(default, float) else value
    return cls(**kwargs)


def load_config(path: str | Path | None = None, overrides: dict[str, Any] | None = None) -> Config:
    """Read a TOML config (or none) and apply ``{"section": {"field": value}}`` overrides."""
    values: dict[str, Any] = {}
    if path is not None:
        try:
            values = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"{path}: {e}") from e
    for section, fields in (overrides or {}).items():
        values.setdefault(section, {}).update(fields)
    return _build(Config, values, str(path or "config"))


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
