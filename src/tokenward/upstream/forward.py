"""The last step: send an admitted request to its backend and relay the answer.

Non-streaming answers are relayed whole; streams event by event (``stream_relay.py``);
both through the request's ``Outbound`` (pipeline/outbound.py), never to the client's
``send`` directly, so the response transforms stages registered see every byte.
Whatever happens, the backend connection is closed or returned to the pool before this
returns, so a client that goes away cancels the backend's work at once. Returns the
``Exit`` the runner settles with; what the backend may have consumed decides its usage:

- the connection was refused (nothing was written): nothing done, refunded;
- the request was written and the connection then failed: possibly consumed, its usage
  unknown (charged in full), or counted from what the stream delivered;
- the backend answered an error status: it did no generation, refunded;
- a whole answer larger than the request could justify (pipeline/bounds.py) is cut
  unread: 502 ``upstream_error``, charged in full (nothing of it could be counted).

Reported usage is clamped to what the request could use before anyone reads it. A client
never sees the backend's address or errno: those go to the log and the decision record.

Which target: the model's upstream is a pool (upstream/pool.py; a ``base_url`` is a pool of
one). The request takes a target there for as long as its answer lasts, its reservation
counted on it; a target that fails before the first byte of an answer hands the request to
another (upstream/failover.py), under the same reservation.
"""

from __future__ import annotations

from typing import Final

import asyncio
import logging
from time import perf_counter_ns

import msgspec

from ..config.schema import StreamConfig
from ..errors import Reason, Refusal
from ..observe.metrics import add_ns
from ..pipeline.context import RequestContext, required
from ..pipeline.stage import Exit, ExitKind
from ..pipeline.bounds import answer_limit
from .usage_report import bounded
from ..reconcile.usage import NOTHING_USED, UNKNOWN, decode_usage_member
from ..reconcile.usage_bounds import from_reported
from .backend_errors import backend_refusal
from .affinity import affinity_seed, prefix_chain
from .client import UpstreamConnectError, UpstreamError, UpstreamTimeout, UpstreamTooLarge
from .failover import TARGET_FAULTS, after_failure, after_status
from .pool import BackendPool, Replica
from .response_head import Response
from .prepare import prepare
from .stream_clock import StreamClock
from .stream_relay import relay_stream
from .targets import Target, TargetTable

log = logging.getLogger("tokenward.upstream")
_JSON_CT: Final = (b"content-type", b"application/json")


def failure_detail(ctx: RequestContext, target: Target, exc: UpstreamError) -> None:
    """What went wrong, with the backend's address and the OS error: for the log and the
    decision record (``notes.upstream_error_detail``), never for the client."""
    ctx.note("upstream_error_detail", exc.detail)
    log.warning("request %s: upstream %s: %s", ctx.request_id, target.upstream_name, exc.detail)


async def _answer_failure(ctx: RequestContext, target: Target, exc: UpstreamError, doing: str) -> Exit:
    """Map a backend failure before the client got a byte to its refusal, and answer it:
    a reason code and the request id, nothing of the backend's address or errno."""
    failure_detail(ctx, target, exc)
    if isinstance(exc, UpstreamTimeout):
        refusal = Refusal(Reason.upstream_timeout, f"the backend did not {doing} in time (request {ctx.request_id})")
        usage = UNKNOWN
    else:
        refusal = Refusal(Reason.upstream_unavailable, f"the backend is unavailable (request {ctx.request_id})")
        # Only a connection refused before any byte was written proves the backend never
        # saw the request; anything later may have started generation.
        usage = NOTHING_USED if isinstance(exc, UpstreamConnectError) else UNKNOWN
    await ctx.out.refusal(ctx.refused_by("forward", refusal))
    return Exit(ExitKind.UPSTREAM_FAILED, refusal.reason.name, usage)


