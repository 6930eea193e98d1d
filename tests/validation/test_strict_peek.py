"""The chat route's peek read off the strict decode (validation/peek.py) is the lenient peek.

For any body, a RequestBody whose first peek goes through ``STRICT_CHAT`` must give what the
lenient decode of the same bytes gives, field for field (a peek that does not fit: None for
both), and leave the typed view validation reads only where the strict schema took the body.
"""

from __future__ import annotations

import json

import msgspec
from hypothesis import given, settings, strategies as st

from tokenward.validation.peek import STRICT_CHAT, chat_peek
from tokenward.validation.request import CHAT_DECODER
from tokenward.wire.request_body import RequestBody, _decode_peek

_scalars = st.one_of(st.none(), st.booleans(), st.integers(-3, 300), st.text(max_size=8), st.floats(0, 2))
_content = st.one_of(st.text(max_size=40), st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": st.text(max_size=10)}),
                                                     max_size=2), st.none(), st.integers())
_message = st.fixed_dictionaries(
    {"role": st.sampled_from(["system", "developer", "user", "assistant", "tool", "nobody", 3])},
    optional={"content": _content, "name": st.text(max_size=5), "tool_call_id": st.text(min_size=1, max_size=5)})
_tool = st.one_of(
    st.fixed_dictionaries({"type": st.just("function"),
                           "function": st.fixed_dictionaries({"name": st.from_regex(r"\A[a-z_]{1,8}\Z")},
                                                             optional={"parameters": st.just({"type": "object"}),
                                                                       "description": st.text(max_size=5)})}),
    st.fixed_dictionaries({"type": st.sampled_from(["function", "custom"])}, optional={"custom": st.just({"name": "c"})}))
_FIELDS = {
    "user": st.one_of(st.text(max_size=10), _scalars),
    "tools": st.one_of(st.lists(_tool, max_size=2), st.none()),
    "tool_choice": st.one_of(st.sampled_from(["auto", "none", "required", "sometimes"]), st.none(),
                             st.just({"type": "function", "function": {"name": "f"}})),
    "response_format": st.one_of(st.sampled_from([{"type": "text"}, {"type": "json_object"}, {"type": "other"}]), st.none()),
    "stream": _scalars,
    "stream_options": st.one_of(st.none(), st.fixed_dictionaries({}, optional={
        "include_usage": st.one_of(st.booleans(), st.none()), "include_obfuscation": st.booleans()}), st.just({"x": 1})),
    "logprobs": _scalars, "top_logprobs": _scalars, "max_tokens": _scalars, "max_completion_tokens": _scalars,
    "n": _scalars, "temperature": _scalars, "functions": st.just([{"name": "f"}]), "best_of": _scalars,
    "top_k": _scalars, "chat_template": st.one_of(st.text(max_size=5), st.none()), "priority": _scalars,
    "documents": st.just([{"title": "t"}]), "unknown_field": _scalars,
}
_bodies = st.builds(
    lambda model, messages, extra: {"model": model, "messages": messages, **extra},
    st.one_of(st.text(min_size=1, max_size=6), st.integers()),
    st.lists(_message, max_size=3),
    st.fixed_dictionaries({}, optional=_FIELDS),
)

# bodies the strict schema takes, mostly: the peek is then read off the typed decode
_valid_message = st.one_of(
    st.fixed_dictionaries({"role": st.sampled_from(["system", "developer", "user"]), "content": st.text(max_size=30)},
                          optional={"name": st.text(max_size=5)}),
    st.fixed_dictionaries({"role": st.just("assistant")}, optional={"content": st.one_of(st.text(max_size=9), st.none())}),
    st.fixed_dictionaries({"role": st.just("tool"), "content": st.text(max_size=9),
                           "tool_call_id": st.from_regex(r"\A[a-z0-9]{1,8}\Z")}))
