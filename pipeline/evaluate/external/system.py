"""A foreign model as a submitted system: its features gathered, its scores computed.

:func:`foreign_model_scores` (re-ranking mode) resolves each model feature to one source
column (the release's own features, the Qdrant cosine, ``--features`` files, the Turso
table, in that order; ``--feature-map`` renames), reads those columns joined to the eval
candidates, and scores every (survey, candidate) pair of the eval set with the model; a
candidate a source has no row for gets the feature missing (NaN: LightGBM's own
missing-value route). A source with ``survey_id`` (a ``--features`` file of pair features)
joins per (survey, candidate). :func:`foreign_model_retrieval` (retrieval mode) does the
same over each survey's top K of a first stage. The scores then go through the one
evaluator as any run does; the facts it returns carry the popularity section's numbers
(:mod:`pipeline.evaluate.external.popularity`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from pipeline.core.files import file_identity
from pipeline.evaluate.columns import CANDIDATE_ID, LABEL, SCORE, SURVEY_ID
from pipeline.evaluate.external.keys import alias_key, candidate_keys
from pipeline.evaluate.external.model import (
    ForeignModel,
    ForeignModelError,
    load_foreign,
    read_feature_map,
)
from pipeline.evaluate.external.popularity import FOREIGN, feature_facts, time_facts
from pipeline.evaluate.external.sources import (
    TURSO_TOKEN_ENV,
    FileSource,
    ReleaseSource,
    TursoSource,
)
from pipeline.evaluate.external.turso_remote import TIMEOUT_S
from pipeline.evaluate.external.vectors import SurveyEncoder, VectorSource
from pipeline.evaluate.retrieval.qdrant_index import API_KEY_ENV
from pipeline.rank.features import FEATURE_NAMES

SHOWN_COLUMNS = 40  # offered columns named in the error of a feature no source has


@dataclass(frozen=True)
class ExternalOptions:
    """Where a foreign model's features come from (the ``evaluate`` flags of the same names).

    Attributes:
        feature_map: ``--feature-map FILE.toml``: ``model_feature = "source column"``.
        turso_url: ``--turso-url``: libsql://, https://, file:PATH or a local database.
        turso_token: ``--turso-token`` (else ``TURSO_AUTH_TOKEN`` / ``TURSO_DB_TOKEN``).
        turso_timeout_s: ``--turso-timeout``: seconds a remote database has per answer.
        features_table: ``--features-table`` (default ``papers``).
        features_key: ``--features-key`` (default ``id``).
        features: ``--features FILE`` (Parquet or CSV), repeatable.
        qdrant: ``--qdrant-url`` / ``--qdrant``: a server URL or a local-mode folder.
        collection: ``--collection``.
        id_field: ``--id-field``: the payload field holding a point's paper id.
        vector_feature: ``--vector-feature``: the cosine's feature name (default ``cosine``).
        query_vectors: ``--query-vectors``: survey vectors the collection lacks.
        features_as_of: ``--features-as-of``: the date the outside features were taken.
        query_encoder: the first ``--encoder`` / ``--sentence-transformer`` of the command
            (a :class:`~pipeline.evaluate.systems.models.ModelSpec`): the vectors of the
            surveys neither the collection nor ``--query-vectors`` has.
        cache_dir: the evaluation cache its survey vectors are kept in (None: none).
        batch_size: texts per call of ``query_encoder``.
    """

    feature_map: Path | None = None
    turso_url: str | None = None
    turso_token: str | None = field(default=None, repr=False)
    turso_timeout_s: float = TIMEOUT_S
    features_table: str = "papers"
    features_key: str = "id"
    features: tuple[Path, ...] = ()
    qdrant: str | None = None
    collection: str | None = None
    id_field: str = "_id"
    vector_feature: str = "cosine"
    query_vectors: Path | None = None
    features_as_of: date | None = None
    query_encoder: Any = None
    cache_dir: Path | None = None
    batch_size: int = 64


NO_OPTIONS = ExternalOptions()


@contextlib.contextmanager
def secrets_in_env(turso_token: str | None, qdrant_api_key: str | None) -> Iterator[None]:
    """A token or key given as an argument, set for the block as the environment variable
    it would otherwise come from: the clients read it there, and every redaction
    (:data:`pipeline.rules.redact.SECRET_ENV`) knows its value; restored on exit."""
    given = {TURSO_TOKEN_ENV[0]: turso_token, API_KEY_ENV: qdrant_api_key}
    before = {name: os.environ.get(name) for name, value in given.items() if value}
    for name in before:
        os.environ[name] = str(given[name])
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _sources(
    view: pl.DataFrame | None,
    pairs: pl.DataFrame,
    options: ExternalOptions,
    encode_surveys: SurveyEncoder | None = None,
) -> list[Any]:
    """The feature sources in lookup order; ``view`` None (retrieval mode): no release
    features (module doc)."""
    sources: list[Any] = [] if view is None else [ReleaseSource(view)]
    if options.qdrant is not None:
        if options.collection is None:
            raise ForeignModelError(
                f"--qdrant {options.qdrant}: give --collection NAME (the collection of the "
                "papers' vectors)"
            )
        sources.append(VectorSource(options.qdrant, options.collection, pairs,
                                    options.vector_feature, options.id_field,
                                    options.query_vectors, encode_surveys))  # fmt: skip
    sources += [FileSource(Path(p)) for p in options.features]
    if options.turso_url is not None:
        sources.append(TursoSource(options.turso_url, options.turso_token,
                                   options.features_table, options.features_key,
                                   options.turso_timeout_s))  # fmt: skip
    return sources


def _resolve(
    model_file: Path, mapping: dict[str, str], sources: list[Any], retrieval: bool = False
) -> dict[str, tuple[Any, str]]:
    """Model feature -> (source, column), the first source offering the column.

    Raises:
        ForeignModelError: a feature no source offers (naming the model's features and the
            columns offered).
    """
    offered = [(source, source.columns()) for source in sources]
    found: dict[str, tuple[Any, str]] = {}
    missing: list[str] = []
    for feature, column in mapping.items():
        source = next((s for s, columns in offered if column in columns), None)
        if source is None:
            missing.append(feature if column == feature else f"{feature} (as {column!r})")
        else:
            found[feature] = (source, column)
    if missing:
        columns = [c for _, cs in offered for c in cs]
        more = f", ... ({len(columns)} in all)" if len(columns) > SHOWN_COLUMNS else ""
        release = sorted(set(missing) & set(FEATURE_NAMES)) if retrieval else []
        why = (
            f"; in retrieval mode the release's own features ({', '.join(release)}) are not "
            "offered: they exist for the judged candidates only, so their presence would tell "
            "a judged document from an unjudged one (give them in --features or the Turso "
            "table for every document)"
            if release
            else ""
        )
        raise ForeignModelError(
            f"--model-file {model_file}: no source has feature(s) {', '.join(missing)}; the "
            f"model's features: {', '.join(mapping)}; columns offered: "
            f"{', '.join(columns[:SHOWN_COLUMNS]) or 'none'}{more} (a column of another name: "
            f'--feature-map FILE.toml with model_feature = "column"){why}'
        )
    return found


@dataclass(frozen=True)
class _Gathered:
    """A foreign model's feature matrix over some (survey, candidate) pairs."""

    features: pl.DataFrame  # the model's features, in its order, aligned with the pairs
    origin: dict[str, tuple[str, str]]  # feature -> (source label, column)
    sources: dict[str, dict[str, Any]]  # source label -> what it read