async def _too_large(ctx: RequestContext, target: Target, exc: UpstreamTooLarge) -> Exit:
    """A whole answer larger than the request could justify: cut unread, 502. Nothing of it
    could be counted, so the reservation (the most the request could use) is charged."""
    failure_detail(ctx, target, exc)
    refusal = Refusal(Reason.upstream_error, f"the backend's answer is larger than this request allows "
                                             f"(request {ctx.request_id})")
    await ctx.out.refusal(ctx.refused_by("forward", refusal))
    return Exit(ExitKind.UPSTREAM_FAILED, refusal.reason.name, UNKNOWN)


def _upstream_headers(ctx: RequestContext, target: Target) -> list[tuple[bytes, bytes]]:
    """What the backend gets besides the body: the content type, the request's id, the
    backend's credential and the client headers the upstream lets through."""
    headers = [_JSON_CT]
    if target.request_id_header is not None:
        rid = ctx.request_id if target.request_id_format == "gateway" else upstream_request_id(ctx.request_id)
        headers.append((target.request_id_header, rid.encode()))
    headers += target.auth_headers
    headers += target.allow.select(ctx.headers)
    return headers


async def _take(ctx: RequestContext, backends: BackendPool, tokens: int, salt: bytes | None) -> Replica:
    """A target of a pool of several (or of a capped one): routed, or queued, or refused
    ``upstream_saturated`` (upstream/pool.py). ``salt``: the body's cache_salt, which a
    prompt's prefixes are keyed on (upstream/affinity.py)."""
    chain = prefix_chain(ctx, affinity_seed(ctx, salt)) if backends.affinity is not None else None
    replica = backends.take(tokens, None, chain)
    if replica is None:
        return await backends.wait_turn(tokens, chain)
    if chain:
        ctx.note("affinity", backends.last_affinity)
    return replica


def upstream_request_id(request_id: str) -> str:
    """The UUID form of a gateway request id, for backends that take only UUIDs.

    ``req_1a2b3c4d2f`` (process prefix ``1a2b3c4d``, counter ``2f``) becomes
    ``1a2b3c4d-0000-4000-8000-00000000002f``: a version-4-shaped UUID that an operator
    can map back to the gateway's id by eye, with no lookup and nothing random to log.
    """
    prefix, counter = request_id[4:12], request_id[12:]
    if len(prefix) == 8 and 0 < len(counter) <= 12:
        try:
            int(prefix + counter, 16)
        except ValueError:
            pass
        else:
            return prefix + "-0000-4000-8000-" + counter.rjust(12, "0")
    import uuid

    return str(uuid.uuid4())  # an id from elsewhere (tests, other front ends)


