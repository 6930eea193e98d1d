"""The hot path's whole share of the signals: one tuple per decision, appended to a
bounded buffer. Everything else (hashing networks, sketching prompts, the store) happens
in batches (engine.py), off the request path.

The tuple holds references the request already made (its typed body, its headers), never
copies; a batch drops them a second later. When the buffer is full, observations are
dropped and counted, never allowed to grow the process.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple


class Observation(NamedTuple):
    at: float
    tenant: str
    key_id: str
    reason: str | None            # None: admitted
    status: int | None
    output: int                   # completion tokens (0 when unknown or none)
    at_max: bool                  # asked for the plan's maximum output
    model: str | None
    stream: bool
    request: Any                  # the validated request (tools, prompt texts), or None
    source: Any                   # the proxy header's value, or the peer (host, port)
    notes: dict | None            # the decision's notes (the budget's reserved / actual)
    screening: dict | None        # the screening record (outcomes per detector)


class Observer:
    __slots__ = ("buffer", "max_buffer", "dropped", "_clock", "_header")

    def __init__(self, clock: Callable[[], float], max_buffer: int, network_header: str | None) -> None:
        self.buffer: list[Observation] = []
        self.max_buffer = max_buffer
        self.dropped = 0
        self._clock = clock
        self._header = network_header.lower().encode() if network_header else None

    def __call__(self, ctx: Any) -> None:
        principal = ctx.principal
        if principal is None:
            return
        buffer = self.buffer
        if len(buffer) >= self.max_buffer:
            self.dropped += 1
            return
        request = ctx.request
        at_max = False
        if request is not None:
            entitlement = ctx.entitlement
            plan = entitlement.plan if entitlement is not None else principal.plan
            # at (or within a tenth of) the plan's maximum: what a caller asks who takes all it can
            at_max = request.max_output_tokens * 10 >= plan.max_output_tokens * 9 > 0
        usage = ctx.usage
        output = usage.completion_tokens if ctx.upstream_status is not None else None
        header = self._header
        if header is not None:
            source = None
            for name, value in ctx.headers:
                if name == header:
                    source = value
                    break
        else:
            cycle = getattr(ctx.receive, "__self__", None)
            scope = getattr(cycle, "scope", None)
            source = scope.get("client") if scope is not None else None
        screening = ctx.screening
        buffer.append(Observation(self._clock(), principal.tenant, principal.key_id, ctx.reason, ctx.status,
                                  output or 0, at_max, ctx.model, ctx.stream, request, source, ctx.notes,
                                  screening.record if screening is not None else None))
