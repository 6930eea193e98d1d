"""Failover before the first byte: when a pool's target fails a request before any byte of
an answer, another target may take it, under the same reservation.

Asked again elsewhere (at most ``max_attempts`` targets in all, each once):

- a connection refused or that could not be made (DNS, TLS, connect timeout): the target
  never saw the request;
- no connection free to that target within ``pool_timeout_s`` (the gateway's own limit);
- a connection closed or reset after the request was written and before any byte came back
  (a reused keep-alive connection the backend was closing, a backend that died);
- a 502 or 503 answer (a proxy in front of a dead engine, an engine shedding load).

Not asked again: a timeout waiting for the first byte (the target may still be working on
it: two engines would then generate the answer) unless the upstream says
``retry_on_timeout: true``; anything after the first byte of an answer (the client may have
part of it, and the target did the work); any other status (a 4xx is about the request, and
every target would say it).

One request, one charge: the reservation moves from target to target (``BackendPool.swap``),
the admission stage settles once on what the answering target reported, and the one decision
record lists every target tried (``notes.targets``) and why each but the last failed
(``notes.failover``, with the backend's address and error: for the operator, never the
client). A target that sent nothing back may still have spent compute on the request (a
prefill, part of a generation it lost): that is the cost of a retry, the engines', not the
client's.
"""

from __future__ import annotations

import logging
from typing import Any

from ..pipeline.context import RequestContext
from .client import UpstreamConnectError, UpstreamError, UpstreamNoAnswer, UpstreamTimeout, UpstreamTooLarge
from .pool import BackendPool, Replica

log = logging.getLogger("tokenward.upstream")

# a backend's answers that another target may be asked instead
RETRY_STATUSES = frozenset({502, 503})
# how an answer that had started ended, when that says the target failed (its connection
# lost, or silent past the deadline): counted toward its ejection
TARGET_FAULTS = frozenset({"upstream_unavailable", "upstream_timeout", "stream_idle_timeout"})


def failure_kind(exc: UpstreamError) -> str | None:
    """What a failure says of the target, for its health ("unreachable", "timed out"); None
    when it is not the target's doing (no connection free in the gateway's own pool, an
    answer larger than this request allows)."""
    if isinstance(exc, UpstreamTimeout):
        return None if exc.phase == "pool" else "timed out"
    if isinstance(exc, UpstreamTooLarge):
        return None
    if isinstance(exc, (UpstreamConnectError, UpstreamNoAnswer)):
        return "unreachable"
    return "broken answer"


def may_retry(exc: UpstreamError, pool: BackendPool) -> bool:
    """No byte of an answer came, and the target cannot be generating it (or the upstream
    lets a timeout be retried)."""
    if isinstance(exc, (UpstreamConnectError, UpstreamNoAnswer)):
        return True
    if isinstance(exc, UpstreamTimeout):
        return exc.phase in ("connect", "pool") or pool.retry_on_timeout
    return False


def next_target(ctx: RequestContext, pool: BackendPool, tried: list[Replica], tokens: int, detail: str) -> Replica | None:
    """Another target for the request, its reservation moved there, or None (``max_attempts``
    reached, or no target left that may take it)."""
    if len(tried) >= pool.max_attempts:
        return None
    failed = tried[-1]
    other = pool.swap(failed, tokens, tried)
    if other is None:
        return None
    tried.append(other)
    log.warning("request %s: upstream %s: target %s failed before answering (%s); trying %s",
                ctx.request_id, pool.name, failed.label, detail, other.label)
    notes: Any = ctx.notes.get("failover") if ctx.notes is not None else None
    entry = {"target": failed.label, "error": detail}
    if isinstance(notes, list):
        notes.append(entry)
    else:
        ctx.note("failover", [entry])
    return other


def after_failure(ctx: RequestContext, pool: BackendPool, tried: list[Replica], tokens: int,
                  exc: UpstreamError) -> Replica | None:
    """A request failed on its target before an answer: counted against the target; the
    next target to ask, or None (the failure is the answer)."""
    replica = tried[-1]
    kind = failure_kind(exc)
    if kind is not None:
        pool.failed(replica, kind)
    return next_target(ctx, pool, tried, tokens, exc.detail) if may_retry(exc, pool) else None


def after_status(ctx: RequestContext, pool: BackendPool, tried: list[Replica], tokens: int,
                 status: int) -> Replica | None:
    """A target answered 5xx: counted against it; for a 502 or 503, the next target to ask."""
    pool.failed(tried[-1], f"answered {status}")
    if status in RETRY_STATUSES:
        return next_target(ctx, pool, tried, tokens, f"answered {status}")
    return None
