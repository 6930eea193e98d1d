"""A gateway called as an ASGI app in a private event loop, for hypothesis-driven tests.

Hypothesis drives synchronous test functions, so the gateway (and the mock backend it
forwards to, over real loopback) live in an event loop this harness owns; each request
runs the loop until the gateway's response is complete. Calling the ASGI app directly
skips the HTTP server, which is what lets thousands of generated requests run in CI time.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

from tests.validation.harness import create_keys, lab_config
from tokenward.app import Gateway
from tokenward.config.loader import parse_config
from tokenward.mock import start_mock, stop_mock


class ErrorLogs(logging.Handler):
    """Collects error records and anything logged with a traceback."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info or record.levelno >= logging.ERROR:
            self.records.append(record)


class LoopGateway:
    def __init__(self, tmp_path: Path, **lab_overrides: Any) -> None:
        self.loop = asyncio.new_event_loop()
        self.errors = ErrorLogs()
        logging.getLogger().addHandler(self.errors)
        self.loop.run_until_complete(self._start(tmp_path, lab_overrides))

    async def _start(self, tmp_path: Path, overrides: dict[str, Any]) -> None:
        self.mock_server, port, self.mock = await start_mock("127.0.0.1", 0)
        text = lab_config(f"http://127.0.0.1:{port}/v1", tmp_path, **overrides)
        config = parse_config(text, environ={})
        self.gateway = Gateway(config)
        await self.gateway.startup()
        self.keys = await create_keys(self.gateway)

    def close(self) -> None:
        logging.getLogger().removeHandler(self.errors)
        self.loop.run_until_complete(self.gateway.shutdown())
        self.loop.run_until_complete(stop_mock(self.mock_server))
        self.loop.close()

    @property
    def backend_requests(self) -> int:
        return self.mock.stats.requests

    def last_forwarded(self) -> Any:
        return self.mock.stats.snapshot(0)["last_request"]["body"]

    def call(self, method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None,
             tenant: str | None = "lab") -> tuple[int, bytes]:
        pairs = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in (headers or {}).items()]
        if tenant is not None:
            pairs.append((b"authorization", f"Bearer {self.keys[tenant]}".encode()))
        if body and not any(name == b"content-type" for name, _ in pairs):
            pairs.append((b"content-type", b"application/json"))
        return self.loop.run_until_complete(self._call(method, path, body, pairs))

    async def _call(self, method: str, path: str, body: bytes, headers: list) -> tuple[int, bytes]:
        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method,
                 "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"",
                 "headers": headers, "server": ("127.0.0.1", 80), "client": ("127.0.0.1", 50000)}
        delivered = False
        loop = asyncio.get_running_loop()

        async def receive() -> dict:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            await loop.create_future()  # the client stays connected until cancelled
            return {"type": "http.disconnect"}  # pragma: no cover

        messages: list[dict] = []

        async def send(message: dict) -> None:
            messages.append(message)

        await self.gateway(scope, receive, send)
        status = messages[0]["status"]
        return status, b"".join(m.get("body", b"") for m in messages[1:])
