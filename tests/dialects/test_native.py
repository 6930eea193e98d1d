"""Reading native answers: usage from each dialect's own fields, and the text deltas a
streamed restorer rewrites. The streams are the translators' output, which the SDK tests
show to be what the SDKs read; a rewrite through ``with_text`` / ``whole_texts`` must
reach the SDK's accumulated answer."""

from __future__ import annotations

import json

from tokenward.dialects import native
from tokenward.dialects.common import sse

from .chat_chunks import call_chunks, end_chunks, events, text_chunks
from .test_streams_sdk import anthropic_final, messages_sse, openai_final, responses_sse

CHUNKS = text_chunks(["Mail ", "ann@", "example.org"]) + call_chunks(0, "c1", "send", ['{"to": "ann', '@example.org"}']) \
    + end_chunks("tool_calls", 12, 30)


def rewrite(stream: bytes, change) -> bytes:
    """Every delta and every whole text of a stream passed through ``change``."""
    out = []
    for name, data in events(stream):
        if native.text_delta(data) is not None:
            data = native.with_text(data, change(native.text_delta(data)[1]))
        for container, field in native.whole_texts(data):
            container[field] = change(container[field])
        out.append(sse(name, data))
    return b"".join(out)


def _read(data: dict) -> native.Event:
    """An event's data as the native stream reader reads it."""
    event = native.read_event(json.dumps(data).encode())
    assert event is not None
    return event


def test_usage_from_native_streams():
    for dialect, stream in (("responses", responses_sse(CHUNKS)), ("messages", messages_sse(CHUNKS))):
        usage = native.StreamUsage(dialect)
        for _, data in events(stream):
            usage.feed(_read(data))
        assert usage.counts == (12, 30), dialect


def test_anthropic_usage_adds_the_cached_prompt_and_takes_message_delta_last():
    usage = native.StreamUsage("messages")
    usage.feed(_read({"type": "message_start", "message": {"usage": {"input_tokens": 5, "output_tokens": 1,
                                                                     "cache_read_input_tokens": 100}}}))
    usage.feed(_read({"type": "message_delta", "usage": {"output_tokens": 40, "input_tokens": None}}))
    assert usage.counts == (105, 40)
    assert native.answer_usage("messages", json.dumps({"usage": {"input_tokens": 3, "output_tokens": 2,
                                                                 "cache_creation_input_tokens": 7}}).encode()) == (10, 2)
    assert native.answer_usage("responses", b'{"usage": {"input_tokens": 3, "output_tokens": 2}}') == (3, 2)
    assert native.answer_usage("responses", b'{"usage": null}') is None
    assert native.answer_usage("messages", b"not json") is None
    assert native.StreamUsage("responses").counts is None


def test_text_slots_reassemble_each_text():
    for stream in (responses_sse(CHUNKS), messages_sse(CHUNKS)):
        slots: dict = {}
        for _, data in events(stream):
            found = native.text_delta(data)
            if found is not None:
                slots[found[0]] = slots.get(found[0], "") + found[1]
        assert sorted(slots.values()) == ["Mail ann@example.org", '{"to": "ann@example.org"}']


def test_a_rewrite_of_deltas_and_whole_texts_reaches_the_sdks():
    change = lambda text: text.replace("ann", "ANN")  # noqa: E731
    response = openai_final(rewrite(responses_sse(CHUNKS), change))
    assert response.output_text == "Mail ANN@example.org"
    assert json.loads(response.output[1].arguments) == {"to": "ANN@example.org"}
    message = anthropic_final(rewrite(messages_sse(CHUNKS), change))
    assert message.content[0].text == "Mail ANN@example.org"
    assert message.content[1].input == {"to": "ANN@example.org"}


def _delta(data: dict) -> bool:
    return native.is_delta(_read(data))


def test_a_delta_that_reports_no_usage_is_told_apart_and_every_other_event_is_read():
    """``is_delta``: the events kept as bytes, their text unread unless the stream ends
    without its count; an event reporting usage, or of another kind, is read (escapes too)."""
    for kind in ("response.output_text.delta", "response.function_call_arguments.delta",
                 "response.reasoning_text.delta", "response.reasoning_summary_text.delta", "response.refusal.delta",
                 "response.custom_tool_call_input.delta"):
        assert _delta({"type": kind, "output_index": 0, "delta": "x"}), kind
    text = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "x"}}
    assert _delta(text) and _delta({**text, "usage": None})
    assert not _delta({**text, "usage": {"output_tokens": 3}})
    escaped = b'{"type": "message_delta", "delta": {}, "us\\u0061ge": {"output_tokens": 3}}'
    event = native.read_event(escaped)
    assert event is not None and event.usage == {"output_tokens": 3} and not native.is_delta(event)
    for other in ({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 3}},
                  {"type": "content_block_stop", "index": 0}, {"type": "response.completed", "response": {}},
                  {"type": "response.output_text.done", "text": "x"}, {"type": ["content_block_delta"]},
                  {"type": {"a": 1}}):
        assert not _delta(other), other
    assert native.read_event(b"[1, 2]") is None and native.read_event(b"{nope") is None


def test_stream_usage_reads_each_dialects_counts_from_the_events():
    usage = native.StreamUsage("messages")
    for data in ({"type": "message_start", "message": {"usage": {"input_tokens": 20, "output_tokens": 1}}},
                 {"type": "message_delta", "usage": {"output_tokens": 7}}):
        usage.feed(_read(data))
    assert (usage.counts, usage.final) == ((20, 7), True)
    usage = native.StreamUsage("responses")
    usage.feed(_read({"type": "response.created", "response": {"usage": None}}))
    assert (usage.counts, usage.final) == (None, False)
    usage.feed(_read({"type": "response.completed", "response": {"usage": {"input_tokens": 12, "output_tokens": 4}}}))
    assert (usage.counts, usage.final) == ((12, 4), True)
