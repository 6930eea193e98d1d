"""A fixed-response OpenAI-compatible backend for the benchmarks: raw asyncio + httptools.

Why not the project's mock: the backend shares CPU 1 with the load generator, so it must
cost as little per request as possible. This one answers every POST with one
pre-encoded HTTP response (one parse, one ``transport.write``), about a third of the
CPU per request of the mock under uvicorn (see bench/results/2026-12-02/history.md, "The backend").

Streaming (``"stream": true`` in the body): ``max_tokens`` SSE chunks at ``--rate``
chunks per second, then a usage chunk when ``stream_options.include_usage`` is asked
for, then ``[DONE]``. All streams are served by one repeating timer split into slots,
so 1,000 streams cost 20,000 ``write`` calls a second and nothing else; each chunk
carries ``"t"``, the backend's ``time.monotonic()`` when it was written, so the client
can measure one-way chunk delay (CLOCK_MONOTONIC is shared by all processes).

    python bench/backend.py [--port 0] [--rate 20]   # prints "backend listening on http://127.0.0.1:PORT"

``GET /_bench/stats`` answers ``{"posts": N}``: the completions it has answered, so a rig can
check that every request a proxy answered reached the backend (issue 43).
"""

from __future__ import annotations

import argparse
import asyncio
import re
import signal
import socket
import sys
import time

import httptools

CHAT_BODY = (
    b'{"id":"chatcmpl-bench","object":"chat.completion","created":1700000000,"model":"bench-chat",'
    b'"choices":[{"index":0,"message":{"role":"assistant","content":"Hello! How can I help you today?"},'
    b'"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":9,"total_tokens":21}}'
)
MODELS_BODY = b'{"object":"list","data":[{"id":"bench-chat","object":"model","created":0,"owned_by":"bench"}]}'
NOT_FOUND_BODY = b'{"error":{"message":"not found","type":"invalid_request_error","param":null,"code":null}}'


def _response(status: bytes, body: bytes, keep_alive: bool = True) -> bytes:
    head = (b"HTTP/1.1 " + status + b"\r\ncontent-type: application/json\r\ncontent-length: "
            + str(len(body)).encode() + b"\r\n")
    if not keep_alive:
        head += b"connection: close\r\n"
    return head + b"\r\n" + body


CHAT_RESPONSE = _response(b"200 OK", CHAT_BODY)
MODELS_RESPONSE = _response(b"200 OK", MODELS_BODY)
NOT_FOUND_RESPONSE = _response(b"404 Not Found", NOT_FOUND_BODY)
SSE_HEAD = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
            b"transfer-encoding: chunked\r\n\r\n")
_CHUNK_PREFIX = (b'data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1700000000,'
                 b'"model":"bench-chat","choices":[{"index":0,"delta":{"content":"tok "},'
                 b'"finish_reason":null}],"t":')
_USAGE_EVENT = (b'data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1700000000,'
                b'"model":"bench-chat","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":%d,'
                b'"total_tokens":%d}}\n\n')
_STOP_EVENT = (b'data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1700000000,'
               b'"model":"bench-chat","choices":[{"index":0,"delta":{},"finish_reason":"length"}]}\n\n')
_DONE_EVENT = b"data: [DONE]\n\n"

_STREAM_RE = re.compile(rb'"stream"\s*:\s*true')
_USAGE_RE = re.compile(rb'"include_usage"\s*:\s*true')
_MAX_TOKENS_RE = re.compile(rb'"max_tokens"\s*:\s*(\d+)')


POSTS = 0   # completions answered (GET /_bench/stats)


def _chunked(payload: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(payload), payload)


class Stream:
    __slots__ = ("transport", "left", "total", "usage", "keep_alive", "proto")

    def __init__(self, proto: "BackendProtocol", chunks: int, usage: bool, keep_alive: bool) -> None:
        self.proto = proto
        self.transport = proto.transport
        self.left = chunks
        self.total = chunks
        self.usage = usage
        self.keep_alive = keep_alive