def _gather(
    model: ForeignModel, pairs: pl.DataFrame, keys: pl.DataFrame, sources: list[Any],
    mapping: dict[str, str], retrieval: bool = False,
) -> _Gathered:  # fmt: skip
    """Each model feature read from its source and joined to ``pairs`` (a candidate a source
    has no row for: null, i.e. missing); a source with ``survey_id`` joins per pair."""
    try:
        resolved = _resolve(model.path, mapping, sources, retrieval)
        table = pairs
        source_facts: dict[str, dict[str, Any]] = {}
        for source in sources:
            wanted = [(f, c) for f, (s, c) in resolved.items() if s is source]
            if not wanted:
                continue
            columns = sorted({c for _, c in wanted})
            block = source.read(columns, keys)
            source_facts[source.label] = block.facts
            on = [c for c in (SURVEY_ID, CANDIDATE_ID) if c in block.frame.columns]
            got = block.frame.select(*on, *[pl.col(c).alias(f) for f, c in wanted])
            if SURVEY_ID in on and not isinstance(source, (ReleaseSource, VectorSource)):
                got, unmatched = _eval_surveys(got, pairs[SURVEY_ID])
                source_facts[source.label] |= {"pair_rows_survey_unmatched": unmatched}
            table = table.join(got, on=on, how="left", maintain_order="left")
    finally:
        for source in sources:
            close = getattr(source, "close", None)
            if close is not None:
                close()
    origin = {f: (s.label, c) for f, (s, c) in resolved.items()}
    return _Gathered(table.select(model.features), origin, source_facts)


