"""The cache key from the validated request: the fields that do not change an answer are
left out, nothing else is, and the request is left exactly as it was."""

from __future__ import annotations

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenward.cache.key import IGNORED, cache_key
from tokenward.validation.schemas import ChatCompletionRequest, CompletionRequest

SECRET = b"s" * 32
_limits = st.one_of(st.none(), st.integers(1, 4096))
_text = st.text(max_size=40)


@st.composite
def requests(draw):
    chat = draw(st.booleans())
    raw: dict = {"model": "m", "temperature": draw(st.one_of(st.none(), st.floats(0, 2)))}
    if chat:
        raw["messages"] = [{"role": "user", "content": draw(_text)}]
        cap = draw(_limits)
        if cap is not None:
            raw["max_completion_tokens"] = cap
    else:
        raw["prompt"] = draw(_text)
    for field, value in (("max_tokens", draw(_limits)), ("user", draw(st.one_of(st.none(), _text))),
                         ("stream", draw(st.one_of(st.none(), st.booleans())))):
        if value is not None:
            raw[field] = value
    if raw.get("stream") and draw(st.booleans()):
        raw["stream_options"] = {"include_usage": draw(st.booleans())}
    return (ChatCompletionRequest if chat else CompletionRequest), raw


def _typed(kind, raw: dict):
    body = msgspec.json.encode(raw)
    return body, msgspec.json.decode(body, type=kind)


@settings(max_examples=300, deadline=None)
@given(requests(), st.data())
def test_the_ignored_fields_do_not_change_the_key_and_the_request_is_left_as_it_was(drawn, data):
    kind, raw = drawn
    body, typed = _typed(kind, raw)
    before = msgspec.json.encode(typed)
    key, limit = cache_key(SECRET, "tw", "acme", body, typed)
    assert msgspec.json.encode(typed) == before            # cleared and put back
    assert limit == (raw.get("max_completion_tokens") or raw.get("max_tokens"))
    # the same request with other values (or none) in every ignored field: the same key
    other = {k: v for k, v in raw.items() if k not in IGNORED}
    if data.draw(st.booleans()):
        other.update(stream=True, stream_options={"include_usage": True}, user="someone else", max_tokens=7)
    assert cache_key(SECRET, "tw", "acme", *_typed(kind, other))[0] == key
    # the untyped path (a body a later stage rewrote) keys the same request apart from the
    # typed path's form, but still ignores the same fields
    assert cache_key(SECRET, "tw", "acme", body)[0] == cache_key(SECRET, "tw", "acme", msgspec.json.encode(other))[0]


@settings(max_examples=200, deadline=None)
@given(requests())
def test_a_field_that_changes_the_answer_changes_the_key(drawn):
    kind, raw = drawn
    key = cache_key(SECRET, "tw", "acme", *_typed(kind, raw))[0]
    temperature = raw["temperature"] or 0.0
    changed = dict(raw, temperature=temperature + 0.5 if temperature < 1 else temperature - 0.5)
    assert cache_key(SECRET, "tw", "acme", *_typed(kind, changed))[0] != key
    assert cache_key(SECRET, "tw", "globex", *_typed(kind, raw))[0] != key
