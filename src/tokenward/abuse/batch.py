"""A batch of observations, aggregated per subject (each key, each tenant): pure, apart
from the keyed hashes it is given."""

from __future__ import annotations

from typing import Callable, Iterable

from .observe import Observation
from .state import Batch

# Refusals that count toward the "refusals" signal: a caller hammering limits or screening.
HAMMERING = frozenset({"content_blocked"})


class _Acc:
    __slots__ = ("requests", "output", "at_max", "refusals", "networks", "capabilities", "events", "prompt",
                 "tenant")

    def __init__(self, tenant: str) -> None:
        self.tenant = tenant
        self.requests = self.output = self.at_max = self.refusals = 0
        self.networks: dict[str, int] = {}
        self.capabilities: dict[str, int] = {}
        self.events: dict[str, int] = {}
        self.prompt = None      # the latest validated request of a key (for its sketch)

    def batch(self) -> Batch:
        return Batch(self.requests, self.output, self.at_max, self.refusals, self.networks, self.capabilities,
                     self.events)


def _count(table: dict[str, int], name: str, n: int = 1) -> None:
    table[name] = table.get(name, 0) + n


def capabilities(obs: Observation) -> list[str]:
    caps = [f"model:{obs.model}"] if obs.model else []
    request = obs.request
    if request is not None and getattr(request.body, "tools", None):
        caps.append("tools")
    if obs.stream:
        caps.append("stream")
    return caps


def aggregate(observations: Iterable[Observation], network: Callable[[object], str | None]
              ) -> tuple[dict[str, _Acc], dict[str, _Acc]]:
    """(per key id, per tenant) accumulators of a batch."""
    keys: dict[str, _Acc] = {}
    tenants: dict[str, _Acc] = {}
    for obs in observations:
        key = keys.get(obs.key_id)
        if key is None:
            key = keys[obs.key_id] = _Acc(obs.tenant)
        tenant = tenants.get(obs.tenant)
        if tenant is None:
            tenant = tenants[obs.tenant] = _Acc(obs.tenant)
        net = network(obs.source)
        caps = capabilities(obs)
        refused = obs.reason is not None and obs.status is not None and obs.status >= 400
        hammering = refused and (obs.status == 429 or obs.reason in HAMMERING)
        validated = obs.request is not None   # refused before validation: not a request shape to judge
        for acc in (key, tenant):
            acc.requests += validated
            acc.output += obs.output
            acc.at_max += obs.at_max
            acc.refusals += hammering
            if net is not None:
                _count(acc.networks, net)
            for cap in caps:
                _count(acc.capabilities, cap)
        if refused:
            _count(tenant.events, f"r:{obs.reason}")
        for kind, outcome in _screened(obs.screening):
            _count(tenant.events, f"s:{kind}:{outcome}")
        if obs.request is not None and obs.reason is None:
            key.prompt = obs.request
    return keys, tenants


def _screened(record: dict | None) -> list[tuple[str, str]]:
    """(detector kind, outcome) pairs of a screening record."""
    if not record:
        return []
    out = []
    for kind, entry in record.items():
        outcome = entry.get("outcome") if isinstance(entry, dict) else None
        if isinstance(outcome, str):
            out.append((kind, outcome))
    return out