class Forwarder:
    def __init__(self, targets: TargetTable, stream: StreamConfig) -> None:
        self.targets = targets
        self.max_duration = stream.max_duration_s
        self.idle_timeout = stream.idle_timeout_s
        self._stream_clock: StreamClock | None = None

    def clock(self) -> StreamClock:
        if self._stream_clock is None:
            loop = asyncio.get_running_loop()
            self._stream_clock = StreamClock(loop, self.idle_timeout, self.max_duration)
        return self._stream_clock

    async def __call__(self, ctx: RequestContext) -> Exit:
        if ctx.job is not None:
            # raises the refusal when its agent job was cancelled or expired since admission;
            # records the dispatch (an abandoned reservation is then told apart: jobs/runs.py)
            await ctx.job.dispatch()
        call = prepare(ctx, self.targets, required(ctx.route, "route").upstream_path)
        target = call.target
        headers = _upstream_headers(ctx, target)
        backends = target.backends
        work = ctx.work
        tokens = work.reserve_tokens if work is not None else 0
        timeout = min(target.read_timeout, self.max_duration)
        watch = ctx.disconnect
        if watch is not None:
            watch.arm()
        try:
            replica = backends.single
            if replica is not None and not backends.capped:
                # a pool of one without caps: nothing to choose (BackendPool.take, inlined:
                # this is every single-upstream request's path)
                replica.requests += 1
                replica.tokens += tokens
            else:
                replica = await _take(ctx, backends, tokens, call.salt)
            tried = [replica]
            taken = perf_counter_ns() if backends.capped else 0
            try:
                # one target after another while none has sent a byte of an answer (failover.py);
                # the last one tried holds the request's reservation
                while True:
                    replica.sent += 1
                    sent = perf_counter_ns()
                    try:
                        resp = await replica.transport.request("POST", call.path, headers, call.body, timeout=timeout)
                    except UpstreamError as exc:
                        other = after_failure(ctx, backends, tried, tokens, exc)
                        if other is None:
                            return await _answer_failure(ctx, target, exc, "answer")
                        replica = other
                        continue
                    add_ns(target.answered[call.stream], perf_counter_ns() - sent)
                    status = ctx.upstream_status = resp.status
                    other = None   # a 5xx handed on to another target (no continue inside a
                    try:           # try/finally: mypyc does not compile one)
                        if status < 500:
                            if replica.failures or replica.ejections:
                                backends.succeeded(replica)
                        else:
                            other = after_status(ctx, backends, tried, tokens, status)
                        if other is None:
                            if status >= 400:
                                return await self._relay_error(ctx, target, resp, timeout)
                            if call.stream and status == 200:
                                exit = await relay_stream(self, ctx, call, resp)
                            else:
                                exit = await self._relay_whole(ctx, target, resp, timeout)
                            if exit.reason in TARGET_FAULTS:
                                backends.failed(replica, exit.reason or "")
                            return exit
                    finally:
                        resp.abort()  # no-op when the body was read to the end
                    if other is not None:
                        replica = other
            finally:
                backends.release(tried[-1], tokens, taken, perf_counter_ns() if taken else 0)
                if backends.several:
                    ctx.note("targets", [r.label for r in tried])
        finally:
            if watch is not None:
                watch.disarm()

    async def _relay_whole(self, ctx: RequestContext, target: Target, resp: Response, timeout: float) -> Exit:
        limit = answer_limit(ctx, target.answer_bytes_per_token, target.answer_slack_bytes)
        try:
            body = await resp.read(timeout=timeout, limit=limit)
        except UpstreamTooLarge as exc:
            return await _too_large(ctx, target, exc)
        except UpstreamError as exc:
            return await _answer_failure(ctx, target, exc, "finish")
        try:
            ctx.usage = bounded(ctx, target, from_reported(decode_usage_member(body).usage))
        except (msgspec.DecodeError, msgspec.ValidationError):
            # An empty answer did nothing we can see; one that is not a JSON object may
            # have generated and lost its text: charged in full.
            usage = NOTHING_USED if not body.strip() else UNKNOWN
            what = "an empty body" if usage is NOTHING_USED else "a body that is not a JSON object"
            refusal = Refusal(Reason.upstream_error, f"the backend answered {resp.status} with {what}")
            await ctx.out.refusal(ctx.refused_by("forward", refusal))
            return Exit(ExitKind.UPSTREAM_FAILED, refusal.reason.name, usage)
        ctx.status = resp.status
        headers = [(b"content-type", resp.header(b"content-type") or b"application/json"),
                   (b"x-request-id", ctx.request_id.encode())]
        await ctx.out.whole(resp.status, headers, body)
        return Exit(ExitKind.COMPLETED, None, ctx.usage)

    async def _relay_error(self, ctx: RequestContext, target: Target, resp: Response,
                           timeout: float) -> Exit:
        """The backend refused the work itself: nothing was generated; the client gets the
        gateway's envelope for it (backend_errors.py)."""
        try:
            body = await resp.read(timeout=timeout)
        except UpstreamError:
            body = b""
        refusal = backend_refusal(resp.status, body, resp.header(b"retry-after"),
                                  target.backend_model, ctx.model)
        ctx.usage = NOTHING_USED
        await ctx.out.refusal(ctx.refused_by("forward", refusal))
        return Exit(ExitKind.COMPLETED, None, NOTHING_USED)
