"""A burst at the edge of a window: the gateway's token bucket beside a fixed-window counter."""

from __future__ import annotations

from typing import Callable

from ..result import Panel, Result, Series
from ..sim import Sim
from .events import Events, cumulative

CONFIG = """
plans:
  team: {tokens_per_minute: 60000, requests_per_minute: 100000, max_concurrent_streams: 0, max_output_tokens: 4096}
tenants: {acme: {plan: team}}
"""
LIMIT, TOKENS, BURST_FROM, BURST_TO, EVERY, SECONDS = 60_000, 1000, 59.0, 61.0, 0.015, 120


class FixedWindow:
    """The counterexample (not the gateway's code): a count per calendar minute, reset at
    each minute's start."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.window = -1
        self.used = 0

    def admit(self, now: float, amount: int) -> bool:
        window = int(now // 60)
        if window != self.window:
            self.window, self.used = window, 0
        if self.used + amount > self.limit:
            return False
        self.used += amount
        return True


def _max_in(times: list[float], window: float) -> int:
    best, lo = 0, 0
    for hi, t in enumerate(times):
        while times[lo] <= t - window:
            lo += 1
        best = max(best, hi - lo + 1)
    return best * TOKENS


async def run(seed: int, tick: Callable[[float], None]) -> Result:
    sim = Sim(CONFIG, seed=seed)
    events = Events(sim.clock)
    fixed = FixedWindow(LIMIT)
    bucket_times: list[float] = []
    fixed_times: list[float] = []

    async def arrive() -> None:
        now = sim.clock.elapsed
        decision = await sim.reserve("acme", TOKENS)
        if decision.ticket is not None:
            bucket_times.append(now)
            await sim.settle(decision, TOKENS)
        if fixed.admit(now, TOKENS):
            fixed_times.append(now)

    t = BURST_FROM
    while t < BURST_TO:
        events.at(t, arrive)
        t = round(t + EVERY, 6)
    await events.run(SECONDS, tick)
    await sim.close()
    rows = [[name, len(times) * TOKENS, _max_in(times, 60), _max_in(times, 10)]
            for name, times in (("token bucket (the gateway)", bucket_times), ("fixed one-minute window", fixed_times))]
    series = [Series(name, *cumulative(times, [TOKENS] * len(times), 0.5, SECONDS), style)
              for (name, times), style in ((("token bucket (the gateway)", bucket_times), "-"),
                                           (("fixed one-minute window", fixed_times), "--"))]
    return Result(
        "window-boundary", "A burst at a window's edge",
        "A client that knows where a counting window starts and ends bursts across its boundary: how much gets "
        "through in a short time with the gateway's token bucket, and with a fixed one-minute window?",
        [f"A limit of {LIMIT:,} tokens a minute. After a quiet start the client sends a {TOKENS}-token request "
         f"every {EVERY:g} s from {BURST_FROM:g} s to {BURST_TO:g} s, across the minute boundary at 60 s.",
         "Token bucket: the gateway's own Admitter (capacity 60,000, refilled at 1,000 a second, full at rest). "
         "Fixed window: a counter per calendar minute, reset at each minute's start (a common design, written "
         "here only as the comparison).",
         "Every request uses what it reserved."],
        ["limiter", "tokens admitted", "most in any 60 s", "most in any 10 s"],
        rows,
        [Panel("Tokens admitted (cumulative)", "seconds", "tokens", series, [(60.0, "window boundary")])],
        finding=(f"The fixed window lets {rows[1][3]:,} tokens through within 10 s, twice its per-minute limit, "
                 f"half on each side of the boundary; the token bucket admits at most {rows[0][3]:,} in any 10 s and "
                 f"{rows[0][2]:,} in any minute: its full bucket, then only what refills (1,000 a second)."),
        seed=seed)
