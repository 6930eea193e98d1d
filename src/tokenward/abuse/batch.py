"""A batch of observations (observe.py), aggregated per subject (each key, each tenant):
pure, apart from the keyed hashes it is given."""

from __future__ import annotations

from typing import Any, Callable, Final, Iterable

from .observe import AT_MAX, KEY, Observation, MODEL, OUTPUT, REASON, SCREENING, SOURCE, STATUS, STREAM, TENANT, TOOLS, VALIDATED
from .state import Batch

# Refusals that count toward the "refusals" signal beside every 429: screening's refusals.
HAMMERING: Final = frozenset({"content_blocked"})


class Acc:
    __slots__ = ("requests", "output", "at_max", "refusals", "networks", "capabilities", "events", "prompt",
                 "tenant")

    def __init__(self, tenant: str) -> None:
        self.tenant = tenant
        self.requests = self.output = self.at_max = self.refusals = 0
        self.networks: dict[str, int] = {}
        self.capabilities: dict[str, int] = {}
        self.events: dict[str, int] = {}
        self.prompt: Any = None      # a key's latest admitted request (for its sketch)

    def batch(self) -> Batch:
        return Batch(self.requests, self.output, self.at_max, self.refusals, self.networks, self.capabilities,
                     self.events)


def _capabilities(obs: Observation) -> tuple[str, ...]:
    model = obs[MODEL]
    caps: tuple[str, ...] = ("model:" + model,) if model else ()
    if obs[TOOLS]:
        caps += ("tools",)
    if obs[STREAM]:
        caps += ("stream",)
    return caps


def aggregate(observations: Iterable[Observation], network: Callable[[Any], str | None]
              ) -> tuple[dict[str, Acc], dict[str, Acc]]:
    """(per key id, per tenant) accumulators of a batch."""
    keys: dict[str, Acc] = {}
    tenants: dict[str, Acc] = {}
    for obs in observations:
        key = keys.get(obs[KEY])
        if key is None:
            key = keys[obs[KEY]] = Acc(obs[TENANT])
        tenant = tenants.get(obs[TENANT])
        if tenant is None:
            tenant = tenants[obs[TENANT]] = Acc(obs[TENANT])
        net = network(obs[SOURCE])
        caps = _capabilities(obs)
        reason, status = obs[REASON], obs[STATUS]
        refused = reason is not None and status is not None and status >= 400
        hammering = refused and (status == 429 or reason in HAMMERING)
        validated = obs[VALIDATED]   # refused before validation: no request shape to judge
        for acc in (key, tenant):
            acc.requests += validated
            acc.output += obs[OUTPUT]
            acc.at_max += obs[AT_MAX]
            acc.refusals += hammering
            if net is not None:
                acc.networks[net] = acc.networks.get(net, 0) + 1
            for cap in caps:
                acc.capabilities[cap] = acc.capabilities.get(cap, 0) + 1
        events = tenant.events
        if refused:
            name = "r:" + reason
            events[name] = events.get(name, 0) + 1
        record = obs[SCREENING]
        if record:
            for kind, outcome in _screened(record):
                name = f"s:{kind}:{outcome}"
                events[name] = events.get(name, 0) + 1
    return keys, tenants


def _screened(record: dict[str, Any]) -> list[tuple[str, str]]:
    """(detector kind, outcome) pairs of a screening record."""
    out = []
    for kind, entry in record.items():
        outcome = entry.get("outcome") if isinstance(entry, dict) else None
        if isinstance(outcome, str):
            out.append((kind, outcome))
    return out
