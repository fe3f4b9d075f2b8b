"""Stage ``openalex`` (reduce): every work the release can show, described by OpenAlex.

Which works: every row of ``works`` (the positives, and the pools the hard negatives are
drawn from: works other surveys cite and works cited in the field). Each is looked up by one
of its aliases: its OpenAlex id (the smallest, when a work has several), else its DOI, else
its arXiv id (:func:`lookup_key`).

Where from (:mod:`pipeline.corpus.openalex`): the lookup cache in the work directory first;
the ids it does not answer from the snapshot ``[openalex_lookup] snapshot`` (``--openalex
DIR``), else from the API when ``OPENALEX_API_KEY`` is set, else from nowhere. With no
source, or when the lookups stop early (refused key, budget, service failing), the stage
still ends: the works without an answer have no record, the log says in one line how many,
and ``_summary.json`` and the release count them; a snapshot that holds no work is
refused while works are left to look up (its "not found" would be cached for every work).
The runner runs this stage every time (``Stage.always_run``): a rerun asks only for ids
without an answer, and the stages after it rerun only when ``records.parquet`` changed (its
sha256 is the stage's ``key_extra``). A rebuild from a kept cache asks nothing and writes
the same bytes.

Outputs: ``records.parquet`` (``schema.OPENALEX_RECORDS``, one row per work with an answer,
found or not, sorted by ``work_id``; ``oa_abstract`` as ``[openalex] abstracts`` lets the
release carry it, :mod:`pipeline.rules.described`) and ``_summary.json`` (this run's
lookups: calls, cost, what was dropped, and the rates of the records).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from pipeline.core import schema as S
from pipeline.core.errors import StageError
from pipeline.core.files import sha256_file, write_json
from pipeline.corpus import openalex as OA
from pipeline.corpus.sources import InputError
from pipeline.engine.context import ReduceContext
from pipeline.engine.stage import Stage
from pipeline.rules.aliases import ARXIV_PREFIX
from pipeline.rules.described import carried_abstract
from pipeline.rules.redact import redact

log = logging.getLogger("pipeline")
_KINDS = (("openalex:", 0), ("doi:", 1), (ARXIV_PREFIX, 2))


def lookup_key(aliases: pl.Expr) -> pl.Expr:
    """The alias a work is looked up by: its smallest ``openalex:`` alias, else ``doi:``,
    else ``arxiv:`` (null when it has none of them)."""
    picks = [aliases.list.eval(pl.element().filter(pl.element().str.starts_with(p))).list.min()
             for p, _ in _KINDS]  # fmt: skip
    return pl.coalesce(picks)


@dataclass(frozen=True)
class Source:
    """This run's route: what it is (``route``), the identity its answers carry
    (:attr:`OA.Answer.asked`; None: no source to ask), and ``lookup(keys, tally)``, or why
    there is none (``problem``: a snapshot that holds nothing, refused when a key is to be
    asked; without it and without ``lookup``, the works are not looked up)."""

    route: str
    identity: str | None = None
    lookup: Callable[[list[str], OA.Tally], Iterable[list[OA.Answer]]] | None = None
    problem: str | None = None


def lookup_source(cfg: Any) -> Source:
    """This run's :class:`Source`: the snapshot, else the API, else none."""
    lcfg = cfg.openalex_lookup
    if lcfg.snapshot:
        root = Path(lcfg.snapshot)
        if not root.is_dir():
            raise StageError(f"openalex: the snapshot folder {root} does not exist")
        files = OA.snapshot_files(root)
        route = f"snapshot ({len(files)} files)"
        problem = OA.snapshot_problem(root)
        if problem is not None:
            return Source(route, problem=problem)
        identity = OA.snapshot_identity(root)
        return Source(route, identity, lambda keys, tally: OA.snapshot_lookup(
            keys, root, tally, identity
        ))  # fmt: skip
    key = os.environ.get(OA.KEY_ENV, "")
    if not key:
        return Source(f"no {OA.KEY_ENV} and no --openalex snapshot")
    settings = OA.ApiSettings(
        base_url=os.environ.get(OA.URL_ENV) or OA.DEFAULT_URL,
        api_key=key,
        batch_ids=lcfg.batch_ids,
        budget_usd=lcfg.budget_usd,
        max_calls=lcfg.max_calls,
        timeout_s=lcfg.timeout_s,
        max_retries=lcfg.max_retries,
        backoff_s=lcfg.backoff_s,
        max_wait_s=lcfg.max_wait_s,
        requests_per_second=lcfg.requests_per_second,
    )

    def lookup(keys: list[str], tally: OA.Tally) -> Iterable[list[OA.Answer]]:
        return OA.api_lookup(keys, OA.ApiClient(settings, tally))

    url = OA.public_url(settings.base_url)
    return Source(f"api ({url})", OA.api_identity(settings.base_url), lookup)


