"""The lenient body peek that identity and entitlement share: one decode per body."""

from __future__ import annotations

from tokenward.pipeline.context import RequestContext
from tokenward.stages import peek as peek_module
from tokenward.stages.peek import body_peek


def _ctx(body: bytes) -> RequestContext:
    ctx = RequestContext("req_1", "POST", "/v1/chat/completions", [], None, None, 0)
    ctx.body = body
    return ctx


def _counting(monkeypatch) -> list[bytes]:
    seen: list[bytes] = []
    decode = peek_module._decode

    def counted(body: bytes):
        seen.append(body)
        return decode(body)

    monkeypatch.setattr(peek_module, "_decode", counted)
    return seen


def test_the_body_is_decoded_once_for_every_stage_that_peeks(monkeypatch):
    seen = _counting(monkeypatch)
    ctx = _ctx(b'{"model": "m", "user": "alice", "messages": [{"role": "system", "content": "x"}]}')
    first, second = body_peek(ctx), body_peek(ctx)
    assert first is second and first.user == "alice" and first.messages[0].role == "system"
    assert len(seen) == 1


def test_a_body_that_does_not_fit_is_peeked_at_once_and_reads_as_none(monkeypatch):
    seen = _counting(monkeypatch)
    ctx = _ctx(b'{"messages": "not a list"}')
    assert body_peek(ctx) is None and body_peek(ctx) is None
    assert len(seen) == 1
    assert body_peek(_ctx(b"")) is None and len(seen) == 1       # no body: nothing to decode


def test_a_rewritten_body_is_peeked_at_again(monkeypatch):
    seen = _counting(monkeypatch)
    ctx = _ctx(b'{"model": "a"}')
    assert body_peek(ctx).model == "a"
    ctx.body, ctx.peek = b'{"model": "b"}', None                   # what entitlement does when it rewrites
    assert body_peek(ctx).model == "b" and len(seen) == 2
