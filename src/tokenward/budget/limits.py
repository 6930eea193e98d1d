"""From config to checks: which limits a caller's request is reserved against, built once.

A ``TenantBudget`` is the layout of one tenant's namespace for one plan (and one key, when
the plan has per-key limits) on one UTC day, plus what the stage needs per request: how
to turn (tokens, cost) into each check's amount, which limit a failed check was, and which
checks feed the ``x-ratelimit-*`` headers. ``Budgets`` caches them, so a request looks one
up instead of building it.

Limit names (also the names ``plan.shadow`` takes): ``spend_daily``, ``spend_monthly``,
``streams``, ``inflight``, ``tokens``, ``cost``, ``requests``, ``key_tokens``,
``key_requests``, ``key_spend_daily``, ``key_spend_monthly``, and for service capacity
``capacity``.

A key's own limits (``KeyLimits``, set when the key was created) are checks of the same
layout, under the key's id in the tenant's namespace: one reservation, one atomic script
call, draws on the plan's limits and the key's together. ``key_tokens`` is the lower of the
plan's ``key_tokens_per_minute`` and the key's own ``tokens_per_minute``.
"""

from __future__ import annotations

import hashlib
import math
import operator
import re
from typing import Callable, NamedTuple

from ..config.key_limits import KeyLimits
from ..config.schema import CapacityConfig, Config, PlanConfig
from ..config.loader import check_capacity
from ..errors import Reason
from . import policy
from .policy import BUCKET, COST, GAUGE, REQUEST, SCALE, SLOT, SOFT, SPEND, TOKENS, Check
from .store import Layout

REASONS: dict[str, Reason] = {
    "spend_daily": Reason.spend_cap, "spend_monthly": Reason.spend_cap,
    "key_spend_daily": Reason.spend_cap, "key_spend_monthly": Reason.spend_cap,
    "streams": Reason.concurrency_limit, "inflight": Reason.concurrency_limit,
    "tokens": Reason.token_budget, "cost": Reason.token_budget, "key_tokens": Reason.token_budget,
    "requests": Reason.rate_limited, "key_requests": Reason.rate_limited,
    "capacity": Reason.token_budget, "capacity_share": Reason.token_budget,
    # an agent job's checks (jobs/terms.py); the admission stage asks the job book why
    "job": Reason.job_budget_exhausted, "job_ancestor": Reason.job_cancelled,
}
JOB_LIMITS = frozenset(("job", "job_ancestor"))

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def safe(part: str) -> str:
    """A key component without spaces or braces (braces would break the hash tag)."""
    return _UNSAFE.sub(lambda m: "%{:02X}".format(ord(m.group())), part) if _UNSAFE.search(part) else part


def tenant_namespace(prefix: str, tenant: str) -> str:
    return f"{prefix}:{{t:{_tag(tenant)}}}"


def upstream_namespace(prefix: str, name: str) -> str:
    return f"{prefix}:{{u:{_tag(name)}}}"


def _tag(name: str) -> str:
    tag = safe(name)
    return tag if len(tag) <= 64 else hashlib.sha1(name.encode()).hexdigest()


def _scaled(limit: int | float, fraction: float) -> int:
    return max(1, math.ceil(limit * fraction)) if fraction != 1.0 else int(limit)


class _Spec(NamedTuple):
    name: str
    suffix: str
    kind: str
    unit: str
    p1: int
    p2: int


def _rate(name: str, suffix: str, unit: str, per_minute: int) -> _Spec:
    return _Spec(name, suffix, BUCKET, unit, per_minute * SCALE, per_minute)


def _spend(name: str, suffix: str, usd: float, expires_ms: int, fraction: float) -> _Spec:
    return _Spec(name, suffix, SPEND, COST, _scaled(policy.micro_usd(usd), fraction), expires_ms)


def _lowest(*limits: int | None) -> int | None:
    given = [limit for limit in limits if limit is not None]
    return min(given) if given else None


