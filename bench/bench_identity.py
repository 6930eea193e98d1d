"""CPU per request of the identity and entitlement stages with a warm key cache.

    python bench/bench_identity.py [--requests 20000] [--repeat 3]

Builds both stages the way the gateway does (a SQLite key store in a temp dir, the
tenant plans precomputed), warms the key cache, then awaits ``identity.admit`` and
``entitlement.admit`` on a built request context in a loop and divides
``time.process_time`` by the number of requests. The cache TTL is raised for the run so
that "warm" means warm (a reload costs one SQLite read per TTL, per key, anyway).

Scenarios: an API key on a plan that allows everything the body asks for (1 KB chat
body, 12 typical headers), the same with a ``user`` label, a request refused for a model
outside the plan, a consumer plan whose system prompt is replaced (a body rewrite), and
a cached JWT. The acceptance budget is 30 us per request for identity + entitlement.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time


from tokenward.config.loader import parse_config
from tokenward.pipeline.context import RequestContext
from tokenward.assemble.gateway import assemble
from tokenward.observe.telemetry import Telemetry
from tokenward.stages import order
from tokenward.stages import s03_identity, s06_entitlement

CONFIG = """
upstreams: {local: {base_url: "http://127.0.0.1:9/v1"}}
models:
  small-chat: {upstream: local}
  large-chat: {upstream: local}
plans:
  team: {models: [small-chat, large-chat], allow_tools: [search, calculator]}
  free: {models: [small-chat], allow_system_prompt: false, system_prompt: "You are a helpful assistant."}
tenants:
  acme: {plan: team}
  globex: {plan: free}
keystore: {url: "sqlite:///%s/keys.db"}
logging: {decisions: "off"}
"""


def chat_body(model: str = "small-chat", **extra) -> bytes:
    text = "Summarise the following paragraph in two sentences. " * 14
    body = {"model": model, "max_tokens": 256, "temperature": 0.2,
            "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": text}],
            "tools": [{"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}}],
            **extra}
    return json.dumps(body).encode()


def headers(key: str) -> list[tuple[bytes, bytes]]:
    return [(b"host", b"gateway.example"), (b"user-agent", b"OpenAI/Python 1.40.0"),
            (b"accept", b"application/json"), (b"content-type", b"application/json"),
            (b"x-stainless-lang", b"python"), (b"x-stainless-package-version", b"1.40.0"),
            (b"x-stainless-os", b"Linux"), (b"x-stainless-arch", b"x64"), (b"x-stainless-runtime", b"CPython"),
            (b"x-stainless-retry-count", b"0"), (b"content-length", b"1024"),
            (b"authorization", b"Bearer " + key.encode())]


async def measure(stages, key: str, body: bytes, n: int, repeat: int) -> tuple[float, str | None]:
    identity, entitlement = stages
    hdrs = headers(key)
    ctx = RequestContext("bench", "POST", "/v1/chat/completions", hdrs, None, None, 0)
    best = float("inf")
    outcome = None
    for _ in range(repeat):
        t0 = time.process_time()
        for _ in range(n):
            ctx.principal = ctx.entitlement = None
            ctx.body = body
            refusal = await identity.admit(ctx)
            if refusal is None:
                refusal = await entitlement.admit(ctx)
            outcome = refusal.reason.name if refusal is not None else None
        best = min(best, (time.process_time() - t0) / n * 1e6)
    return best, outcome


async def main(n: int, repeat: int) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        parts = await assemble(parse_config(CONFIG % tmp, {}), telemetry=Telemetry(),
                               stages=order.only({"edge", "identity", "entitlement"}))
        identity = next(s for s in parts.stages if isinstance(s, s03_identity.IdentityStage))
        entitlement = next(s for s in parts.stages if isinstance(s, s06_entitlement.EntitlementStage))
        keys = parts.keys
        assert keys is not None
        acme, _ = await keys.create("acme")
        globex, _ = await keys.create("globex")
        identity.api_keys.cache._configured_ttl = identity.api_keys.cache.ttl_s = 3600.0
        stages = (identity, entitlement)
        scenarios = [
            ("api key, team plan, 1 KB chat body", acme, chat_body()),
            ("api key + user label", acme, chat_body(user="end-user-42")),
            ("refused: model not in plan", globex, chat_body("large-chat", tools=None)),
            ("consumer plan: system prompt replaced", globex, chat_body(tools=None)),
        ]
        results = []
        for name, key, body in scenarios:
            await measure(stages, key, body, 100, 1)  # warm the cache and the code paths
            us, outcome = await measure(stages, key, body, n, repeat)
            results.append((name, us, outcome))
        await parts.stop()
    print(f"identity + entitlement, warm cache, CPU per request (best of {repeat} x {n}):")
    for name, us, outcome in results:
        print(f"  {name:<40} {us:6.2f} us   ({outcome or 'admitted'})")
    worst = max(us for _, us, _ in results)
    print(f"worst: {worst:.2f} us (budget 30 us): {'OK' if worst <= 30 else 'OVER BUDGET'}")
    return 0 if worst <= 30 else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    sys.exit(asyncio.run(main(args.requests, args.repeat)))
