"""Two tenants on one service capacity: tenant A bursts while tenant B sends ordinary
interactive work, under a single shared pool and under per-tenant shares plus the reserve."""

from __future__ import annotations

from typing import Any, Callable

from ..result import Panel, Result, Series
from ..sim import Sim, percentile
from .events import Action, Events, Tick, part_of, per_window

BASE = """
upstreams: {local: {base_url: "http://127.0.0.1:9/v1"}}
models: {chat: {upstream: local}}
plans:
  big: {models: [chat], tokens_per_minute: 10000000, requests_per_minute: 1000000, max_concurrent_streams: 0,
        max_output_tokens: 8192}
tenants: {a: {plan: big}, b: {plan: big}}
capacity:
  local: {tokens_per_minute: 600000%s}
"""
MODES = (("single shared pool", ""), ("shares A 0.3, B 0.2 + reserve 0.5", ", shares: {a: 0.3, b: 0.2}"))
SECONDS = 120
A_START, A_END, A_RATE, A_TOKENS, A_TRIES = 20, 80, 100, 300, 3
B_RATE, B_TOKENS, B_TRIES = 2, 500, 6


async def _mode(seed: int, shares: str, tick: Tick) -> dict[str, dict[str, Any]]:
    sim = Sim(BASE % shares, seed=seed)
    events = Events(sim.clock)
    out: dict[str, dict[str, Any]] = {t: {"admitted": [], "tokens": [], "delays": [], "given_up": 0, "refusals": 0, "terminal": 0}
                 for t in "ab"}

    def client(tenant: str, tokens: int, tries: int) -> Callable[[], Action]:
        async def attempt(first: float, left: int) -> None:
            decision = await sim.reserve(tenant, tokens, "chat")
            stats, now = out[tenant], sim.clock.elapsed
            if decision.ticket is not None:
                stats["admitted"].append(now)
                stats["tokens"].append(tokens)
                stats["delays"].append(now - first)

                async def done() -> None:
                    await sim.settle(decision, tokens)
                events.after(2.0, done)
                return
            stats["refusals"] += 1
            stats["terminal"] += decision.terminal
            if left <= 1 or decision.retry_after is None:
                stats["given_up"] += 1
                return
            # the client honours Retry-After (whole seconds, from the bucket's refill arithmetic)
            events.after(decision.retry_after + sim.rng.random() * 0.05, lambda: attempt(first, left - 1))

        def start() -> Action:
            return lambda: attempt(sim.clock.elapsed, tries)
        return start

    b = client("b", B_TOKENS, B_TRIES)
    for i in range(SECONDS * B_RATE):
        events.at(i / B_RATE + 0.013, b())
    a = client("a", A_TOKENS, A_TRIES)
    for i in range((A_END - A_START) * A_RATE):
        events.at(A_START + i / A_RATE, a())
    await events.run(SECONDS + 30, tick)
    await sim.close()
    return out


async def run(seed: int, tick: Callable[[float], None]) -> Result:
    rows, rates, delays = [], [], []
    offered_b = SECONDS * B_RATE * B_TOKENS
    for n, (label, shares) in enumerate(MODES):
        out = await _mode(seed, shares, part_of(tick, n, len(MODES)))
        a, b = out["a"], out["b"]
        refusals = a["refusals"] + b["refusals"]
        rows.append([label, round(sum(b["tokens"]) / offered_b, 3), round(percentile(b["delays"], 50), 3),
                     round(percentile(b["delays"], 99), 3), b["refusals"], b["given_up"], sum(a["tokens"]),
                     a["given_up"], round((a["terminal"] + b["terminal"]) / max(refusals, 1), 3)])
        xs, ys = per_window(b["admitted"], b["tokens"], 5.0, SECONDS)
        rates.append(Series(f"B, {label}", xs, ys, ["-", "--"][n]))
        delays.append(Series(f"B, {label}", b["admitted"], b["delays"], ["-", "--"][n]))
    return Result(
        "two-tenants", "Two tenants, one capacity",
        "While tenant A bursts, how much of tenant B's ordinary work is admitted, and how long does B wait, under "
        "one shared pool and under per-tenant shares with a shared reserve?",
        ["One backend with a capacity of 600,000 tokens a minute (capacity.local), shared by tenants A and B; "
         "their own plans are far larger, so only the capacity binds.",
         f"B sends {B_RATE} requests a second of {B_TOKENS} tokens for {SECONDS} s (60,000 a minute: a tenth of "
         f"the capacity). A bursts from {A_START} s to {A_END} s: {A_RATE} requests a second of {A_TOKENS} tokens.",
         "A refused client waits what Retry-After says (plus a little jitter) and tries again: B up to "
         f"{B_TRIES} times, A up to {A_TRIES}. B's delay is from its first try to its admission.",
         "Shares: A draws first on its guaranteed 30%, B on its 20%; the rest is a reserve anyone may draw on. "
         "The admission code is the gateway's own (capacity checks with soft share buckets)."],
        ["capacity", "B admitted share", "B p50 delay (s)", "B p99 delay (s)", "B refusals", "B gave up",
         "A admitted tokens", "A gave up", "terminal share of refusals"],
        rows,
        [Panel("B's admitted tokens per minute (5 s windows)", "seconds", "tokens per minute", rates,
               [(A_START, "A's burst starts"), (A_END, "A's burst ends")]),
         Panel("B's delay until admitted", "seconds", "delay (s)", delays)],
        finding=(f"With one shared pool A's burst takes the capacity and B gets {rows[0][1]:.0%} of its work through "
                 f"(p99 delay {rows[0][3]} s); with shares B gets {rows[1][1]:.0%} (p99 {rows[1][3]} s), "
                 "because A can empty the reserve but never B's share."),
        seed=seed)
