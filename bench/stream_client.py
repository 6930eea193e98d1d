"""SSE load client: N concurrent streaming chat completions, each chunk timed on arrival.

Raw asyncio protocols with httptools (no client library) so the client costs little of
the CPU it shares with the backend. Each chunk from bench/backend.py carries ``"t"``,
the backend's ``time.monotonic()`` when it wrote it; arrival minus ``t`` is the chunk's
one-way delay (the same clock in every process). Reported, as one JSON line:

- delay_ms: one-way chunk delay percentiles, over every content chunk of every stream;
- gap_ms: inter-chunk gap percentiles (arrival to arrival within a stream; nominal 1/rate);
- stalled: streams that went more than --stall-s without a chunk, ended early, or failed.

    python bench/stream_client.py --url http://127.0.0.1:PORT/v1/chat/completions \
        --streams 1000 --chunks 200 [--ramp 1] [--api-key K]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from array import array
from urllib.parse import urlsplit

import httptools

_T = b'"t":'


class Totals:
    def __init__(self) -> None:
        self.delays = array("d")
        self.gaps = array("d")
        self.first = array("d")   # connect to first chunk, per stream
        self.max_gap_by_stream: list[float] = []
        self.failures: dict[str, int] = {}
        self.complete = 0
        self.chunks = 0

    def fail(self, kind: str) -> None:
        self.failures[kind] = self.failures.get(kind, 0) + 1


class StreamConn(asyncio.Protocol):
    def __init__(self, request: bytes, totals: Totals, done: asyncio.Future) -> None:
        self.request = request
        self.totals = totals
        self.done = done
        self.parser = httptools.HttpResponseParser(self)
        self.transport: asyncio.Transport | None = None
        self.status = 0
        self.buf = b""
        self.now = 0.0
        self.last = 0.0
        self.max_gap = 0.0
        self.chunks = 0
        self.saw_done = False
        self.opened = time.monotonic()

    def connection_made(self, transport) -> None:
        self.transport = transport
        transport.write(self.request)

    def data_received(self, data: bytes) -> None:
        self.now = time.monotonic()
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._finish(f"bad response: {exc}")

    def connection_lost(self, exc) -> None:
        self._finish("connection lost before the stream ended")

    def on_headers_complete(self) -> None:
        self.status = self.parser.get_status_code()

    def on_body(self, body: bytes) -> None:
        buf = self.buf + body if self.buf else body
        start = 0
        while True:
            end = buf.find(b"\n\n", start)
            if end < 0:
                break
            self._event(buf, start, end)
            start = end + 2
        self.buf = buf[start:]

    def _event(self, buf: bytes, start: int, end: int) -> None:
        at = buf.rfind(_T, start, end)
        if at < 0:
            if buf.startswith(b"data: [DONE]", start):
                self.saw_done = True
            return
        stamp = float(buf[at + 4:buf.index(b"}", at, end)])
        now = self.now
        totals = self.totals
        totals.delays.append(now - stamp)
        if not self.chunks:
            totals.first.append(now - self.opened)
        if self.chunks:
            gap = now - self.last
            totals.gaps.append(gap)
            if gap > self.max_gap:
                self.max_gap = gap
        self.last = now
        self.chunks += 1

    def on_message_complete(self) -> None:
        if self.status != 200:
            self._finish(f"status {self.status}")
        else:
            self._finish(None)
        if self.transport is not None:
            self.transport.close()

    def _finish(self, failure: str | None) -> None:
        if not self.done.done():
            self.done.set_result(failure)


def _request(url: str, chunks: int, api_key: str | None) -> bytes:
    parts = urlsplit(url)
    body = json.dumps({"model": "bench-chat", "messages": [{"role": "user", "content": "Count."}],
                       "stream": True, "max_tokens": chunks}, separators=(",", ":")).encode()
    head = [f"POST {parts.path} HTTP/1.1", f"host: {parts.netloc}", "content-type: application/json",
            f"content-length: {len(body)}", "accept: text/event-stream"]
    if api_key:
        head.append(f"authorization: Bearer {api_key}")
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


async def _one(loop, host: str, port: int, request: bytes, chunks: int, delay: float, totals: Totals,
               stall_s: float, deadline: float) -> None:
    await asyncio.sleep(delay)
    done = loop.create_future()
    conn = StreamConn(request, totals, done)
    try:
        await loop.create_connection(lambda: conn, host, port)
        failure = await asyncio.wait_for(done, max(deadline - loop.time(), 0.1))
    except (OSError, asyncio.TimeoutError) as exc:
        failure = "timed out" if isinstance(exc, asyncio.TimeoutError) else f"connect: {exc.__class__.__name__}"
        if conn.transport is not None:
            conn.transport.abort()
    totals.chunks += conn.chunks
    totals.max_gap_by_stream.append(conn.max_gap)
    if failure is None and conn.chunks < chunks:
        failure = "fewer chunks than asked for"
    if failure is None and not conn.saw_done:
        failure = "no [DONE]"
    if failure is not None:
        totals.fail(failure)
    elif conn.max_gap <= stall_s:
        totals.complete += 1


def _percentiles(values: array, scale: float = 1000.0) -> dict:
    if not values:
        return {}
    ordered = sorted(values)
    pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))] * scale  # noqa: E731
    return {"p50": pick(0.5), "p90": pick(0.9), "p99": pick(0.99), "p999": pick(0.999),
            "max": ordered[-1] * scale, "mean": sum(ordered) / len(ordered) * scale, "n": len(ordered)}


async def run(url: str, streams: int, chunks: int, rate: float, ramp: float, api_key: str | None,
              stall_s: float) -> dict:
    loop = asyncio.get_running_loop()
    parts = urlsplit(url)
    request = _request(url, chunks, api_key)
    totals = Totals()
    started = time.monotonic()
    deadline = loop.time() + ramp + chunks / rate + 15.0
    await asyncio.gather(*(
        _one(loop, parts.hostname, parts.port, request, chunks, ramp * i / streams, totals, stall_s, deadline)
        for i in range(streams)))
    stalled = sum(1 for gap in totals.max_gap_by_stream if gap > stall_s)
    return {
        "streams": streams, "chunks_per_stream": chunks, "rate": rate,
        "complete": totals.complete, "stalled_over_s": stall_s, "stalled": stalled,
        "failed": sum(totals.failures.values()), "failures": totals.failures,
        "chunks_expected": streams * chunks, "chunks_received": totals.chunks,
        "delay_ms": _percentiles(totals.delays), "gap_ms": _percentiles(totals.gaps),
        "first_chunk_ms": _percentiles(totals.first),
        "wall_s": time.monotonic() - started,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--streams", type=int, default=1000)
    parser.add_argument("--chunks", type=int, default=200)
    parser.add_argument("--rate", type=float, default=20.0, help="the backend's chunks per second")
    parser.add_argument("--ramp", type=float, default=1.0, help="seconds over which streams start")
    parser.add_argument("--api-key")
    parser.add_argument("--stall-s", type=float, default=1.0)
    args = parser.parse_args()
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    try:
        import uvloop

        runner = uvloop.run
    except ImportError:
        runner = asyncio.run
    result = runner(run(args.url, args.streams, args.chunks, args.rate, args.ramp, args.api_key, args.stall_s))
    print("BENCH_JSON " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
