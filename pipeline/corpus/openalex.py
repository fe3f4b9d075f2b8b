"""OpenAlex works: the API client, the snapshot reader and the lookup cache.

What a work is, as OpenAlex describes it, is read from either route with the same typed
decoder (:class:`WireWork` names only the fields kept) and reduced to a :class:`Described`
record. Both routes answer lookup keys, the aliases of ``works`` (``openalex:W123``,
``doi:10.1/x``, ``arxiv:2104.06921``; an arXiv id is asked as arXiv's DataCite DOI
``10.48550/arxiv.<id>``, the DOI OpenAlex gives arXiv preprints).

The API (``OPENALEX_URL``, default ``https://api.openalex.org``), used as its documentation
asks (developers.openalex.org, "Filter", "Authentication & Pricing", "Error Handling"):

* one list call per at most :data:`MAX_OR_VALUES` ids of one kind, OR-ed with ``|`` in a
  ``filter`` (the documented limit of values in one filter), ``per_page`` as large, and
  ``select`` naming only the fields of :class:`WireWork`;
* a key that the ids an answer did not cover are asked one by one as singletons
  (``/works/<id>``, free), which is how a deleted work (404) and a merged one (301 to the
  work it was merged into) are told apart;
* the key (``OPENALEX_API_KEY``) is a query parameter, as documented; it is never logged,
  never written and never part of an error message: messages name the URL without its query;
* 429, 5xx, a timeout, a cut or invalid body (one that is not the length its
  ``Content-Length`` says, or whose length is not a number) are retried with exponential
  backoff, or after ``Retry-After`` when the answer gives it; 401, and 403 without
  ``Retry-After``, are a refused key and end the lookups of the run;
* an answer is read in chunks up to :data:`MAX_ANSWER_BYTES`; a larger one ends the
  lookups of the run, naming the limit;
* every call is counted, and its cost summed at the documented prices
  (:data:`LIST_CALL_USD`, singletons free); the lookups stop before a call would pass the
  budget, and a rerun goes on from the cache.

The snapshot (``--openalex DIR``): ``DIR/works/**/*.gz`` (or ``DIR/data/works/**/*.gz``, the
bucket's own layout, else ``DIR/**/*.gz``), gzip JSON lines of the same records, read in
sorted file order until every key is answered. A snapshot holds no record for a merged
work; its ``merged_ids/works/*.csv.gz`` (``merge_date,id,merge_into_id``, documented in
"Snapshot data format") name the work each was merged into, so an OpenAlex id asked is
answered by the record of the work it was merged into, as the API's 301 does. A key no
record answers is cached as not found, so a rerun with the same snapshot reads nothing. A
snapshot that holds no work (no files, empty files, no record in them) answers nothing, not
"not found": it is refused, and so is a damaged file, naming it.

The cache (:class:`LookupCache`, in the work directory) holds one answer per key, found or
not found, in JSON-lines segments written atomically; a killed run loses at most the
answers not yet flushed, and a rerun asks only for keys without an answer. A "not found"
names the source that gave it (a snapshot by its files, the API by its URL) and holds for
that source only: a run with another snapshot asks the key again.
"""

from __future__ import annotations

import csv
import http.client
import logging
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import msgspec

from pipeline.core.files import atomic_path, sha256_text, temp_tag
from pipeline.corpus.sources import (
    InputError,
    InputFile,
    InputReadError,
    LongLine,
    iter_lines,
)

log = logging.getLogger("pipeline")

DEFAULT_URL = "https://api.openalex.org"
URL_ENV = "OPENALEX_URL"
KEY_ENV = "OPENALEX_API_KEY"
MAX_OR_VALUES = 100  # values OR-ed in one filter, and the largest per_page
LIST_CALL_USD = 0.10 / 1000  # "List / Filter: $0.10 / 1,000 calls"
SINGLETON_USD = 0.0  # "Singleton: Free"
DOCUMENTED_REQUESTS_PER_SECOND = 100
# the largest answer read: a page of 100 works with the fields of SELECT is some hundreds
# of KB. Decoded, an answer takes some times its size: a position of an abstract's word is
# 2 bytes of JSON ("1,") and 8 in a list, and 64 more while the words are put in order,
# which MAX_ABSTRACT_WORDS bounds
MAX_ANSWER_BYTES = 16 << 20
TOO_LONG = b"<a line longer than MAX_ANSWER_BYTES>"  # in place of such a snapshot line
# an abstract is some hundred words; an index of more is a whole text, or an attack
MAX_ABSTRACT_WORDS = 100_000
ANSWER_CHUNK = 1 << 20
ARXIV_DOI_PREFIX = "10.48550/arxiv."
SELECT = (
    "id,doi,title,display_name,publication_date,publication_year,type,language,is_retracted,"
    "updated_date,ids,primary_location,locations,primary_topic,abstract_inverted_index"
)
OPENALEX, DOI, ARXIV = "openalex", "doi", "arxiv"


