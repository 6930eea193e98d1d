"""The request body's views (wire/request_body.py): each decoded once per version of the
bytes, by every stage that reads it; a rewrite is the next version with no stale view."""

from __future__ import annotations

import msgspec

from tokenward.pipeline.context import RequestContext
from tokenward.wire import request_body


def _ctx(body: bytes) -> RequestContext:
    ctx = RequestContext("req_1", "POST", "/v1/chat/completions", [], None, None, 0)
    ctx.body = body
    return ctx


def _counting(monkeypatch) -> list[bytes]:
    seen: list[bytes] = []
    decode = request_body._decode_peek

    def counted(body: bytes):
        seen.append(body)
        return decode(body)

    monkeypatch.setattr(request_body, "_decode_peek", counted)
    return seen


def test_the_body_is_decoded_once_for_every_stage_that_peeks(monkeypatch):
    seen = _counting(monkeypatch)
    ctx = _ctx(b'{"model": "m", "user": "alice", "stream": true, "max_tokens": 7, '
               b'"messages": [{"role": "system", "content": "x"}]}')
    first, second = ctx.parsed.peek(), ctx.parsed.peek()
    assert first is second and len(seen) == 1
    assert (first.model, first.user, first.stream, first.max_tokens) == ("m", "alice", True, 7)
    assert [m.role for m in first.messages] == ["system"]


def test_a_body_that_does_not_fit_is_decoded_once_and_reads_as_none(monkeypatch):
    seen = _counting(monkeypatch)
    ctx = _ctx(b'{"model": "m", "messages": "not a list"}')
    assert ctx.parsed.peek() is None and ctx.parsed.peek() is None
    assert len(seen) == 1
    assert _ctx(b"").parsed.peek() is None and len(seen) == 1       # no body: nothing to decode


def test_new_bytes_are_the_next_version_and_drop_every_view(monkeypatch):
    seen = _counting(monkeypatch)
    ctx = _ctx(b'{"model": "a"}')
    assert ctx.parsed.peek().model == "a" and ctx.parsed.tree() == {"model": "a"}
    version = ctx.parsed.version
    ctx.body = b'{"model": "b"}'                                      # any stage's rewrite
    assert ctx.parsed.version == version + 1
    assert ctx.parsed.peek().model == "b" and len(seen) == 2
    assert ctx.parsed.tree() == {"model": "b"}


def test_an_edited_tree_becomes_the_next_version_and_its_tree():
    ctx = _ctx(b'{"model": "a", "messages": []}')
    tree = ctx.parsed.edit()
    tree["model"] = "b"
    ctx.parsed.rewrite(tree)
    assert msgspec.json.decode(ctx.body) == {"model": "b", "messages": []}
    assert ctx.parsed.tree() is tree                                 # not decoded again
    assert ctx.parsed.peek().model == "b"


def test_an_abandoned_edit_does_not_leave_a_changed_tree_behind():
    ctx = _ctx(b'{"model": "a"}')
    ctx.parsed.tree()
    tree = ctx.parsed.edit()
    tree["model"] = "changed but never rewritten"
    assert ctx.parsed.tree() == {"model": "a"}


def test_the_typed_view_is_cached_per_decoder_and_version():
    class Only(msgspec.Struct):
        model: str

    decoder = msgspec.json.Decoder(Only)
    ctx = _ctx(b'{"model": "a"}')
    assert ctx.parsed.typed(decoder) is ctx.parsed.typed(decoder)
    ctx.body = b'{"model": "b"}'
    assert ctx.parsed.typed(decoder).model == "b"


def test_members_are_raw_until_the_tree_is_decoded():
    ctx = _ctx(b'{"model": "a", "messages": [{"role": "user"}]}')
    members = ctx.parsed.members()
    assert isinstance(members["messages"], msgspec.Raw)
    ctx.parsed.tree()
    assert ctx.parsed.members() == {"model": "a", "messages": [{"role": "user"}]}