def _eval_surveys(frame: pl.DataFrame, surveys: pl.Series) -> tuple[pl.DataFrame, int]:
    """``frame`` (a user's pair features) with each ``survey_id`` as the eval set spells it
    (matched as given or in its alias form, as candidates are: ``arXiv:2104.06921v2`` is
    survey ``2104.06921``), and the number of rows whose survey is no eval survey (dropped)."""
    ours = pl.DataFrame({"_eval": surveys.unique().sort()})
    forms = pl.concat([
        ours.select(pl.col("_eval").alias("_form"), "_eval"),
        ours.select(alias_key(pl.col("_eval")).alias("_form"), "_eval"),
    ]).drop_nulls().unique("_form", keep="first")  # fmt: skip
    given = frame.with_columns(
        pl.col(SURVEY_ID).cast(pl.String).alias("_raw"), alias_key(pl.col(SURVEY_ID)).alias("_norm")
    )
    by_raw = given.join(forms, left_on="_raw", right_on="_form", how="left", maintain_order="left")[
        "_eval"
    ]
    by_norm = given.join(
        forms, left_on="_norm", right_on="_form", how="left", maintain_order="left"
    )["_eval"]
    named = given.with_columns(by_raw.fill_null(by_norm).alias(SURVEY_ID)).drop("_raw", "_norm")
    unmatched = int(named[SURVEY_ID].null_count())
    kept = named.drop_nulls(SURVEY_ID).unique([SURVEY_ID, CANDIDATE_ID], keep="first",
                                              maintain_order=True)  # fmt: skip
    return kept, unmatched


def _predict(model: ForeignModel, features: pl.DataFrame) -> pl.Series:
    matrix = features.to_numpy().astype(np.float64)  # nulls become NaN: missing
    return pl.Series(SCORE, model.predict(matrix), dtype=pl.Float64)


def _survey_encoder(eval_set: pl.DataFrame, options: ExternalOptions) -> SurveyEncoder | None:
    """The surveys' vectors from ``options.query_encoder`` (an ``--encoder`` or
    ``--sentence-transformer`` of the same command), for the surveys the collection lacks."""
    spec = options.query_encoder
    if spec is None:
        return None

    def encode(survey_ids: list[str]) -> tuple[list[str], np.ndarray]:
        from pipeline.evaluate.retrieval.model_runs import encode_surveys

        wanted = eval_set.filter(
            pl.col(SURVEY_ID).is_in(pl.Series(survey_ids, dtype=pl.String).implode())
        )
        return encode_surveys(spec, wanted, options.cache_dir, options.batch_size)

    return encode


