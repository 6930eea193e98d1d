"""The runner with fake stages: every early exit releases exactly what was taken, once."""

from __future__ import annotations

import asyncio
import json
from time import perf_counter_ns
from typing import NamedTuple

import pytest

from tokenward.errors import Reason, Refusal
from tokenward.pipeline.context import RequestContext
from tokenward.pipeline.lifecycle import IllegalTransition, Lifecycle, State
from tokenward.pipeline.runner import Runner
from tokenward.pipeline.stage import BaseStage, Exit, ExitKind
from tokenward.reconcile.usage import Usage


class Ledger:
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []
        self.outstanding: dict[str, int] = {}


class Taking(BaseStage):
    holds = True

    def __init__(self, name: str, ledger: Ledger, fail_release: bool = False) -> None:
        self.name = name
        self.ledger = ledger
        self.fail_release = fail_release

    async def admit(self, ctx):
        self.ledger.outstanding[self.name] = self.ledger.outstanding.get(self.name, 0) + 1
        self.ledger.events.append(("take", self.name))
        return None

    def _give_back(self, how: str) -> None:
        self.ledger.outstanding[self.name] -= 1
        self.ledger.events.append((how, self.name))
        if self.fail_release:
            raise RuntimeError("release failed")

    async def on_abort(self, ctx, exit):
        self._give_back(f"abort:{exit.kind.value}")

    async def on_complete(self, ctx, usage):
        self._give_back("complete")


class Refusing(BaseStage):
    name = "refusing"

    async def admit(self, ctx):
        return Refusal(Reason.token_budget, "no budget")


class Raising(BaseStage):
    name = "raising"

    async def admit(self, ctx):
        raise ValueError("bug")


class Hanging(BaseStage):
    name = "hanging"

    def __init__(self) -> None:
        self.entered = asyncio.Event()

    async def admit(self, ctx):
        self.entered.set()
        await asyncio.sleep(3600)


class Harness:
    def __init__(self, stages, forward_exit: Exit | None = None, forward_raises: BaseException | None = None):
        self.responses: list[Refusal] = []
        self.finished: list[RequestContext] = []
        self.forwarded = 0

        async def forward(ctx):
            self.forwarded += 1
            if forward_raises is not None:
                raise forward_raises
            return forward_exit or Exit(ExitKind.COMPLETED, None, Usage(1, 2, "reported"))

        self.runner = Runner(stages, forward, self.finished.append)

    def ctx(self) -> RequestContext:
        async def receive():
            return {"type": "http.disconnect"}

        async def send(message):
            # every refusal leaves through the request's one way out (pipeline/outbound.py)
            if message["type"] == "http.response.start":
                reason = dict(message["headers"]).get(b"x-tokenward-reason")
                self._head = (message["status"], reason)
            elif self._head is not None:
                status, reason = self._head
                error = json.loads(message["body"])["error"]
                self.responses.append(Sent(status, Reason[reason.decode()], error["message"]))
                self._head = None

        self._head: tuple | None = None
        return RequestContext("r1", "POST", "/v1/chat/completions", [], receive, send, perf_counter_ns())


class Sent(NamedTuple):
    status: int
    reason: Reason
    message: str


def _all_returned(ledger: Ledger) -> None:
    assert all(count == 0 for count in ledger.outstanding.values()), ledger.outstanding


async def test_success_completes_each_holder_once_newest_first():
    ledger = Ledger()
    h = Harness([Taking("a", ledger), Taking("b", ledger)])
    ctx = h.ctx()
    await h.runner.run(ctx)
    assert ledger.events == [("take", "a"), ("take", "b"), ("complete", "b"), ("complete", "a")]
    _all_returned(ledger)
    assert ctx.lifecycle.state is State.SETTLED and len(h.finished) == 1


async def test_refusal_unwinds_only_earlier_stages_and_never_forwards():
    ledger = Ledger()
    h = Harness([Taking("a", ledger), Taking("b", ledger), Refusing(), Taking("c", ledger)])
    ctx = h.ctx()
    await h.runner.run(ctx)
    assert ledger.events == [("take", "a"), ("take", "b"), ("abort:rejected", "b"), ("abort:rejected", "a")]
    _all_returned(ledger)
    assert h.forwarded == 0
    assert [r.reason for r in h.responses] == [Reason.token_budget]
    assert ctx.deciding_stage == "refusing" and ctx.reason == "token_budget"
    assert ctx.lifecycle.state is State.REJECTED


