"""Fan-out with retries: a parent call with four child tasks of up to three attempts of 20
units each, against a 100-unit job; without job budgets, with them, and a client that
tries to escape its job's bound by making new jobs (or making up ids)."""

from __future__ import annotations

from functools import partial
from typing import Any, Callable

from ...errors import Reason, Refusal
from ...jobs.terms import JobBudgets, JobRequest, job_value
from ..result import Panel, Result, Series
from ..sim import Sim
from .events import Action, Events, Tick, cumulative, part_of

CONFIG = """
plans:
  team: {tokens_per_minute: 1000000, requests_per_minute: 100000, max_concurrent_streams: 0,
         max_output_tokens: 4096, max_job_tokens: 100, max_open_jobs: 8, jobs_per_minute: 6}
tenants: {acme: {plan: team}}
"""
PARENTS, EVERY, TASKS, ATTEMPTS, UNITS, BUDGET, SUCCESS, RUN_S = 40, 15.0, 4, 3, 20, 100, 0.3, 4.0
SECONDS = PARENTS * EVERY + 60
VARIANTS = ("no job budget", "job budget 100", "client makes new jobs", "client makes up job ids")


class Parent:
    def __init__(self) -> None:
        self.job: JobBudgets | None = None   # the job its attempts run in
        self.running = TASKS       # tasks not over yet: the last one to end closes the job


class _Variant:
    """One variant's run: parents arrive every EVERY seconds, each starts its tasks; an
    attempt reserves UNITS (in the parent's job when there is one), runs RUN_S, and either
    finishes its task or, the tool having failed, is retried."""

    def __init__(self, seed: int, variant: str, outcomes: list[list[list[bool]]]) -> None:
        self.sim = Sim(CONFIG, seed=seed)
        self.events = Events(self.sim.clock)
        self.variant = variant
        self.outcomes = outcomes
        self.out: dict[str, Any] = {"units": [], "done": [], "attempts": 0, "denied": 0, "terminal": 0, "retryable": 0,
                          "jobs": 0, "peak": 0}

    async def run(self, tick: Tick) -> dict[str, Any]:
        for p in range(PARENTS):
            self.events.at(p * EVERY, self._start(p))
        await self.events.run(SECONDS, tick)
        await self.sim.close()
        return self.out

    def _start(self, p: int) -> Action:
        async def go() -> None:
            parent = Parent()
            if self.variant in ("job budget 100", "client makes new jobs") and not await self._new_job(parent):
                return
            for t in range(TASKS):
                self.events.after(0.1 * t, partial(self._attempt, p, t, parent, 0))
        return go

    async def _new_job(self, parent: Parent) -> bool:
        sim, out = self.sim, self.out
        made = await sim.jobs.create("acme", sim.plan("acme"), JobRequest(BUDGET))
        if isinstance(made, Refusal):
            out["retryable" if made.reason in (Reason.rate_limited, Reason.concurrency_limit) else "terminal"] += 1
            return False
        out["jobs"] += 1
        job = await sim.jobs.resolve("acme", made.id)
        assert not isinstance(job, Refusal)   # made a moment ago, in the same store
        parent.job = job
        return True

    async def _task_over(self, parent: Parent) -> None:
        parent.running -= 1
        if parent.running == 0 and parent.job is not None:
            await self.sim.jobs.cancel("acme", parent.job.meta.id)   # the call is over: its job goes

    async def _attempt(self, p: int, t: int, parent: Parent, n: int) -> None:
        sim, out, events = self.sim, self.out, self.events
        job: JobBudgets | Refusal | None = parent.job
        if self.variant == "client makes up job ids":
            job = await sim.jobs.resolve("acme", f"job_{p:013d}{t:013d}")   # never issued: job_not_found
        decision = await sim.reserve("acme", UNITS, job=job) if not isinstance(job, Refusal) else None
        if decision is None or decision.ticket is None:
            out["denied"] += UNITS
            out["terminal"] += 1
            if self.variant == "client makes new jobs" and decision is not None and await self._new_job(parent):
                events.after(0.5, lambda: self._attempt(p, t, parent, n))   # and carries on in the fresh job
                return
            await self._task_over(parent)
            return
        out["attempts"] += 1
        out["units"].append((sim.clock.elapsed, UNITS))
        if parent.job is not None:
            [rec] = await sim.jobs.records("acme", [parent.job.meta.id])
            value = job_value(rec)
            assert value is not None   # a job's record stays after it ends
            out["peak"] = max(out["peak"], value.used)

        async def done() -> None:
            await sim.settle(decision, UNITS)
            if self.outcomes[p][t][n]:
                out["done"].append((sim.clock.elapsed, 1))
            elif n + 1 < ATTEMPTS:
                events.after(0.5, lambda: self._attempt(p, t, parent, n + 1))   # the tool failed: the agent retries
                return
            await self._task_over(parent)
        events.after(RUN_S, done)


