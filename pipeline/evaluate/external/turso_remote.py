"""A remote Turso database with a deadline on every answer.

The libsql client has no request timeout for a remote database and blocks in native code
with the GIL held, so a server that accepts the connection and never answers would hang
the evaluation for good (a thread cannot time it out; a signal handler never runs). The
client therefore runs in a child process (:mod:`pipeline.evaluate.external.turso_worker`),
and every answer it owes has :data:`TIMEOUT_S` seconds to arrive before the child is killed
and the run stops with one line. :class:`RemoteConnection` offers the two calls
:class:`~pipeline.evaluate.external.sources.TursoSource` makes of a libsql connection:
``execute(sql, params)`` and the cursor's ``fetchmany`` / ``fetchall``.
"""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec

from pipeline.core.errors import PipelineError
from pipeline.evaluate.external import turso_worker

TIMEOUT_S = 60.0  # per answer: a wide table's batch of rows arrives well within it
BATCH_ROWS = 10_000
WORKER = Path(turso_worker.__file__)


class RemoteError(PipelineError, ValueError):
    """The remote database answered with an error, or did not answer in time (a server's
    failure, told to the user as :class:`~pipeline.evaluate.external.sources.SourceError`)."""


class RemoteConnection:
    """A libsql connection to ``url`` held by a child process (module doc)."""

    def __init__(self, url: str, token: str, *, timeout_s: float = TIMEOUT_S) -> None:
        self.timeout_s = timeout_s
        env = {**os.environ, "PIPELINE_TURSO_TOKEN": token}
        self._process = subprocess.Popen(
            [sys.executable, "-I", str(WORKER), url],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        self._encode = msgspec.msgpack.Encoder().encode
        self._decode = msgspec.msgpack.Decoder().decode
        self._expect("ready", "connecting")

    def _read(self, size: int, deadline: float, doing: str) -> bytes:
        assert self._process.stdout is not None
        fd, data = self._process.stdout.fileno(), b""
        while len(data) < size:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                self.close()
                raise RemoteError(f"no answer within {self.timeout_s:g} s while {doing}")
            chunk = os.read(fd, size - len(data))
            if not chunk:
                code = self.close()
                raise RemoteError(f"the client process ended while {doing} (exit {code})")
            data += chunk
        return data

    def _receive(self, doing: str) -> list[Any]:
        deadline = time.monotonic() + self.timeout_s
        size = turso_worker.HEADER.unpack(self._read(turso_worker.HEADER.size, deadline, doing))
        message = self._decode(self._read(size[0], deadline, doing))
        if message[0] == "error":
            raise RemoteError(f"{message[1]}: {message[2]}")
        return message

    def _expect(self, kind: str, doing: str) -> None:
        message = self._receive(doing)
        if message[0] != kind:
            self.close()
            raise RemoteError(f"unexpected answer {message[0]!r} while {doing}")

    def execute(self, sql: str, params: tuple[Any, ...] = ()) -> RemoteCursor:
        """Send one statement; its rows stream through the returned cursor."""
        if self._process.poll() is not None or self._process.stdin is None:
            raise RemoteError("the connection is closed")
        data = self._encode([sql, list(params), BATCH_ROWS])
        self._process.stdin.write(turso_worker.HEADER.pack(len(data)) + data)
        self._process.stdin.flush()
        return RemoteCursor(self)

    def close(self) -> int | None:
        """Stop the child process (killed: it may be blocked on the server)."""
        if self._process.poll() is None:
            self._process.kill()
        return self._process.wait()


class RemoteCursor:
    """The rows of one statement, in the batches the child sends."""

    def __init__(self, connection: RemoteConnection) -> None:
        self._batches = self._stream(connection)
        self._pending: list[tuple[Any, ...]] = []

    @staticmethod
    def _stream(connection: RemoteConnection) -> Iterator[list[tuple[Any, ...]]]:
        while True:
            message = connection._receive("reading rows")
            if message[0] == "end":
                return
            yield [tuple(row) for row in message[1]]

    def fetchmany(self, size: int) -> list[tuple[Any, ...]]:
        while len(self._pending) < size:
            batch = next(self._batches, None)
            if batch is None:
                break
            self._pending.extend(batch)
        rows, self._pending = self._pending[:size], self._pending[size:]
        return rows

    def fetchall(self) -> list[tuple[Any, ...]]:
        rows = self._pending
        for batch in self._batches:
            rows.extend(batch)
        self._pending = []
        return rows
