"""Operator controls over the admin API (the same operations as ``tokenward tenants`` and
``tokenward abuse``), each audited:

    POST /admin/tenants/{T}/pause            {capability, for, reason, reviewer?}
    POST /admin/tenants/{T}/resume           {capability, reason, reviewer?}
    POST /admin/tenants/{T}/cancel-streams   {reason, reviewer?}
         -> {"control", "cancelled_here", "replicas_notified"}
    GET  /admin/controls[?tenant=T][&history=1]   the controls in force (or the latest 200)
    POST /admin/abuse/actions                {action, key_id | tenant, for?, reason, reviewer?,
                                              concurrency?, max_output_tokens?}
    POST /admin/abuse/reinstate              {key_id | tenant, reason, reviewer?, appeal?}
    POST /admin/abuse/exemptions             {key_id | tenant, for, reason, reviewer?}
    POST /admin/abuse/unexempt               {key_id | tenant, reason, reviewer?}
    GET  /admin/status, /admin/status.json   the status page (status.py)

``key_id`` is a key id or a whole key; ``appeal`` is ``none``, ``upheld`` or ``overturned``.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable, TypeVar


from ..admin.api import AdminApi, Answer, _duration, _error, _read_json, _refusal, _text
from ..budget.admission import Admitter
from ..config.schema import Config
from ..http.asgi import Receive
from ..wire.codec import json_encode as _encode
from ..errors import Reason
from ..keys import format as keyformat
from ..keys.service import KeyService
from ..observe.telemetry import Telemetry
from .metrics import EnforcementMetrics
from .model import ControlError
from .runtime import ControlRuntime
from .service import ControlOps
from .status import EventCounts, StatusPage

T = TypeVar("T")


class ControlAdmin:
    def __init__(self, config: Config, ops: ControlOps, runtime: ControlRuntime, enforcement: EnforcementMetrics,
                 keys: KeyService | None) -> None:
        self.config = config
        self.ops = ops
        self.runtime = runtime
        self.enforcement = enforcement
        self.keys = keys

    async def _call(self, operation: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
        try:
            return await operation(*args, **kwargs)
        except ControlError as exc:
            raise _refusal(Reason.invalid_field, str(exc), exc.param) from None
        except Exception as exc:   # the key store is down: say so, not a 500
            raise _error(503, "action_unavailable", f"the action could not be done now: {exc}") from None

    def _now(self) -> float:
        return self.runtime.now()

    async def tenants(self, parts: list[str], query: dict[str, str], receive: Receive) -> Answer | None:
        if len(parts) != 3 or parts[2] not in ("pause", "resume", "cancel-streams"):
            return None   # another part's tenant action (cache/purge)
        tenant, action = parts[1], parts[2]
        if tenant not in self.config.tenants:
            raise _error(404, "tenant_not_found", f"no tenant {tenant!r} in the config", "tenant")
        body = await _read_json(receive)
        reason = _text(body, "reason", required=True)
        reviewer = _text(body, "reviewer") or "admin-api"
        self.enforcement.controls[(action, tenant)] += 1
        now = self._now()
        if action == "pause":
            control = await self._call(self.ops.pause, tenant, _text(body, "capability", required=True),
                                       _duration(body, "for", required=True), reason, reviewer)
            return 200, _encode({"tenant": tenant, "control": control.public(now)})
        if action == "resume":
            cleared = await self._call(self.ops.resume, tenant, _text(body, "capability", required=True), reason,
                                       reviewer)
            return 200, _encode({"tenant": tenant, "cleared": [c.public(now) for c in cleared]})
        before = self.runtime.cancelled
        control = await self._call(self.ops.cancel_streams, tenant, reason, reviewer)
        return 200, _encode({"tenant": tenant, "control": control.public(now),
                             "cancelled_here": self.runtime.cancelled - before,
                             "replicas_notified": self.ops.heard})

    async def controls(self, parts: list[str], query: dict[str, str], receive: Receive) -> Answer | None:
        if parts != ["controls"]:
            return None
        tenant = query.get("tenant")
        now = self._now()
        if query.get("history"):
            rows = await self._call(self.runtime.repo.history, tenant)
        else:
            rows = [c for c in self.runtime.view.controls if tenant is None or c.tenant == tenant]
        return 200, _encode({"object": "list", "data": [c.public(now) for c in rows]})

    async def _subject(self, body: dict[str, Any]) -> tuple[str, str | None]:
        """(tenant, key id or None) named by a body: a key (its tenant from the key store,
        or given) or a tenant as a whole."""
        ident = _text(body, "key_id")
        tenant = _text(body, "tenant")
        if ident is None:
            if tenant is None:
                raise _refusal(Reason.invalid_field, "name a key_id or a tenant", "key_id")
            return tenant, None
        key_id = ident if ident.startswith("jwt:") else keyformat.key_id_of(ident)
        if key_id is None:
            raise _refusal(Reason.invalid_field, "not a key id or a key", "key_id")
        if tenant is None:
            if self.keys is None:
                raise _error(404, "key_not_found", f"no key store to look up {key_id} in: name the tenant", "key_id")
            record = await self._call(self.keys.get, key_id)
            if record is None:
                raise _error(404, "key_not_found", f"no key with id {key_id}", "key_id")
            tenant = record.tenant
        return tenant, key_id

    async def abuse(self, parts: list[str], query: dict[str, str], receive: Receive) -> Answer | None:
        if len(parts) != 2 or parts[1] not in ("actions", "reinstate", "exemptions", "unexempt"):
            return None
        body = await _read_json(receive)
        tenant, key_id = await self._subject(body)
        reason = _text(body, "reason", required=True)
        reviewer = _text(body, "reviewer") or "admin-api"
        now = self._now()
        if parts[1] == "reinstate":
            cleared = await self._call(self.ops.reinstate, tenant, key_id, reason, reviewer, body.get("appeal"))
            return 200, _encode({"cleared": [c.public(now) for c in cleared if c.cleared_at is not None],
                                 "grace": [c.public(now) for c in cleared if c.cleared_at is None]})
        if parts[1] == "unexempt":
            cleared = await self._call(self.ops.unexempt, tenant, key_id, reason, reviewer)
            return 200, _encode({"cleared": [c.public(now) for c in cleared]})
        if parts[1] == "exemptions":
            control = await self._call(self.ops.exempt, tenant, key_id, _duration(body, "for", required=True),
                                       reason, reviewer)
            return 201, _encode({"control": control.public(now)})
        action = _text(body, "action", required=True)
        params = {name: body[name] for name in ("concurrency", "max_output_tokens", "no_tools") if name in body}
        control = await self._call(self.ops.act, action, tenant, key_id, _duration(body, "for", required=False),
                                   reason, by=reviewer, params=params or None)
        return 201, _encode({"control": control.public(now)})


def mount(admin: AdminApi, config: Config, runtime: ControlRuntime, ops: ControlOps,
          enforcement: EnforcementMetrics, telemetry: Telemetry, keys: KeyService | None, admitter: Admitter | None,
          shared_events: EventCounts | None) -> StatusPage:
    """The operator controls and the status page on the admin API; the page, whose ``tally``
    counts screening outcomes when no abuse signals do (``shared_events`` None)."""
    handlers = ControlAdmin(config, ops, runtime, enforcement, keys)
    page = StatusPage(config, runtime, telemetry, admitter, keys, shared_events)
    for action, summary in (("pause", "pause a capability of a tenant"), ("resume", "resume a paused capability"),
                            ("cancel-streams", "end a tenant's open streams, on every replica")):
        admin.add("POST", f"tenants/{{tenant}}/{action}", handlers.tenants, summary + " (audited)")
    admin.add("GET", "controls", handlers.controls, "the controls in force, or their history")
    for action, summary in (("actions", "act on a key or a tenant (suspend, throttle, ...)"),
                            ("reinstate", "lift an abuse action (with the appeal's outcome)"),
                            ("exemptions", "exempt a key or a tenant from the abuse rules"),
                            ("unexempt", "end an exemption")):
        admin.add("POST", f"abuse/{action}", handlers.abuse, summary + " (audited)")
    admin.add("GET", "status", page.html, "the status page")
    admin.add("GET", "status.json", page.json, "the status page's numbers")
    admin.add("GET", "budget/{tenant}", page.budget, "a tenant's budgets (tokenward budget show)")
    return page
