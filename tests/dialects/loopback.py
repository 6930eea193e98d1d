"""A loopback HTTP server that answers every POST with bytes the test chose.

The dialect translators are sans-IO; this is how their output reaches the official SDKs'
own HTTP, SSE and accumulator code unchanged: the test serves the translated bytes and
calls ``client.responses.create`` / ``client.messages.stream`` against it.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterator


class Canned:
    def __init__(self, status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None):
        self.status = status
        self.body = body
        self.content_type = content_type
        self.headers = headers or {}
        self.requests: list[tuple[str, bytes]] = []


def _handler(canned: Canned) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
            length = int(self.headers.get("content-length") or 0)
            canned.requests.append((self.path, self.rfile.read(length)))
            self.send_response(canned.status)
            self.send_header("content-type", canned.content_type)
            self.send_header("content-length", str(len(canned.body)))
            for name, value in canned.headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(canned.body)

        def log_message(self, *args: object) -> None:
            pass

    return Handler


@contextmanager
def serving(status: int, body: bytes, content_type: str = "application/json",
            headers: dict[str, str] | None = None) -> Iterator[tuple[str, Canned]]:
    """``(base_url, canned)`` while a server on 127.0.0.1 answers with ``body``."""
    canned = Canned(status, body, content_type, headers)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(canned))
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", canned
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
