"""``POST /v1/jobs``, ``GET /v1/jobs/{id}``, ``DELETE /v1/jobs/{id}`` on the public listener.

The caller is identified exactly as for completions (the identity stage itself: the same
keys, JWTs, revocations and suspensions), and a job is looked up only inside the caller's
tenant, so another tenant's id is ``job_not_found``. Each call leaves one decision record
(deciding stage ``jobs``).
"""

from __future__ import annotations

from time import perf_counter_ns
from typing import Any, Callable

import msgspec

from ..errors import Reason, Refusal
from ..http.asgi import Receive, Scope, Send
from ..http.bodies import read_bounded
from ..http.responses import JSON
from ..pipeline.context import RequestContext, required
from ..pipeline.lifecycle import State
from ..pipeline.outbound import Outbound
from .book import JobBook
from .terms import decode_request, well_formed
from ..wire.codec import json_encode as _encode

PREFIX = "/v1/jobs"
MAX_BODY = 16_384

class JobsApi:
    def __init__(self, book: JobBook, identity: Any, finish: Callable[[RequestContext], None]) -> None:
        self.book = book
        self.identity = identity
        self.finish = finish

    async def __call__(self, scope: Scope, receive: Receive, send: Send, request_id: str) -> None:
        ctx = RequestContext(request_id, scope["method"], scope["path"], scope["headers"], receive, send,
                             perf_counter_ns())
        ctx.deciding_stage = "jobs"
        ctx.lifecycle.move(State.ADMITTING)
        try:
            status, body = await self._handle(ctx)
        except Refusal as refusal:
            status, body = refusal.status, refusal
        # the same way out as a completion's (pipeline/outbound.py): no stage registered a
        # transform here, but the headers identity set (a clamped key, a rate limit) go out
        out = ctx.outbound = Outbound(send, (), request_id.encode(), ctx.response_headers)
        if isinstance(body, Refusal):
            ctx.refused_by("jobs", body)
            ctx.lifecycle.move(State.REJECTED)
            await out.refusal(body)
        else:
            ctx.status = status
            ctx.lifecycle.move(State.ANSWERED)
            await out.whole(status, [JSON, (b"x-request-id", out.request_id)], _encode(body))
        self.finish(ctx)

    async def _handle(self, ctx: RequestContext) -> tuple[int, dict[str, Any] | Refusal]:
        path, method = ctx.path.rstrip("/"), ctx.method
        job_id = path[len(PREFIX) + 1:] if path.startswith(PREFIX + "/") else None
        if path == PREFIX:
            if method != "POST":
                return 405, _method(method, path, b"POST")
        elif job_id is None or "/" in job_id:
            return 404, Refusal(Reason.route_denied, f"route {ctx.path[:200]} is not served by this gateway")
        elif method not in ("GET", "DELETE"):
            return 405, _method(method, path, b"DELETE, GET")
        refused = await self.identity.admit(ctx)
        if refused is not None:
            return refused.status, refused
        principal = required(ctx.principal, "principal")
        tenant = principal.tenant
        # a job id from the path, recorded only in a job id's shape: the path is the client's
        # to fill, and the record keeps no value of it (observe/routes.py)
        ctx.note("job", job_id if job_id is None or well_formed(job_id) else "malformed")
        if job_id is None:
            return await self._create(ctx, tenant)
        found = await (self.book.view(tenant, job_id) if method == "GET" else self.book.cancel(tenant, job_id))
        return 200, found

    async def _create(self, ctx: RequestContext, tenant: str) -> tuple[int, dict[str, Any] | Refusal]:
        content_type = ctx.header(b"content-type") or b""
        if content_type.split(b";", 1)[0].strip().lower() != b"application/json":
            return 415, Refusal(Reason.unsupported_media_type, "content-type must be application/json")
        body = await read_bounded(ctx.receive, MAX_BODY, "a job's body")
        if isinstance(body, Refusal):
            return body.status, body
        try:
            request = decode_request(body)
        except msgspec.ValidationError as exc:
            reason = Reason.unknown_field if "unknown field" in str(exc) else Reason.invalid_field
            return 400, Refusal(reason, f"invalid job: {exc}")
        except msgspec.DecodeError as exc:
            return 400, Refusal(Reason.invalid_json, f"the body is not JSON: {exc}")
        created = await self.book.create(tenant, required(ctx.principal, "principal").plan, request)
        if isinstance(created, Refusal):
            return created.status, created
        ctx.note("job", created.id)
        return 201, await self.book.view(tenant, created.id)


def _method(method: str, path: str, allowed: bytes) -> Refusal:
    return Refusal(Reason.method_not_allowed, f"method {method} is not allowed on {path[:200]}",
                   headers=((b"allow", allowed),))