def _by_kind(keys: pl.Series) -> dict[str, int]:
    kinds = keys.str.split_exact(":", 1).struct.field("field_0").value_counts()
    return {str(k): int(n) for k, n in kinds.sort(kinds.columns[0]).iter_rows()}


def projection(keys: pl.Series, cfg: Any) -> dict[str, Any]:
    """:func:`pipeline.corpus.openalex.lookup_projection` of asking the API for ``keys``
    under ``[openalex_lookup]``."""
    lcfg = cfg.openalex_lookup
    return OA.lookup_projection(
        _by_kind(keys), lcfg.batch_ids, lcfg.requests_per_second, lcfg.budget_usd
    )


def works_projection(works: Path, cache_dir: Path, cfg: Any) -> dict[str, Any]:
    """What the lookups of a run would ask the API, from its finished ``works`` table and its
    lookup cache ``cache_dir`` (the ids the cache answers for the API at ``OPENALEX_URL``
    are not asked again: a "not found" of a snapshot is)."""
    keys = (
        pl.scan_parquet(works)
        .select(lookup_key(pl.col(S.ALIASES)).alias(S.LOOKUP_KEY))
        .drop_nulls()
        .unique()
        .collect(engine="streaming")[S.LOOKUP_KEY]
    )
    api = OA.api_identity(os.environ.get(OA.URL_ENV) or OA.DEFAULT_URL)
    cached = OA.LookupCache(cache_dir).load(api)
    todo = keys.filter(~keys.is_in(pl.Series(list(cached), dtype=pl.String).implode()))
    return {"ids_cached": keys.len() - todo.len(), **projection(todo, cfg)}


# the records table's columns read from an answer's record (:class:`OA.Described`)
_RECORD_FIELDS = {
    S.OA_ANSWERED_ID: "openalex_id", S.OA_TITLE: "title",
    S.OA_PUBLICATION_DATE: "publication_date", S.OA_YEAR: "publication_year",
    S.OA_TYPE: "type", S.OA_VENUE: "venue", S.OA_TOPIC: "topic", S.OA_SUBFIELD: "subfield",
    S.OA_FIELD: "field", S.OA_DOMAIN: "domain", S.OA_LANGUAGE: "language",
    S.OA_RETRACTED: "is_retracted", S.OA_DOI: "doi", S.OA_ARXIV_ID: "arxiv_id",
    S.OA_PMID: "pmid", S.OA_ABSTRACT: "abstract", S.OA_LICENSE: "license",
    S.OA_UPDATED_DATE: "updated_date",
}  # fmt: skip


def _rows(keys: pl.DataFrame, answers: dict[str, OA.Answer]) -> pl.DataFrame:
    """The records table's rows, before the abstract policy: one per work whose lookup key
    has an answer, in the order of ``keys``. The answers become columns one field at a time
    and meet the works in a join. Measured on 1M works with 0.9M answers
    (``bench/openalex_rows.py``, a loaded 2-core machine): 4.0 s, where the loop that built
    each row as a dict took 12.5 s."""
    listed = list(answers.values())
    records = [a.record for a in listed]
    columns: dict[str, list[Any]] = {
        S.LOOKUP_KEY: [a.key for a in listed],
        S.OA_FOUND: [a.found and a.record is not None for a in listed],
        S.OA_SOURCE: [a.source for a in listed],
    }
    for column, name in _RECORD_FIELDS.items():
        columns[column] = [getattr(r, name) if r is not None else None for r in records]
    schema = {c: t for c, t in S.polars_schema(S.OPENALEX_RECORDS).items() if c in columns}
    schema[S.OA_PUBLICATION_DATE] = pl.String
    described = pl.DataFrame(columns, schema=schema)
    order = [c for c in S.OPENALEX_RECORDS.names if c != S.OA_HAS_ABSTRACT]
    return (
        keys.filter(pl.col(S.LOOKUP_KEY).is_not_null())
        .join(described, on=S.LOOKUP_KEY, how="inner", maintain_order="left")
        .select(order)
    )


def _rate(n: int, d: int) -> float | None:
    return round(n / d, 6) if d else None