async def test_exception_unwinds_and_answers_internal_error_without_detail():
    ledger = Ledger()
    h = Harness([Taking("a", ledger), Raising()])
    ctx = h.ctx()
    await h.runner.run(ctx)
    assert ledger.events[-1] == ("abort:error", "a")
    _all_returned(ledger)
    assert h.responses[0].reason is Reason.internal_error and "bug" not in h.responses[0].message
    assert ctx.lifecycle.state is State.ABORTED


async def test_cancellation_unwinds_shielded_and_reraises():
    ledger = Ledger()
    hanging = Hanging()
    h = Harness([Taking("a", ledger), Taking("b", ledger), hanging])
    ctx = h.ctx()
    task = asyncio.ensure_future(h.runner.run(ctx))
    await hanging.entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert ledger.events[-2:] == [("abort:cancelled", "b"), ("abort:cancelled", "a")]
    _all_returned(ledger)
    assert h.forwarded == 0 and len(h.finished) == 1


async def test_cancellation_during_forward_releases_once():
    ledger = Ledger()
    h = Harness([Taking("a", ledger)], forward_raises=asyncio.CancelledError())
    with pytest.raises(asyncio.CancelledError):
        await h.runner.run(h.ctx())
    assert ledger.events == [("take", "a"), ("abort:cancelled", "a")]


async def test_upstream_failure_exit_reaches_on_abort_with_its_usage():
    ledger = Ledger()
    seen = []

    class Recording(Taking):
        async def on_abort(self, ctx, exit):
            seen.append(exit)
            await super().on_abort(ctx, exit)

    h = Harness([Recording("a", ledger)], forward_exit=Exit(ExitKind.UPSTREAM_FAILED, "upstream_unavailable",
                                                             Usage(0, 0, "counted")))
    ctx = h.ctx()
    await h.runner.run(ctx)
    assert seen[0].kind is ExitKind.UPSTREAM_FAILED and seen[0].usage.completion_tokens == 0
    _all_returned(ledger)
    assert ctx.lifecycle.state is State.ABORTED


async def test_failing_release_is_recorded_and_swallowed():
    ledger = Ledger()
    h = Harness([Taking("a", ledger), Taking("b", ledger, fail_release=True), Refusing()])
    ctx = h.ctx()
    await h.runner.run(ctx)
    # b's failure does not stop a's release, and the client still gets the clean 429.
    assert ("abort:rejected", "a") in ledger.events
    assert [r.reason for r in h.responses] == [Reason.token_budget]
    assert h.runner.release_failures == 1 and ctx.notes == {"release_failed.b": True}


async def test_refusal_raised_below_a_stage_unwinds_like_a_returned_one():
    ledger = Ledger()

    class RaisesRefusal(BaseStage):
        name = "store"

        async def admit(self, ctx):
            raise Refusal(Reason.budget_store_unavailable, "store down")

    h = Harness([Taking("a", ledger), RaisesRefusal()])
    ctx = h.ctx()
    await h.runner.run(ctx)
    assert ledger.events[-1] == ("abort:rejected", "a")
    assert h.responses[0].reason is Reason.budget_store_unavailable
    assert ctx.deciding_stage == "store"


def test_lifecycle_refuses_illegal_moves():
    life = Lifecycle()
    life.move(State.ADMITTING)
    with pytest.raises(IllegalTransition):
        life.move(State.SETTLED)
    life.move(State.FORWARDING)
    life.move(State.STREAMING)
    life.move(State.SETTLED)
    with pytest.raises(IllegalTransition):
        life.move(State.ABORTED)


class Marking:
    """A response transform that tags what passes it, to show order and coverage."""

    def __init__(self, tag: bytes) -> None:
        self.tag = tag

    def whole(self, body: bytes) -> bytes:
        return body + self.tag

    def events(self, events):
        from tokenward.wire.sse import SseEvent

        return [SseEvent(e.raw.rstrip(b"\n") + self.tag + b"\n\n") for e in events]

    def finish(self):
        return []

    def close(self, tail):
        return tail


class Transforming(BaseStage):
    def __init__(self, name: str, tag: bytes) -> None:
        self.name = name
        self.tag = tag

    async def admit(self, ctx):
        ctx.add_transform(Marking(self.tag))
        return None


class Answering(BaseStage):
    name = "cache"

    async def admit(self, ctx):
        class Hit:
            async def deliver(self, ctx, out):
                ctx.status = 200
                await out.whole(200, [], b"cached")
                return Exit(ExitKind.COMPLETED, None, Usage(0, 0, "counted"))

        return Hit()


