"""The controls in force, as the request path reads them: a snapshot rebuilt whenever they
change (never per request), replaced whole, so a request sees one consistent view.

The hot path asks two dict lookups (the key, the tenant) and, only when one of them has
something, compares end times with the clock: a control that ends needs no message.
"""

from __future__ import annotations

import math

from .model import CANCEL, EXEMPT, PAUSE, Control

INF = math.inf


class Enforced:
    """The abuse actions on one key (or on a whole tenant), merged: the strictest wins."""

    __slots__ = ("suspend_until", "concurrency", "concurrency_until", "max_output", "no_tools", "restrict_until")

    def __init__(self) -> None:
        self.suspend_until = 0.0
        self.concurrency: int | None = None
        self.concurrency_until = 0.0
        self.max_output: int | None = None
        self.no_tools = False
        self.restrict_until = 0.0

    def add(self, control: Control) -> None:
        until = control.until if control.until is not None else INF
        params = control.params or {}
        if control.kind == "suspend":
            self.suspend_until = max(self.suspend_until, until)
        elif control.kind == "reduce_concurrency":
            limit = int(params.get("concurrency", 1))
            self.concurrency = limit if self.concurrency is None else min(self.concurrency, limit)
            self.concurrency_until = max(self.concurrency_until, until)
        elif control.kind == "restrict":
            cap = int(params.get("max_output_tokens", 0))
            self.max_output = cap if self.max_output is None else min(self.max_output, cap)
            self.no_tools = self.no_tools or bool(params.get("no_tools", True))
            self.restrict_until = max(self.restrict_until, until)

    def merged(self, other: Enforced | None) -> Enforced:
        if other is None:
            return self
        out = Enforced()
        out.suspend_until = max(self.suspend_until, other.suspend_until)
        limits = [c for c in (self.concurrency, other.concurrency) if c is not None]
        out.concurrency = min(limits) if limits else None
        out.concurrency_until = max(self.concurrency_until, other.concurrency_until)
        caps = [c for c in (self.max_output, other.max_output) if c is not None]
        out.max_output = min(caps) if caps else None
        out.no_tools = self.no_tools or other.no_tools
        out.restrict_until = max(self.restrict_until, other.restrict_until)
        return out


class TenantControls:
    __slots__ = ("pauses", "enforced")

    def __init__(self) -> None:
        self.pauses: dict[str, float] = {}      # capability -> until (inf: until resumed)
        self.enforced: Enforced | None = None   # abuse actions on the whole tenant


class ControlView:
    __slots__ = ("keys", "tenants", "exempt_keys", "exempt_tenants", "actions", "controls")

    def __init__(self, controls: list[Control] | tuple[Control, ...] = ()) -> None:
        self.controls = tuple(controls)
        self.keys: dict[str, Enforced] = {}
        self.tenants: dict[str, TenantControls] = {}
        self.exempt_keys: dict[str, float] = {}
        self.exempt_tenants: dict[str, float] = {}
        # (tenant, key_id or None) -> the abuse actions on it, shadow ones included (the engine's view)
        self.actions: dict[tuple[str, str | None], list[Control]] = {}
        for control in self.controls:
            self._add(control)

    def _add(self, control: Control) -> None:
        kind = control.kind
        until = control.until if control.until is not None else INF
        if kind == CANCEL:
            return
        if kind == EXEMPT:
            table = self.exempt_keys if control.key_id is not None else self.exempt_tenants
            name = control.key_id if control.key_id is not None else control.tenant
            table[name] = max(table.get(name, 0.0), until)
            return
        if kind == PAUSE:
            tenant = self._tenant(control.tenant)
            cap = control.capability or "all"
            tenant.pauses[cap] = max(tenant.pauses.get(cap, 0.0), until)
            return
        self.actions.setdefault((control.tenant, control.key_id), []).append(control)
        if control.shadow or kind in ("record", "review"):
            return   # recorded, not enforced
        if control.key_id is not None:
            self.keys.setdefault(control.key_id, Enforced()).add(control)
        else:
            tenant = self._tenant(control.tenant)
            if tenant.enforced is None:
                tenant.enforced = Enforced()
            tenant.enforced.add(control)

    def _tenant(self, name: str) -> TenantControls:
        tenant = self.tenants.get(name)
        if tenant is None:
            tenant = self.tenants[name] = TenantControls()
        return tenant

    @property
    def empty(self) -> bool:
        return not self.keys and not self.tenants

    def exempt(self, tenant: str, key_id: str | None, now: float) -> bool:
        if self.exempt_tenants.get(tenant, 0.0) > now:
            return True
        return key_id is not None and self.exempt_keys.get(key_id, 0.0) > now

    def strongest(self, tenant: str, key_id: str | None, now: float, shadow: bool) -> int:
        """The severity of the strongest action in force on this subject (shadow ones only
        when ``shadow``), -1 for none."""
        from .model import SEVERITY

        best = -1
        for control in self.actions.get((tenant, key_id), ()):
            if control.shadow == shadow and control.active_at(now):
                best = max(best, SEVERITY.get(control.kind, -1))
        return best