def content_counts(records: pl.DataFrame, works: int) -> dict[str, Any]:
    """What the records say, the same whichever run looked them up (the release shows these)."""
    found = records.filter(pl.col(S.OA_FOUND))
    n = found.height

    def has(col: str) -> int:
        return int((found[col].fill_null("").str.strip_chars() != "").sum())

    updated = found[S.OA_UPDATED_DATE].drop_nulls()
    return {
        "works": works,
        "works_with_record": n,
        "works_not_in_openalex": records.height - n,
        "works_not_looked_up": works - records.height,
        "record_rate": _rate(n, works),
        "title_rate": _rate(has(S.OA_TITLE), works),
        "abstract_rate": _rate(int(found[S.OA_HAS_ABSTRACT].sum()), works),
        "abstract_carried_rate": _rate(has(S.OA_ABSTRACT), works),
        "venue_rate": _rate(has(S.OA_VENUE), works),
        "subfield_rate": _rate(has(S.OA_SUBFIELD), works),
        "retracted": int(found[S.OA_RETRACTED].fill_null(False).sum()),
        "merged": int(
            found.filter(
                pl.col(S.LOOKUP_KEY).str.starts_with("openalex:")
                & (pl.col(S.LOOKUP_KEY) != pl.lit("openalex:") + pl.col(S.OA_ANSWERED_ID))
            ).height
        ),
        "by_source": {str(k): int(v) for k, v in records.group_by(S.OA_SOURCE).len().sort(S.OA_SOURCE).iter_rows()},
        "updated_date_min": updated.min() if updated.len() else None,
        "updated_date_max": updated.max() if updated.len() else None,
    }  # fmt: skip


def build_openalex(ctx: ReduceContext) -> dict[str, Any]:
    """Look up the works not yet answered, write the records of every answered work."""
    keys = (
        ctx.read("works", "works")
        .select(S.WORK_ID, lookup_key(pl.col(S.ALIASES)).alias(S.LOOKUP_KEY))
        .sort(S.WORK_ID)
        .collect(engine="streaming")
    )
    source = lookup_source(ctx.cfg)
    route, lookup = source.route, source.lookup
    cache = OA.LookupCache(ctx.cache_dir(), ctx.cfg.openalex_lookup.flush_keys)
    answers = cache.load(source.identity)
    wanted = sorted(set(keys[S.LOOKUP_KEY].drop_nulls().to_list()))
    todo = [k for k in wanted if k not in answers]
    if todo and source.problem is not None:
        raise InputError(f"{source.problem}; {len(todo)} works to look up")
    cached_before = len(wanted) - len(todo)
    tally = OA.Tally()
    answered = 0
    if todo and lookup is not None:
        log.info("openalex: %d ids answered by the cache, %d to ask (%s)", cached_before,
                 len(todo), route)  # fmt: skip
        if route.startswith("api"):
            p = projection(pl.Series(todo, dtype=pl.String), ctx.cfg)
            log.info("openalex: at most %d list calls, $%.2f, %.1f min at %g calls/s",
                     p["list_calls"], p["cost_usd"], p["minutes"] or 0.0,
                     p["requests_per_second"])  # fmt: skip
        try:
            for batch in lookup(todo, tally):
                cache.add(batch)
                for a in batch:
                    if a.key not in answers:
                        answers[a.key] = a
                        answered += 1
        except OA.LookupStopped as e:
            # written to the manifest and the summary: a library's words may quote a secret
            tally.stopped = redact(str(e))
        finally:
            cache.flush()
    rows = _rows(keys, answers)
    has_abstract = pl.col(S.OA_ABSTRACT).fill_null("").str.strip_chars() != ""
    records = rows.with_columns(
        pl.col(S.OA_PUBLICATION_DATE).str.to_date("%Y-%m-%d", strict=False),
        has_abstract.alias(S.OA_HAS_ABSTRACT),
        carried_abstract(ctx.cfg.openalex.abstracts).alias(S.OA_ABSTRACT),
    ).select(S.OPENALEX_RECORDS.names)
    ctx.write("records", records)
    content = content_counts(records, keys.height)
    missing = content["works_not_looked_up"]
    if missing:
        why = tally.stopped or (route if lookup is None else "no answer")
        log.warning("openalex: %d of %d works not looked up (%s)", missing, keys.height, why)
    run = {
        "route": route if todo else "cache only",
        "ids_wanted": len(wanted),
        "ids_cached_before": cached_before,
        "ids_asked": len(todo) if lookup is not None else 0,
        "ids_answered": answered,
        "works_without_lookup_key": int(keys[S.LOOKUP_KEY].null_count()),
        **tally.as_dict(),
    }
    write_json(ctx.summary_output(), {"records": content, "lookups": run})
    return {**content, "lookups": run}


def records_digest(stage_dir: Path) -> str:
    """sha256 of the records the stage wrote (``key_extra``: the later stages rerun only when
    the records changed, not each time the lookups ran)."""
    path = stage_dir / "records.parquet"
    return sha256_file(path) if path.is_file() else "none"


STAGE = Stage(
    name="openalex",
    kind="reduce",
    reads=("works",),
    config_sections=("openalex",),
    fn=build_openalex,
    outputs=(("records", S.OPENALEX_RECORDS),),
    help="every cited work described by OpenAlex (cache, then snapshot or API; resumable)",
    always_run=True,
    key_extra=records_digest,
)
