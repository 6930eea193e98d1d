"""The gateway's own Python cost per request, without sockets: the ASGI app called in a
loop with a canned request and a stub upstream that answers at once.

    python bench/inproc.py [--requests 20000] [--stages edge] [--profile] [--stream-chunks 0]

What is timed is everything the gateway does per request above the server and the
network: the pipeline runner and its stages, preparing the upstream call, relaying the
answer, and encoding the decision record (written to a file in a temp dir). What is not:
the server's HTTP parsing and writes, the upstream client's socket work, the kernel. The
difference between this and the CPU per request that overhead.py measures is the share
of the server, the client and the system calls.

--profile runs the same loop under cProfile and prints the top functions by own time.
--stream-chunks N times a streamed request of N chunks instead (CPU per relayed chunk).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import itertools
import os
import pstats
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from backend import CHAT_BODY  # noqa: E402

BODY = b'{"model":"bench-chat","messages":[{"role":"user","content":"Say hello."}],"max_tokens":16}'
CHUNK = (b'data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1700000000,'
         b'"model":"bench-chat","choices":[{"index":0,"delta":{"content":"tok "},"finish_reason":null}]}\n\n')
TAIL = (b'data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1700000000,'
        b'"model":"bench-chat","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":9,'
        b'"total_tokens":21}}\n\ndata: [DONE]\n\n')


class StubResponse:
    """Just enough of tokenward.upstream.client.UpstreamResponse for the forwarder."""

    def __init__(self, chunks: int) -> None:
        self.status = 200
        self._left = chunks
        self._streaming = chunks > 0

    def header(self, name: bytes) -> bytes | None:
        if name == b"content-type":
            return b"text/event-stream" if self._streaming else b"application/json"
        return None

    async def read(self, timeout=None, limit=None) -> bytes:
        return CHAT_BODY

    async def next_chunk(self, timeout=None) -> bytes | None:
        if self._left > 0:
            self._left -= 1
            return CHUNK
        if self._left == 0:
            self._left = -1
            return TAIL
        return None

    def abort(self) -> None:
        pass


class StubTransport:
    """An upstream transport (upstream/response_head.py ``Transport``) that answers at once."""

    def __init__(self, chunks: int) -> None:
        self.chunks = chunks

    async def request(self, method, path, headers, body, *, timeout=None) -> StubResponse:
        return StubResponse(self.chunks)

    @property
    def stats(self) -> dict[str, int]:
        return {"open": 0, "idle": 0, "waiting": 0}

    async def aclose(self) -> None:
        pass


def stub_pools(gateway, chunks: int) -> None:
    """Every target's transport replaced by ``StubTransport`` (its connections never opened):
    the transport, not a method of it, so a compiled UpstreamPool (tokenward/compiled.py) is
    stubbed the same way."""
    stub = StubTransport(chunks)
    for pool in gateway.parts.targets.pools.values():
        for replica in pool.replicas:   # a pool's targets (issue 39)
            replica.transport = stub


def make_scope(api_key: str | None, body: bytes) -> dict:
    headers = [(b"host", b"127.0.0.1"), (b"content-type", b"application/json"),
               (b"content-length", str(len(body)).encode()), (b"user-agent", b"wrk")]
    if api_key:
        headers.append((b"authorization", b"Bearer " + api_key.encode()))
    return {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
            "scheme": "http", "path": "/v1/chat/completions", "raw_path": b"/v1/chat/completions",
            "query_string": b"", "root_path": "", "headers": headers, "client": ("127.0.0.1", 5000),
            "server": ("127.0.0.1", 8080)}


class StubConnection:
    """What a request cycle needs of its connection, without a socket: writes land in a list."""

    write_paused = False

    def __init__(self, sink: list) -> None:
        self.sink = sink
        self.loop = asyncio.get_running_loop()

    def write(self, data: bytes) -> None:
        self.sink.append(data)

    def response_done(self, cycle) -> None:
        pass

    def body_drained(self, size: int) -> None:
        pass

    def resume_reading(self) -> None:
        pass


async def one_request(gateway, scope: dict, body: bytes, sink: list) -> None:
    """One request through the server's own request cycle (respond_now, disconnect hook)."""
    from tokenward.http.cycle import RequestCycle

    cycle = RequestCycle(StubConnection(sink), scope, True, False)
    cycle.body = [body]
    cycle.more_body = False
    await gateway(scope, cycle.receive, cycle.send)