def foreign_model_scores(
    eval_set: pl.DataFrame,
    eval_path: Path,
    view: pl.DataFrame,
    model_file: Path,
    options: ExternalOptions = NO_OPTIONS,
) -> tuple[str, pl.Series, dict[str, Any]]:
    """(system name, scores aligned with ``eval_set``, facts) of a foreign ``--model-file``.

    Args:
        eval_set: the loaded eval set (its labels feed the per-feature AUCs only).
        eval_path: the eval Parquet (its ``candidate_aliases`` join the sources).
        view: the answer-free candidates view of the eval set (the release's features).

    Raises:
        ForeignModelError, SourceError: the model, a feature, or a source cannot be used.
    """
    model = load_foreign(model_file)
    mapping = read_feature_map(options.feature_map, model.features)
    pairs = eval_set.select(SURVEY_ID, CANDIDATE_ID)
    sources = _sources(view, pairs, options, _survey_encoder(eval_set, options))
    keys = candidate_keys(eval_path, pairs[CANDIDATE_ID])
    got = _gather(model, pairs, keys, sources, mapping)
    facts = {
        "kind": FOREIGN,
        "target": model.path.name,
        "file": file_identity(model.path),
        "features": feature_facts(got.features, eval_set, model.gain, got.origin),
        "sources": got.sources,
        "time": time_facts(view, options.features_as_of),
    }
    return model.path.stem, _predict(model, got.features), facts


def foreign_model_retrieval(
    eval_set: pl.DataFrame,
    eval_path: Path,
    first_stage: pl.DataFrame,
    first_stage_name: str,
    model_file: Path,
    options: ExternalOptions = NO_OPTIONS,
) -> tuple[str, pl.DataFrame, dict[str, Any]]:
    """(system name, run, facts) of a foreign ``--model-file`` in retrieval mode: it
    re-ranks ``first_stage`` (each survey's top K of the first stage: ``survey_id``,
    ``candidate_id``), its features read from the same sources as in re-ranking mode.

    Two differences keep a judgment from reaching the model: the release's own features
    are not offered (they exist for judged candidates only), and a source's keys are
    matched to each document's own id only, never to the judged candidates' aliases (a
    judged document would otherwise be found under more names than an unjudged one).
    The per-feature AUCs read the judged pairs among ``first_stage``; coverage is over all.

    Raises:
        ForeignModelError, SourceError: the model, a feature, or a source cannot be used.
    """
    model = load_foreign(model_file)
    mapping = read_feature_map(options.feature_map, model.features)
    pairs = first_stage.select(SURVEY_ID, CANDIDATE_ID).unique(maintain_order=True)
    sources = _sources(None, pairs, options, _survey_encoder(eval_set, options))
    keys = candidate_keys(eval_path, pairs[CANDIDATE_ID], aliases=False)
    got = _gather(model, pairs, keys, sources, mapping, retrieval=True)
    run = pairs.with_columns(_predict(model, got.features))
    judged = pairs.with_row_index("_row").join(
        eval_set.select(SURVEY_ID, CANDIDATE_ID, LABEL), on=[SURVEY_ID, CANDIDATE_ID],
        how="inner", maintain_order="left",
    )  # fmt: skip
    facts = {
        "kind": FOREIGN,
        "target": model.path.name,
        "file": file_identity(model.path),
        "first_stage": first_stage_name,
        "pairs_scored": pairs.height,
        "features": feature_facts(
            got.features[judged["_row"]],
            judged,
            model.gain,
            got.origin,
            coverage_of=got.features,
        ),  # fmt: skip
        "sources": got.sources,
        "time": time_facts(eval_set, options.features_as_of),
    }
    return model.path.stem, run, facts


def with_qdrant(
    options: ExternalOptions | None,
    qdrant: str | Path,
    collection: str | None,
    id_field: str,
    query_vectors: str | Path | None,
) -> ExternalOptions:
    """``options`` with the Qdrant flags as the vector source (re-ranking mode, where
    ``--qdrant`` gives a foreign model's feature rather than a retrieval)."""
    import dataclasses

    return dataclasses.replace(
        options if options is not None else NO_OPTIONS,
        qdrant=str(qdrant),
        collection=collection,
        id_field=id_field,
        query_vectors=None if query_vectors is None else Path(query_vectors),
    )
