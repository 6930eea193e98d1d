"""CPU per request of budget admission: one reservation and its settle.

    python bench/bench_admission.py [--requests 20000] [--concurrency 32] [--repeat 3]

Times, with ``time.process_time`` over a loop of ``--requests`` (``--concurrency`` tasks at
once, so Redis calls overlap as they do under load), for each store:

- ``stage``: the admission stage's ``admit`` + ``on_complete`` on a built request context
  (amount estimate from a field peek, cost units, the reservation, the rate-limit headers,
  the decision-record notes, the settle);
- ``admitter``: ``Admitter.reserve`` + ``Admitter.settle`` alone;
- for Redis, ``redis-py client``: the same two EVALSHA calls through ``redis.asyncio.Redis``
  (the client's own command path), for comparison with the store's direct use of
  redis-py's connection.

Only this process's CPU is counted (pinned to CPU 0; redis-server runs on CPU 1). Round trips
per request are counted by the Redis store. The plan is the ``team`` plan of
examples/gateway.yaml (spend caps, streams, tokens, requests: four checks).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time

from tokenward.budget import policy
from tokenward.budget.admission import Admitter
from tokenward.budget.memory import MemoryStore
from tokenward.config.loader import effective_plan, parse_config
from tokenward.pipeline.context import RequestContext
from tokenward.pipeline.results import Principal
from tokenward.reconcile.usage import Usage
from tokenward.stages.s02_edge import Route
from tokenward.stages.s10_admission import AdmissionStage

CONFIG = """
upstreams: {local: {base_url: "http://127.0.0.1:9/v1"}}
models:
  small-chat: {upstream: local, input_price_per_million: 0.15, output_price_per_million: 0.60}
plans:
  team:
    models: [small-chat]
    max_output_tokens: 8192
    tokens_per_minute: 1000000000
    max_concurrent_streams: 100000
    requests_per_minute: 100000000
    daily_spend_usd: 1000000
    monthly_spend_usd: 10000000
tenants: {acme: {plan: team}}
store: {url: memory, lease_s: 30}
"""
BODY = b'{"model":"small-chat","messages":[{"role":"user","content":"Say hello in five words."}],"max_tokens":64}'
ROUTE = Route("/v1/chat/completions", ("POST",), ("application/json",), 1 << 20)


def start_redis(directory: str) -> subprocess.Popen:
    sock = os.path.join(directory, "redis.sock")
    pin = ["taskset", "-c", "1"] if shutil.which("taskset") and (os.cpu_count() or 1) > 1 else []
    proc = subprocess.Popen(pin + [shutil.which("redis-server") or "/usr/bin/redis-server", "--port", "0",
                             "--unixsocket", sock, "--save", "", "--appendonly", "no", "--dir", directory],
                            stdout=subprocess.DEVNULL)
    for _ in range(200):
        if os.path.exists(sock):
            return proc
        time.sleep(0.01)
    raise RuntimeError("redis-server did not start")


async def timed(n: int, concurrency: int, one) -> float:
    """CPU microseconds per call of ``one()``, ``concurrency`` at a time."""
    async def worker(count: int) -> None:
        for _ in range(count):
            await one()

    await asyncio.gather(*(worker(200 // concurrency + 1) for _ in range(concurrency)))  # warm up
    t0 = time.process_time()
    await asyncio.gather(*(worker(n // concurrency) for _ in range(concurrency)))
    return (time.process_time() - t0) / (n // concurrency * concurrency) * 1e6


def stage_call(stage: AdmissionStage, principal: Principal):
    usage = Usage(12, 20, "reported")

    async def one() -> None:
        ctx = RequestContext("req", "POST", "/v1/chat/completions", [], None, None, 0)
        ctx.route = ROUTE
        ctx.body = BODY
        ctx.principal = principal
        ctx.model = "small-chat"
        if await stage.admit(ctx) is not None:
            raise RuntimeError("refused during the benchmark")
        await stage.on_complete(ctx, usage)

    return one


def admitter_call(admitter: Admitter, plan):
    async def one() -> None:
        decision = await admitter.reserve("acme", "team", plan, "key", "small-chat", "local", 8300, 6)
        await admitter.settle(decision.ticket, 40, 1, policy.SETTLE)

    return one


def client_call(url: str):
    import redis.asyncio as aioredis

    from tokenward.budget.scripts import RESERVE, SETTLE

    client = aioredis.Redis.from_url(url)
    # one token bucket (kind 1, unit 1, 100/min), the layout reserve.lua and settle.lua document
    spec, amount = struct.pack("<5d", 1, 1, 6_000_000, 100, 1), struct.pack("<d", 5)
    ns, leases, old_key = "tw:{t:c}", "tw:{t:c}:leases", "tw:{t:c}:b:tokens"

    async def one() -> None:
        await client.evalsha(RESERVE.sha.decode(), 3, ns, leases, old_key, 1, "x", 2, spec, amount, "b:tokens")
        await client.evalsha(SETTLE.sha.decode(), 4, ns, leases, "tw:{t:c}:r:x", old_key, 1, 2, 0, "s", "x",
                             "b:tokens")

    return client, one


async def run(args) -> None:
    config = parse_config(CONFIG, environ={})
    plan = effective_plan(config, "acme")
    principal = Principal("acme", "key", "team", plan)
    stores = [("memory", MemoryStore())]
    directory = tempfile.mkdtemp(prefix="tw-bench-")
    redis_proc = start_redis(directory)
    url = f"unix://{directory}/redis.sock"
    try:
        from tokenward.budget.redis import RedisStore

        stores.append(("redis", RedisStore(url, 0.5)))
        for name, store in stores:
            admitter = Admitter(config, store)
            stage = AdmissionStage(config, admitter)
            for label, one in (("stage", stage_call(stage, principal)), ("admitter", admitter_call(admitter, plan))):
                trips_before = getattr(store, "round_trips", 0)
                best = min([await timed(args.requests, args.concurrency, one) for _ in range(args.repeat)])
                trips = (getattr(store, "round_trips", 0) - trips_before) / ((args.requests + 200) * args.repeat)
                extra = f"  {trips:.2f} round trips/request" if name == "redis" else ""
                print(f"{name:7s} {label:9s} {best:7.1f} us CPU per reserve+settle{extra}")
            await admitter.close()
        await stores[1][1].reserve([])  # keeps the connection warm for the comparison below
        client, one = client_call(url)
        await client.script_load(__import__("tokenward.budget.redis", fromlist=["RESERVE"]).RESERVE.source)
        await client.script_load(__import__("tokenward.budget.redis", fromlist=["SETTLE"]).SETTLE.source)
        best = min([await timed(args.requests, args.concurrency, one) for _ in range(args.repeat)])
        print(f"redis   redis-py client {best:7.1f} us CPU per two EVALSHA calls (for comparison)")
        await client.aclose()
    finally:
        redis_proc.kill()
        redis_proc.wait()
        shutil.rmtree(directory, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if (os.cpu_count() or 1) > 1:
        os.sched_setaffinity(0, {0})   # this process on CPU 0, redis-server on CPU 1
    try:
        import uvloop

        uvloop.run(run(args))
    except ImportError:
        asyncio.run(run(args))


if __name__ == "__main__":
    sys.exit(main())
