"""A worker dies after reserving: its leases expire and another replica's reconciler settles
them, telling a reservation abandoned before dispatch from work that may still be running."""

from __future__ import annotations

from typing import Callable, cast

from ...budget.limits import tenant_namespace
from ...errors import Refusal
from ...jobs.terms import JobRequest, job_value
from ..result import Panel, Result, Series
from ..sim import Clock, Sim
from ...budget.memory import MemoryStore

CONFIG = """
plans:
  team: {tokens_per_minute: 1000000, requests_per_minute: 10000, max_concurrent_streams: 10,
         max_inflight_tokens: 100000, max_output_tokens: 8192, max_job_tokens: 20000}
tenants: {acme: {plan: team}}
store: {lease_s: 30}
"""
SECONDS, CRASH, TOKENS = 120, 12.0, 3000
NS = tenant_namespace("tw", "acme")


async def _simulate(seed: int, tick: Callable[[float], None]) -> tuple[list[str], dict[str, float], dict[str, list[float]]]:
    """(the requests' names, when each was settled, the series per second): a worker
    reserves three requests, two of them in a job (one dispatched), then dies at CRASH."""
    clock, store = Clock(), MemoryStore()
    worker, survivor = Sim(CONFIG, clock, store, seed), Sim(CONFIG, clock, store, seed)
    meta = await worker.jobs.create("acme", worker.plan("acme"), JobRequest(10_000))
    assert not isinstance(meta, Refusal)   # the plan allows this job
    job = await worker.jobs.resolve("acme", meta.id)
    clock.advance(5)
    requests = {name: await worker.reserve("acme", TOKENS, job=j)
                for name, j in (("job request, not yet dispatched", job), ("job request, dispatched", job),
                                ("request without a job", None))}
    reservations: dict[str, str] = {}
    for name, decision in requests.items():
        assert decision.ticket is not None   # the plan admits all three
        reservations[name] = decision.ticket.reservation_id
    await store.dispatch(NS, reservations["job request, dispatched"], [meta.id], worker.admitter.now_ms())
    settled_at: dict[str, float] = {}
    series: dict[str, list[float]] = {"xs": [], "held": [], "spent": [], "slots": [], "inflight": []}
    t = 5.0
    while t <= SECONDS:
        clock.at(t)
        if t < CRASH:
            await worker.admitter.keeper.tick()       # alive: it renews its leases
        await survivor.admitter.keeper.tick()          # the other replica's lease keeper and reconciler
        [record] = await store.jobs(NS, [meta.id])
        value = job_value(record)
        assert value is not None   # the job outlives the run
        for name, reservation_id in reservations.items():
            gone = await store.record_keys([f"{NS}:r:{reservation_id}"])
            if gone == [None] and name not in settled_at:
                settled_at[name] = t
        series["xs"].append(t)
        series["held"].append(value.held)
        series["spent"].append(value.used - value.held)
        # gauges: counts (policy.Stored, read by their kind)
        series["slots"].append(cast("int | None", await store.value(f"{NS}:g:streams")) or 0)
        series["inflight"].append(cast("int | None", await store.value(f"{NS}:g:inflight")) or 0)
        tick(t / SECONDS)
        t += 1.0
    await worker.close()
    await survivor.close()
    return list(requests), settled_at, series


async def run(seed: int, tick: Callable[[float], None]) -> Result:
    requests, settled_at, series = await _simulate(seed, tick)
    xs, held, spent, slots, inflight = (series[k] for k in ("xs", "held", "spent", "slots", "inflight"))
    dispatched = {"job request, not yet dispatched": "no", "job request, dispatched": "yes",
                  "request without a job": "not recorded"}
    rows = [[name, dispatched[name], CRASH, settled_at.get(name),
             "unused: refunded" if dispatched[name] == "no" else "charged in full",
             0 if dispatched[name] == "no" else (TOKENS if "job" in name else "(no job)")] for name in requests]
    lease_end = CRASH - 1 + 30    # renewed at its last tick before it died
    return Result(
        "crash", "A worker crashes after reserving",
        "When the replica holding reservations dies, when are they settled, and is work that may still be running "
        "at a backend charged while a reservation that never left the gateway is not?",
        ["Two replicas share one budget store; the worker reserves three requests of 3,000 tokens at 5 s: two in "
         "an agent job (one dispatched to a backend, one not yet) and one without a job.",
         f"The worker dies at {CRASH:g} s. Leases last 30 s (store.lease_s) and are renewed at every tick of their "
         "replica's lease keeper while it lives (every second here); the survivor's lease keeper runs every "
         "second and reconciles expired leases (only after its store has answered it for a whole lease).",
         "A job's request is marked dispatched right before it is sent, so the reconciler knows that an unmarked "
         "one never reached a backend; a request outside a job keeps no such mark and is charged in full.",
         "The admission code, lease keeper and reconciler are the gateway's own, on the in-memory store."],
        ["request", "dispatched", "worker died at (s)", "settled at (s)", "settled as", "tokens charged to the job"],
        rows,
        [Panel("The job's tokens", "seconds", "tokens", [Series("reserved (held)", xs, held),
                                                        Series("charged (spent)", xs, spent, "--")],
               [(CRASH, "worker dies"), (lease_end, "leases expire")]),
         Panel("The tenant's gauges", "seconds", "open", [Series("stream slots", xs, slots),
                                                         Series("in-flight tokens / 1000", xs,
                                                                [v / 1000 for v in inflight], "--")],
               [(CRASH, "worker dies"), (lease_end, "leases expire")])],
        finding=(f"Both job requests are settled at {settled_at.get('job request, dispatched')} s, once their leases "
                 "have expired: the dispatched one charged in full (it may have run), the undispatched one refunded; "
                 "every slot and in-flight token comes back."),
        seed=seed)