def tenant_specs(plan: PlanConfig, key_id: str | None, periods: policy.Periods, fraction: float = 1.0,
                 key_limits: KeyLimits | None = None) -> list[_Spec]:
    """The plan's limits, and the key's own, in reservation order: terminal ones first, so
    the reason names them."""
    f = fraction
    specs: list[_Spec] = []
    if plan.daily_spend_usd is not None:
        specs.append(_spend("spend_daily", f"s:d:{periods.day}", plan.daily_spend_usd, periods.day_expires_ms, f))
    if plan.monthly_spend_usd is not None:
        specs.append(_spend("spend_monthly", f"s:m:{periods.month}", plan.monthly_spend_usd,
                            periods.month_expires_ms, f))
    own = key_limits if key_id is not None else None
    if own is not None and own.daily_spend_usd is not None:
        specs.append(_spend("key_spend_daily", f"k:{safe(key_id or '')}:s:d:{periods.day}", own.daily_spend_usd,
                            periods.day_expires_ms, f))
    if own is not None and own.monthly_spend_usd is not None:
        specs.append(_spend("key_spend_monthly", f"k:{safe(key_id or '')}:s:m:{periods.month}", own.monthly_spend_usd,
                            periods.month_expires_ms, f))
    if plan.max_concurrent_streams > 0:
        specs.append(_Spec("streams", "g:streams", GAUGE, SLOT, _scaled(plan.max_concurrent_streams, f), 0))
    if plan.max_inflight_tokens is not None:
        specs.append(_Spec("inflight", "g:inflight", GAUGE, TOKENS, _scaled(plan.max_inflight_tokens, f), 0))
    if plan.tokens_per_minute > 0:
        specs.append(_rate("tokens", "b:tokens", TOKENS, _scaled(plan.tokens_per_minute, f)))
    if plan.spend_per_minute_usd is not None:
        specs.append(_rate("cost", "b:cost", COST, _scaled(policy.micro_usd(plan.spend_per_minute_usd), f)))
    if plan.requests_per_minute > 0:
        specs.append(_rate("requests", "b:requests", REQUEST, _scaled(plan.requests_per_minute, f)))
    key_tokens = _lowest(plan.key_tokens_per_minute, own.tokens_per_minute if own is not None else None)
    if key_id is not None and key_tokens is not None:
        specs.append(_rate("key_tokens", f"k:{safe(key_id)}:b:tokens", TOKENS, _scaled(key_tokens, f)))
    if key_id is not None and plan.key_requests_per_minute is not None:
        specs.append(_rate("key_requests", f"k:{safe(key_id)}:b:requests", REQUEST,
                           _scaled(plan.key_requests_per_minute, f)))
    return specs


