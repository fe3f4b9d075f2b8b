"""Peak memory of one OpenAlex API lookup whose answer is large: a loopback server answers
the list call with one work whose ``abstract_inverted_index`` holds ``--mb`` MB of word
positions (``"1,"`` each), and a child process asks for that work with this checkout's
client and prints how its lookups ended and its peak resident size (``VmHWM``, Linux).

``python bench/openalex_answer_memory.py --mb 50`` (the answer's true ``Content-Length``);
``--length not-a-number`` sends that header instead, so the client has no length to go by
and reads until the end of the connection.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CHILD = """
import sys
from pipeline.corpus import openalex as OA
settings = OA.ApiSettings(base_url=sys.argv[1], api_key="k", requests_per_second=0,
                          max_retries=0)
try:
    got = [a for b in OA.api_lookup(["openalex:W1"], OA.ApiClient(settings, OA.Tally())) for a in b]
    print("answered:", got[0].found, "abstract of", len(got[0].record.abstract or ""), "chars")
except Exception as e:
    print(f"{type(e).__name__}: {e}"[:200])
status = open("/proc/self/status").read().split("VmHWM:")[1].split()[0]
print(f"peak resident: {int(status) // 1024} MB")
"""


def answer(mb: float) -> bytes:
    """A list answer of about ``mb`` MB: one work, its abstract's positions filling it."""
    positions = b"1," * int(mb * 1e6 / 2) + b"1"
    return (
        b'{"meta": {}, "results": [{"id": "https://openalex.org/W1", '
        b'"abstract_inverted_index": {"word": [' + positions + b"]}}]}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=50.0, help="size of the answer in MB")
    ap.add_argument("--length", default="", help="Content-Length to send (default: the true one)")
    args = ap.parse_args()
    body = answer(args.mb)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a: Any) -> None:
            pass

        def do_GET(self) -> None:  # noqa: N802
            self.send_response(200)
            self.send_header("Content-Length", args.length or str(len(body)))
            self.end_headers()
            try:
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client refused the answer

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    print(f"answer: {len(body) / 1e6:.1f} MB, Content-Length: {args.length or 'true'}")
    sys.stdout.flush()
    subprocess.run([sys.executable, "-c", CHILD, url], cwd=ROOT, check=True)
    server.shutdown()


if __name__ == "__main__":
    main()
