"""Control: the enforcement actions and operator controls in force, where identity and
entitlement have just decided who the caller is and what the plan allows.

Read from a replicated snapshot (control/view.py: two dict lookups when nothing applies):

- a capability an operator paused for the tenant (``all``, ``model:NAME``, ``tools``,
  ``streaming``): ``capability_paused``;
- an abuse action on the key (or on its whole tenant): ``suspend`` -> ``key_suspended``;
  ``restrict`` -> requests naming tools refused (``key_restricted``) and the output clamped
  (a narrower plan for validation to clamp against); ``reduce_concurrency`` -> one of the
  key's few slots in the shared store, or ``key_concurrency_reduced``.

A refusal names the action, never the signal behind it. Every request admitted here is
registered as open for its tenant until the runner releases it, so an operator can end a
tenant's streams on every replica (control/streams.py).
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Callable

from ..budget.store import StoreUnavailable
from ..config.schema import Config
from ..control.metrics import EnforcementMetrics
from ..control.runtime import ControlRuntime
from ..errors import Reason, Refusal
from ..pipeline.results import Entitlement
from ..pipeline.stage import BaseStage, Deciding, Releasing

if TYPE_CHECKING:
    from ..control.view import Enforced, TenantControls
    from ..pipeline.context import RequestContext
    from ..pipeline.results import Principal
    from ..pipeline.stage import Exit
    from ..reconcile.usage import Usage


STORE_DOWN = Refusal(Reason.budget_store_unavailable, "the budget store is unavailable; try again shortly",
                    headers=((b"retry-after", b"1"),))




def _retry(left_s: float) -> tuple[tuple[bytes, bytes], ...]:
    return () if left_s == math.inf else ((b"retry-after", b"%d" % max(1, math.ceil(left_s))),)


def _paused(what: str, until: float, now: float) -> Refusal:
    end = "until resumed" if until == math.inf else f"for another {max(1, math.ceil(until - now))}s"
    return Refusal(Reason.capability_paused, f"{what} is paused for your organization by the operator {end}",
                   headers=_retry(until - now))


def _pause_refusal(ctx: RequestContext, pauses: dict[str, float], now: float) -> Refusal | None:
    until = pauses.get("all", 0.0)
    if until > now:
        return _paused("the API", until, now)
    peek = ctx.parsed.peek()
    if peek is not None and peek.model.__class__ is str:
        until = pauses.get("model:" + peek.model, 0.0)
        if until > now:
            return _paused(f"model {peek.model}", until, now)
    until = pauses.get("tools", 0.0)
    if until > now and peek is not None and (peek.tools or peek.functions):
        return _paused("tool use", until, now)
    until = pauses.get("streaming", 0.0)
    if until > now and peek is not None and peek.stream is True:
        return _paused("streaming", until, now)
    return None


class ControlStage(BaseStage):
    name = "control"
    needs = frozenset({"principal"})
    writes = frozenset({"entitlement"})
    holds = True

    def __init__(self, runtime: ControlRuntime, clock: Callable[[], float] = time.time,
                 lease_s: float = 660.0, enforcement: EnforcementMetrics | None = None) -> None:
        self.runtime = runtime
        # the gateway's (assemble/gateway.py): reserved against settled tokens per tenant
        self.enforcement = enforcement if enforcement is not None else EnforcementMetrics()
        self.open = runtime.open
        self._clock = clock
        self._lease_ms = int(lease_s * 1000)
        self._narrowed: dict[tuple[int, int], Entitlement] = {}

    def decide(self, ctx: RequestContext) -> Deciding:
        principal = ctx.principal
        if principal is None:
            return None
        view = self.runtime.view
        if view.keys or view.tenants:
            tenant = view.tenants.get(principal.tenant)
            enforced = view.keys.get(principal.key_id)
            if tenant is not None or enforced is not None:
                return self._admit_enforced(ctx, principal, tenant, enforced)
        self.open.add(principal.tenant, ctx, None)
        return None

    async def _admit_enforced(self, ctx: RequestContext, principal: Principal, tenant: TenantControls | None,
                              enforced: Enforced | None) -> Refusal | None:
        """A caller under an enforcement action or an operator's control: it may wait for
        the store's count of the key's open requests."""
        decided = await self._enforce(ctx, principal, tenant, enforced)
        if type(decided) is Refusal:
            return decided
        self.open.add(principal.tenant, ctx, decided)
        return None

    async def _enforce(self, ctx: RequestContext, principal: Principal, tenant: TenantControls | None,
                       enforced: Enforced | None) -> Refusal | str | None:
        now = self._clock()
        if tenant is not None:
            if tenant.pauses:
                refusal = _pause_refusal(ctx, tenant.pauses, now)
                if refusal is not None:
                    return refusal
            if tenant.enforced is not None:
                enforced = tenant.enforced.merged(enforced)
        if enforced is None:
            return None
        if enforced.suspend_until > now:
            left = enforced.suspend_until - now
            end = "until reinstated" if left == math.inf else f"for another {max(1, math.ceil(left))}s"
            return Refusal(Reason.key_suspended, f"API key is suspended {end}", headers=_retry(left))
        if enforced.restrict_until > now:
            refusal = self._restrict(ctx, enforced, enforced.restrict_until - now)
            if refusal is not None:
                return refusal
        if enforced.concurrency is not None and enforced.concurrency_until > now:
            limit = enforced.concurrency
            try:
                taken = await self.runtime.store.take_slot(principal.key_id, ctx.request_id, limit,
                                                           int(now * 1000), self._lease_ms)
            except StoreUnavailable:   # the key's slots cannot be counted: closed, as the budget fails
                return STORE_DOWN
            if not taken:
                return Refusal(Reason.key_concurrency_reduced,
                               f"this API key may have {limit} open request(s) at a time for now; "
                               "retry when one finishes", headers=((b"retry-after", b"1"),))
            return ctx.request_id
        return None

    def _restrict(self, ctx: RequestContext, enforced: Enforced, left_s: float) -> Refusal | None:
        peek = ctx.parsed.peek()
        if enforced.no_tools and peek is not None and (peek.tools or peek.functions):
            return Refusal(Reason.key_restricted, "this API key is restricted: requests with tools are refused "
                           "for now", param="tools", headers=_retry(left_s))
        cap = enforced.max_output
        entitlement = ctx.entitlement
        if cap is not None and entitlement is not None and entitlement.plan.max_output_tokens > cap:
            key = (id(entitlement), cap)   # entitlements are built once per tenant and scope
            narrowed = self._narrowed.get(key)
            if narrowed is None:
                if len(self._narrowed) > 1024:
                    self._narrowed.clear()
                narrowed = self._narrowed[key] = entitlement.with_max_output(cap)
            ctx.entitlement = narrowed
            ctx.note("restricted", {"max_output_tokens": cap})
        return None

    def abort(self, ctx: RequestContext, exit: Exit) -> Releasing:
        return self._release(ctx)

    def complete(self, ctx: RequestContext, usage: Usage) -> Releasing:
        return self._release(ctx)

    def _release(self, ctx: RequestContext) -> Releasing:
        principal = ctx.principal
        if principal is None:
            return None
        reservation = ctx.reservation
        if reservation is not None:   # admission released first: settled
            self.enforcement.settle(principal.tenant, reservation.record)
        held = self.open.remove(principal.tenant, ctx)
        if held is not None:   # a slot of the key's reduced concurrency: the store gives it back
            return self.runtime.store.give_slot(principal.key_id, held)
        return None


def build(config: Config, clock: Callable[[], float], control_runtime: ControlRuntime,
          enforcement: EnforcementMetrics) -> ControlStage:
    lease_s = config.stream.max_duration_s + 60.0
    return ControlStage(control_runtime, clock, lease_s, enforcement)