# --------------------------------------------------------------------- wire records
class _Named(msgspec.Struct):
    display_name: str | None = None


class _Location(msgspec.Struct):
    source: _Named | None = None
    landing_page_url: str | None = None
    license: str | None = None


class _Topic(msgspec.Struct):
    display_name: str | None = None
    subfield: _Named | None = None
    field: _Named | None = None
    domain: _Named | None = None


class _Ids(msgspec.Struct):
    openalex: str | None = None
    doi: str | None = None
    pmid: str | None = None


class WireWork(msgspec.Struct):
    """An OpenAlex work as the API and the snapshot write it: only the fields kept."""

    id: str | None = None
    doi: str | None = None
    title: str | None = None
    display_name: str | None = None
    publication_date: str | None = None
    # decoded by :func:`publication_year`: a year of another type or out of range nulls the
    # year, not the record (the rest of the work is still its description)
    publication_year: msgspec.Raw = msgspec.Raw(b"null")
    type: str | None = None
    language: str | None = None
    is_retracted: bool | None = None
    updated_date: str | None = None
    ids: _Ids | None = None
    primary_location: _Location | None = None
    locations: list[_Location] | None = None
    primary_topic: _Topic | None = None
    abstract_inverted_index: dict[str, list[int]] | None = None


class _WireList(msgspec.Struct):
    meta: dict[str, Any] | None = None
    results: list[msgspec.Raw] | None = None


# the years a work's year is kept in: those a calendar date (``publication_date``, ISO 8601
# and the records table's Date) can hold; the records table stores the year as Int32
YEARS = (1, 9999)
Year = Annotated[int, msgspec.Meta(ge=YEARS[0], le=YEARS[1])]


class Described(msgspec.Struct, omit_defaults=True):
    """What the pipeline keeps of a work: ids without their URL prefixes, DOIs lower-cased."""

    openalex_id: str
    title: str | None = None
    publication_date: str | None = None
    # checked when a cached answer is decoded too: a cache line with a year out of range
    # (written before the year was checked) does not decode, and its key is asked again
    publication_year: Year | None = None
    type: str | None = None
    venue: str | None = None
    topic: str | None = None
    subfield: str | None = None
    field: str | None = None
    domain: str | None = None
    language: str | None = None
    is_retracted: bool = False
    doi: str | None = None
    arxiv_id: str | None = None
    pmid: str | None = None
    abstract: str | None = None
    license: str | None = None
    updated_date: str | None = None


class Answer(msgspec.Struct, omit_defaults=True):
    """The cached answer for one key: the record, or ``found`` false (OpenAlex has none).

    ``asked``: the identity of the source that answered (:func:`snapshot_identity`,
    :func:`api_identity`). A "not found" holds only for the source that said it: when the
    lookups have another source (a newer snapshot, the API), the key is asked again
    (:meth:`LookupCache.load`)."""

    key: str
    found: bool
    source: str
    record: Described | None = None
    asked: str = ""


_decode_work = msgspec.json.Decoder(WireWork).decode
_decode_list = msgspec.json.Decoder(_WireList).decode
_decode_answer = msgspec.json.Decoder(Answer).decode
_decode_year = msgspec.json.Decoder(Year | None).decode
_encode = msgspec.json.Encoder().encode


def _tail(url: str | None, prefix: str) -> str | None:
    if not url:
        return None
    return url[len(prefix) :] if url.startswith(prefix) else url


def openalex_id(url: str | None) -> str | None:
    """``https://openalex.org/W123`` -> ``W123``."""
    tail = _tail(url, "https://openalex.org/")
    return tail.rsplit("/", 1)[-1] if tail else None


def bare_doi(url: str | None) -> str | None:
    """``https://doi.org/10.1/X`` -> ``10.1/x`` (DOIs are case-insensitive)."""
    tail = _tail(url, "https://doi.org/")
    return tail.strip().lower() if tail else None


def abstract_text(index: dict[str, list[int]] | None, tally: Tally | None = None) -> str | None:
    """The abstract an ``abstract_inverted_index`` encodes: each word at its positions; None
    for more than :data:`MAX_ABSTRACT_WORDS` words (counted, ``tally.long_abstracts``)."""
    if not index:
        return None
    if sum(len(positions) for positions in index.values()) > MAX_ABSTRACT_WORDS:
        if tally is not None:
            tally.long_abstracts += 1
        return None
    placed = sorted((pos, word) for word, positions in index.items() for pos in positions)
    return " ".join(word for _, word in placed) or None


