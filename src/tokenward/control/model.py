"""What an enforcement control is: an abuse action, an operator's pause, an exemption, a
cancel of a tenant's streams. One row each in ``tokenward_controls`` (tables.py), written
with its audit record in one transaction (repo.py).

Kinds:

- abuse actions, mildest first (``config.abuse.ACTIONS``): ``record`` (shadow: nothing
  enforced), ``review`` (an operator should look; nothing enforced), ``reduce_concurrency``,
  ``restrict``, ``suspend``; on a key, or on a whole tenant (``key_id`` None);
- ``pause``: a tenant's capability (``tools``, ``streaming``, ``model:NAME``, ``all``);
- ``exempt``: no automatic action on this key or tenant while it lasts;
- ``cancel_streams``: an event (``until`` = its time): the tenant's open streams end.

A control is active from ``created_at`` until ``until`` (None: until cleared) unless
``cleared_at`` is set. Shadow rows record a would-be action and are never enforced.
"""

from __future__ import annotations

from typing import TypedDict

import msgspec

from ..config.abuse import ACTIONS

PAUSE, EXEMPT, CANCEL = "pause", "exempt", "cancel_streams"
KINDS = frozenset(ACTIONS) | {PAUSE, EXEMPT, CANCEL}
CAPABILITIES = ("tools", "streaming", "all")     # and model:NAME
APPEALS = ("none", "upheld", "overturned")
SEVERITY = {name: i for i, name in enumerate(ACTIONS)}
AUTOMATIC = "tokenward:abuse"

# an action's parameters: concurrency (int), max_output_tokens (int), no_tools (bool)
ActionParams = dict[str, int | bool]


class Control(msgspec.Struct, frozen=True, kw_only=True):
    id: int = 0
    kind: str
    tenant: str
    key_id: str | None = None           # None: the whole tenant
    capability: str | None = None       # pause only
    params: ActionParams | None = None  # concurrency, max_output_tokens, no_tools
    reason: str = ""
    rule: str | None = None             # the policy rule of an automatic action
    signals: dict[str, float] | None = None   # the values that fired it (numbers, never text)
    automatic: bool = False
    by: str = ""                        # the reviewer, or AUTOMATIC
    shadow: bool = False
    created_at: float = 0.0
    until: float | None = None
    cleared_at: float | None = None
    cleared_by: str | None = None
    cleared_reason: str | None = None
    appeal: str | None = None

    @property
    def scope(self) -> str:
        if self.key_id is not None:
            return f"key:{self.key_id}"
        return f"tenant:{self.tenant}" + (f":{self.capability}" if self.capability else "")

    def active_at(self, now: float) -> bool:
        return self.cleared_at is None and (self.until is None or self.until > now) and self.kind != CANCEL

    def public(self, now: float) -> PublicControl:
        """The control as the admin API and the status page show it."""
        return PublicControl(
            id=self.id, kind=self.kind, tenant=self.tenant, key_id=self.key_id, capability=self.capability,
            params=self.params, reason=self.reason, rule=self.rule, signals=self.signals,
            automatic=self.automatic, by=self.by, shadow=self.shadow, created_at=self.created_at,
            until=self.until, cleared_at=self.cleared_at, cleared_by=self.cleared_by,
            cleared_reason=self.cleared_reason, appeal=self.appeal,
            scope=self.scope, active=self.active_at(now))


class PublicControl(TypedDict):
    """``Control.public``: every field of the control, its scope and whether it is in force
    (tests/control/test_model.py holds the two field lists equal)."""
    id: int
    kind: str
    tenant: str
    key_id: str | None
    capability: str | None
    params: ActionParams | None
    reason: str
    rule: str | None
    signals: dict[str, float] | None
    automatic: bool
    by: str
    shadow: bool
    created_at: float
    until: float | None
    cleared_at: float | None
    cleared_by: str | None
    cleared_reason: str | None
    appeal: str | None
    scope: str
    active: bool


class ControlError(ValueError):
    """An operator request that cannot be done as asked; ``str()`` says why."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


def parse_capability(text: str, models: frozenset[str] | None = None) -> str:
    """``tools`` | ``streaming`` | ``all`` | ``model:NAME`` (a model the gateway serves)."""
    if text in CAPABILITIES:
        return text
    if text.startswith("model:") and len(text) > 6:
        name = text[6:]
        if models is not None and name not in models:
            raise ControlError(f"no model {name!r} is served here", "capability")
        return text
    raise ControlError(f"capability must be tools, streaming, all or model:NAME, not {text!r}", "capability")


def parse_appeal(text: str | None) -> str:
    value = text or "none"
    if value not in APPEALS:
        raise ControlError(f"appeal must be one of {', '.join(APPEALS)}, not {value!r}", "appeal")
    return value
