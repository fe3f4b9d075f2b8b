"""What the tests' local HTTP stubs share (the Hub's in ``tests/test_hub.py``, OpenAlex's in
``tests/openalex_stub.py``): a threaded server on a free loopback port, started and stopped
as a context manager, and JSON answers."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self


class LoopbackStub:
    """Serves ``handler`` on ``127.0.0.1`` at a free port (``url``) while entered."""

    def _serve(self, handler: type[BaseHTTPRequestHandler]) -> str:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> Self:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()

    @staticmethod
    def _json(obj: Any, status: int = 200) -> tuple[int, dict[str, str], bytes]:
        return status, {"Content-Type": "application/json"}, json.dumps(obj).encode()
