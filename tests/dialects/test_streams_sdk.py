"""Streams: chat chunks translated to each dialect's events, read by the official SDKs'
stream parsers and accumulators over loopback."""

from __future__ import annotations

import json

import anthropic
import openai
import pytest

from tokenward.dialects import messages_schema, responses_schema
from tokenward.dialects.messages_stream import MessagesStream
from tokenward.dialects.responses_stream import ResponsesStream

from .chat_chunks import call_chunks, end_chunks, events, text_chunks
from .loopback import serving

RESPONSES_BODY = {"model": "small-chat", "input": "hi", "stream": True}
MESSAGES_BODY = {"model": "small-chat", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}],
                 "stream": True}
TEXT_THEN_TWO_CALLS = (text_chunks(["Let me ", "check."]) + call_chunks(0, "call_a", "weather", ['{"ci', 'ty": "Paris"}'])
                       + call_chunks(1, "call_b", "weather", ['{"city": ', '"Rome"}']) + end_chunks("tool_calls", 9, 21))


def responses_sse(chunks: list[dict], body: dict = RESPONSES_BODY, **finish) -> bytes:
    stream = ResponsesStream(responses_schema.parse(json.dumps(body).encode()), created_at=1700000000)
    return b"".join(stream.feed(chunk) for chunk in chunks) + stream.finish(**finish)


def messages_sse(chunks: list[dict], body: dict = MESSAGES_BODY, input_tokens: int = 9, **finish) -> bytes:
    stream = MessagesStream(messages_schema.parse(json.dumps(body).encode()), input_tokens=input_tokens)
    return b"".join(stream.feed(chunk) for chunk in chunks) + stream.finish(**finish)


def openai_final(sse: bytes) -> openai.types.responses.Response:
    with serving(200, sse, "text/event-stream") as (url, _):
        client = openai.OpenAI(base_url=url + "/v1", api_key="k", max_retries=0)
        with client.responses.stream(model="small-chat", input="hi") as stream:
            return stream.get_final_response()


def anthropic_final(sse: bytes) -> anthropic.types.Message:
    with serving(200, sse, "text/event-stream") as (url, _):
        client = anthropic.Anthropic(base_url=url, api_key="k", max_retries=0)
        with client.messages.stream(model="small-chat", max_tokens=64, messages=[{"role": "user", "content": "hi"}]) as s:
            return s.get_final_message()


def test_responses_stream_text_then_two_tool_calls():
    response = openai_final(responses_sse(TEXT_THEN_TWO_CALLS))
    assert response.output_text == "Let me check."
    assert [(o.type, getattr(o, "arguments", None)) for o in response.output] == [
        ("message", None), ("function_call", '{"city": "Paris"}'), ("function_call", '{"city": "Rome"}')]
    assert [o.call_id for o in response.output[1:]] == ["call_a", "call_b"]
    assert (response.usage.input_tokens, response.usage.output_tokens, response.usage.total_tokens) == (9, 21, 30)
    assert response.status == "completed"


def test_responses_event_order_and_sequence_numbers():
    named = events(responses_sse(TEXT_THEN_TWO_CALLS))
    assert [data["sequence_number"] for _, data in named] == list(range(len(named)))
    assert all(name == data["type"] for name, data in named)
    kinds = [name for name, _ in named]
    assert kinds == [
        "response.created", "response.in_progress",
        "response.output_item.added", "response.content_part.added",
        "response.output_text.delta", "response.output_text.delta",
        "response.output_text.done", "response.content_part.done", "response.output_item.done",
        "response.output_item.added", "response.function_call_arguments.delta",
        "response.function_call_arguments.delta",
        "response.output_item.added", "response.function_call_arguments.delta",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done", "response.output_item.done",
        "response.function_call_arguments.done", "response.output_item.done",
        "response.completed"]


def test_responses_stream_through_create_yields_typed_events():
    with serving(200, responses_sse(text_chunks(["a", "b"]) + end_chunks("stop", 1, 2)), "text/event-stream") as (url, _):
        client = openai.OpenAI(base_url=url + "/v1", api_key="k", max_retries=0)
        got = list(client.responses.create(model="small-chat", input="hi", stream=True))
    assert "".join(e.delta for e in got if e.type == "response.output_text.delta") == "ab"
    assert got[-1].type == "response.completed" and got[-1].response.usage.output_tokens == 2


def test_responses_stream_cut_by_the_output_bound_is_incomplete():
    named = events(responses_sse(text_chunks(["abc"]) + end_chunks("length", 1, 3)))
    last = named[-1][1]
    assert named[-1][0] == "response.incomplete"
    assert (last["response"]["status"], last["response"]["incomplete_details"]) == (
        "incomplete", {"reason": "max_output_tokens"})


