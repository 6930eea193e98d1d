"""Enforcement operations, whoever asks: the admin API, the CLI, the abuse engine.

Each writes its control and audit record (repo.py), then announces the change so every
replica applies it at once (runtime.py). The same code runs in a gateway (announce:
refresh here and publish) and in the CLI (announce: publish only).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Awaitable, Callable, Mapping

from ..config.abuse import ACTIONS
from . import repo as q
from .model import (AUTOMATIC, CANCEL, EXEMPT, PAUSE, ActionParams, Control, ControlError, parse_appeal,
                    parse_capability)
from .repo import ControlRepo

if TYPE_CHECKING:
    from ..keys.store import KeyStore

# announce(kind, control): "changed" after any change, "cancel" for a cancel event
Announce = Callable[[str, Control], Awaitable[int | None]]
ENFORCED = ("review", "reduce_concurrency", "restrict", "suspend", "record")


def _params(kind: str, given: Mapping[str, object] | None) -> ActionParams | None:
    """An action's parameters, checked: a bad one must never reach the replicated view."""
    rest = dict(given or {})
    out: ActionParams | None
    if kind == "reduce_concurrency":
        concurrency = rest.pop("concurrency", 1)
        if type(concurrency) is not int or concurrency < 1:
            raise ControlError("concurrency must be an integer >= 1", "concurrency")
        out = {"concurrency": concurrency}
    elif kind == "restrict":
        max_output, no_tools = rest.pop("max_output_tokens", 256), rest.pop("no_tools", True)
        if type(max_output) is not int or max_output < 0:
            raise ControlError("max_output_tokens must be an integer >= 0", "max_output_tokens")
        if type(no_tools) is not bool:
            raise ControlError("no_tools must be true or false", "no_tools")
        out = {"max_output_tokens": max_output, "no_tools": no_tools}
    else:
        out = None
    if rest:
        name = next(iter(rest))
        raise ControlError(f"{name} does not apply to the action {kind}", name)
    return out


def _text(value: str | None, name: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ControlError(f"{name} must be a non-empty string", name)
    return value.strip()


class ControlOps:
    def __init__(self, repo: ControlRepo, announce: Announce, tenants: frozenset[str],
                 models: frozenset[str] | None = None, grace_s: float = 0.0) -> None:
        self.repo = repo
        # after a reinstatement whose appeal overturned the action: no automatic action on
        # that key (or tenant) for this long, so the same hour's signals cannot bring it back
        self.grace_s = grace_s
        self._announce = announce
        self.tenants = tenants
        self.models = models
        self.heard = 0   # processes that heard the last announcement (0 without Redis)
        self.keys: KeyStore | None = None   # where a caller that has one (the CLI) looks keys up

    def _tenant(self, tenant: str) -> str:
        if tenant not in self.tenants:
            raise ControlError(f"no tenant {tenant!r} in the config", "tenant")
        return tenant

    async def _add(self, control: Control, duration_s: float | None) -> Control:
        added = await self.repo.add(control, duration_s)
        self.heard = await self._announce(CANCEL if added.kind == CANCEL else "changed", added) or 0
        return added

    async def pause(self, tenant: str, capability: str, duration_s: float, reason: str, by: str) -> Control:
        cap = parse_capability(capability, self.models)
        if not duration_s > 0:
            raise ControlError("a pause needs a positive duration (--for 1h)", "for")
        return await self._add(Control(kind=PAUSE, tenant=self._tenant(tenant), capability=cap,
                                       reason=_text(reason, "reason"), by=_text(by, "reviewer")), duration_s)

    async def resume(self, tenant: str, capability: str, reason: str, by: str) -> list[Control]:
        cap = parse_capability(capability, self.models)
        where = [*q.subject(self._tenant(tenant), None), q.kinds([PAUSE]), q.capability(cap)]
        cleared = await self.repo.clear(where, by=_text(by, "reviewer"), reason=_text(reason, "reason"),
                                        action="tenant:resume")
        if not cleared:
            raise ControlError(f"{cap} is not paused for tenant {tenant}", "capability")
        await self._announce("changed", cleared[0])
        return cleared

    async def cancel_streams(self, tenant: str, reason: str, by: str) -> Control:
        return await self._add(Control(kind=CANCEL, tenant=self._tenant(tenant), reason=_text(reason, "reason"),
                                       by=_text(by, "reviewer")), None)

    async def exempt(self, tenant: str, key_id: str | None, duration_s: float, reason: str, by: str) -> Control:
        if not duration_s > 0:
            raise ControlError("an exemption needs an expiry (--for 30d)", "for")
        return await self._add(Control(kind=EXEMPT, tenant=self._tenant(tenant), key_id=key_id,
                                       reason=_text(reason, "reason"), by=_text(by, "reviewer")), duration_s)

    async def unexempt(self, tenant: str, key_id: str | None, reason: str, by: str) -> list[Control]:
        where = [*q.subject(self._tenant(tenant), key_id), q.kinds([EXEMPT])]
        cleared = await self.repo.clear(where, by=_text(by, "reviewer"), reason=_text(reason, "reason"),
                                        action="abuse:unexempt")
        if not cleared:
            raise ControlError("no exemption in force there", "key_id" if key_id else "tenant")
        await self._announce("changed", cleared[0])
        return cleared

    async def act(self, kind: str, tenant: str, key_id: str | None, duration_s: float | None, reason: str, *,
                  by: str = AUTOMATIC, rule: str | None = None, signals: dict[str, float] | None = None,
                  params: Mapping[str, object] | None = None, shadow: bool = False) -> Control:
        """An abuse action: automatic (the engine, ``by`` AUTOMATIC) or an operator's."""
        if kind not in ACTIONS:
            raise ControlError(f"action must be one of {', '.join(ACTIONS)}, not {kind!r}", "action")
        control = Control(kind=kind, tenant=self._tenant(tenant), key_id=key_id, params=_params(kind, params),
                          reason=_text(reason, "reason"), rule=rule, signals=signals, automatic=by == AUTOMATIC,
                          by=_text(by, "reviewer"), shadow=shadow)
        return await self._add(control, duration_s)

    async def reinstate(self, tenant: str | None, key_id: str | None, reason: str, by: str,
                        appeal: str | None = None) -> list[Control]:
        """Clear every abuse action in force on a key (or a tenant as a whole), recording
        the appeal outcome; service comes back on every replica at once."""
        outcome = parse_appeal(appeal)
        if key_id is None:
            if tenant is None:
                raise ControlError("name a key or a tenant", "key_id")
            subject = q.subject(self._tenant(tenant), None)
        else:
            subject = q.subject("", key_id)
        where = [*subject, q.kinds(ENFORCED)]
        cleared = await self.repo.clear(where, by=_text(by, "reviewer"), reason=_text(reason, "reason"),
                                        action="abuse:reinstate", appeal=outcome)
        if not cleared:
            raise ControlError("no abuse action is in force there", "key_id" if key_id else "tenant")
        if outcome == "overturned" and self.grace_s > 0:
            grace = Control(kind=EXEMPT, tenant=cleared[0].tenant, key_id=key_id, by=_text(by, "reviewer"),
                            reason=f"grace after an overturned action: {reason.strip()}")
            cleared.append(await self.repo.add(grace, self.grace_s))
        await self._announce("changed", cleared[0])
        return cleared
