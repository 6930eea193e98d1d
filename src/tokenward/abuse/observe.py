"""The hot path's whole share of the signals: one plain tuple per decision, appended to a
bounded buffer. Everything else (hashing networks, sketching prompts, the store) happens
in batches (engine.py), off the request path.

A tuple holds small values only, so the batch does not keep a second of requests' objects
alive (they would be promoted through the collector's generations and traversed there).
The one exception is the latest admitted request of each key, kept for its prompt's
sketch, at most ``MAX_PROMPTS`` of them. When the buffer is full, observations are dropped
and counted, never allowed to grow the process.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Final

from ..validation.schemas import ChatCompletionRequest

if TYPE_CHECKING:
    from ..pipeline.context import RequestContext

# fields of an observation (a plain tuple: cheaper to build than a named one); Final: constants
# where compiled
AT: Final = 0
TENANT: Final = 1
KEY: Final = 2
REASON: Final = 3
STATUS: Final = 4
OUTPUT: Final = 5
AT_MAX: Final = 6
MODEL: Final = 7
STREAM: Final = 8
VALIDATED: Final = 9
TOOLS: Final = 10
SOURCE: Final = 11
SCREENING: Final = 12
Observation = tuple[Any, ...]   # its fields at the indices above
MAX_PROMPTS: Final = 4096


class Observer:
    __slots__ = ("buffer", "prompts", "max_buffer", "dropped", "_clock", "_header")

    def __init__(self, clock: Callable[[], float], max_buffer: int, network_header: str | None) -> None:
        self.buffer: list[Observation] = []
        self.prompts: dict[str, Any] = {}     # key id -> its latest admitted validated request
        self.max_buffer = max_buffer
        self.dropped = 0
        self._clock = clock
        self._header = network_header.lower().encode() if network_header else None

    def take(self) -> tuple[list[Observation], dict[str, Any]]:
        """What was observed since the last take (the batch's), leaving both empty."""
        buffer, prompts = self.buffer, self.prompts
        self.buffer, self.prompts = [], {}
        return buffer, prompts

    def __call__(self, ctx: RequestContext) -> None:
        # typed: compiled, each read of ctx is a native slot, not a generic getattr
        principal = ctx.principal
        if principal is None:
            return
        buffer = self.buffer
        if len(buffer) >= self.max_buffer:
            self.dropped += 1
            return
        request = ctx.request
        at_max = tools = False
        if request is not None:
            entitlement = ctx.entitlement
            plan = entitlement.plan if entitlement is not None else principal.plan
            # at (or within a tenth of) the plan's maximum: what a caller asks who takes all it can
            at_max = request.max_output_tokens * 10 >= plan.max_output_tokens * 9 > 0
            tools = isinstance(request.body, ChatCompletionRequest) and bool(request.body.tools)
            if ctx.reason is None:
                prompts = self.prompts
                if len(prompts) < MAX_PROMPTS:
                    prompts[principal.key_id] = request
        output = ctx.usage.completion_tokens if ctx.upstream_status is not None else None
        header = self._header
        source: bytes | str | None = None   # the header's bytes, or the peer's address (a str)
        if header is not None:
            for name, value in ctx.headers:
                if name == header:
                    source = value
                    break
        else:
            scope = getattr(getattr(ctx.receive, "__self__", None), "scope", None)
            client = scope.get("client") if scope is not None else None
            source = client[0] if client else None
        screening = ctx.screening
        buffer.append((self._clock(), principal.tenant, principal.key_id, ctx.reason, ctx.status, output or 0, at_max,
                       ctx.model, ctx.stream, request is not None, tools, source,
                       screening.record if screening is not None else None))