_valid_tool = st.fixed_dictionaries(
    {"type": st.just("function"), "function": st.fixed_dictionaries(
        {"name": st.from_regex(r"\A[a-z_]{1,8}\Z")},
        optional={"parameters": st.just({"type": "object"}), "description": st.text(max_size=5)})})
_maybe_null = lambda values: st.one_of(st.none(), values)  # noqa: E731
_VALID_FIELDS = {
    "user": _maybe_null(st.text(max_size=10)),
    "tools": _maybe_null(st.lists(_valid_tool, max_size=2)),
    "tool_choice": _maybe_null(st.sampled_from(["auto", "none", "required"])),
    "response_format": _maybe_null(st.sampled_from([{"type": "text"}, {"type": "json_object"}])),
    "stream": _maybe_null(st.booleans()),
    "stream_options": _maybe_null(st.fixed_dictionaries({}, optional={
        "include_usage": _maybe_null(st.booleans()), "include_obfuscation": st.booleans()})),
    "logprobs": _maybe_null(st.booleans()), "top_logprobs": _maybe_null(st.integers(0, 20)),
    "max_tokens": _maybe_null(st.integers(1, 10**6)), "max_completion_tokens": _maybe_null(st.integers(1, 10**6)),
    "n": _maybe_null(st.integers(1, 8)), "temperature": _maybe_null(st.floats(0, 2)),
    "seed": _maybe_null(st.integers(0, 2**31)), "metadata": st.just({"k": "v"}),
}
_valid_bodies = st.builds(
    lambda model, messages, extra: {"model": model, "messages": messages, **extra},
    st.text(min_size=1, max_size=6), st.lists(_valid_message, min_size=1, max_size=3),
    st.fixed_dictionaries({}, optional=_VALID_FIELDS),
)


def _lenient(raw: bytes):
    try:
        return _decode_peek(raw)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


@settings(max_examples=600, deadline=None)
@given(st.one_of(_bodies, _valid_bodies))
def test_the_strict_peek_is_the_lenient_peek(body):
    raw = json.dumps(body).encode()
    strict = RequestBody(raw)
    strict.strict = STRICT_CHAT
    assert strict.peek() == _lenient(raw)
    try:
        expected = CHAT_DECODER.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError):
        expected = None
    typed_view = strict._typed if strict._typed_by is CHAT_DECODER else None
    assert typed_view == expected   # left for validation exactly when the strict schema took it


def test_a_plain_agent_body_is_peeked_without_a_lenient_pass(monkeypatch):
    from tokenward.wire import request_body

    def no_lenient(raw):
        raise AssertionError("the lenient decode ran")

    raw = json.dumps({"model": "m", "max_tokens": 16, "user": "u", "stream": True,
                      "stream_options": {"include_usage": True},
                      "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}],
                      "messages": [{"role": "user", "content": "x" * 70_000}]}).encode()
    expected = _decode_peek(raw)
    monkeypatch.setattr(request_body, "_decode_peek", no_lenient)
    body = RequestBody(raw)
    body.strict = STRICT_CHAT
    assert body.peek() == expected
    assert body.typed(CHAT_DECODER) is body._typed   # validation's decode: the one already made


def test_what_the_strict_peek_cannot_say_exactly_is_peeked_leniently():
    named = CHAT_DECODER.decode(json.dumps({"model": "m", "messages": [{"role": "user", "content": "x"}],
                                            "tool_choice": {"type": "function", "function": {"name": "f"}}}))
    vllm = CHAT_DECODER.decode(json.dumps({"model": "m", "messages": [{"role": "user", "content": "x"}], "top_k": 3}))
    assert chat_peek(named) is None and chat_peek(vllm) is None
    raw = json.dumps({"model": "m", "messages": [{"role": "user", "content": "x"}], "top_k": 3}).encode()
    body = RequestBody(raw)
    body.strict = STRICT_CHAT
    assert body.peek() == _decode_peek(raw) and body.peek().top_k == 3
