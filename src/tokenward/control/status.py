"""The operator's status page: per tenant, the budgets against their limits, open streams,
refusals by reason over the last minutes, the controls in force, screening outcomes and
the cache's hit rate. ``GET /admin/status`` is the page (status_html.py renders it on the
server; its small script re-fetches the tenants' part every two seconds, so it updates
without a reload), ``GET /admin/status.json`` the same numbers for scripts.

What every replica shares (the budget store, the controls, the abuse signals' per-minute
counts) is shown for the whole service; the rest (screening, cache, refusals when no abuse
signals run) is this replica's own, and says so: with several workers, all of them (the
counts of the scrape they answer together, observe/shared_metrics.py). Open requests are
the answering worker's ("here"). Nothing here is a key, a prompt or an address: tenants,
key ids, reasons and counts.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any, Protocol, Sequence, cast


from ..budget import policy
from ..budget.limits import Budgets
from ..budget.admission import Admitter
from ..budget.report import budget_report
from ..budget.store import StoreUnavailable
from ..wire.codec import json_encode as _encode
from ..errors import Reason, envelope
from ..http.responses import code_header
from ..config.loader import effective_plan
from ..config.schema import Config
from ..keys.service import KeyService
from ..admin.api import Answer
from ..http.asgi import Receive
from ..observe.telemetry import Telemetry
from ..pipeline.context import RequestContext
from .runtime import ControlRuntime
from .status_html import BudgetRow, CacheRate, StatusData, StoreDown, TenantStatus, page, tenants_fragment

SNAPSHOT_S = 10.0


class EventCounts(Protocol):
    """The abuse signals' store, as the page reads it: per tenant, event -> count over a window
    (abuse/store.py SignalStore.events), the same for every replica."""

    async def events(self, tenants: Sequence[str], now: int, window_s: int) -> dict[str, dict[str, int]]: ...


class StatusPage:
    def __init__(self, config: Config, runtime: ControlRuntime, telemetry: Telemetry, admitter: Admitter | None,
                 keys: KeyService | None, shared_events: EventCounts | None) -> None:
        self.config = config
        self.runtime = runtime
        self.telemetry = telemetry
        self.admitter = admitter
        self.keys = keys
        # the abuse signals' shared counts (refusals and screening for every replica), when configured
        self.shared_events = shared_events
        self._plans = {t: effective_plan(self.config, t) for t in self.config.tenants}
        self._budgets = Budgets(self.config)   # our own: never the admitter's cache of the hot path
        # (monotonic time, {(tenant, reason): refusals so far}) of this replica, for "the last minutes"
        self._snapshots: list[tuple[float, dict[tuple[str, str], int]]] = []
        self._cached: tuple[float, StatusData] | None = None
        self._lock = asyncio.Lock()
        # Without abuse signals (whose shared counts carry them), this replica's screening
        # outcomes per tenant: the gateway calls ``tally`` for each request it finishes.
        self._screened: dict[tuple[str, str], int] = {}
        self._screen_snaps: list[tuple[float, dict[tuple[str, str], int]]] = []

    def tally(self, ctx: RequestContext) -> None:
        principal, screening = ctx.principal, ctx.screening
        if principal is None or screening is None:
            return
        counts = self._screened
        for kind, entry in screening.record.items():
            outcome = entry.get("outcome") if isinstance(entry, dict) else None
            if isinstance(outcome, str):
                key = (principal.tenant, f"{kind}:{outcome}")
                counts[key] = counts.get(key, 0) + 1

    # -- data ------------------------------------------------------------------------------
    async def data(self) -> StatusData:
        """The page's numbers, computed at most once a second however many viewers poll."""
        async with self._lock:
            cached = self._cached
            if cached is not None and time.monotonic() - cached[0] < 1.0:
                return cached[1]
            now = self.runtime.now()
            window = self.config.control.status_window_s
            events = await self._events(now, window)
            decisions, lookups, screened = await _counts(self.telemetry)
            local = self._local_refusals(window, decisions)
            local_screened = _windowed(dict(self._screened), self._screen_snaps, window)
            tenants: dict[str, TenantStatus] = {}
            for tenant in sorted(self.config.tenants):
                tenants[tenant] = await self._tenant(tenant, now, events.get(tenant), local.get(tenant, {}),
                                                     _cache(tenant, lookups), local_screened.get(tenant, {}))
            body: StatusData = {"at": now, "window_s": window, "tenants": tenants, "screening": _screening(screened),
                                "replica": {"pid": os.getpid(), "controls_live": self.runtime.live}}
            self._cached = (time.monotonic(), body)
            return body

    async def _tenant(self, tenant: str, now: float, shared: dict[str, int] | None, local: dict[str, int],
                      cache: CacheRate, local_screened: dict[str, int]) -> TenantStatus:
        open_here, streaming_here = self.runtime.open.counts(tenant)
        refusals = {k[2:]: v for k, v in (shared or {}).items() if k.startswith("r:")} if shared is not None else local
        screening = {k[2:]: v for k, v in (shared or {}).items() if k.startswith("s:")} if shared is not None \
            else local_screened
        controls = [c.public(now) for c in self.runtime.view.controls if c.tenant == tenant and c.active_at(now)]
        return {"budget": await self._budget(tenant, now), "open_here": open_here, "streaming_here": streaming_here,
                "refusals": dict(sorted(refusals.items(), key=lambda kv: -kv[1])),
                # refusals' and screening's alike: the signals' shared counts, else this replica's
                "refusals_scope": "all replicas" if shared is not None else "this replica",
                "screening": screening, "controls": controls, "cache": cache}

    async def _budget(self, tenant: str, now: float) -> list[BudgetRow] | list[StoreDown]:
        admitter = self.admitter
        if admitter is None:
            return []
        now_ms = int(now * 1000)
        budget = self._budgets.tenant(tenant, self._plans[tenant], None, now_ms)
        rows: list[BudgetRow] = []
        try:
            for name, check in zip(budget.names, budget.layout.checks):
                rows.append(_row(name, check, await admitter.shared.store.value(check.key), now_ms))
        except Exception as exc:   # the store is down: the page says so rather than failing
            return [StoreDown(limit="store", error=str(exc))]
        return rows

    async def _events(self, now: float, window: float) -> dict[str, dict[str, int]]:
        store = self.shared_events
        if store is None:
            return {}
        try:
            return await store.events(sorted(self.config.tenants), int(now), int(window))
        except Exception:
            return {}

    def _local_refusals(self, window: float, decisions: Decisions) -> dict[str, dict[str, int]]:
        totals: dict[tuple[str, str], int] = {}
        for (route, stage, reason, tenant), count in list(decisions.items()):
            if reason != "ok" and tenant:
                totals[(tenant, reason)] = totals.get((tenant, reason), 0) + count
        return _windowed(totals, self._snapshots, window)

    # -- routes ----------------------------------------------------------------------------
    async def html(self, parts: list[str], query: dict[str, str], receive: Receive) -> Answer | None:
        if parts != ["status"]:
            return None
        data = await self.data()
        nonce = os.urandom(12).hex()
        if query.get("fragment"):
            body = tenants_fragment(data)
        else:
            body = page(data, nonce)
        headers = [(b"content-type", b"text/html; charset=utf-8"), (b"cache-control", b"no-store"),
                   (b"x-frame-options", b"DENY"),
                   (b"content-security-policy",
                    f"default-src 'self'; script-src 'nonce-{nonce}'; style-src 'unsafe-inline'".encode())]
        return 200, body.encode(), headers

    async def json(self, parts: list[str], query: dict[str, str], receive: Receive) -> Answer | None:
        if parts != ["status.json"]:
            return None
        return 200, _encode(await self.data())

    async def budget(self, parts: list[str], query: dict[str, str], receive: Receive) -> Answer | None:
        """``GET /admin/budget/{tenant}[?key=ID]``: what ``tokenward budget show`` prints, from
        this gateway's own store (the only way to read an in-memory one from outside)."""
        if len(parts) != 2 or parts[0] != "budget":
            return None
        tenant, key_id = parts[1], query.get("key") or None
        admitter = self.admitter
        if tenant not in self._plans or admitter is None:
            return _not_found(f"no tenant {tenant!r} with budgets in this gateway's config", "tenant")
        limits = None
        if key_id is not None:
            record = await self.keys.get(key_id) if self.keys is not None else None
            if record is None or record.tenant != tenant:
                return _not_found(f"no key {key_id!r} of tenant {tenant!r}", "key")
            limits = record.limits()
        now_ms = int(self.runtime.now() * 1000)
        budget = self._budgets.tenant(tenant, self._plans[tenant], key_id, now_ms, limits)
        try:
            report = await budget_report(admitter.shared.store, budget, tenant, key_id, now_ms)
        except StoreUnavailable as exc:
            return 503, envelope(Reason.budget_store_unavailable, str(exc)), \
                [(b"content-type", b"application/json"), code_header(Reason.budget_store_unavailable.name)]
        return 200, _encode(report)