async def test_an_answering_stage_unwinds_like_a_refusal_and_its_answer_passes_the_transforms():
    """The answer exit: holds taken before the answering stage are released (``answered``,
    no backend work), nothing is forwarded, later stages never run, and the answer goes out
    through the transforms registered so far, newest first."""
    ledger = Ledger()
    sent = []

    async def send(message):
        sent.append(message)

    h = Harness([Taking("a", ledger), Transforming("mask", b"|mask"), Transforming("screen", b"|screen"),
                 Answering(), Taking("late", ledger)])
    ctx = h.ctx()
    ctx.send = send
    await h.runner.run(ctx)
    assert ledger.events == [("take", "a"), ("abort:answered", "a")]
    _all_returned(ledger)
    assert h.forwarded == 0 and not h.responses
    assert b"".join(m.get("body", b"") for m in sent) == b"cached|screen|mask"   # newest first
    assert ctx.answered_by == ctx.deciding_stage == "cache"
    assert ctx.lifecycle.state is State.ANSWERED and len(h.finished) == 1


async def test_the_forwarder_writes_through_the_transforms():
    ledger = Ledger()
    sent = []

    async def send(message):
        sent.append(message)

    async def forward(ctx):
        from tokenward.wire.sse import SseEvent

        await ctx.outbound.start_stream(200, [])
        await ctx.outbound.events([SseEvent(b"data: 1\n\n")])
        await ctx.outbound.end_stream(b"data: [DONE]\n\n")
        return Exit(ExitKind.COMPLETED, None, Usage(1, 1, "reported"))

    runner = Runner([Taking("a", ledger), Transforming("mask", b"!")], forward, lambda ctx: None)
    h = Harness([])
    ctx = h.ctx()
    ctx.send = send
    await runner.run(ctx)
    assert [m.get("body") for m in sent[1:]] == [b"data: 1!\n\n", b"data: [DONE]\n\n"]
    assert ledger.events[-1] == ("complete", "a")


class Heading(BaseStage):
    """A stage that sets a response header, as admission sets the rate-limit headers."""

    name = "heading"

    async def admit(self, ctx):
        ctx.response_headers.append((b"x-ratelimit-remaining-tokens", b"42"))
        return None


def _recorder():
    sent: list[dict] = []

    async def send(message):
        sent.append(message)

    return sent, send


@pytest.mark.parametrize("how", ["written", "raised"])
async def test_a_refusal_from_the_forward_step_carries_the_response_headers_and_passes_the_transforms(how):
    """The forward step refuses (an upstream that cannot be reached, a job stopped at
    dispatch, a model the table does not know): whether it writes the refusal through the
    way out or raises it, the answer carries the headers the stages set and passes the
    transforms they registered, as an answer would."""
    sent, send = _recorder()

    async def forward(ctx):
        refusal = Refusal(Reason.upstream_unavailable, "the backend could not be reached")
        if how == "raised":
            raise refusal
        await ctx.outbound.refusal(ctx.refused_by("forward", refusal))
        return Exit(ExitKind.UPSTREAM_FAILED, refusal.reason.name, Usage(0, 0, "counted"))

    runner = Runner([Heading(), Transforming("restore", b"|restored")], forward, lambda ctx: None)
    ctx = Harness([]).ctx()
    ctx.send = send
    await runner.run(ctx)
    head = dict(sent[0]["headers"])
    assert sent[0]["status"] == Reason.upstream_unavailable.status
    assert head[b"x-tokenward-reason"] == b"upstream_unavailable"
    assert head[b"x-ratelimit-remaining-tokens"] == b"42"
    assert sent[1]["body"].endswith(b"|restored")
    assert ctx.deciding_stage == "forward" and ctx.reason == "upstream_unavailable"


async def test_a_stage_refusal_leaves_by_the_same_way_out():
    sent, send = _recorder()
    h = Harness([Heading(), Transforming("restore", b"|restored"), Refusing()])
    ctx = h.ctx()
    ctx.send = send
    await h.runner.run(ctx)
    head = dict(sent[0]["headers"])
    assert sent[0]["status"] == 429 and head[b"x-tokenward-reason"] == b"token_budget"
    assert head[b"x-ratelimit-remaining-tokens"] == b"42"
    assert sent[1]["body"].endswith(b"|restored") and h.forwarded == 0