def _arxiv_of(work: WireWork, doi: str | None) -> str | None:
    if doi and doi.startswith(ARXIV_DOI_PREFIX):
        return doi[len(ARXIV_DOI_PREFIX) :]
    for loc in work.locations or ():
        url = loc.landing_page_url or ""
        if "arxiv.org/abs/" in url:
            found = url.split("arxiv.org/abs/", 1)[1].strip("/")
            return found.split("v")[0] if "v" in found.split(".")[-1] else found
    return None


def publication_year(work: WireWork, tally: Tally | None = None) -> int | None:
    """The work's year when it is an integer within :data:`YEARS`, else None; a year given
    but not kept is counted (``tally.invalid_years``)."""
    try:
        return _decode_year(work.publication_year)
    except (msgspec.DecodeError, msgspec.ValidationError):
        if tally is not None:
            tally.invalid_years += 1
        return None


def describe(work: WireWork, tally: Tally | None = None) -> Described | None:
    """The kept fields of a work; None when it has no OpenAlex id (not a usable record)."""
    oid = openalex_id(work.id)
    if not oid:
        return None
    doi = bare_doi(work.doi) or bare_doi(work.ids.doi if work.ids else None)
    loc, topic = work.primary_location, work.primary_topic

    def name(x: _Named | None) -> str | None:
        return x.display_name if x is not None else None

    pmid = work.ids.pmid if work.ids else None
    return Described(
        openalex_id=oid,
        title=work.title or work.display_name,
        publication_date=work.publication_date,
        publication_year=publication_year(work, tally),
        type=work.type,
        venue=name(loc.source) if loc else None,
        topic=topic.display_name if topic else None,
        subfield=name(topic.subfield) if topic else None,
        field=name(topic.field) if topic else None,
        domain=name(topic.domain) if topic else None,
        language=work.language,
        is_retracted=bool(work.is_retracted),
        doi=doi,
        arxiv_id=_arxiv_of(work, doi),
        pmid=pmid.rsplit("/", 1)[-1] if pmid else None,
        abstract=abstract_text(work.abstract_inverted_index, tally),
        license=loc.license if loc else None,
        updated_date=work.updated_date,
    )


# --------------------------------------------------------------------- keys
def asked_as(key: str) -> tuple[str, str]:
    """``(filter kind, value)`` a lookup key is asked as: ``openalex:W1`` -> ("openalex",
    "w1"), ``doi:10.1/x`` -> ("doi", "10.1/x"), ``arxiv:2104.1`` -> ("doi",
    "10.48550/arxiv.2104.1"); values lower-cased, as the answers are matched."""
    kind, _, value = key.partition(":")
    if kind == OPENALEX:
        return OPENALEX, value.lower()
    if kind == ARXIV:
        return DOI, (ARXIV_DOI_PREFIX + value).lower()
    return DOI, value.lower()


def answers_to(record: Described) -> set[tuple[str, str]]:
    """The ``(kind, value)`` pairs a record answers (:func:`asked_as`)."""
    out = {(OPENALEX, record.openalex_id.lower())}
    if record.doi:
        out.add((DOI, record.doi))
    if record.arxiv_id:
        out.add((DOI, (ARXIV_DOI_PREFIX + record.arxiv_id).lower()))
    return out


@dataclass
class Tally:
    """What the lookups of one run did: calls, cost, and every answer that was dropped."""

    calls: int = 0
    list_calls: int = 0
    singleton_calls: int = 0
    cost_usd: float = 0.0
    retries: int = 0
    merged: int = 0  # keys answered by another work (merged into it)
    unasked_records: int = 0  # records in an answer that match no key asked
    invalid_records: int = 0  # records that do not decode, or have no id
    invalid_years: int = 0  # records kept without their year (not an integer in YEARS)
    long_abstracts: int = 0  # records kept without their abstract (over MAX_ABSTRACT_WORDS)
    batches_without_meta: int = 0
    stopped: str | None = None  # why the lookups of this run ended early, if they did

    def as_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["cost_usd"] = round(self.cost_usd, 6)
        return d


class LookupStopped(Exception):
    """The lookups of this run end here (refused key, budget, service failing); what was
    answered so far is kept and a rerun goes on."""


# --------------------------------------------------------------------- the API
class _NoRedirect(urllib.request.HTTPRedirectHandler):
    # a merge answers 301: the client reads the new id and asks it with its own parameters
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