def _not_found(message: str, param: str) -> Answer:
    body = _encode({"error": {"message": message, "type": "invalid_request_error", "param": param,
                              "code": "not_found"}})
    return 404, body, [(b"content-type", b"application/json"), code_header("not_found")]


Counts = dict[tuple[str, str], int]


def _windowed(totals: Counts, snaps: list[tuple[float, Counts]], window: float) -> dict[str, dict[str, int]]:
    """tenant -> {name: count over the last ``window`` seconds}, from cumulative ``totals``
    and the snapshots kept of them (one every SNAPSHOT_S)."""
    at = time.monotonic()
    if not snaps or at - snaps[-1][0] >= SNAPSHOT_S:
        snaps.append((at, totals))
    while len(snaps) > 1 and snaps[1][0] <= at - window:
        snaps.pop(0)
    base: Counts = snaps[0][1] if snaps[0][0] <= at - window else {}
    out: dict[str, dict[str, int]] = {}
    for (tenant, name), count in totals.items():
        delta = count - base.get((tenant, name), 0)
        if delta > 0:
            out.setdefault(tenant, {})[name] = delta
    return out


def _row(name: str, check: policy.Check, value: policy.Stored, now_ms: int) -> BudgetRow:
    enforced = bool(check.enforce)
    if check.kind in (policy.BUCKET, policy.SOFT):
        level = policy.refill(cast("policy.BucketState | None", value), check.p1, check.p2, now_ms)[0]
        capacity = check.p1 // policy.SCALE
        return BudgetRow(limit=name, enforced=enforced, kind="rate", used=capacity - level // policy.SCALE,
                         limit_value=capacity, unit=_unit(check))
    if check.kind == policy.GAUGE:
        return BudgetRow(limit=name, enforced=enforced, kind="held", used=int(cast("int | None", value) or 0),
                         limit_value=check.p1, unit=_unit(check))
    return BudgetRow(limit=name, enforced=enforced, kind="spend", used=int(cast("int | None", value) or 0) / 1e6,
                     limit_value=check.p1 / 1e6, unit="USD")


