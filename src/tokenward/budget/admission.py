"""Admission against budgets: one reservation per request, settled exactly once.

``Admitter`` is what the admission stage calls; it knows nothing of HTTP. A request is
reserved in the tenant's namespace and, when the model or upstream has a configured
capacity, in that capacity's namespace too. The two live in different hash slots, so
they are two atomic script calls sent in one pipelined round trip; a request is admitted
only if both reserved, and a half that reserved alone is voided at once. Neither half can
over-admit its own budget; a crash between the two leaves leases that the reconciler
settles. Settle is again one round trip for both halves.

Failure policy: the shared store sits behind a breaker with a short timeout. When it is
unreachable, a tier configured to fail open is admitted against a process-local memory
store holding ``store.fail_open_fraction`` of every limit; every other tier is refused
with ``budget_store_unavailable``. When the store answers again, the breaker closes by
itself and settles that had to wait are finished by the lease keeper.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import time
from typing import Any, Callable, Coroutine

from ..config.key_limits import KeyLimits
from ..config.schema import Config, PlanConfig
from ..errors import Reason
from . import policy
from .guard import Breaker
from .leases import Guarded, LeaseKeeper, Ticket
from .limits import JOB_LIMITS, REASONS, Budgets, TenantBudget, tenant_namespace
from .memory import MemoryStore
from .policy import Outcome
from .reconcile import Reconciler
from .store import BudgetStore, ReserveCall, SettleCall, StoreUnavailable

log = logging.getLogger("tokenward.budget")


class Decision:
    __slots__ = ("ticket", "reason", "limit", "retry_after", "terminal", "headers", "shadow", "limits", "local")

    def __init__(self, ticket: Ticket | None = None, reason: Reason | None = None, limit: str | None = None,
                 retry_after: int | None = None, terminal: bool = False,
                 headers: list[tuple[bytes, bytes]] | None = None, shadow: tuple[str, ...] = (),
                 limits: tuple[str, ...] = (), local: bool = False) -> None:
        self.ticket = ticket
        self.reason = reason
        self.limit = limit
        self.retry_after = retry_after
        self.terminal = terminal
        self.headers = headers or []
        self.shadow = shadow
        self.limits = limits
        self.local = local

    @property
    def admitted(self) -> bool:
        return self.ticket is not None


UNAVAILABLE = Decision(reason=Reason.budget_store_unavailable)


class Admitter:
    def __init__(self, config: Config, store: BudgetStore, clock: Callable[[], float] = time.time,
                 breaker: Breaker | None = None) -> None:
        cfg = config.store
        self.config = config
        self._clock = clock
        self.lease_ms = int(cfg.lease_s * 1000)
        shared_is_local = isinstance(store, MemoryStore)
        self.shared = Guarded(store, None if shared_is_local else (breaker or Breaker(failures=cfg.breaker_failures)))
        self.budgets = Budgets(config)
        self.all_open = cfg.failure_policy == "open"
        self.open_tiers = frozenset(cfg.fail_open_tiers)
        self.local = Guarded(MemoryStore(), None)
        self.local_budgets = Budgets(config, cfg.fail_open_fraction)
        self._seen: set[str] = set()
        self._configured = frozenset(config.tenants)
        reconcilers = [(self.shared, Reconciler(store, self._namespaces, clock))]
        if not shared_is_local:
            reconcilers.append((self.local, Reconciler(self.local.store, self._namespaces, clock)))
        self.keeper = LeaseKeeper(cfg.lease_s, clock, reconcilers)
        self._background: set[asyncio.Task[None]] = set()
        self._id_prefix = os.urandom(6).hex()
        self._ids = itertools.count(1)
        self._settles: list[SettleCall] = []     # for the shared store, sent at the end of a loop pass

    def _namespaces(self) -> list[str]:
        prefix = self.config.store.key_prefix
        known = {tenant_namespace(prefix, t) for t in self.config.tenants} | self._seen
        return sorted(known) + self.budgets.capacity_namespaces()

    def now_ms(self) -> int:
        return int(self._clock() * 1000)

    async def reserve(self, tenant: str, tier: str, plan: PlanConfig, key_id: str | None, model: str | None,
                      upstream: str | None, tokens: int, cost: int, job: Any = None,
                      key_limits: KeyLimits | None = None) -> Decision:
        """``job``: the request's agent job (jobs.terms.JobBudgets), reserved in the same step;
        ``key_limits``: the key's own limits, checks of the same atomic call as the plan's."""
        now_ms = self.now_ms()
        rid = self._id_prefix + "%x" % next(self._ids)
        guarded, budgets = self.shared, self.budgets
        parts, calls = self._calls(budgets, tenant, plan, key_id, key_limits, model, upstream, tokens, cost, rid,
                                   now_ms, job)
        outcomes = None
        if guarded.now is not None:
            outcomes = list(map(guarded.now.reserve_now, calls))
        elif guarded.allow():
            try:
                # awaited here, not through guarded.call: one coroutine frame less per request
                outcomes = await guarded.store.reserve(calls)
            except StoreUnavailable as exc:
                guarded.failed(exc)
                # It may have reserved before the answer was lost: void it once the store is back.
                self.keeper.retry_later(guarded, [_void(call, now_ms) for call in calls])
            except BaseException:
                guarded.abandoned()
                # Cancelled (the client left) with the reservation perhaps made: void it now,
                # outside this request's task, rather than hold it until its lease ends.
                self._in_background(self._settle_calls(guarded, [_void(call, now_ms) for call in calls]))
                raise
            else:
                guarded.succeeded()
        if outcomes is None:
            if not (self.all_open or tier in self.open_tiers) or job is not None:
                return UNAVAILABLE   # (a job's counters live only in the shared store)
            guarded, budgets = self.local, self.local_budgets
            parts, calls = self._calls(budgets, tenant, plan, key_id, key_limits, model, upstream, tokens, cost, rid,
                                       now_ms)
            assert guarded.now is not None   # the local store is the memory store: it answers at once
            outcomes = list(map(guarded.now.reserve_now, calls))
        decision, voids = self._decide(guarded, rid, parts, calls, outcomes, now_ms)
        if voids:
            await self._settle_calls(guarded, voids)
        return decision

    def reserve_now(self, tenant: str, tier: str, plan: PlanConfig, key_id: str | None, model: str | None,
                    upstream: str | None, tokens: int, cost: int, job: Any = None,
                    key_limits: KeyLimits | None = None) -> Decision | None:
        """``reserve``'s decision where the shared store answers without waiting (the
        memory store): the same atomic step, with no coroutine. None: call ``reserve``."""
        store_now = self.shared.now
        if store_now is None:
            return None
        now_ms = self.now_ms()
        rid = self._id_prefix + "%x" % next(self._ids)
        parts, calls = self._calls(self.budgets, tenant, plan, key_id, key_limits, model, upstream, tokens, cost, rid,
                                   now_ms, job)
        decision, voids = self._decide(self.shared, rid, parts, calls, list(map(store_now.reserve_now, calls)),
                                       now_ms)
        for void in voids:   # a half refused: the other half is voided in the same step
            store_now.settle_now(void)
        return decision

    def _calls(self, budgets: Budgets, tenant: str, plan: PlanConfig, key_id: str | None,
               key_limits: KeyLimits | None, model: str | None, upstream: str | None, tokens: int, cost: int,
               rid: str, now_ms: int, job: Any = None) -> tuple[tuple[TenantBudget, ...], list[ReserveCall]]:
        """The reservation's calls: the tenant's namespace (the plan's limits and the key's
        own), and the model's capacity when it has one."""
        lease_until = now_ms + self.lease_ms
        budget = budgets.tenant(tenant, plan, key_id, now_ms, key_limits)
        if job is not None:
            budget = job.joined(budget)
        if tenant not in self._configured and len(self._seen) < 10_000:
            self._seen.add(budget.layout.namespace)
        call = ReserveCall(budget.layout, rid, now_ms, lease_until, budget.amounts(tokens, cost))
        capacity = budgets.capacity(tenant, model, upstream, plan.shadow) if budgets.has_capacity else None
        if capacity is None:
            return (budget,), [call]
        return (budget, capacity), [call, ReserveCall(capacity.layout, rid, now_ms, lease_until,
                                                      capacity.amounts(tokens, cost))]

    def _decide(self, guarded: Guarded, rid: str, parts: tuple[TenantBudget, ...], calls: list[ReserveCall],
                outcomes: list[Outcome], now_ms: int) -> tuple[Decision, list[SettleCall]]:
        """The decision, and the halves to void when another half refused."""
        local = guarded is self.local
        first = outcomes[0]
        if len(parts) == 1:
            names = parts[0].names
            if first.ok:
                layout = parts[0].layout
                ticket = Ticket(rid, guarded.store, ((layout, layout.record_key(rid)),))
                self.keeper.hold(ticket)
                return Decision(ticket, headers=parts[0].headers(first.levels),
                                shadow=tuple(names[i] for i in first.shadow) if first.shadow else (),
                                limits=names, local=local), []
        else:
            names = tuple(n for budget in parts for n in budget.names)
        shadow: tuple[str, ...] = ()
        refused = None
        for budget, o in zip(parts, outcomes):
            if o.shadow:
                shadow += tuple(budget.names[i] for i in o.shadow)
            if not o.ok and refused is None:
                refused = (budget, o)
        if refused is None:
            ticket = Ticket(rid, guarded.store, tuple((b.layout, b.layout.record_key(rid)) for b in parts))
            self.keeper.hold(ticket)
            return Decision(ticket, headers=parts[0].headers(first.levels), shadow=shadow,
                            limits=names, local=local), []
        voids = [_void(call, now_ms) for call, o in zip(calls, outcomes) if o.ok]
        budget, outcome = refused
        limit = budget.names[outcome.failed]
        reason = REASONS[limit]
        retry = policy.retry_after_s(outcome.retry_ms) if reason in (Reason.token_budget, Reason.rate_limited) else None
        terminal = (reason is Reason.spend_cap or (reason is Reason.token_budget and retry is None)
                    or limit in JOB_LIMITS)
        # A refusal carries the x-ratelimit-* headers too, as OpenAI's 429s do: the tenant's
        # levels as they stand (before the call, since nothing was taken).
        tenant_levels = outcome.levels if budget is parts[0] else first.levels
        return Decision(reason=reason, limit=limit, retry_after=retry, terminal=terminal, shadow=shadow,
                        limits=names, local=local, headers=parts[0].headers(tenant_levels)), voids

    async def settle(self, ticket: Ticket, tokens: int, cost: int, mode: str) -> bool:
        """Settle a held reservation once and wait for the store; False if already settled."""
        calls = self._claim(ticket, tokens, cost, mode)
        if calls is None:
            return False
        if calls:
            await self._settle_calls(self.shared, calls)
        return True

    def settle_soon(self, ticket: Ticket, tokens: int, cost: int, mode: str) -> bool:
        """``settle`` without waiting: the store call joins the other settles of this pass of
        the event loop, and one background task sends them all in one round trip (a failure
        is retried by the lease keeper, as for ``settle``). The response has gone out by
        now; what the request still held is given back a loop pass later."""
        calls = self._claim(ticket, tokens, cost, mode)
        if calls is None:
            return False
        if calls:
            if not self._settles:
                asyncio.get_running_loop().call_soon(self._send_settles)
            self._settles += calls
        return True

    def _claim(self, ticket: Ticket, tokens: int, cost: int, mode: str) -> list[SettleCall] | None:
        """Take a held ticket once (None if it was taken already). A store that answers
        without awaiting is settled here; the calls left are for the shared store."""
        if ticket.settled:
            return None
        ticket.settled = True
        self.keeper.release(ticket)
        now_ms = self.now_ms()
        rid = ticket.reservation_id
        calls = [SettleCall(layout.leases_key, rid, record_key, layout.keys, now_ms, tokens, cost, mode, layout)
                 for layout, record_key in ticket.parts]
        guarded = self.local if ticket.store is self.local.store else self.shared
        store_now = guarded.now
        if store_now is None:
            return calls
        for call in calls:
            store_now.settle_now(call)
        return []

    def _send_settles(self) -> None:
        calls, self._settles = self._settles, []
        if calls:
            self._in_background(self._settle_calls(self.shared, calls))

    async def _settle_calls(self, guarded: Guarded, calls: list[SettleCall]) -> None:
        if not guarded.allow():
            self.keeper.retry_later(guarded, calls)
            return
        try:
            await guarded.call(guarded.store.settle, calls)
        except StoreUnavailable:
            self.keeper.retry_later(guarded, calls)

    def _in_background(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def warm(self) -> None:
        """Get the shared store ready before traffic (a cluster recognised, scripts loaded).
        A store that does not answer yet is not a reason to refuse to start: requests fail
        closed until it does, and it recovers alone."""
        try:
            await self.shared.store.warm()
        except StoreUnavailable as exc:
            log.warning("budget store not reachable at start-up (%s); requests fail closed until it is", exc)

    @property
    def settling(self) -> bool:
        """Settles or voids not finished yet: held, waiting for the store, or in flight
        (a batch of settles or a void running in the background, a retry being answered)."""
        keeper = self.keeper
        return bool(self._background or keeper.open or keeper.pending or keeper.retrying)

    async def close(self) -> None:
        self._send_settles()
        if self._background:
            await asyncio.wait(self._background, timeout=self.config.store.timeout_ms / 1000 + 1)
        await self.keeper.close()
        await self.shared.store.close()


def _void(call: ReserveCall, now_ms: int) -> SettleCall:
    layout = call.layout
    return SettleCall(layout.leases_key, call.reservation_id, layout.record_key(call.reservation_id), layout.keys,
                      now_ms, 0, 0, policy.VOID, layout)
