"""A Turso server for the tests: Hrana 3 over HTTP, JSON encoding, over a SQLite file.

It speaks the protocol as libsql's ``docs/HRANA_3_SPEC.md`` documents it (``POST
/v3/pipeline`` with ``{"baton", "requests"}``, answered by ``{"baton", "base_url",
"results"}``, with the ``describe``, ``execute``, ``batch``, ``sequence``, ``get_autocommit`` and
``close`` stream requests; ``POST /v3/cursor`` with a batch, answered by a line of
``{"baton", "base_url"}`` and a line per cursor entry: ``step_begin``, ``row``,
``step_end`` or ``step_error``; values as ``{"type": "integer", "value": "7"}`` and so on), which is what
the ``libsql`` client sends for an ``http://`` URL. It checks the bearer token, and it can
be told to stop answering (``stall_after`` requests served), as a wedged server does.
"""

from __future__ import annotations

import base64
import json
import re
import sqlite3
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


def _value(value: Any) -> dict[str, Any]:
    if value is None:
        return {"type": "null"}
    if isinstance(value, int):
        return {"type": "integer", "value": str(value)}
    if isinstance(value, float):
        return {"type": "float", "value": value}
    if isinstance(value, bytes):
        return {"type": "blob", "base64": base64.b64encode(value).decode()}
    return {"type": "text", "value": str(value)}


def _argument(value: dict[str, Any]) -> Any:
    kind = value["type"]
    if kind == "integer":
        return int(value["value"])
    if kind == "blob":
        return base64.b64decode(value["base64"])
    return None if kind == "null" else value["value"]


class HranaStub:
    """``with HranaStub(database, token) as url:`` serves ``database`` at ``url``."""

    def __init__(self, database: Path, token: str, *, stall_after: int | None = None) -> None:
        self.database, self.token, self.stall_after = database, token, stall_after
        self.served = 0
        self.authorizations: list[str] = []
        self._release = threading.Event()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def _reply(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # version check: GET /v3
                self._reply(200 if self.path.rstrip("/") == "/v3" else 404, {})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                stub.authorizations.append(self.headers.get("Authorization", ""))
                if self.path not in ("/v3/pipeline", "/v3/cursor"):
                    self._reply(404, {"message": f"no endpoint {self.path}"})
                    return
                if self.headers.get("Authorization") != f"Bearer {stub.token}":
                    # a careless server quotes the credential back
                    self._reply(401, {"message": f"bad token {self.headers.get('Authorization')}"})
                    return
                if stub.stall_after is not None and stub.served >= stub.stall_after:
                    stub._release.wait()  # the wedged server: holds the request open
                    return
                stub.served += 1
                if self.path == "/v3/cursor":
                    lines = [{"baton": None, "base_url": None}, *stub.cursor(body)]
                    data = b"".join(json.dumps(line).encode() + b"\n" for line in lines)
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                self._reply(200, stub.pipeline(body))

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True

    def pipeline(self, body: dict[str, Any]) -> dict[str, Any]:
        connection = sqlite3.connect(self.database)
        results = []
        for request in body["requests"]:
            try:
                results.append({"type": "ok", "response": self._answer(connection, request)})
            except sqlite3.Error as e:
                results.append({"type": "error", "error": {"message": str(e), "code": "SQLITE_ERROR"}})  # fmt: skip
        connection.close()
        closed = any(r.get("type") == "close" for r in body["requests"])
        return {"baton": None if closed else "baton-1", "base_url": None, "results": results}

    def cursor(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        connection = sqlite3.connect(self.database)
        entries: list[dict[str, Any]] = []
        for step, item in enumerate(body["batch"]["steps"]):
            try:
                result = self._answer(connection, {"type": "execute", "stmt": item["stmt"]})
            except sqlite3.Error as e:
                entries.append({"type": "step_error", "step": step,
                                "error": {"message": str(e), "code": "SQLITE_ERROR"}})  # fmt: skip
                continue
            result = result["result"]
            entries.append({"type": "step_begin", "step": step, "cols": result["cols"]})
            entries += [{"type": "row", "row": row} for row in result["rows"]]
            entries.append({"type": "step_end", "affected_row_count": 0, "last_insert_rowid": None})  # fmt: skip
        connection.close()
        return entries

    @staticmethod
    def _answer(connection: sqlite3.Connection, request: dict[str, Any]) -> dict[str, Any]:
        kind = request["type"]
        if kind == "describe":  # the client asks how many positional parameters to bind
            params = 0
            try:
                connection.execute(f"EXPLAIN {request['sql']}")
            except sqlite3.ProgrammingError as e:  # "The current statement uses N, ..."
                params = int(re.search(r"uses (\d+)", str(e)).group(1))  # type: ignore[union-attr]
            described = connection.execute(request["sql"], [None] * params).description
            cols = [{"name": d[0], "decltype": None} for d in described or ()]
            result = {"params": [{"name": None}] * params, "cols": cols, "is_explain": False,
                      "is_readonly": True}  # fmt: skip
            return {"type": "describe", "result": result}
        if kind == "execute":
            stmt = request["stmt"]
            args = [_argument(a) for a in stmt.get("args") or ()]
            cursor = connection.execute(stmt["sql"], args)
            rows = [[_value(v) for v in row] for row in cursor.fetchall()]
            cols = [{"name": d[0], "decltype": None} for d in cursor.description or ()]
            result = {"cols": cols, "rows": rows, "affected_row_count": 0,
                      "last_insert_rowid": None}  # fmt: skip
            return {"type": "execute", "result": result}
        if kind == "batch":
            results: list[Any] = []
            errors: list[Any] = []
            for item in request["batch"]["steps"]:
                try:
                    step = HranaStub._answer(connection, {"type": "execute", "stmt": item["stmt"]})
                    results.append(step["result"])
                    errors.append(None)
                except sqlite3.Error as e:
                    results.append(None)
                    errors.append({"message": str(e), "code": "SQLITE_ERROR"})
            return {"type": "batch", "result": {"step_results": results, "step_errors": errors}}
        if kind == "sequence":
            connection.executescript(request["sql"])
            return {"type": "sequence"}
        if kind == "get_autocommit":
            return {"type": "get_autocommit", "is_autocommit": True}
        if kind == "close":
            return {"type": "close"}
        raise sqlite3.OperationalError(f"the stub does not serve {kind!r} requests")

    def __enter__(self) -> str:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __exit__(self, *exc: object) -> None:
        self._release.set()
        self._server.shutdown()
        self._server.server_close()
