"""The lab's harness: the real ``Admitter`` on a ``MemoryStore``, with a clock the scenario moves.

Nothing here decides anything: a scenario asks the admission code through the same calls
the admission stage makes (``Admitter.reserve`` with the request's worst case, then a
settle on what it used) and reads the answers. Time is the ``Clock``'s, so a ten-minute
scenario runs in milliseconds and twice the same.
"""

from __future__ import annotations

import random
from typing import Any, cast

from ..budget import policy
from ..budget.admission import Admitter, Decision
from ..budget.memory import MemoryStore
from ..config import parse_config
from ..config.loader import effective_plan
from ..config.schema import PlanConfig
from ..jobs.book import JobBook

START = 1_700_000_040.0   # a fixed epoch (UTC 22:14:00): every run starts at the same instant


class Clock:
    """Seconds since the epoch, moved only by the scenario."""

    def __init__(self, start: float = START) -> None:
        self.now = start
        self.start = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def at(self, elapsed: float) -> None:
        self.now = self.start + elapsed

    @property
    def elapsed(self) -> float:
        return round(self.now - self.start, 6)


class Sim:
    """One gateway replica's admission, as the admission stage drives it."""

    def __init__(self, config_text: str, clock: Clock | None = None, store: MemoryStore | None = None,
                 seed: int = 0) -> None:
        self.config = parse_config(config_text, environ={})
        self.clock = clock or Clock()
        self.store = store or MemoryStore()
        self.admitter = Admitter(self.config, self.store, clock=self.clock)
        self.jobs = JobBook(self.admitter)
        self.rng = random.Random(seed)

    def plan(self, tenant: str) -> PlanConfig:
        return effective_plan(self.config, tenant)

    async def reserve(self, tenant: str, tokens: int, model: str | None = None, job: Any = None,
                      key_id: str = "key") -> Decision:
        upstream = self.config.models[model].upstream if model is not None else None
        return await self.admitter.reserve(tenant, self.config.tenants[tenant].plan, self.plan(tenant), key_id,
                                           model, upstream, tokens, 0, job)

    async def settle(self, decision: Decision, used: int | None) -> None:
        """The request ended: known usage settles; unknown (None) is charged in full."""
        if decision.ticket is None:
            return
        mode = policy.SETTLE if used is not None else policy.FULL
        await self.admitter.settle(decision.ticket, used or 0, 0, mode)

    async def tokens_left(self, tenant: str) -> int:
        """The tenant's token bucket as it stands now (what a request could take)."""
        budget = self.admitter.budgets.tenant(tenant, self.plan(tenant), None, self.admitter.now_ms())
        at = budget.tokens_at
        check = budget.layout.checks[at]
        value = await self.store.value(check.key)   # a token bucket: (level, at) or None
        assert value is None or isinstance(value, tuple)
        level = policy.refill(cast("policy.BucketState | None", value), check.p1, check.p2, self.admitter.now_ms())[0]
        return level // policy.SCALE

    async def close(self) -> None:
        await self.admitter.keeper.close()


def percentile(values: list[float], p: float) -> float:
    """The p-th percentile (nearest rank) of the values; 0 for none."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, -(-int(p * len(ordered) * 1000) // 100_000))
    return ordered[min(rank, len(ordered)) - 1]
