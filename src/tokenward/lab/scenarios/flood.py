"""The max_tokens flood: what a 400,000 tokens-per-minute plan admits when every request
declares the plan's largest output, against the same traffic declaring what it needs."""

from __future__ import annotations

from typing import Any, Callable

from ..result import Panel, Result, Series
from ..sim import Sim
from .events import Events, Tick, part_of, per_window

CONFIG = """
plans:
  team: {tokens_per_minute: 400000, max_output_tokens: 8192, requests_per_minute: 600,
         max_concurrent_streams: 0}
tenants: {acme: {plan: team}}
"""
SECONDS, RATE, PROMPT, DURATION = 180, 10, 500, 6.0
VARIANTS = (("max_tokens 8192 (the flood)", 8192, True), ("max_tokens 512 (what it needs)", 512, True),
            ("max_tokens 8192, usage unknown", 8192, False))


async def _variant(seed: int, max_tokens: int, usage_known: bool, tick: Tick) -> dict[str, Any]:
    sim = Sim(CONFIG, seed=seed)
    events = Events(sim.clock)
    out: dict[str, Any] = {"admitted": [], "refused": [], "used": [], "denied": 0, "retryable": 0, "terminal": 0}

    async def arrive() -> None:
        need = PROMPT + max_tokens
        decision = await sim.reserve("acme", need)
        now = sim.clock.elapsed
        if decision.ticket is None:
            out["refused"].append(now)
            out["denied"] += need
            out["terminal" if decision.terminal else "retryable"] += 1
            return
        out["admitted"].append(now)
        used = PROMPT + sim.rng.randint(100, 500)     # what the answer really takes

        async def done() -> None:
            await sim.settle(decision, used if usage_known else None)
            out["used"].append((sim.clock.elapsed, used))
        events.after(DURATION, done)

    for i in range(SECONDS * RATE):
        events.at(i / RATE, arrive)
    await events.run(SECONDS + DURATION, tick)
    await sim.close()
    return out


async def run(seed: int, tick: Callable[[float], None]) -> Result:
    rows, series = [], []
    for n, (label, max_tokens, known) in enumerate(VARIANTS):
        out = await _variant(seed, max_tokens, known, part_of(tick, n, len(VARIANTS)))
        admitted, refused = len(out["admitted"]), len(out["refused"])
        used = sum(u for _, u in out["used"])
        minutes = SECONDS / 60
        last = sum(1 for t in out["admitted"] if t >= SECONDS - 60)
        rows.append([label, PROMPT + max_tokens, round(admitted / minutes, 1), last, round(refused / minutes, 1),
                     round(refused / (admitted + refused), 3), round(used / minutes),
                     round(admitted * (PROMPT + max_tokens) / max(used, 1), 2), out["denied"],
                     out["terminal"], out["retryable"]])
        xs, ys = per_window(out["admitted"], [1.0] * admitted, 10.0, SECONDS)
        series.append(Series(label, xs, ys, ["-", "--", ":"][n]))
    return Result(
        "flood", "The max_tokens flood",
        "How many requests per minute does a 400,000 tokens-per-minute plan admit when each one declares the "
        "plan's largest output, and what does honest declaration change?",
        [f"One tenant on the team plan: 400,000 tokens per minute, max_output_tokens 8192, 600 requests per minute.",
         f"{RATE} requests a second for {SECONDS} s, each with a {PROMPT}-token prompt; each answer really uses "
         "100 to 500 tokens (seeded) and takes 6 s.",
         "Each request reserves its worst case (prompt + max_tokens) and settles on the usage the backend reports: "
         "the difference comes back when it ends. 'usage unknown': the backend reports none, so the whole "
         "reservation stays charged.",
         "The same arrivals and answer lengths in every variant; the admission code is the gateway's own Admitter "
         "on the in-memory store, the clock simulated."],
        ["variant", "reserved per request", "admitted per min", "admitted in the last min", "refused per min",
         "refused share",
         "tokens used per min", "reserved / used", "denied work (tokens)", "terminal refusals", "retryable refusals"],
        rows,
        [Panel("Admissions per minute (10 s windows)", "seconds", "requests admitted per minute", series)],
        finding=(f"Declaring 8192 output tokens holds admissions to {rows[0][3]} in the last minute against "
                 f"{rows[1][3]} for the same traffic declaring 512 (the request limit), though both use about the same "
                 f"tokens: the refunds of finished answers are what keep the flood going. With no usage reported "
                 f"nothing comes back, and the plan admits {rows[2][3]} a minute once its first burst is spent: "
                 f"400,000 / {PROMPT + 8192} = {400000 // (PROMPT + 8192)}."),
        seed=seed)