class Ticker:
    """One timer for every stream: slot k of ``slots`` is served every ``interval`` seconds,
    offset by k * interval / slots, so writes are spread evenly instead of in one burst."""

    def __init__(self, rate: float, slots: int = 10) -> None:
        self.interval = 1.0 / rate
        self.slots: list[set[Stream]] = [set() for _ in range(slots)]
        self.step = self.interval / slots
        self._next_slot = 0
        self._tick = 0
        self._deadline = 0.0
        self._handle: asyncio.TimerHandle | None = None
        self.streams = 0

    def add(self, stream: Stream) -> None:
        self.slots[self._next_slot].add(stream)
        self._next_slot = (self._next_slot + 1) % len(self.slots)
        self.streams += 1
        if self._handle is None:
            loop = asyncio.get_running_loop()
            self._deadline = loop.time() + self.step
            self._handle = loop.call_at(self._deadline, self._fire)

    def remove(self, stream: Stream) -> None:
        for slot in self.slots:
            if stream in slot:
                slot.discard(stream)
                self.streams -= 1
                return

    def _fire(self) -> None:
        slot = self.slots[self._tick % len(self.slots)]
        self._tick += 1
        if slot:
            # One timestamp per slot: encoded once, written to every stream in the slot.
            chunk = _chunked(_CHUNK_PREFIX + b"%.6f}\n\n" % time.monotonic())
            done = [s for s in slot if self._emit(s, chunk)]
            for s in done:
                slot.discard(s)
                self.streams -= 1
        if self.streams == 0:
            self._handle = None
            return
        loop = asyncio.get_running_loop()
        self._deadline += self.step
        now = loop.time()
        if self._deadline < now - self.interval:  # fell far behind: do not burst to catch up
            self._deadline = now
        self._handle = loop.call_at(self._deadline, self._fire)

    @staticmethod
    def _emit(stream: Stream, chunk: bytes) -> bool:
        transport = stream.transport
        if transport.is_closing():
            return True
        stream.left -= 1
        if stream.left > 0:
            transport.write(chunk)
            return False
        tail = _STOP_EVENT
        if stream.usage:
            tail += _USAGE_EVENT % (stream.total, stream.total + 12)
        transport.write(chunk + _chunked(tail + _DONE_EVENT) + b"0\r\n\r\n")
        stream.proto.stream = None
        if not stream.keep_alive:
            transport.close()
        else:
            # Later: a pipelined request could start a stream while the ticker iterates its slot.
            asyncio.get_running_loop().call_soon(stream.proto.resume_requests)
        return True


class BackendProtocol(asyncio.Protocol):
    def __init__(self, ticker: Ticker) -> None:
        self.ticker = ticker
        self.transport: asyncio.Transport = None  # type: ignore[assignment]
        self.parser = httptools.HttpRequestParser(self)
        self.url = b""
        self.body: list[bytes] = []
        self.stream: Stream | None = None
        self.pending: list[bytes] = []  # bytes that arrived while a stream was running

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        if self.stream is not None:
            self.ticker.remove(self.stream)
            self.stream = None

    def data_received(self, data: bytes) -> None:
        if self.stream is not None:
            self.pending.append(data)
            return
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            self.transport.close()

    def resume_requests(self) -> None:
        pending, self.pending = self.pending, []
        for data in pending:
            self.data_received(data)

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        global POSTS
        url, self.url = self.url, b""
        body = b"".join(self.body) if self.body else b""
        self.body = []
        keep_alive = self.parser.should_keep_alive()
        method = self.parser.get_method()
        if method == b"POST" and url.endswith(b"/completions"):
            POSTS += 1
            if _STREAM_RE.search(body):
                self._start_stream(body, keep_alive)
                return
            self.transport.write(CHAT_RESPONSE)
        elif method == b"GET" and url.endswith(b"/models"):
            self.transport.write(MODELS_RESPONSE)
        elif method == b"GET" and url == b"/_bench/stats":
            self.transport.write(_response(b"200 OK", b'{"posts":%d}' % POSTS))
        else:
            self.transport.write(NOT_FOUND_RESPONSE)
        if not keep_alive:
            self.transport.close()

    def _start_stream(self, body: bytes, keep_alive: bool) -> None:
        found = _MAX_TOKENS_RE.search(body)
        chunks = max(1, int(found.group(1))) if found else 16
        self.transport.write(SSE_HEAD)
        self.stream = Stream(self, chunks, bool(_USAGE_RE.search(body)), keep_alive)
        self.ticker.add(self.stream)


async def serve(host: str, port: int, rate: float) -> None:
    loop = asyncio.get_running_loop()
    ticker = Ticker(rate)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    server = await loop.create_server(lambda: BackendProtocol(ticker), sock=sock, backlog=4096)
    print(f"backend listening on http://{host}:{sock.getsockname()[1]}", flush=True)
    stop = loop.create_future()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, lambda: stop.done() or stop.set_result(None))
    await stop
    server.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--rate", type=float, default=20.0, help="stream chunks per second")
    args = parser.parse_args()
    try:
        import uvloop
    except ImportError:
        uvloop = None
    runner = uvloop.run if uvloop is not None else asyncio.run
    try:
        runner(serve(args.host, args.port, args.rate))
    except KeyboardInterrupt:
        pass
    sys.exit(0)


if __name__ == "__main__":
    main()
