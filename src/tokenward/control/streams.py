"""The requests each tenant has open on this replica, and ending them on an operator's word.

A request is registered by the control stage when it admits it and dropped when the
runner releases it. Cancelling a tenant's streams ends every one of its requests that is
being forwarded right now, the way a client disconnect does (``DisconnectWatch``): the
request's task is cancelled inside the forward step, which closes the backend connection
(the backend stops generating), the runner unwinds every stage (the reservation settles
on the usage the stream had shown), and the client, still there, then gets an honest end:
an in-band error event on a started stream, else a ``stream_cancelled`` envelope.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping

from ..errors import Reason, Refusal
from ..http.responses import NO_RETRY
from ..pipeline.lifecycle import State

if TYPE_CHECKING:
    from ..pipeline.context import RequestContext

CANCELLED = "this tenant's open streams were cancelled by the operator"


class OpenRequests:
    __slots__ = ("by_tenant", "counted")

    def __init__(self, counted: dict[str, int]) -> None:
        # this replica's open requests per tenant: the gateway's metrics' ``open_streams``,
        # exported as tokenward_open_streams, open requests as the budget counts them
        self.counted = counted
        # tenant -> {request context: the concurrency slot it holds (its request id), or None}
        self.by_tenant: dict[str, dict[RequestContext, str | None]] = {}

    def add(self, tenant: str, ctx: RequestContext, held: str | None = None) -> None:
        requests = self.by_tenant.get(tenant)
        if requests is None:
            requests = self.by_tenant[tenant] = {}
        requests[ctx] = held
        self.counted[tenant] = len(requests)

    def remove(self, tenant: str, ctx: RequestContext) -> str | None:
        requests = self.by_tenant.get(tenant)
        if requests is None:
            return None
        held = requests.pop(ctx, None)
        self.counted[tenant] = len(requests)
        if not requests:
            del self.by_tenant[tenant]
        return held

    def counts(self, tenant: str) -> tuple[int, int]:
        """(open requests, of them streaming now) of a tenant on this replica."""
        requests = self.by_tenant.get(tenant)
        if not requests:
            return 0, 0
        return len(requests), sum(1 for ctx in requests if ctx.lifecycle.state is State.STREAMING)

    def cancel(self, tenant: str, note: Mapping[str, object] | None = None) -> int:
        """End the tenant's requests being forwarded now; how many."""
        ended = 0
        for ctx in list(self.by_tenant.get(tenant, ())):
            if cancel_request(ctx, note):
                ended += 1
        return ended


def cancel_request(ctx: RequestContext, note: Mapping[str, object] | None = None) -> bool:
    watch = ctx.disconnect
    if watch is None or not watch.armed or watch.fired:
        return False   # not in the forward step (before it, or already unwinding)
    started = ctx.lifecycle.state is State.STREAMING
    if ctx.reason is None:
        ctx.reason = Reason.stream_cancelled.name
        ctx.deciding_stage = "control"
        ctx.status = 200 if started else Reason.stream_cancelled.status
    ctx.note("cancelled", note or {"by": "operator"})

    return watch.cancel(Refusal(Reason.stream_cancelled, CANCELLED, headers=(NO_RETRY,)))
