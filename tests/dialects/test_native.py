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


def test_usage_from_native_streams():
    for dialect, stream in (("responses", responses_sse(CHUNKS)), ("messages", messages_sse(CHUNKS))):
        usage = native.StreamUsage(dialect)
        for _, data in events(stream):
            usage.feed(data)
        assert usage.counts == (12, 30), dialect


def test_anthropic_usage_adds_the_cached_prompt_and_takes_message_delta_last():
    usage = native.StreamUsage("messages")
    usage.feed({"type": "message_start", "message": {"usage": {"input_tokens": 5, "output_tokens": 1,
                                                               "cache_read_input_tokens": 100}}})
    usage.feed({"type": "message_delta", "usage": {"output_tokens": 40, "input_tokens": None}})
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
