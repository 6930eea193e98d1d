"""Replicas sharing one budget, beside process-local limiters: what load balancing does to
a limit that each replica enforces on its own."""

from __future__ import annotations

from typing import Callable

from ...budget.memory import MemoryStore
from ..result import Panel, Result, Series
from ..sim import Clock, Sim
from .events import Action, Events, Tick, cumulative, part_of

CONFIG = """
plans:
  team: {tokens_per_minute: 60000, requests_per_minute: 100000, max_concurrent_streams: 0, max_output_tokens: 4096}
tenants: {acme: {plan: team}}
"""
REPLICAS, SECONDS, RATE, TOKENS, LIMIT = 3, 240, 6, 1000, 60_000
MODES = ("3 replicas, one shared store", "3 replicas, process-local limiters", "1 replica")


async def _mode(seed: int, mode: str, tick: Tick) -> list[float]:
    clock = Clock()
    shared = MemoryStore()
    count = 1 if mode == "1 replica" else REPLICAS
    sims = [Sim(CONFIG, clock, shared if "shared" in mode or count == 1 else MemoryStore(), seed) for _ in range(count)]
    events = Events(clock)
    admitted: list[float] = []

    def arrive(i: int) -> Action:
        async def go() -> None:
            sim = sims[i % count]                      # the load balancer: round robin
            decision = await sim.reserve("acme", TOKENS)
            if decision.ticket is not None:
                admitted.append(clock.elapsed)
                await sim.settle(decision, TOKENS)
        return go

    for i in range(SECONDS * RATE):
        events.at(i / RATE, arrive(i))
    await events.run(SECONDS, tick)
    for sim in sims:
        await sim.close()
    return admitted


def _max_in_window(times: list[float], window: float) -> int:
    best, lo = 0, 0
    for hi, t in enumerate(times):
        while times[lo] <= t - window:
            lo += 1
        best = max(best, hi - lo + 1)
    return best


async def run(seed: int, tick: Callable[[float], None]) -> Result:
    rows, series = [], []
    for n, mode in enumerate(MODES):
        admitted = await _mode(seed, mode, part_of(tick, n, len(MODES)))
        total = len(admitted) * TOKENS
        steady = sum(1 for t in admitted if t >= 120) * TOKENS / ((SECONDS - 120) / 60)
        rows.append([mode, total, round(steady), round(steady / LIMIT, 2), _max_in_window(admitted, 60) * TOKENS])
        series.append(Series(mode, *cumulative(admitted, [TOKENS] * len(admitted), 2.0, SECONDS),
                             ["-", "--", ":"][n]))
    xs = [float(t) for t in range(0, SECONDS + 1, 2)]
    series.append(Series("the plan: 60,000 a minute (and its first full bucket)", xs,
                         [LIMIT + LIMIT * t / 60 for t in xs], "-."))
    return Result(
        "replicas", "Replicas sharing one budget",
        "Behind a load balancer, does a tenant's limit hold when every replica checks it against one shared "
        "store, and what happens when each replica keeps its own count?",
        [f"A tenant with 60,000 tokens a minute sends {RATE} requests a second of {TOKENS} tokens "
         f"({RATE * TOKENS * 60:,} a minute: {RATE * TOKENS * 60 // LIMIT}x its limit) for {SECONDS} s through a "
         f"round-robin load balancer to {REPLICAS} replicas.",
         "Shared: every replica's Admitter reserves in the same store (the gateway's Redis mode). Process-local: "
         "each replica has its own in-memory store, as a limiter that counts per process would.",
         "Every request uses what it reserved. A bucket starts full, so the first minute may admit up to twice "
         "the per-minute rate; the dash-dotted line is that bound."],
        ["deployment", "tokens admitted", "tokens per minute after the second", "times the limit",
         "most tokens in any 60 s"],
        rows,
        [Panel("Tokens admitted (cumulative)", "seconds", "tokens", series)],
        finding=(f"One shared store holds the tenant to {rows[0][3]}x its limit however many replicas serve it; "
                 f"process-local limiters let it through at {rows[1][3]}x, one limit per replica."),
        seed=seed)
