"""Soak for bounded cardinality and flat memory (issue 27): what hostile or just varied
traffic leaves behind in the gateway.

    python bench/cardinality_soak.py [--paths 200000] [--mixed 100000] [--conns 32]

The full pipeline (bench/full.yaml: keys, plan, validation, Redis budgets) with
``/metrics`` exposed; the gateway on CPU 0, the backend, redis and this load generator
(raw asyncio sockets, keep-alive) on CPU 1.

1. ``--paths`` requests to distinct random paths (GET, POST and DELETE; a seventh of them
   address-like, ``/v1/path.<random>@secretmail.org/x``; half with a valid key): after
   every fifth, the number of series, the size of a scrape, the time a scrape takes (the
   median and worst of five) and the gateway's RSS.
2. ``--mixed`` requests: valid whole answers, refusals (no key, an unknown model), streams
   read to the end, and clients that leave mid-stream; RSS after each tenth.

Pass: series and RSS flat (within 5 MB) over phase 1, a scrape under 50 ms, RSS flat over
phase 2 after its first tenth (warm-up). Prints JSON (bench/results/).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import string
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import Procs, machine, raise_fd_limit, require, run_main  # noqa: E402
from overhead import probe, start_backend, start_gateway, start_redis, write_config  # noqa: E402

_LENGTH = re.compile(rb"content-length: *(\d+)", re.IGNORECASE)
BODY = b'{"model":"bench-chat","messages":[{"role":"user","content":"Say hello."}],"max_tokens":16%s}'


def _rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))


def _request(method: str, path: str, body: bytes = b"", key: str | None = None, close: bool = False) -> bytes:
    head = [f"{method} {path} HTTP/1.1", "host: bench", f"content-length: {len(body)}"]
    if body:
        head.append("content-type: application/json")
    if key:
        head.append(f"authorization: Bearer {key}")
    if close:
        head.append("connection: close")
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


class Conn:
    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader = self.writer = None

    async def send(self, raw: bytes) -> int:
        """One request on a kept-alive connection; (re)opened when the server closed it."""
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        self.writer.write(raw)
        head = await self.reader.readuntil(b"\r\n\r\n")
        found = _LENGTH.search(head)
        if found:
            await self.reader.readexactly(int(found.group(1)))
        if found is None or b"connection: close" in head.lower():
            await self.close()
        return int(head[9:12])

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.reader = self.writer = None


async def _once(host: str, port: int, raw: bytes, leave_after: int | None) -> int:
    """A request on its own connection (streams): read to the end, or leave after some bytes."""
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(raw)
    got = b""
    try:
        while True:
            chunk = await reader.read(4096)
            if not chunk:
                break
            got += chunk
            if leave_after is not None and len(got) >= leave_after:
                break
    finally:
        writer.close()
    return int(got[9:12]) if len(got) >= 12 else 0


async def _scrape(host: str, port: int) -> dict:
    times, body = [], b""
    for _ in range(5):
        reader, writer = await asyncio.open_connection(host, port)
        started = time.perf_counter()
        writer.write(_request("GET", "/metrics", close=True))
        body = await reader.read(-1)
        times.append((time.perf_counter() - started) * 1000)
        writer.close()
    text = body.split(b"\r\n\r\n", 1)[1]
    series = sum(1 for line in text.splitlines() if line and not line.startswith(b"#"))
    times.sort()
    return {"series": series, "bytes": len(text), "scrape_ms_median": round(times[2], 2),
            "scrape_ms_max": round(times[-1], 2), "secretmail_in_scrape": b"secretmail" in text}


async def _drive(host: str, port: int, conns: int, make, count: int, start: int) -> dict[int, int]:
    statuses: dict[int, int] = {}
    cursor = iter(range(start, start + count))

    async def worker() -> None:
        conn = Conn(host, port)
        for i in cursor:
            status = await make(conn, i)
            statuses[status] = statuses.get(status, 0) + 1
        await conn.close()

    await asyncio.gather(*(worker() for _ in range(conns)))
    return statuses


def _path_request(rng: random.Random, key: str):
    def make(conn: Conn, i: int):
        word = "".join(rng.choices(string.ascii_lowercase + string.digits, k=12))
        path = (f"/v1/{word}", f"/v1/path.{word}@secretmail.org/x", f"/{word}/{i}", f"/v1/chat/completions/{word}",
                f"/v1/jobs/{word}/{i}", f"/v1/models{word}", f"/x{i}?q={word}")[i % 7]
        method = ("GET", "POST", "DELETE")[i % 3]
        body = BODY % b"" if method == "POST" else b""
        return conn.send(_request(method, path, body, key if i % 2 else None))
    return make


def _mixed_request(host: str, port: int, key: str):
    stream = b',"stream":true'

    def make(conn: Conn, i: int):
        kind = i % 10
        if kind < 4:
            return conn.send(_request("POST", "/v1/chat/completions", BODY % b"", key))
        if kind < 6:
            return conn.send(_request("POST", "/v1/chat/completions", BODY % b""))                 # 401
        if kind == 6:
            return conn.send(_request("POST", "/v1/chat/completions",
                                      BODY.replace(b"bench-chat", b"no-such-model") % b"", key))   # refused
        raw = _request("POST", "/v1/chat/completions", BODY % stream, key, close=True)
        return _once(host, port, raw, 200 if kind == 9 else None)                                  # 9: leaves
    return make


async def _soak(url: str, pid: int, key: str, args) -> dict:
    host, port = url.removeprefix("http://").split(":")
    port = int(port)
    rng = random.Random(27)
    out: dict = {"paths": [], "mixed": []}
    point = {"requests": 0, "rss_kib": _rss_kib(pid), **await _scrape(host, port)}
    out["paths"].append(point)
    step = args.paths // 5
    for n in range(5):
        started = time.monotonic()
        statuses = await _drive(host, port, args.conns, _path_request(rng, key), step, n * step)
        point = {"requests": (n + 1) * step, "seconds": round(time.monotonic() - started, 1), "statuses": statuses,
                 "rss_kib": _rss_kib(pid), **await _scrape(host, port)}
        out["paths"].append(point)
        print(json.dumps(point), file=sys.stderr)
    step = args.mixed // 10
    for n in range(10):
        started = time.monotonic()
        statuses = await _drive(host, port, args.conns, _mixed_request(host, port, key), step, n * step)
        point = {"requests": (n + 1) * step, "seconds": round(time.monotonic() - started, 1), "statuses": statuses,
                 "rss_kib": _rss_kib(pid)}
        out["mixed"].append(point)
        print(json.dumps(point), file=sys.stderr)
    return out


def _verdict(out: dict) -> dict:
    paths, mixed = out["paths"], out["mixed"]
    return {
        "series_added_by_paths": paths[-1]["series"] - paths[1]["series"],
        "rss_growth_over_paths_kib": paths[-1]["rss_kib"] - paths[1]["rss_kib"],
        "rss_growth_over_paths_from_start_kib": paths[-1]["rss_kib"] - paths[0]["rss_kib"],
        "worst_scrape_ms": max(p["scrape_ms_max"] for p in paths),
        "rss_growth_over_mixed_after_warmup_kib": mixed[-1]["rss_kib"] - mixed[0]["rss_kib"],
        "address_in_a_scrape": any(p["secretmail_in_scrape"] for p in paths),
    }


def _machine() -> dict:
    """harness.machine() without wrk (not needed here, and not always installed)."""
    try:
        return machine()
    except FileNotFoundError:
        import platform

        return {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--paths", type=int, default=200_000)
    parser.add_argument("--mixed", type=int, default=100_000)
    parser.add_argument("--conns", type=int, default=32)
    args = parser.parse_args()
    require("redis-server")
    raise_fd_limit()
    with tempfile.TemporaryDirectory(prefix="tokenward-cardsoak-") as name, Procs(Path(name), 3600) as procs:
        tmp = Path(name)
        _, backend_url = start_backend(procs, 1000)
        store_url = start_redis(procs, tmp)
        config = write_config("full", tmp, backend_url, store_url)
        raw = yaml.safe_load(config.read_text())
        raw["server"]["expose_metrics"] = True
        raw["store"]["timeout_ms"] = 250
        raw["logging"]["decisions"] = "off"
        config.write_text(yaml.safe_dump(raw, sort_keys=False))
        gateway, url = start_gateway(procs, config, None, None)
        key = probe(url, None, config, tmp)
        os.sched_setaffinity(0, {1})
        out = asyncio.run(_soak(url, gateway.pid, key, args))
    print(json.dumps({"machine": _machine(), "args": vars(args), **out, "verdict": _verdict(out)}, indent=2))


if __name__ == "__main__":
    run_main(main, "cardinality_soak")