class TenantBudget:
    """One namespace's checks for one kind of caller, with what a request needs per check."""

    __slots__ = ("layout", "names", "units", "tokens_at", "requests_at", "day", "day_number", "plan",
                 "static_headers", "_reported", "_amounts")

    def __init__(self, namespace: str, specs: list[_Spec], shadow: tuple[str, ...], day: str,
                 plan: PlanConfig | None = None) -> None:
        checks = [Check(f"{namespace}:{s.suffix}", s.kind, s.unit, s.p1, s.p2, 0 if s.name in shadow else 1)
                  for s in specs]
        self.layout = Layout(namespace, checks)
        self.names = tuple(s.name for s in specs)
        self.units = tuple(s.unit for s in specs)
        self.tokens_at = self.names.index("tokens") if "tokens" in self.names else -1
        self.requests_at = self.names.index("requests") if "requests" in self.names else -1
        self.day = day
        self.day_number = int(day) if day else -1
        self.plan = plan
        self.static_headers = _limit_headers(checks, self.tokens_at, self.requests_at)
        # Per header-reporting bucket: where it is, its capacity and refill, its header names.
        self._reported = tuple((at, checks[at].p1, checks[at].p2, b"x-ratelimit-remaining-" + what,
                                b"x-ratelimit-reset-" + what)
                               for at, what in ((self.tokens_at, b"tokens"), (self.requests_at, b"requests"))
                               if at >= 0)
        self._amounts = _amounts_builder(self.units)

    def amounts(self, tokens: int, cost: int) -> list[int]:
        return self._amounts(tokens, cost)

    def headers(self, levels: tuple[int, ...]) -> list[tuple[bytes, bytes]]:
        """OpenAI-style x-ratelimit-* headers from the levels a reservation left."""
        if not levels:
            return []
        out = list(self.static_headers)
        for at, cap, rate, remaining, reset in self._reported:
            level = levels[at]
            out.append((remaining, b"%d" % (level // SCALE)))
            out.append((reset, policy.format_reset_bytes(policy.full_after_ms(level, cap, rate))))
        return out


def _limit_headers(checks: list[Check], tokens_at: int, requests_at: int) -> tuple[tuple[bytes, bytes], ...]:
    out = []
    if tokens_at >= 0:
        out.append((b"x-ratelimit-limit-tokens", b"%d" % checks[tokens_at].p2))
    if requests_at >= 0:
        out.append((b"x-ratelimit-limit-requests", b"%d" % checks[requests_at].p2))
    return tuple(out)


def _amounts_builder(units: tuple[str, ...]) -> Callable[[int, int], list[int]]:
    """A function (tokens, cost) -> the amount per check, for this order of units."""
    picks = tuple(0 if u == TOKENS else 1 if u == COST else 2 for u in units)
    if len(picks) < 2:
        return lambda tokens, cost: [(tokens, cost, 1)[p] for p in picks]
    pick = operator.itemgetter(*picks)
    return lambda tokens, cost: list(pick((tokens, cost, 1)))


class Budgets:
    """Cached ``TenantBudget``s for one store (the shared one, or a fail-open local one)."""

    def __init__(self, config: Config, fraction: float = 1.0) -> None:
        self.prefix = config.store.key_prefix
        self.fraction = fraction
        self._tenants: dict[tuple[str, str | None, KeyLimits | None], TenantBudget] = {}
        self._capacity = _capacity_table(config)
        self._capacity_budgets: dict[tuple[str, str], TenantBudget | None] = {}
        self.has_capacity = bool(self._capacity)

    def tenant(self, tenant: str, plan: PlanConfig, key_id: str | None, now_ms: int,
               key_limits: KeyLimits | None = None) -> TenantBudget:
        per_key = (plan.key_tokens_per_minute is not None or plan.key_requests_per_minute is not None
                   or key_limits is not None)
        cache_key = (tenant, key_id if per_key else None, key_limits)
        budget = self._tenants.get(cache_key)
        day_number = now_ms // policy.DAY_MS
        if budget is not None and budget.day_number == day_number and (budget.plan is plan or budget.plan == plan):
            return budget
        day = str(day_number)
        if len(self._tenants) > 50_000:
            self._tenants.clear()  # bounded: a key-id flood cannot grow it without end
        specs = tenant_specs(plan, cache_key[1], policy.periods(now_ms), self.fraction, key_limits)
        budget = TenantBudget(tenant_namespace(self.prefix, tenant), specs, plan.shadow, day, plan)
        self._tenants[cache_key] = budget
        return budget

    def capacity(self, tenant: str, model: str | None, upstream: str | None,
                 shadow: tuple[str, ...]) -> TenantBudget | None:
        """The service-capacity checks for this tenant on this model's capacity, if any."""
        name = model if model in self._capacity else upstream if upstream in self._capacity else None
        if name is None:
            return None
        cache_key = (name, tenant)
        if cache_key not in self._capacity_budgets:
            self._capacity_budgets[cache_key] = self._capacity_budget(name, tenant, shadow)
        return self._capacity_budgets[cache_key]

    def _capacity_budget(self, name: str, tenant: str, shadow: tuple[str, ...]) -> TenantBudget:
        cap = self._capacity[name]
        namespace = upstream_namespace(self.prefix, name)
        shares = {t: max(1, int(cap.tokens_per_minute * f)) for t, f in cap.shares.items()}
        pool = _scaled(cap.tokens_per_minute - sum(shares.values()), self.fraction)
        specs = []
        if tenant in shares:
            per_minute = _scaled(shares[tenant], self.fraction)
            specs.append(_Spec("capacity_share", f"c:share:{safe(tenant)}", SOFT, TOKENS, per_minute * SCALE,
                               per_minute))
        specs.append(_rate("capacity", "c:pool", TOKENS, pool))
        return TenantBudget(namespace, specs, shadow, "")

    def capacity_namespaces(self) -> list[str]:
        return [upstream_namespace(self.prefix, name) for name in self._capacity]


def _capacity_table(config: Config) -> dict[str, CapacityConfig]:
    check_capacity(config)  # the loader already did; kept for configs built in code
    return dict(config.capacity)
