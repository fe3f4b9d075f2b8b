"""A local OpenAlex works API for the tests, beside the Hub stub of ``tests/test_hub.py``.

It speaks the documented JSON: a list answer is ``{"meta": {...}, "results": [...]}``, a
singleton is the work itself, a merged id answers 301 with ``Location`` naming the work it
was merged into, a deleted one 404, a wrong key 401. ``script`` queues raw answers (status,
headers, body, delay) served before the normal ones, for the bad answers.
"""

from __future__ import annotations

import time
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from tests.loopback import LoopbackStub


def oa_work(
    wid: str,
    title: str | None = None,
    *,
    doi: str | None = None,
    abstract: str | None = "a short abstract of the work",
    venue: str | None = "Journal of Tests",
    year: int = 2020,
    license: str | None = "cc-by",  # noqa: A002
    retracted: bool = False,
    arxiv: str | None = None,
) -> dict[str, Any]:
    """A work record in OpenAlex's shape (the fields the pipeline selects, and a few more)."""
    words = (abstract or "").split()
    index: dict[str, list[int]] = {}
    for i, w in enumerate(words):
        index.setdefault(w, []).append(i)
    doi_url = f"https://doi.org/{doi}" if doi else None
    locations = (
        [{"landing_page_url": f"https://arxiv.org/abs/{arxiv}v2", "source": None}] if arxiv else []
    )
    return {
        "id": f"https://openalex.org/{wid}",
        "doi": doi_url,
        "title": title,
        "display_name": title,
        "publication_date": f"{year}-03-01",
        "publication_year": year,
        "type": "article",
        "language": "en",
        "is_retracted": retracted,
        "updated_date": f"2025-01-0{1 + int(wid[-1]) % 9}T00:00:00.000000",
        "cited_by_count": 1234,
        "ids": {"openalex": f"https://openalex.org/{wid}", "doi": doi_url,
                "pmid": "https://pubmed.ncbi.nlm.nih.gov/12345"},
        "primary_location": {"source": {"display_name": venue} if venue else None,
                             "license": license, "landing_page_url": None},
        "locations": locations,
        "primary_topic": {"display_name": "Software Testing",
                          "subfield": {"display_name": "Software"},
                          "field": {"display_name": "Computer Science"},
                          "domain": {"display_name": "Physical Sciences"}},
        "abstract_inverted_index": index or None,
    }  # fmt: skip


class OpenAlexStub(LoopbackStub):
    """The works endpoints of the OpenAlex API, in memory."""

    def __init__(self, works: list[dict[str, Any]] | None = None, key: str = "oa-test-key"):
        self.works: dict[str, dict[str, Any]] = {}
        self.merged: dict[str, str] = {}  # old id -> the id it was merged into
        self.key = key
        self.requests: list[dict[str, Any]] = []
        self.script: list[tuple[int, dict[str, str], bytes, float]] = []
        self.extra_results: list[dict[str, Any]] = []  # added to every list answer
        self.hide_in_lists: set[str] = set()  # ids a filter never returns (singletons do)
        for w in works or ():
            self.add(w)
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802
                url = urlsplit(self.path)
                query = {k: v[0] for k, v in parse_qs(url.query).items()}
                stub.requests.append({"path": unquote(url.path), "query": query})
                if stub.script:
                    status, headers, body, delay = stub.script.pop(0)
                    time.sleep(delay)
                    length = headers.pop("Content-Length", str(len(body)))
                else:
                    status, headers, body = stub.route(unquote(url.path), query)
                    length = str(len(body))
                try:
                    self.send_response(status)
                    for k, v in headers.items():
                        self.send_header(k, v)
                    self.send_header("Content-Length", length)
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test)

        self.url = self._serve(Handler)

    def add(self, work: dict[str, Any]) -> None:
        """Serve ``work`` (by its id and its DOI)."""
        self.works[work["id"].rsplit("/", 1)[-1].upper()] = work

    def _by_doi(self, doi: str) -> dict[str, Any] | None:
        for w in self.works.values():
            if (w.get("doi") or "").lower() == f"https://doi.org/{doi}".lower():
                return w
        return None

    def route(self, path: str, query: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
        if self.key and query.get("api_key") != self.key:
            return self._json({"error": "Invalid API key"}, 401)
        if path == "/works":
            field, _, values = query.get("filter", "").partition(":")
            found = []
            for v in values.split("|"):
                w = self.works.get(v.upper()) if field == "ids.openalex" else self._by_doi(v)
                if w is not None and w["id"].rsplit("/", 1)[-1] not in self.hide_in_lists:
                    found.append(w)
            results = found + self.extra_results
            meta = {"count": len(results), "db_response_time_ms": 5, "page": 1,
                    "per_page": int(query.get("per_page", 25))}  # fmt: skip
            return self._json({"meta": meta, "results": results})
        if path.startswith("/works/"):
            ident = path.removeprefix("/works/")
            if ident.startswith("doi:"):
                w = self._by_doi(ident.removeprefix("doi:"))
            else:
                ident = ident.upper()
                if ident in self.merged:
                    return 301, {"Location": f"{self.url}/works/{self.merged[ident]}"}, b""
                w = self.works.get(ident)
            if w is None:
                return self._json({"error": "Not Found", "message": f"{ident} not found"}, 404)
            return self._json(w)
        return self._json({"error": "Not Found"}, 404)