async def _variant(seed: int, variant: str, outcomes: list[list[list[bool]]], tick: Tick) -> dict[str, Any]:
    return await _Variant(seed, variant, outcomes).run(tick)


async def run(seed: int, tick: Callable[[float], None]) -> Result:
    import random

    rng = random.Random(seed)
    outcomes = [[[rng.random() < SUCCESS for _ in range(ATTEMPTS)] for _ in range(TASKS)] for _ in range(PARENTS)]
    rows, spent, finished = [], [], []
    for n, variant in enumerate(VARIANTS):
        out = await _variant(seed, variant, outcomes, part_of(tick, n, len(VARIANTS)))
        units = sum(u for _, u in out["units"])
        done = len(out["done"])
        refusals = out["terminal"] + out["retryable"]
        rows.append([variant, units, done, round(units / done, 1) if done else None,
                     round(out["attempts"] / done, 2) if done else None, out["denied"],
                     round(out["terminal"] / refusals, 3) if refusals else None, out["jobs"], out["peak"]])
        style = ["-", "--", ":", "-."][n]
        spent.append(Series(variant, *cumulative([t for t, _ in out["units"]], [u for _, u in out["units"]],
                                                  5.0, SECONDS), style))
        finished.append(Series(variant, *cumulative([t for t, _ in out["done"]], [1] * done, 5.0, SECONDS), style))
    return Result(
        "fan-out", "Fan-out with retries against a job budget",
        "When one call fans out into retrying child tasks, what does the job budget bound, what does it cost in "
        "finished tasks, and can a client escape the bound by making new jobs?",
        [f"{PARENTS} parent calls, one every {EVERY:g} s; each starts {TASKS} child tasks; each task makes up to "
         f"{ATTEMPTS} attempts of {UNITS} units ({TASKS} x {ATTEMPTS} x {UNITS} = {TASKS * ATTEMPTS * UNITS} "
         f"planned behind one call); an attempt runs {RUN_S:g} s and succeeds with probability {SUCCESS} (seeded: "
         "the same outcomes in every variant), else the task retries.",
         f"With job budgets each parent's attempts run in one job of {BUDGET} units: a request that does not fit "
         "is refused terminally (job_budget_exhausted) and the job takes no more.",
         "'client makes new jobs': on that refusal the client creates a fresh job and carries on; creation is "
         "bounded by the plan (jobs_per_minute 6, max_open_jobs 8, max_job_tokens 100). 'client makes up job "
         "ids': every id it invents is job_not_found.",
         "Cost per finished task = units admitted / tasks finished; retry amplification = attempts admitted / "
         "tasks finished."],
        ["variant", "units admitted", "tasks finished", "cost per finished task", "retry amplification",
         "denied work (units)", "terminal share of refusals", "jobs created", "most units in one job"],
        rows,
        [Panel("Units admitted (cumulative)", "seconds", "units", spent),
         Panel("Tasks finished (cumulative)", "seconds", "tasks", finished)],
        finding=(f"Without budgets the fan-out spends {rows[0][1]} units; with a {BUDGET}-unit job per call "
                 f"{rows[1][1]}, and no job ever holds more than {rows[1][8]}. Making new jobs buys only what "
                 f"jobs_per_minute allows ({rows[2][7]} jobs, {rows[2][1]} units); made-up ids buy nothing."),
        seed=seed)
