"""The pipeline runner: walk the declared stages, unwind what they took on every exit.

The way in: each stage admits (returns None), refuses (a ``Refusal``), or answers the
request itself (an ``Answer``: a cache hit). Stages that hold something are remembered in
the order they admitted. However the request ends, each of them gets exactly one release
call, newest first: ``on_complete`` when the backend finished the work, ``on_abort``
otherwise (a refusal, an answer by a later stage, an error, a disconnect). A release
that fails is recorded and swallowed, so a broken cleanup never turns a clean refusal
into a 500. Releases after a cancellation run in a shielded task: a second cancel cannot
cut them off.

The way out is one: every response leaves through the request's ``Outbound``
(pipeline/outbound.py), built from the response transforms the stages registered and the
response headers they set. The forwarder writes a backend's answer through it, an
answering stage its own, and the runner every refusal (a stage's, the forward step's, a
store's raised from below a stage) and the end of a request cancelled from outside (an
operator's cancel, a job stopped: ``DisconnectWatch.cancel`` with the refusal to send).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from time import perf_counter_ns
from typing import Any, Awaitable, Callable, Sequence

from ..errors import Reason, Refusal
from ..reconcile.usage import NOTHING_USED, Usage
from .coroutines import is_coroutine
from .context import RequestContext
from .lifecycle import State
from .outbound import Outbound
from .stage import Answer, Exit, ExitKind, Releasing, Stage

log = logging.getLogger("tokenward.runner")

# forward(ctx) -> the Exit that ended the forwarded request (COMPLETED carries usage)
Forward = Callable[[RequestContext], Awaitable[Exit]]
Finish = Callable[[RequestContext], None]


class Runner:
    def __init__(self, stages: Sequence[Stage], forward: Forward, finish: Finish,
                 routes: dict[str, Forward] | None = None) -> None:
        # The stages a request's path runs, chosen once per path: the stages for every route,
        # plus, on a path some stage names in ``on_routes``, those (no check per stage and
        # request). Only paths the stages name are keys: a client's paths cannot grow it.
        named = {path for stage in stages if stage.on_routes is not None for path in stage.on_routes}
        self._default = self._chain(stages, None)
        self._by_path = {path: self._chain(stages, path) for path in named}
        self._forward = forward
        # routes answered by the gateway itself after admission (path -> handler), not forwarded
        self._routes = routes or {}
        self._finish = finish
        self.release_failures = 0

    @staticmethod
    def _chain(stages: Sequence[Stage], path: str | None) -> tuple[tuple[Stage, str, bool], ...]:
        return tuple((stage, stage.name, stage.holds) for stage in stages
                     if stage.on_routes is None or (path is not None and path in stage.on_routes))

    async def run(self, ctx: RequestContext) -> None:
        held: list[Stage] = []
        current = "forward"
        try:
            ctx.lifecycle.move(State.ADMITTING)
            timings = ctx.timings
            t0 = perf_counter_ns()
            # a stage for other routes (the dialects') is not in the chain: not called, not timed
            for stage, name, holds in self._by_path.get(ctx.path, self._default):
                current = name
                decided = stage.decide(ctx)
                # asked once per type (pipeline/coroutines.py)
                if decided is not None and is_coroutine(decided):
                    decided = await decided   # this stage had to wait (pipeline/stage.py)
                # one clock reading per boundary: a stage ends where the next one starts
                t1 = perf_counter_ns()
                timings.append((name, t1 - t0))
                t0 = t1
                if decided is not None:
                    if isinstance(decided, Refusal):
                        await self._refuse(ctx, held, name, decided)
                    else:
                        await self._answer(ctx, held, name, decided)
                    return
                if holds:
                    held.append(stage)
            if ctx.lifecycle.state is State.ADMITTING:
                ctx.lifecycle.move(State.FORWARDING)
            current = "forward"
            route = ctx.route
            ctx.outbound = self._outbound(ctx)
            exit = await self._routes.get(route.path if route is not None else "", self._forward)(ctx)
            timings.append(("forward", perf_counter_ns() - t0))
        except Refusal as refusal:
            # Raised from code below a stage (a store call, the body reader).
            await self._refuse(ctx, held, ctx.deciding_stage or current, refusal)
            return
        except asyncio.CancelledError:
            if await self._cancelled(ctx, held):
                return
            raise
        except Exception:
            log.exception("request %s failed inside the gateway", ctx.request_id)
            await self._failed(ctx, held)
            return
        if held:
            releasing = self._release_now(ctx, held, exit)
            if releasing is not None:
                await releasing
        if not ctx.lifecycle.done:
            ctx.lifecycle.move(State.SETTLED if exit.kind is ExitKind.COMPLETED else State.ABORTED)
        self._finish(ctx)

    async def _refuse(self, ctx: RequestContext, held: list[Stage], stage_name: str,
                      refusal: Refusal) -> None:
        route = ctx.route
        if route is not None and refusal.param:
            refusal = route.client_terms(refusal)   # a dialect names its own fields (pipeline/route.py)
        ctx.refused_by(stage_name, refusal)
        if not ctx.lifecycle.done:
            ctx.lifecycle.move(State.REJECTED)
        await self._release(ctx, held, Exit(ExitKind.REJECTED, refusal.reason.name))
        out = ctx.outbound
        if out is None:   # refused before the forward step: the way out is built here
            out = ctx.outbound = self._outbound(ctx)
        await out.refusal(refusal)
        self._finish(ctx)

    async def _answer(self, ctx: RequestContext, held: list[Stage], stage_name: str, answer: Answer) -> None:
        """A stage answered: what the stages before it took is given back through the same
        unwinding as a refusal (no backend did any work), then the answer goes out through
        the response transforms those stages registered."""
        ctx.deciding_stage = ctx.answered_by = stage_name
        await self._release(ctx, held, Exit(ExitKind.ANSWERED, stage_name, NOTHING_USED))
        ctx.outbound = self._outbound(ctx)
        t0 = perf_counter_ns()
        exit = await answer.deliver(ctx, ctx.outbound)
        ctx.timings.append(("answer", perf_counter_ns() - t0))
        if not ctx.lifecycle.done:
            ctx.lifecycle.move(State.ANSWERED if exit.kind is ExitKind.COMPLETED else State.ABORTED)
        self._finish(ctx)

    @staticmethod
    def _outbound(ctx: RequestContext) -> Outbound:
        transforms = ctx.transforms
        return Outbound(ctx.send, transforms[::-1] if transforms else (), ctx.request_id.encode(),
                        ctx.response_headers)

    def _mark_aborted(self, ctx: RequestContext, reason: Reason) -> None:
        if ctx.reason is None:
            ctx.reason = reason.name
            ctx.status = reason.status
        if ctx.deciding_stage is None:
            ctx.deciding_stage = "forward" if ctx.lifecycle.state in (State.FORWARDING, State.STREAMING) else "runner"
        if not ctx.lifecycle.done:
            ctx.lifecycle.move(State.ABORTED)

    async def _cancelled(self, ctx: RequestContext, held: list[Stage]) -> bool:
        """Unwind a cancelled request; True when the cancel was the gateway's own (the client
        left, or a cancel from outside, which says how to end the request): it is over, not
        the server, and the caller returns instead of re-raising."""
        streaming = ctx.lifecycle.state is State.STREAMING   # before it moves to ABORTED
        self._mark_aborted(ctx, Reason.client_disconnected)
        await _shielded(self._release(ctx, held, Exit(ExitKind.CANCELLED, "cancelled", ctx.usage)))
        watch = ctx.disconnect
        ours = watch is not None and watch.fired
        if ours:
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            if watch is not None and watch.ending is not None:
                await self._end(ctx, watch.ending, streaming)
        self._finish(ctx)
        return ours

    async def _failed(self, ctx: RequestContext, held: list[Stage]) -> None:
        streaming = ctx.lifecycle.state is State.STREAMING
        self._mark_aborted(ctx, Reason.internal_error)
        await self._release(ctx, held, Exit(ExitKind.ERROR, "internal_error", ctx.usage))
        await self._end(ctx, Refusal(Reason.internal_error, "internal error"), streaming)
        self._finish(ctx)

    async def _end(self, ctx: RequestContext, refusal: Refusal, streaming: bool) -> None:
        """End the request with ``refusal`` through its way out, however far the answer got."""
        try:
            out = ctx.outbound or self._outbound(ctx)
            await out.end(refusal, streaming)
        except Exception:  # the client left meanwhile, or the response had already ended
            pass

    async def _release(self, ctx: RequestContext, held: list[Stage], exit: Exit) -> None:
        releasing = self._release_now(ctx, held, exit)
        if releasing is not None:
            await releasing

    def _release_now(self, ctx: RequestContext, held: list[Stage], exit: Exit) -> Releasing:
        """Release each held stage, newest first, with no coroutine while none has to wait;
        else the coroutine that finishes the release from the stage that waits."""
        completed = exit.kind is ExitKind.COMPLETED
        usage: Usage = exit.usage if exit.usage is not None else ctx.usage
        while held:
            stage = held.pop()
            try:
                releasing = stage.complete(ctx, usage) if completed else stage.abort(ctx, exit)
            except Exception:
                self._release_failed(ctx, stage)
                continue
            if releasing is not None:
                return self._release_after(ctx, held, exit, stage, releasing)
        return None

    async def _release_after(self, ctx: RequestContext, held: list[Stage], exit: Exit, stage: Stage,
                             releasing: Coroutine[Any, Any, None]) -> None:
        try:
            await releasing
        except asyncio.CancelledError:
            raise
        except Exception:
            self._release_failed(ctx, stage)
        rest = self._release_now(ctx, held, exit)
        if rest is not None:
            await rest

    def _release_failed(self, ctx: RequestContext, stage: Stage) -> None:
        self.release_failures += 1
        log.exception("release of stage %s failed for %s", stage.name, ctx.request_id)
        ctx.note(f"release_failed.{stage.name}", True)


async def _shielded(coro: Awaitable[None]) -> None:
    task = asyncio.ensure_future(coro)
    try:
        await asyncio.shield(task)
    except asyncio.CancelledError:
        # Cancelled again while releasing: the release still runs to its end in its task.
        await asyncio.wait({task})