@dataclass
class ApiSettings:
    """How the client calls the API (``[openalex_lookup]``)."""

    base_url: str = DEFAULT_URL
    api_key: str = field(default="", repr=False)
    batch_ids: int = MAX_OR_VALUES
    budget_usd: float = 1.0
    max_calls: int = 1_000_000
    timeout_s: float = 30.0
    max_retries: int = 4
    backoff_s: float = 1.0
    max_wait_s: float = 120.0
    requests_per_second: float = DOCUMENTED_REQUESTS_PER_SECOND
    max_answer_bytes: int = MAX_ANSWER_BYTES


class ApiClient:
    """The OpenAlex works API, batched, budgeted and retried (module docstring)."""

    def __init__(
        self, settings: ApiSettings, tally: Tally, sleep: Callable[[float], None] = time.sleep
    ):
        self.s = settings
        self.tally = tally
        self.sleep = sleep
        self._opener = urllib.request.build_opener(_NoRedirect)
        self._last = 0.0
        # list answers in the documented JSON: until one came, the service has not shown
        # that it holds works, and what it did not find is not an answer (api_lookup)
        self.lists_answered = 0

    def where(self, path: str) -> str:
        """The URL of ``path`` as messages name it: without credentials and without the
        query, so without the key."""
        return f"{public_url(self.s.base_url)}{path}"

    def _url(self, path: str, params: dict[str, str]) -> str:
        query = dict(params)
        if self.s.api_key:
            query["api_key"] = self.s.api_key
        return f"{self.s.base_url.rstrip('/')}{path}?{urllib.parse.urlencode(query, safe=':|/,')}"

    def _spend(self, list_call: bool) -> None:
        cost = LIST_CALL_USD if list_call else SINGLETON_USD
        if self.tally.calls + 1 > self.s.max_calls:
            raise LookupStopped(f"the call budget is spent ({self.tally.calls} calls)")
        if self.tally.cost_usd + cost > self.s.budget_usd + 1e-12:
            raise LookupStopped(
                f"the budget is spent (${self.tally.cost_usd:.4f} of ${self.s.budget_usd:.4f})"
            )
        gap = 1.0 / self.s.requests_per_second if self.s.requests_per_second > 0 else 0.0
        wait = self._last + gap - time.monotonic()
        if wait > 0:
            self.sleep(wait)
        self._last = time.monotonic()
        self.tally.calls += 1
        self.tally.cost_usd += cost
        if list_call:
            self.tally.list_calls += 1
        else:
            self.tally.singleton_calls += 1

    def _wait(self, attempt: int, retry_after: str | None, what: str) -> None:
        if attempt >= self.s.max_retries:
            raise LookupStopped(f"OpenAlex failed {attempt + 1} times in a row ({what})")
        delay = self.s.backoff_s * (2**attempt)
        if retry_after is not None:
            try:
                delay = float(retry_after)
            except ValueError:
                pass
            if delay > self.s.max_wait_s:
                raise LookupStopped(
                    f"OpenAlex asks to wait {delay:.0f} s ({what}); the daily allowance may "
                    "be spent: rerun later"
                )
        self.tally.retries += 1
        self.sleep(delay)

    def get(self, path: str, params: dict[str, str], list_call: bool) -> tuple[int, bytes, str]:
        """``(status, body, location)`` of a GET: 200, 404 or 301, after retries.

        Raises:
            LookupStopped: refused key, budget spent, the service keeps failing, or an
                answer larger than ``max_answer_bytes``.
        """
        url, where = self._url(path, params), self.where(path)
        for attempt in range(self.s.max_retries + 1):
            self._spend(list_call)
            try:
                with self._opener.open(url, timeout=self.s.timeout_s) as resp:
                    body = self._body(resp, where)
                    if body is None:
                        self._wait(attempt, None, f"{where}: a cut answer")
                        continue
                    return resp.status, body, ""
            except urllib.error.HTTPError as e:
                status, retry_after = e.code, e.headers.get("Retry-After")
                location = e.headers.get("Location") or ""
                e.close()
                if status in (301, 302, 303, 307, 308):
                    return 301, b"", location
                if status in (404, 400):
                    return status, b"", ""
                if status == 401 or (status == 403 and retry_after is None):
                    raise LookupStopped(
                        f"OpenAlex refused the API key (HTTP {status}, {where})"
                    ) from None
                if status in (403, 429) or status >= 500:
                    self._wait(attempt, retry_after, f"{where}: HTTP {status}")
                    continue
                raise LookupStopped(f"OpenAlex answered HTTP {status} ({where})") from None
            except (TimeoutError, urllib.error.URLError, ConnectionError, OSError) as e:
                reason = getattr(e, "reason", None) or type(e).__name__
                self._wait(attempt, None, f"{where}: {reason}")
                continue
            except http.client.HTTPException as e:  # IncompleteRead and kin: a cut answer
                self._wait(attempt, None, f"{where}: {type(e).__name__}")
                continue
        raise LookupStopped(f"OpenAlex failed ({where})")

    def _body(self, resp: Any, where: str) -> bytes | None:
        """The answer's body, read in chunks and at most ``max_answer_bytes`` of it; None
        when it is not the length its ``Content-Length`` says (a cut answer, or a length
        that is not a number: http.client then reads to the end of the connection).

        Raises:
            LookupStopped: the answer is larger than ``max_answer_bytes``.
        """
        limit = self.s.max_answer_bytes
        declared = resp.headers.get("Content-Length")
        digits = (declared or "").strip()
        length = int(digits) if digits.isascii() and digits.isdigit() else None

        def too_large(size: str) -> LookupStopped:
            return LookupStopped(
                f"OpenAlex answered {where} with {size}, over the limit of {limit:,} bytes "
                "for one answer"
            )

        if length is not None and length > limit:
            raise too_large(f"{length:,} bytes")
        chunks, size = [], 0
        while chunk := resp.read(min(ANSWER_CHUNK, limit + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                raise too_large(f"more than {limit:,} bytes")
        if declared is not None and length != size:
            return None
        return b"".join(chunks)

    def _records(self, body: bytes) -> list[WireWork] | None:
        try:
            page = _decode_list(body)
        except (msgspec.DecodeError, msgspec.ValidationError):
            return None
        if page.results is None:
            return None
        if page.meta is None:
            self.tally.batches_without_meta += 1
        works = []
        for raw in page.results:
            try:
                works.append(_decode_work(raw))
            except (msgspec.DecodeError, msgspec.ValidationError):
                self.tally.invalid_records += 1
        return works

    def batch(self, kind: str, values: list[str]) -> list[WireWork]:
        """The works a filter of ``values`` (one kind, at most :data:`MAX_OR_VALUES`) returns.

        Raises:
            LookupStopped: as :meth:`get`; also when the answer is never valid JSON.
        """
        field_name = "ids.openalex" if kind == OPENALEX else "doi"
        params = {
            "filter": f"{field_name}:{'|'.join(values)}",
            "per_page": str(MAX_OR_VALUES),
            "select": SELECT,
        }
        for attempt in range(self.s.max_retries + 1):
            status, body, _ = self.get("/works", params, list_call=True)
            if status != 200:
                return []  # a refused filter: the keys are asked one by one
            works = self._records(body)
            if works is not None:
                self.lists_answered += 1
                return works
            where = self.where("/works")
            self._wait(attempt, None, f"{where}: an answer that is not the documented JSON")
        raise LookupStopped(f"OpenAlex answers {self.where('/works')} with invalid JSON")

    def single(self, kind: str, value: str) -> WireWork | None:
        """The work ``/works/<id>`` answers (following merges), or None (404)."""
        path = f"/works/{value.upper() if kind == OPENALEX else 'doi:' + urllib.parse.quote(value, safe='/')}"
        for _hop in range(3):
            for attempt in range(self.s.max_retries + 1):
                status, body, location = self.get(path, {"select": SELECT}, list_call=False)
                if status in (404, 400):
                    return None
                if status == 301:
                    new = location.rstrip("/").rsplit("/", 1)[-1].split("?")[0]
                    if not new:
                        return None
                    path = f"/works/{new}"
                    break
                try:
                    return _decode_work(body)
                except (msgspec.DecodeError, msgspec.ValidationError):
                    what = f"{self.where(path)}: a work that is not the documented JSON"
                    self._wait(attempt, None, what)
            else:
                raise LookupStopped(f"OpenAlex answers {self.where(path)} with invalid JSON")
        return None


def public_url(base_url: str) -> str:
    """``base_url`` without a ``user:password@`` and without a trailing slash."""
    parts = urllib.parse.urlsplit(base_url.rstrip("/"))
    return parts._replace(netloc=parts.netloc.rsplit("@", 1)[-1]).geturl()


def api_identity(base_url: str) -> str:
    """The API as the cache names the source of an answer (:attr:`Answer.asked`): its URL
    without credentials."""
    return f"api:{public_url(base_url)}"


def api_lookup(keys: list[str], client: ApiClient) -> Iterator[list[Answer]]:
    """Answers for ``keys``, one list per batch (found, or not found after a singleton).

    "Not found" is an answer only from a service that has shown it holds works (a list
    answer in the documented JSON, or a record): until then the keys it did not find are
    held back, and if it never does (a server that answers 404 to everything: a wrong
    ``OPENALEX_URL``), they are not answered and the lookups stop.

    Raises:
        LookupStopped: the lookups end early (:meth:`ApiClient.get`); the answers yielded
            before are complete.
    """
    asked = api_identity(client.s.base_url)
    held: list[Answer] = []  # not found, by a service that has not shown it holds works
    proven = False
    by_kind: dict[str, list[tuple[str, str]]] = {}
    for key in keys:
        kind, value = asked_as(key)
        by_kind.setdefault(kind, []).append((value, key))
    step = max(1, min(client.s.batch_ids, MAX_OR_VALUES))
    for kind in sorted(by_kind):
        pairs = by_kind[kind]
        for i in range(0, len(pairs), step):
            chunk = pairs[i : i + step]
            # a value holding the filter's own separators cannot be OR-ed: asked alone
            plain = [(v, k) for v, k in chunk if not set(v) & {"|", ","}]
            wanted = {(kind, v): k for v, k in chunk}
            answers: dict[str, Answer] = {}
            works = client.batch(kind, [v for v, _ in plain]) if plain else []
            for work in works:
                rec = describe(work, client.tally)
                if rec is None:
                    client.tally.invalid_records += 1
                    continue
                hits = [wanted[a] for a in sorted(answers_to(rec)) if a in wanted]
                if not hits:
                    client.tally.unasked_records += 1
                for key in hits:
                    answers.setdefault(
                        key, Answer(key=key, found=True, source="api", record=rec, asked=asked)
                    )
            for value, key in chunk:
                if key in answers:
                    continue
                work = client.single(kind, value)
                rec = describe(work, client.tally) if work is not None else None
                if rec is not None and (kind, value) not in answers_to(rec):
                    client.tally.merged += 1
                answers[key] = Answer(
                    key=key, found=rec is not None, source="api", record=rec, asked=asked
                )
            batch = [answers[k] for _, k in chunk]
            proven = proven or client.lists_answered > 0 or any(a.found for a in batch)
            if not proven:
                held += [a for a in batch if not a.found]
                batch = [a for a in batch if a.found]
            elif held:
                batch, held = held + batch, []
            if batch:
                yield batch
    if held:
        raise LookupStopped(
            f"OpenAlex at {client.where('/works')} answered no list of works and no work: the "
            f"{len(held)} ids it did not find are not cached as not found (is OPENALEX_URL "
            "the OpenAlex API?)"
        )


def lookup_projection(
    keys_by_kind: Mapping[str, int],
    batch_ids: int = MAX_OR_VALUES,
    requests_per_second: float = DOCUMENTED_REQUESTS_PER_SECOND,
    budget_usd: float = 1.0,
) -> dict[str, Any]:
    """What asking the API for keys would take: ``keys_by_kind`` counts keys by their prefix
    (``openalex``, ``doi``, ``arxiv``). Keys are asked in filters of one kind (:func:`asked_as`:
    arXiv ids as DOIs), ``batch_ids`` a call, at the documented list price; the free
    singletons that follow a batch for the ids it did not answer are not counted (their
    number is not known before asking). ``runs_at_budget``: runs of ``budget_usd`` each (a
    free key's daily allowance is $1: days)."""
    step = max(1, min(batch_ids, MAX_OR_VALUES))
    asked: dict[str, int] = {}
    for prefix, n in keys_by_kind.items():
        kind = asked_as(f"{prefix}:x")[0]
        asked[kind] = asked.get(kind, 0) + int(n)
    calls = sum(-(-n // step) for n in asked.values())
    cost = calls * LIST_CALL_USD
    return {
        "works_to_look_up": sum(asked.values()),
        "by_kind": {k: int(v) for k, v in sorted(keys_by_kind.items())},
        "list_calls": calls,
        "ids_per_call": step,
        "cost_usd": round(cost, 2),
        "list_call_usd": LIST_CALL_USD,
        "requests_per_second": requests_per_second,
        "minutes": round(calls / requests_per_second / 60, 1) if requests_per_second > 0 else None,
        "budget_usd": budget_usd,
        "runs_at_budget": -(-round(cost * 1e6) // round(budget_usd * 1e6))
        if budget_usd > 0
        else None,
    }


# --------------------------------------------------------------------- the snapshot
def _snapshot_dir(root: Path, entity: str) -> Path | None:
    for d in (root / entity, root / "data" / entity):
        if d.is_dir():
            return d
    return None


def snapshot_files(root: Path) -> list[Path]:
    """The works files of a snapshot folder, sorted (``works/**/*.gz``, else
    ``data/works/**/*.gz``, else every ``**/*.gz`` outside ``merged_ids``)."""
    works = _snapshot_dir(root, "works")
    if works is not None:
        return sorted(works.rglob("*.gz"))
    return sorted(p for p in root.rglob("*.gz") if "merged_ids" not in p.relative_to(root).parts)


def merged_files(root: Path) -> list[Path]:
    """The merged-works lists of a snapshot folder, sorted by their date names
    (``merged_ids/works/*.csv.gz``, or under ``data/``)."""
    merged = _snapshot_dir(root, "merged_ids")
    return sorted((merged / "works").glob("*.gz")) if merged and (merged / "works").is_dir() else []


def snapshot_problem(root: Path) -> str | None:
    """Why a snapshot folder cannot answer a lookup, as it is listed (no works files, or
    only empty ones), or None. A source that yields nothing must not answer "not found":
    every work asked would be cached as not in OpenAlex."""
    files = snapshot_files(root)
    where = _snapshot_dir(root, "works")
    if not files:
        if where is None:
            found = "no works/ folder and no *.gz file" + (" (it is empty)" if _empty(root) else "")
        else:
            found = f"no *.gz file in {where}" + (" (it is empty)" if _empty(where) else "")
        return f"openalex: the snapshot folder {root} holds no works files: {found}"
    if all(p.stat().st_size == 0 for p in files):
        return (
            f"openalex: the snapshot folder {root} holds only empty works files ({len(files)} "
            f"of 0 bytes, the first {files[0].relative_to(root).as_posix()})"
        )
    return None


def _empty(folder: Path) -> bool:
    return next(iter(folder.iterdir()), None) is None


def snapshot_identity(root: Path) -> str:
    """The snapshot as the cache names the source of an answer (:attr:`Answer.asked`): its
    works and merged-works files by name and size, wherever the folder is."""
    kinds = (snapshot_files(root), merged_files(root))
    sizes = [[(p.relative_to(root).as_posix(), p.stat().st_size) for p in ps] for ps in kinds]
    return f"snapshot:{sha256_text(sizes)[:16]}"


def _snapshot_lines(path: Path) -> Iterator[tuple[int, bytes | memoryview]]:
    """``(line number, line)`` of a snapshot file (gzip), blank lines skipped; a line of more
    than :data:`MAX_ANSWER_BYTES` is never held whole: it is given as :data:`TOO_LONG`, which
    decodes as no work and as a merged-works row without ids (each counted invalid).

    Raises:
        InputError: the file is not gzip, ends before its end marker, or fails its CRC
            (names the file, and the line and byte it got to).
    """
    try:
        for number, line in iter_lines(
            InputFile(str(path), path.stat().st_size, ""), MAX_ANSWER_BYTES
        ):
            # a line longer than any work record is damage, read no further than the limit
            yield number, TOO_LONG if isinstance(line, LongLine) else line
    except InputReadError as e:
        raise InputError(
            f"openalex: the snapshot file {e}; download the file again and rerun"
        ) from None


def _csv_rows(path: Path) -> Iterator[dict[str, str]]:
    """The rows of a merged-works list (``merge_date,id,merge_into_id``).

    Raises:
        InputError: as :func:`_snapshot_lines`; also a line that is not UTF-8, or one that
            csv cannot read (a field over its limit).
    """

    at = [0]  # the line csv reads (its own line_num lags when a field fails)

    def text() -> Iterator[str]:
        for number, line in _snapshot_lines(path):
            at[0] = number
            try:
                yield bytes(line).decode("utf-8")
            except UnicodeDecodeError as e:
                raise InputError(
                    f"openalex: the snapshot file {path}: line {number} is not UTF-8 "
                    f"({e.reason} at byte {e.start} of the line)"
                ) from None

    reader = csv.DictReader(text())
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as e:  # a field over csv's own limit: no merged-works row
            raise InputError(
                f"openalex: the snapshot file {path}: line {at[0]} is no merged-works row ({e})"
            ) from None
        yield row


def snapshot_merges(root: Path, ids: Iterable[str], tally: Tally) -> dict[str, str]:
    """``{id: the id it ends merged into}`` (upper-case OpenAlex keys) for the ``ids`` a
    snapshot's merged-works lists name. The lists are read in date order, and the id a work
    was merged into is followed too, so a chain (``A`` into ``B``, later ``B`` into ``C``)
    ends at ``C``; only the rows of followed ids are kept (the lists name tens of millions).

    Raises:
        InputError: a list is damaged (:func:`_csv_rows`).
    """
    into: dict[str, str] = {}
    followed = {i.upper() for i in ids}
    for path in merged_files(root):
        for row in _csv_rows(path):
            old = openalex_id(row.get("id"))
            new = openalex_id(row.get("merge_into_id"))
            if not old or not new:
                tally.invalid_records += 1
                continue
            old, new = old.upper(), new.upper()
            if old in followed and old != new:
                into[old] = new
                followed.add(new)
    out = {}
    for start in {i.upper() for i in ids} & into.keys():
        end, seen = start, {start}
        while end in into and into[end] not in seen:  # a cycle ends where it closes
            end = into[end]
            seen.add(end)
        out[start] = end
    return out


def snapshot_lookup(
    keys: list[str], root: Path, tally: Tally, asked: str | None = None
) -> Iterator[list[Answer]]:
    """Answers for ``keys`` from a snapshot: each key's first record in file order, a merged
    OpenAlex id answered by the record of the work it was merged into (``tally.merged``);
    keys no record answers are not found (a snapshot holds every work of its date), once
    every file is read and held at least one work. ``asked``: the snapshot's identity
    (:func:`snapshot_identity`, computed when not given).

    Raises:
        InputError: the snapshot holds no work at all (:func:`snapshot_problem`, or files
            that hold no work record), or a file is damaged (:func:`_snapshot_lines`).
    """
    problem = snapshot_problem(root)
    if problem is not None:
        raise InputError(problem)
    asked = asked if asked is not None else snapshot_identity(root)
    wanted: dict[tuple[str, str], list[str]] = {}
    for key in keys:
        wanted.setdefault(asked_as(key), []).append(key)
    asked_ids = [v for (kind, v) in wanted if kind == OPENALEX]
    merges = snapshot_merges(root, asked_ids, tally)
    for old, new in sorted(merges.items()):
        for key in wanted[(OPENALEX, old.lower())]:
            wanted.setdefault((OPENALEX, new.lower()), []).append(key)
    open_keys = set(keys)
    files = snapshot_files(root)
    records = lines = 0
    for path in files:
        if not open_keys:
            break
        found: list[Answer] = []
        for _, line in _snapshot_lines(path):
            lines += 1
            try:
                rec = describe(_decode_work(line), tally)
            except (msgspec.DecodeError, msgspec.ValidationError):
                rec = None
            if rec is None:
                tally.invalid_records += 1
                continue
            records += 1
            for pair in sorted(answers_to(rec)):
                for key in wanted.get(pair, ()):
                    if key in open_keys:
                        open_keys.discard(key)
                        if asked_as(key) not in answers_to(rec):
                            tally.merged += 1
                        found.append(
                            Answer(key=key, found=True, source="snapshot", record=rec, asked=asked)
                        )
        if found:
            yield found
    if open_keys and not records:
        raise InputError(
            f"openalex: the snapshot folder {root} holds no work record: {len(files)} works "
            f"files read, {lines:,} lines, none a work with an OpenAlex id"
        )
    if open_keys:
        yield [
            Answer(key=k, found=False, source="snapshot", asked=asked) for k in sorted(open_keys)
        ]


# --------------------------------------------------------------------- the cache
class LookupCache:
    """Answers by key, in ``<dir>/answers-*.jsonl`` segments, each written atomically."""

    def __init__(self, directory: Path, flush_keys: int = 1000):
        self.dir = directory
        self.flush_keys = max(1, flush_keys)
        self._pending: list[Answer] = []

    def segments(self) -> list[Path]:
        """The segment files, sorted in the order they were written."""
        return sorted(self.dir.glob("answers-*.jsonl")) if self.dir.is_dir() else []

    def load(self, source: str | None = None) -> dict[str, Answer]:
        """Every cached answer by key: a key's first record, else its first "not found".

        ``source``: the identity of the source this run can ask (:attr:`Answer.asked`); a
        "not found" another source gave (or one written before answers named their source)
        is left out, so the key is asked of this one. None: every answer counts (a run with
        no source to ask). A line that does not decode (a segment damaged on disk, a record
        that fails :class:`Described`'s checks) is skipped: its key is asked again."""
        out: dict[str, Answer] = {}
        for path in self.segments():
            for line in path.read_bytes().splitlines():
                try:
                    a = _decode_answer(line)
                except (msgspec.DecodeError, msgspec.ValidationError):
                    continue
                if not a.found and source is not None and a.asked != source:
                    continue
                held = out.get(a.key)
                if held is None or (a.found and not held.found):
                    out[a.key] = a
        return out

    def add(self, answers: Iterable[Answer]) -> None:
        """Buffer answers; flush a segment every ``flush_keys`` of them."""
        self._pending.extend(answers)
        if len(self._pending) >= self.flush_keys:
            self.flush()

    def flush(self) -> None:
        """Write the buffered answers as one new segment (atomic), named so segments sort
        in the order they were written."""
        if not self._pending:
            return
        self.dir.mkdir(parents=True, exist_ok=True)
        stamp = f"{time.time_ns():020d}"
        final = self.dir / f"answers-{stamp}-{temp_tag().rsplit('-', 1)[-1]}.jsonl"
        with atomic_path(final) as tmp:
            tmp.write_bytes(b"".join(_encode(a) + b"\n" for a in self._pending))
        self._pending = []