def _unit(check: policy.Check) -> str:
    return {policy.TOKENS: "tokens", policy.COST: "micro-USD", policy.REQUEST: "requests",
            policy.SLOT: "open requests"}.get(check.unit, "")


Decisions = dict[tuple[str, str, str, str], int]    # (route, stage, reason, tenant)
Lookups = dict[tuple[str, str], int]                # (tenant, outcome)
Screened = dict[tuple[str, str, str, str], int]     # (kind, detector, outcome, shadow)


async def _counts(telemetry: Telemetry) -> tuple[Decisions, Lookups, Screened]:
    """(decisions, cache lookups, screening outcomes), keyed as the gateway's metrics keep
    them: this process's, or with several workers all of theirs, from the scrape they
    answer together."""
    shared = telemetry.exposition.shared
    if shared is None:
        counted = telemetry.requests
        return counted.decisions, counted.cache, counted.screening
    decisions: Decisions = {}
    lookups: Lookups = {}
    screened: Screened = {}
    for family in await shared.families():
        for sample in family.samples:
            labels, value = sample.labels, int(sample.value)
            if sample.name == "tokenward_decisions_total":
                decisions[(labels["route"], labels["stage"], labels["reason"], labels["tenant"])] = value
            elif sample.name == "tokenward_cache_total":
                lookups[(labels["tenant"], labels["outcome"])] = value
            elif sample.name == "tokenward_screening_total":
                screened[(labels["kind"], labels["detector"], labels["outcome"], labels["shadow"])] = value
    return decisions, lookups, screened


def _cache(tenant: str, lookups: Lookups) -> CacheRate:
    hits = lookups.get((tenant, "hit"), 0)
    misses = lookups.get((tenant, "miss"), 0)
    looked = hits + misses
    return {"hits": hits, "misses": misses, "hit_rate": round(hits / looked, 3) if looked else None}


def _screening(screened: Screened) -> dict[str, int]:
    out: dict[str, int] = {}
    for (kind, detector, outcome, shadow), count in list(screened.items()):
        name = f"{kind}:{outcome}" + (" (shadow)" if shadow == "true" else "")
        out[name] = out.get(name, 0) + count
    return out
