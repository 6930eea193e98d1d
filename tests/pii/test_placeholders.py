"""Masking with placeholders, and restoring them in whole answers and in streams split anywhere."""

from __future__ import annotations

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenward.pii.placeholders import Masker
from tokenward.wire.sse import SseEvent


def masked(text: str, spans, restore: bool = True) -> tuple[str, Masker]:
    masker = Masker(restore)
    return masker.mask(text, spans), masker


def test_order_of_appearance_per_type_and_the_same_value_the_same_placeholder():
    text = "mail a@b.io or c@d.io, again a@b.io, call +1 415 555 0132"
    spans = [(5, 11, "EMAIL"), (15, 21, "EMAIL"), (29, 35, "EMAIL"), (42, 57, "PHONE")]
    out, masker = masked(text, spans)
    assert out == "mail {EMAIL_0} or {EMAIL_1}, again {EMAIL_0}, call {PHONE_0}"
    assert masker.originals == {"EMAIL_0": "a@b.io", "EMAIL_1": "c@d.io", "PHONE_0": "+1 415 555 0132"}
    other, _ = masked(text, spans)
    assert other == out          # two callers, the same masked text
    redacted, _ = masked(text, spans, restore=False)
    assert redacted == "mail [EMAIL] or [EMAIL], again [EMAIL], call [PHONE]"


def test_a_typed_placeholder_is_neutralized_and_never_restored_to_a_value():
    text = "my {EMAIL_0} and x@y.io"
    out, masker = masked(text, [(text.index("x@"), len(text), "EMAIL")])
    assert out == "my {~EMAIL_0} and {EMAIL_0}"
    restorer = masker.restorer()
    # the model echoes both: the typed one comes back as typed, the real one as the value
    answer = orjson.dumps({"choices": [{"message": {"content": "you said {~EMAIL_0} and {EMAIL_0}"}}]})
    assert orjson.loads(restorer.whole(answer))["choices"][0]["message"]["content"] == \
        "you said {EMAIL_0} and x@y.io"
    # a placeholder of another request's map is left alone
    assert restorer.whole(b'"{EMAIL_7} {PHONE_0}"') == b'"{EMAIL_7} {PHONE_0}"'


def test_tool_call_arguments_and_every_choice_are_restored_in_a_whole_answer():
    _, masker = masked("a@b.io", [(0, 6, "EMAIL")])
    body = orjson.dumps({"choices": [
        {"index": i, "message": {"content": f"{i}: {{EMAIL_0}}", "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "f", "arguments": '{"to": "{EMAIL_0}"}'}}]}}
        for i in range(3)]})
    out = orjson.loads(masker.restorer().whole(body))
    for i, choice in enumerate(out["choices"]):
        assert choice["message"]["content"] == f"{i}: a@b.io"
        assert orjson.loads(choice["message"]["tool_calls"][0]["function"]["arguments"]) == {"to": "a@b.io"}


def chunk(text: str, index: int = 0, finish=None, field: str = "content") -> SseEvent:
    delta = {field: text} if text is not None else {}
    return SseEvent(b"data: " + orjson.dumps({"id": "x", "object": "chat.completion.chunk", "model": "m",
                                               "choices": [{"index": index, "delta": delta,
                                                            "finish_reason": finish}]}) + b"\n\n")


def stream_text(events: list[SseEvent], index: int = 0) -> str:
    out = []
    for event in events:
        data = orjson.loads(event.data)
        for choice in data["choices"]:
            if choice["index"] == index:
                out.append(choice.get("delta", {}).get("content") or "")
    return "".join(out)


ANSWER = "Write to {EMAIL_0} or {EMAIL_1}; {~EMAIL_0} is what you typed. {PHONE_0}! {NOT_0} {"
VALUES = {"EMAIL_0": "ana@ex.io", "EMAIL_1": "bo@ex.io", "PHONE_0": "+44 20 7946 0958"}
EXPECTED = "Write to ana@ex.io or bo@ex.io; {EMAIL_0} is what you typed. +44 20 7946 0958! {NOT_0} {"


def restorer():
    from tokenward.pii.placeholders import Restorer

    return Restorer(VALUES, {"EMAIL_0"})


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, len(ANSWER)), max_size=30), st.booleans())
def test_a_stream_split_anywhere_is_restored_exactly(cuts, finish_chunk):
    bounds = sorted(set([0, len(ANSWER), *cuts]))
    pieces = [ANSWER[a:b] for a, b in zip(bounds, bounds[1:])]
    r = restorer()
    out = []
    for piece in pieces:
        out += r.events([chunk(piece)])
    if finish_chunk:
        out += r.events([chunk(None, finish="stop")])
    out += r.finish()
    assert stream_text(out) == EXPECTED


def test_every_byte_boundary():
    for cut in range(len(ANSWER) + 1):
        r = restorer()
        out = r.events([chunk(ANSWER[:cut])]) + r.events([chunk(ANSWER[cut:])]) + r.finish()
        assert stream_text(out) == EXPECTED, cut


def test_choices_are_held_apart_and_flushed_with_their_finish_reason():
    r = restorer()
    out = r.events([chunk("a {EMA", 0), chunk("b {PHO", 1)])
    out += r.events([chunk("IL_0}", 1), chunk("IL_0} x", 0)])
    out += r.events([chunk(None, 0, "stop"), chunk(None, 1, "stop")])
    assert stream_text(out, 0) == "a ana@ex.io x"
    assert stream_text(out, 1) == "b {PHOIL_0}"      # not a placeholder: given back as sent
    assert r.finish() == []


def test_events_without_a_brace_pass_untouched():
    r = restorer()
    event = chunk("plain text")
    assert r.events([event])[0] is event
