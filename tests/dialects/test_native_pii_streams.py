"""Personal data restored in a *native* Responses or Messages stream (tokenize mode).

A masked request now goes to an upstream that serves its API as the dialect itself
(dialects/native_edit.py): the restorer edits the dialect's own delta events, holding back
a tail that may start a placeholder per text slot. Property: however the backend splits
its text into deltas, and however the bytes of its stream are cut, the client reads every
value back, exactly once, in the deltas and in the texts the closing events repeat, and
no placeholder of this request is left; an escaped token the caller typed comes back as
typed. Through the real ``Outbound`` chain.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tokenward.dialects.native_edit import NativeEdit
from tokenward.pii.placeholders import Restorer
from tokenward.pipeline.outbound import Outbound
from tokenward.wire.sse import SseSplitter

ANSWER = "Write to {EMAIL_0} or {EMAIL_1}; {~EMAIL_0} is what you typed. {PHONE_0}! {NOT_0} {"
VALUES = {"EMAIL_0": "ana@ex.io", "EMAIL_1": "bo@ex.io", "PHONE_0": "+44 20 7946 0958"}
EXPECTED = "Write to ana@ex.io or bo@ex.io; {EMAIL_0} is what you typed. +44 20 7946 0958! {NOT_0} {"
ARGS = '{"to": "{EMAIL_1}", "cc": "{PHONE_0}"}'
EXPECTED_ARGS = '{"to": "bo@ex.io", "cc": "+44 20 7946 0958"}'


def _sse(kind: str, data: dict[str, Any]) -> bytes:
    return b"event: " + kind.encode() + b"\ndata: " + json.dumps(data).encode() + b"\n\n"


def _pieces(text: str, cuts: list[int]) -> list[str]:
    bounds = sorted({0, len(text), *[c % (len(text) + 1) for c in cuts]})
    return [text[a:b] for a, b in zip(bounds, bounds[1:])]


def responses_stream(text_cuts: list[int], arg_cuts: list[int]) -> bytes:
    seq = iter(range(10 ** 6))
    msg = {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
           "content": [{"type": "output_text", "text": ANSWER, "annotations": []}]}
    call = {"id": "fc_1", "type": "function_call", "call_id": "call_1", "name": "send", "arguments": ARGS,
            "status": "completed"}
    out = [_sse("response.created", {"type": "response.created", "sequence_number": next(seq),
                                     "response": {"id": "resp_1", "status": "in_progress", "output": []}})]
    where = {"item_id": "msg_1", "output_index": 0, "content_index": 0}
    out += [_sse("response.output_text.delta", {"type": "response.output_text.delta",
                                                "sequence_number": next(seq), **where, "delta": piece})
            for piece in _pieces(ANSWER, text_cuts)]
    out += [_sse("response.output_text.done", {"type": "response.output_text.done", "sequence_number": next(seq),
                                               **where, "text": ANSWER}),
            _sse("response.output_item.done", {"type": "response.output_item.done", "sequence_number": next(seq),
                                               "output_index": 0, "item": msg})]
    out += [_sse("response.function_call_arguments.delta", {
        "type": "response.function_call_arguments.delta", "sequence_number": next(seq), "item_id": "fc_1",
        "output_index": 1, "delta": piece}) for piece in _pieces(ARGS, arg_cuts)]
    out += [_sse("response.function_call_arguments.done", {
                "type": "response.function_call_arguments.done", "sequence_number": next(seq), "item_id": "fc_1",
                "output_index": 1, "arguments": ARGS}),
            _sse("response.completed", {"type": "response.completed", "sequence_number": next(seq), "response": {
                "id": "resp_1", "status": "completed", "output": [msg, call],
                "usage": {"input_tokens": 5, "output_tokens": 30}}})]
    return b"".join(out)


def messages_stream(text_cuts: list[int], arg_cuts: list[int]) -> bytes:
    out = [_sse("message_start", {"type": "message_start", "message": {
        "id": "msg_1", "type": "message", "role": "assistant", "content": [], "usage": {"input_tokens": 5,
                                                                                         "output_tokens": 1}}}),
           _sse("content_block_start", {"type": "content_block_start", "index": 0,
                                        "content_block": {"type": "text", "text": ""}})]
    out += [_sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                                         "delta": {"type": "text_delta", "text": piece}})
            for piece in _pieces(ANSWER, text_cuts)]
    out += [_sse("content_block_stop", {"type": "content_block_stop", "index": 0}),
            _sse("content_block_start", {"type": "content_block_start", "index": 1, "content_block": {
                "type": "tool_use", "id": "toolu_1", "name": "send", "input": {}}})]
    out += [_sse("content_block_delta", {"type": "content_block_delta", "index": 1,
                                         "delta": {"type": "input_json_delta", "partial_json": piece}})
            for piece in _pieces(ARGS, arg_cuts)]
    out += [_sse("content_block_stop", {"type": "content_block_stop", "index": 1}),
            _sse("message_delta", {"type": "message_delta", "delta": {"stop_reason": "tool_use"},
                                   "usage": {"output_tokens": 30}}),
            _sse("message_stop", {"type": "message_stop"})]
    return b"".join(out)


async def _relay(stream: bytes, cuts: list[int]) -> bytes:
    sent: list[bytes] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message.get("body", b""))

    out = Outbound(send, [NativeEdit(Restorer(VALUES, {"EMAIL_0"}))], b"req_1")
    splitter = SseSplitter()
    bounds = sorted({0, len(stream), *[c % (len(stream) + 1) for c in cuts]})
    for a, b in zip(bounds, bounds[1:]):
        events = splitter.feed(stream[a:b])
        if events:
            await out.events(events)
    await out.end_stream(b"")
    return b"".join(sent)


def _read(stream: bytes) -> tuple[str, str, list[str]]:
    text, args, wholes = [], [], []
    for event in SseSplitter().feed(stream):
        data = json.loads(event.data)
        kind = data["type"]
        if kind == "response.output_text.delta":
            text.append(data["delta"])
        elif kind == "response.function_call_arguments.delta":
            args.append(data["delta"])
        elif kind == "response.output_text.done":
            wholes.append(data["text"])
        elif kind == "response.function_call_arguments.done":
            wholes.append(data["arguments"])
        elif kind == "response.completed":
            output = data["response"]["output"]
            wholes += [output[0]["content"][0]["text"], output[1]["arguments"]]
        elif kind == "content_block_delta":
            delta = data["delta"]
            (text if delta["type"] == "text_delta" else args).append(delta.get("text") or delta.get("partial_json"))
    return "".join(text), "".join(args), wholes


def _check(dialect: str, stream: bytes) -> None:
    text, args, wholes = _read(stream)
    assert text == EXPECTED and args == EXPECTED_ARGS
    assert b"{EMAIL_1}" not in stream and b"{PHONE_0}" not in stream
    if dialect == "responses":
        assert wholes == [EXPECTED, EXPECTED_ARGS, EXPECTED, EXPECTED_ARGS]
    else:
        assert stream.rstrip().endswith(b'{"type": "message_stop"}')


def test_every_byte_split_of_a_native_stream():
    for dialect, make in (("responses", responses_stream), ("messages", messages_stream)):
        stream = make([7, 13, 40], [5, 9])
        for cut in range(len(stream) + 1):
            _check(dialect, asyncio.run(_relay(stream, [cut])))


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["responses", "messages"]), st.lists(st.integers(0, 200), max_size=30),
       st.lists(st.integers(0, 60), max_size=12), st.lists(st.integers(0, 10 ** 5), max_size=20))
def test_placeholders_split_anywhere_in_a_native_stream_are_restored_exactly(dialect, text_cuts, arg_cuts, cuts):
    make = responses_stream if dialect == "responses" else messages_stream
    _check(dialect, asyncio.run(_relay(make(text_cuts, arg_cuts), cuts)))
