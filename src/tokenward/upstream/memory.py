"""An upstream transport that calls an ASGI app in this process: no socket, no port.

``TargetTable`` sends each upstream's requests through a transport: an ``UpstreamPool``
(upstream/client.py, HTTP/1.1 over TCP) unless the gateway was assembled with another one
for that upstream (``Gateway(config, transports={"local": MemoryTransport(app)})``). This
one hands the request to an ASGI app (the built-in mock's, a test's own) as its
``http.response.*`` messages come back, with the same surface the forwarder reads: status
and headers once the head is in, the body by ``read`` (whole, under a size limit) or
``next_chunk`` (streamed), ``abort`` to walk away. A test then runs the whole gateway,
backend included, in one event loop, as httpx's ``MockTransport`` does for a client.
"""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable

from .response_head import ResponseHead, UpstreamError, UpstreamTimeout, UpstreamTooLarge

App = Callable[[dict[str, Any], Callable[[], Awaitable[dict[str, Any]]],
                Callable[[dict[str, Any]], Awaitable[None]]], Awaitable[None]]

_END = object()   # the app sent its last body message, or returned


class MemoryResponse(ResponseHead):
    __slots__ = ("status", "headers", "_queue", "_task", "_done", "_exc")

    def __init__(self, task: asyncio.Task[None] | None = None) -> None:
        self.status = 0
        self.headers: list[tuple[bytes, bytes]] = []
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._task = task
        self._done = False
        self._exc: UpstreamError | None = None

    async def next_chunk(self, timeout: float | None = None) -> bytes | None:
        """The next body part the app sent, None at the end."""
        while not self._done:
            try:
                item = await asyncio.wait_for(self._queue.get(), timeout)
            except asyncio.TimeoutError:
                raise UpstreamTimeout(f"no body data from the in-process upstream within {timeout:g} s") from None
            if item is _END:
                self._done = True
            elif isinstance(item, UpstreamError):
                self._exc = item
                raise item
            elif item:
                return bytes(item)
        return None

    async def read(self, timeout: float | None = None, limit: int | None = None) -> bytes:
        parts: list[bytes] = []
        size = 0
        while (part := await self.next_chunk(timeout)) is not None:
            size += len(part)
            if limit is not None and size > limit:
                self.abort()
                raise UpstreamTooLarge(f"upstream response body exceeds {limit} bytes")
            parts.append(part)
        return b"".join(parts)

    def abort(self) -> None:
        """Walk away: the app is cancelled, and a read waiting for its next part is woken
        with the error a socket's reader gets (upstream/_conn.py ``abort``)."""
        if self._task is not None and not self._task.done():
            self._task.cancel()
        if not self._done:
            self._queue.put_nowait(UpstreamError("response aborted by the gateway"))

    async def aclose(self) -> None:
        self.abort()


class MemoryTransport:
    """The transport of one upstream whose backend is ``app`` (an ASGI callable)."""

    def __init__(self, app: App, prefix: str = "/v1") -> None:
        self.app = app
        self.prefix = prefix.rstrip("/")   # the path part of the upstream's base URL
        self.requests = 0

    @property
    def stats(self) -> dict[str, int]:
        return {"open": 0, "idle": 0, "waiting": 0}

    async def request(self, method: str, path: str, headers: list[tuple[bytes, bytes]], body: bytes,
                      *, timeout: float | None = None) -> MemoryResponse:
        self.requests += 1
        resp = MemoryResponse()
        head: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method,
                 "scheme": "http", "path": self.prefix + path, "raw_path": (self.prefix + path).encode(),
                 "query_string": b"", "root_path": "", "headers": list(headers), "server": None, "client": None}
        sent = False

        async def receive() -> dict[str, Any]:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            await asyncio.Event().wait()   # the gateway never hangs up first on its own backend
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                resp.status = message["status"]
                resp.headers = [(bytes(k).lower(), bytes(v)) for k, v in message.get("headers", ())]
                if not head.done():
                    head.set_result(None)
            elif message["type"] == "http.response.body":
                resp._queue.put_nowait(message.get("body", b""))
                if not message.get("more_body", False):
                    resp._queue.put_nowait(_END)

        async def run() -> None:
            try:
                await self.app(scope, receive, send)
            except asyncio.CancelledError:
                raise
            except Exception as exc:   # the app broke: a backend that closed mid-answer
                failure = UpstreamError(f"the in-process upstream failed: {type(exc).__name__}")
                if not head.done():
                    head.set_exception(failure)
                resp._queue.put_nowait(failure)
                return
            if not head.done():
                head.set_exception(UpstreamError("the in-process upstream ended without answering"))
            resp._queue.put_nowait(_END)

        resp._task = asyncio.ensure_future(run())
        try:
            await asyncio.wait_for(asyncio.shield(head), timeout)
        except asyncio.TimeoutError:
            resp.abort()
            raise UpstreamTimeout(f"no answer from the in-process upstream within {timeout:g} s") from None
        return resp

    async def aclose(self) -> None:
        return None
