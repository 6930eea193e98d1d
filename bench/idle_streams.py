"""Gateway memory per idle open stream: N streams open through the full pipeline, each
between two tokens, and the gateway's resident memory before and while they are open.

The backend sends one chunk every 1/--rate seconds per stream (20 s by default), so once
every stream has had its first chunk, all N sit idle in the gateway: admitted, reserved,
their response started, a backend connection held, waiting for the next token. Reported
(one JSON line, and a summary):

- rss_per_stream_kib: (VmRSS with the streams open - VmRSS before) / N, the gateway's own
  memory (kernel socket buffers are not in it; they are the kernel's, per socket);
- rss after the client went away, the streams' records (every one ends 499) and the
  gateway's descriptors, so a stream that leaks anything shows.

    python bench/idle_streams.py [--streams 2000] [--rate 0.05] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import LOAD_CPU, BenchError, Procs, machine, raise_fd_limit, run_main  # noqa: E402
from overhead import create_key, probe, start_backend, start_gateway, summarize_records, write_config  # noqa: E402


def status_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise BenchError(f"no {field} in /proc/{pid}/status")


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


class IdleStream(asyncio.Protocol):
    """Sends one streaming request, then only counts what arrives."""

    def __init__(self, request: bytes, first: asyncio.Future) -> None:
        self.request = request
        self.first = first
        self.transport: asyncio.Transport | None = None
        self.head = b""
        self.events = 0

    def connection_made(self, transport) -> None:
        self.transport = transport
        transport.write(self.request)

    def data_received(self, data: bytes) -> None:
        if b"data: " in data:
            self.events += data.count(b"data: ")
            if not self.first.done():
                self.first.set_result(None)
        elif not self.head:
            self.head = data[:64]
            if not data.startswith(b"HTTP/1.1 200") and not self.first.done():
                self.first.set_exception(BenchError(f"stream refused: {data[:200]!r}"))

    def connection_lost(self, exc) -> None:
        if not self.first.done():
            self.first.set_exception(BenchError("connection closed before the first chunk"))


def request_bytes(port: int, api_key: str, chunks: int) -> bytes:
    body = json.dumps({"model": "bench-chat", "messages": [{"role": "user", "content": "Count."}],
                       "stream": True, "max_tokens": chunks}, separators=(",", ":")).encode()
    return (f"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\nauthorization: Bearer {api_key}\r\n\r\n").encode() + body


async def open_streams(port: int, api_key: str, count: int, chunks: int, ramp_s: float,
                       first_within_s: float) -> list[IdleStream]:
    loop = asyncio.get_running_loop()
    request = request_bytes(port, api_key, chunks)
    streams: list[IdleStream] = []
    firsts = []

    async def one(i: int) -> None:
        await asyncio.sleep(ramp_s * i / count)
        first = loop.create_future()
        conn = IdleStream(request, first)
        streams.append(conn)
        firsts.append(first)
        await loop.create_connection(lambda: conn, "127.0.0.1", port)
        await asyncio.wait_for(first, first_within_s)

    await asyncio.gather(*(one(i) for i in range(count)))
    return streams


async def measure(args, gateway_pid: int, port: int, api_key: str, tmp: Path) -> dict:
    before = status_kib(gateway_pid, "VmRSS")
    fds_before = open_fds(gateway_pid)
    opened_at = time.monotonic()
    interval = 1.0 / args.rate
    streams = await open_streams(port, api_key, args.streams, args.chunks, args.ramp, interval + args.ramp + 10)
    all_first_s = time.monotonic() - opened_at
    await asyncio.sleep(0.5)
    # every stream has had one chunk and waits for the next: the idle state being priced
    if any(s.events > 1 for s in streams):
        raise BenchError("some streams are past their second token already; lower --rate")
    open_rss = status_kib(gateway_pid, "VmRSS")
    if args.trace:
        os.kill(gateway_pid, signal.SIGUSR2)
        await asyncio.sleep(3.0)
    open_fd_count = open_fds(gateway_pid)
    chunks_before_close = sum(s.events for s in streams)
    for s in streams:
        if s.transport is not None:
            s.transport.abort()
    await asyncio.sleep(3.0)
    records = summarize_records(tmp / "decisions.jsonl")
    return {
        "streams": args.streams, "rate": args.rate, "all_had_first_chunk_after_s": all_first_s,
        "events_received_while_open": chunks_before_close,
        "rss_before_kib": before, "rss_open_kib": open_rss,
        "rss_per_stream_kib": (open_rss - before) / args.streams,
        "rss_after_close_kib": status_kib(gateway_pid, "VmRSS"),
        "fds_before": fds_before, "fds_open": open_fd_count, "fds_after_close": open_fds(gateway_pid),
        "records": records["records"], "records_by_status": records["by_status"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--streams", type=int, default=2000)
    parser.add_argument("--rate", type=float, default=0.05, help="the backend's chunks per second per stream")
    parser.add_argument("--chunks", type=int, default=3, help="tokens each stream asks for")
    parser.add_argument("--ramp", type=float, default=2.0, help="seconds over which streams open")
    parser.add_argument("--warm", type=int, default=200, help="non-streaming requests before the baseline")
    parser.add_argument("--trace", help="also write the gateway's top allocation sites with the streams open "
                        "here (tracemalloc: slows the gateway; its RSS figure then includes the tracing)")
    parser.add_argument("--json")
    args = parser.parse_args()
    raise_fd_limit()
    os.sched_setaffinity(0, {int(LOAD_CPU)})
    info = machine()
    with tempfile.TemporaryDirectory(prefix="tokenward-idle-") as tmp_name:
        tmp = Path(tmp_name)
        with Procs(tmp, deadline_s=300) as procs:
            backend, backend_url = start_backend(procs, args.rate)
            config = write_config("full", tmp, backend_url, None)
            api_key = create_key(config, tmp)
            if args.trace:
                os.environ["BENCH_TRACEMALLOC"] = str(Path(args.trace).resolve())
            gateway, gateway_url = start_gateway(procs, config, None, None)
            for _ in range(args.warm):
                api_key = probe(gateway_url, api_key, config, tmp)
            port = int(gateway_url.rsplit(":", 1)[1])
            result = asyncio.run(measure(args, gateway.pid, port, api_key, tmp))
    result["machine"] = info
    print(f"{result['streams']} idle streams (full pipeline, memory store): gateway RSS {result['rss_before_kib']} KiB "
          f"before, {result['rss_open_kib']} KiB open -> {result['rss_per_stream_kib']:.1f} KiB per stream; "
          f"{result['rss_after_close_kib']} KiB after the client left; descriptors {result['fds_before']} / "
          f"{result['fds_open']} / {result['fds_after_close']}; records {result['records_by_status']}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    run_main(main, "idle streams")