@pytest.mark.parametrize("streaming", [False, True])
async def test_a_cancel_from_outside_ends_the_request_through_the_way_out(streaming):
    """An operator's cancel (control/streams.py) or a stopped job (jobs/runs.py) hands the
    disconnect watch the refusal; the runner unwinds, then sends it: an envelope (through
    the transforms) before the answer started, an in-band error event ending a started
    stream, with the stages' headers either way."""
    from tokenward.pipeline.disconnect import DisconnectWatch

    sent, send = _recorder()
    ledger = Ledger()
    started = asyncio.Event()

    async def forward(ctx):
        ctx.disconnect.arm()
        if streaming:
            ctx.lifecycle.move(State.STREAMING)
            await ctx.outbound.start_stream(200, [])
        started.set()
        await asyncio.sleep(3600)

    async def receive():
        await asyncio.sleep(3600)

    runner = Runner([Heading(), Taking("a", ledger), Transforming("restore", b"|restored")], forward,
                    lambda ctx: None)
    ctx = RequestContext("r1", "POST", "/v1/chat/completions", [], receive, send, perf_counter_ns())
    ctx.disconnect = DisconnectWatch(receive, asyncio.get_running_loop())
    task = asyncio.ensure_future(runner.run(ctx))
    await started.wait()
    assert ctx.disconnect.cancel(Refusal(Reason.stream_cancelled, "cancelled by the operator"))
    await task                                     # ends normally: the cancel was the gateway's own
    _all_returned(ledger)
    head = dict(sent[0]["headers"])
    assert head[b"x-ratelimit-remaining-tokens"] == b"42"
    if streaming:
        assert sent[0]["status"] == 200
        # the stream's end is the gateway's own event (what transforms held back comes first)
        assert sent[-1]["more_body"] is False and b"stream_cancelled" in sent[-1]["body"]
    else:
        assert sent[0]["status"] == Reason.stream_cancelled.status
        assert head[b"x-tokenward-reason"] == b"stream_cancelled"
        assert sent[1]["body"].endswith(b"|restored")


async def test_a_stage_for_some_routes_is_neither_called_nor_timed_on_others():
    """``on_routes``: the dialect stages on a chat request cost nothing but one check."""
    from types import SimpleNamespace

    calls: list[str] = []

    class Routing(BaseStage):
        name = "routing"

        async def admit(self, ctx):
            ctx.route = SimpleNamespace(path=ctx.path)
            return None

    class OnlyResponses(BaseStage):
        name = "only_responses"
        on_routes = frozenset({"/v1/responses"})

        async def admit(self, ctx):
            calls.append(ctx.path)
            return None

    h = Harness([Routing(), OnlyResponses()])
    chat_ctx = h.ctx()
    await h.runner.run(chat_ctx)
    responses_ctx = h.ctx()
    responses_ctx.path = "/v1/responses"
    await h.runner.run(responses_ctx)
    assert calls == ["/v1/responses"]
    assert [name for name, _ in chat_ctx.timings] == ["routing", "forward"]
    assert [name for name, _ in responses_ctx.timings] == ["routing", "only_responses", "forward"]


def test_a_stage_must_define_admit_or_decide():
    """BaseStage makes admit from decide and decide from admit: a stage with neither would
    recurse, so defining one is refused at once."""
    with pytest.raises(TypeError, match="neither admit nor decide"):
        class Empty(BaseStage):
            name = "empty"


async def test_a_plain_decide_and_one_that_waits_run_alike():
    """decide returning its decision at once, or the coroutine that finishes it: the runner
    treats both as the same decision, in order, and releases a plain holder exactly once."""
    order = []

    class Plain(BaseStage):
        name = "plain"
        holds = True

        def decide(self, ctx):
            order.append("plain")
            return None

        def complete(self, ctx, usage):
            order.append("plain completed")

        def abort(self, ctx, exit):
            order.append(f"plain aborted: {exit.kind.value}")

    class Waiting(BaseStage):
        name = "waiting"

        def decide(self, ctx):
            async def later():
                await asyncio.sleep(0)
                order.append("waited")
                return Refusal(Reason.rate_limited, "after a wait")
            return later()

    h = Harness([Plain(), Waiting()])
    ctx = h.ctx()
    await h.runner.run(ctx)
    assert order == ["plain", "waited", "plain aborted: rejected"]
    assert [r.reason for r in h.responses] == [Reason.rate_limited] and h.forwarded == 0
    assert ctx.reason == "rate_limited" and ctx.deciding_stage == "waiting"
    order.clear()
    h = Harness([Plain()])
    ctx = h.ctx()
    await h.runner.run(ctx)
    assert order == ["plain", "plain completed"] and h.forwarded == 1 and ctx.lifecycle.state is State.SETTLED
    assert await Plain().admit(ctx) is None and (await Waiting().admit(ctx)).reason is Reason.rate_limited