async def run(args) -> None:
    from tokenward.app import Gateway
    from tokenward.config import load_config
    from tokenward.stages import order

    stages = order.only(set(args.stages.split(","))) if args.stages is not None else None
    with tempfile.TemporaryDirectory(prefix="tokenward-inproc-") as tmp:
        raw = yaml.safe_load((Path(__file__).resolve().parent / f"{args.config}.yaml").read_text())
        raw["upstreams"]["bench"]["base_url"] = "http://127.0.0.1:9/v1"
        if args.store:
            raw["store"]["url"] = args.store
        if args.deterministic:
            # Work that runs on the loop's clock is counted per request in proportion to how
            # slowly the run goes (callgrind: ~50x): a key store or control-table read each
            # second, lease ticks. None of it runs during the count; the abuse signals'
            # batches, which aggregate every request's observation, run every 100 requests
            # (``periodic``).
            raw["keystore"]["cache_ttl_s"] = 3600.0
            raw["keystore"]["last_used_flush_s"] = 3600.0
            raw["store"]["lease_s"] = 3600.0
            raw.setdefault("control", {}).update(poll_s=3600.0, refresh_s=3600.0)
            if raw.get("abuse") is not None:
                raw["abuse"]["batch_s"] = 3600.0
        raw["logging"]["decisions"] = os.path.join(tmp, "decisions.jsonl")
        raw["keystore"]["url"] = f"sqlite:///{tmp}/keys.db"
        config_path = Path(tmp) / "gateway.yaml"
        config_path.write_text(yaml.safe_dump(raw))
        clock = None
        if args.deterministic:   # budgets see a clock that moves 1 ms per reading, not the host's
            ticks = itertools.count(1_800_000_000_000)
            clock = lambda: next(ticks) / 1000   # noqa: E731
        gateway = Gateway(load_config(config_path), clock=clock, stages=stages)
        await gateway.startup()
        identity = gateway.parts.identity
        if args.deterministic and identity is not None:
            # keys/cache.py caps the TTL at 1 s without an invalidation channel: a key store
            # read (SQLAlchemy, aiosqlite's thread) every second of the run would be counted
            # per request in proportion to how slowly it runs (50x under callgrind)
            cache = identity.authenticator.cache
            cache._configured_ttl = cache.ttl_s = 3600.0
        try:
            await measure(gateway, args, config_path)
        finally:
            await gateway.shutdown()


def apply_experiments(gateway, without: set[str]) -> None:
    """Switch parts off in this process only, to price them (bench use only)."""
    if "watch" in without:  # the per-request disconnect watcher task
        from tokenward.pipeline.disconnect import DisconnectWatch

        DisconnectWatch.arm = lambda self: None
        DisconnectWatch.disarm = lambda self: None
    if "record" in without:  # the decision record and the metrics update
        gateway.runner._finish = lambda ctx: None
    if "metrics" in without:  # the in-process metrics update only
        gateway.metrics.observe = lambda ctx: None
    if "timings" in without:  # perf_counter_ns around each stage
        import tokenward.pipeline.runner as runner_module

        runner_module.perf_counter_ns = lambda: 0


async def measure(gateway, args, config_path: Path) -> None:
    stub_pools(gateway, args.stream_chunks)
    apply_experiments(gateway, set(args.without.split(",")) if args.without else set())
    body = BODY if not args.stream_chunks else BODY[:-1] + b',"stream":true}'
    api_key = await key_if_needed(gateway, make_scope(None, body), body, config_path)
    scope = make_scope(api_key, body)
    sink: list = []
    await one_request(gateway, scope, body, sink)
    status = _status(sink)
    if status != 200:
        raise SystemExit(f"the stub request got {status}: {sink!r:.500}")
    every = 100 if args.deterministic else 0
    engine = gateway.parts.abuse

    async def periodic(i: int) -> None:
        """--deterministic: what runs once a second otherwise, once every 100 requests."""
        if every and i % every == every - 1 and engine is not None:
            await engine.flush()

    for i in range(min(2000, args.requests)):  # warm caches
        await one_request(gateway, scope, body, [])
        await periodic(i)

    async def loop(n: int) -> None:
        for i in range(n):
            await one_request(gateway, scope, body, [])
            await periodic(i)

    used = float("inf")
    each = args.requests // args.concurrency
    for _ in range(args.repeat):  # the least of several: other people's load only ever adds
        started = time.process_time()
        await asyncio.gather(*(loop(each) for _ in range(args.concurrency)))
        used = min(used, time.process_time() - started)
    unit = "chunk" if args.stream_chunks else "request"
    per = used * 1e6 / args.requests / max(args.stream_chunks, 1)
    stages = [s.name for s in gateway.parts.stages]
    print(f"stages: {', '.join(stages)}; without: {args.without or '-'}; best of {args.repeat} x {args.requests}; "
          f"{per:.1f} us CPU per {unit} (app only: no server, no sockets)")
    if args.profile:
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(args.requests):
            await one_request(gateway, scope, body, [])
        profiler.disable()
        if args.profile_out:
            profiler.dump_stats(args.profile_out)
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(args.top)
        print(out.getvalue())


def _status(sink: list) -> int:
    """The status of the first response written to the stub connection."""
    return int(sink[0].split(b" ", 2)[1])


async def key_if_needed(gateway, scope: dict, body: bytes, config_path: Path) -> str | None:
    sink: list = []
    await one_request(gateway, scope, body, sink)
    if _status(sink) != 401:
        return None
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from overhead import create_key

    return create_key(config_path, config_path.parent)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=3, help="report the least of this many timed loops")
    parser.add_argument("--stages", help="only these pipeline slots (default: every registered stage)")
    parser.add_argument("--stream-chunks", type=int, default=0)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--profile-out", help="with --profile: also write the pstats data here")
    parser.add_argument("--without", help="price parts by switching them off: watch,record,metrics,timings")
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--config", choices=("foundation", "full"), default="foundation",
                        help="bench/<name>.yaml: the plan and store of that pipeline")
    parser.add_argument("--store", help="store.url instead of the config's (e.g. unix:///tmp/redis.sock)")
    parser.add_argument("--concurrency", type=int, default=1, help="requests in flight at once (tasks)")
    parser.add_argument("--deterministic", action="store_true",
                        help="a budget clock that ticks per reading and no key-cache refresh (bench/instructions.py)")
    args = parser.parse_args()
    import uvloop

    uvloop.run(run(args))


if __name__ == "__main__":
    main()