def test_responses_stream_counted_usage_replaces_a_missing_one():
    sse = responses_sse(text_chunks(["abc"]) + end_chunks("stop", 1, 3)[:1],
                        usage={"prompt_tokens": 5, "completion_tokens": 2})
    assert openai_final(sse).usage.total_tokens == 7


def test_responses_in_band_error_is_raised_by_the_sdk():
    stream = ResponsesStream(responses_schema.parse(json.dumps(RESPONSES_BODY).encode()))
    sse = stream.feed(text_chunks(["partial"])[1]) + stream.error("upstream_truncated", "the stream ended early")
    assert stream.finish() == b"" and stream.error("x", "y") == b""
    with serving(200, sse, "text/event-stream") as (url, _):
        client = openai.OpenAI(base_url=url + "/v1", api_key="k", max_retries=0)
        with pytest.raises(openai.APIError) as caught:
            list(client.responses.create(model="small-chat", input="hi", stream=True))
    assert caught.value.code == "upstream_truncated" and "ended early" in caught.value.message


def test_messages_stream_text_then_two_tool_calls():
    message = anthropic_final(messages_sse(TEXT_THEN_TWO_CALLS))
    assert [(b.type, getattr(b, "text", None) or getattr(b, "input", None)) for b in message.content] == [
        ("text", "Let me check."), ("tool_use", {"city": "Paris"}), ("tool_use", {"city": "Rome"})]
    assert [b.id for b in message.content[1:]] == ["call_a", "call_b"]
    assert message.stop_reason == "tool_use"
    assert (message.usage.input_tokens, message.usage.output_tokens) == (9, 21)


def test_messages_event_order():
    named = events(messages_sse(TEXT_THEN_TWO_CALLS))
    assert [name for name, _ in named] == [
        "message_start", "ping",
        "content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",
        "content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",
        "content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",
        "message_delta", "message_stop"]
    assert named[0][1]["message"]["usage"] == {"input_tokens": 9, "output_tokens": 0}
    assert [d["index"] for n, d in named if n.startswith("content_block")] == [0] * 4 + [1] * 4 + [2] * 4
    assert named[-2][1]["usage"]["output_tokens"] == 21


def test_messages_stream_stop_sequence_from_vllm():
    body = {**MESSAGES_BODY, "stop_sequences": ["END"]}
    named = events(messages_sse(text_chunks(["x"]) + end_chunks("stop", 1, 1, stop_reason="END"), body))
    assert named[-2][1]["delta"] == {"stop_reason": "stop_sequence", "stop_sequence": "END"}


def test_messages_stream_with_no_output_still_closes():
    message = anthropic_final(messages_sse(end_chunks("stop", 4, 0)))
    assert message.content == [] and message.stop_reason == "end_turn" and message.usage.input_tokens == 4


def test_messages_in_band_error_is_raised_by_the_sdk():
    stream = MessagesStream(messages_schema.parse(json.dumps(MESSAGES_BODY).encode()))
    sse = stream.feed(text_chunks(["partial"])[1]) + stream.error("stream_idle_timeout", "no token for 30 s", 504)
    with serving(200, sse, "text/event-stream") as (url, _):
        client = anthropic.Anthropic(base_url=url, api_key="k", max_retries=0)
        with pytest.raises(anthropic.APIStatusError) as caught:
            with client.messages.stream(model="m", max_tokens=5, messages=[{"role": "user", "content": "x"}]) as s:
                s.get_final_message()
    assert caught.value.body["error"] == {"type": "timeout_error", "message": "no token for 30 s",
                                          "code": "stream_idle_timeout"}


def test_chunks_as_data_bytes_and_unreadable_ones():
    stream = MessagesStream(messages_schema.parse(json.dumps(MESSAGES_BODY).encode()))
    out = stream.feed(b'{"choices":[{"index":0,"delta":{"content":"hey"}}]}') + stream.feed(b"[DONE]")
    out += stream.feed(b'{"choices": 5}') + stream.finish()
    deltas = [d["delta"]["text"] for n, d in events(out) if n == "content_block_delta"]
    assert deltas == ["hey"]


def test_a_second_choice_is_ignored():
    """The translated request never sets n; a backend's stray choice 1 does not leak in."""
    stray = {"choices": [{"index": 1, "delta": {"content": "other"}}]}
    chunks = text_chunks(["one"]) + [stray] + end_chunks("stop", 1, 1)
    assert openai_final(responses_sse(chunks)).output_text == "one"
    assert anthropic_final(messages_sse(chunks)).content[0].text == "one"
