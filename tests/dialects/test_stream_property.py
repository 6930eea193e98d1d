"""Property: whatever the chat stream (text cut anywhere, tool calls with argument
fragments, text after tool calls) and however its bytes arrive, what each dialect's SDK
accumulates from the translated stream equals what the chat stream said.

The chat stream goes the way the gateway reads it: SSE bytes cut at random points, split
by ``upstream.sse.SseSplitter``, typed by ``upstream.chunks.parsed``, fed to the
translator; its output is served over loopback to the official SDKs' stream helpers."""

from __future__ import annotations

import json

import anthropic
import openai
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tokenward.dialects import messages_schema, responses_schema
from tokenward.dialects.messages_stream import MessagesStream
from tokenward.dialects.responses_stream import ResponsesStream
from tokenward.wire.chunks import parsed
from tokenward.wire.sse import SseSplitter

from .chat_chunks import call_chunks, end_chunks, text_chunks
from .loopback import serving

NAMES = st.from_regex(r"[a-z][a-z0-9_]{0,11}", fullmatch=True)
ARGS = st.dictionaries(st.text(max_size=6), st.one_of(st.integers(), st.text(max_size=8), st.booleans()),
                       max_size=3)


@st.composite
def fragments(draw, text: str) -> list[str]:
    cuts = sorted(draw(st.sets(st.integers(1, max(len(text) - 1, 1)), max_size=4)))
    edges = [0, *[c for c in cuts if c < len(text)], len(text)]
    return [text[a:b] for a, b in zip(edges, edges[1:]) if b > a]


@st.composite
def segments(draw) -> list[tuple]:
    """[("text", [pieces]) | ("call", name, args dict, [fragments])], no two texts in a row."""
    out: list[tuple] = []
    for _ in range(draw(st.integers(1, 4))):
        if draw(st.booleans()) and (not out or out[-1][0] != "text"):
            out.append(("text", draw(st.lists(st.text(min_size=1, max_size=12), min_size=1, max_size=4))))
        else:
            args = draw(ARGS)
            out.append(("call", draw(NAMES), args, draw(fragments(json.dumps(args)))))
    return out


def chat_sse(segs: list[tuple]) -> bytes:
    chunks, calls = text_chunks([]), 0
    for seg in segs:
        if seg[0] == "text":
            chunks += text_chunks(seg[1])[1:]
        else:
            chunks += call_chunks(calls, f"call_{calls}", seg[1], seg[3])
            calls += 1
    chunks += end_chunks("tool_calls" if calls else "stop", 5, 9)
    return b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"


def translate(sse: bytes, cuts: list[int], stream) -> bytes:
    splitter, out, edges = SseSplitter(), [], [0, *sorted(c for c in cuts if c < len(sse)), len(sse)]
    for a, b in zip(edges, edges[1:]):
        for event in splitter.feed(sse[a:b]):
            chunk = parsed(event)
            if chunk is not None:
                out.append(stream.feed(chunk))
    return b"".join(out) + stream.finish()


def expected(segs: list[tuple]) -> list[tuple]:
    return [("text", "".join(s[1])) if s[0] == "text" else ("call", s[1], s[2]) for s in segs]


@pytest.fixture(scope="module")
def server():
    with serving(200, b"", "text/event-stream") as (url, canned):
        yield url, canned


CASES = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@CASES
@given(segs=segments(), cuts=st.lists(st.integers(1, 4000), max_size=12))
def test_responses_accumulates_what_the_chat_stream_said(server, segs, cuts):
    url, canned = server
    body = json.dumps({"model": "small-chat", "input": "hi", "stream": True}).encode()
    canned.body = translate(chat_sse(segs), cuts, ResponsesStream(responses_schema.parse(body)))
    client = openai.OpenAI(base_url=url + "/v1", api_key="k", max_retries=0)
    with client.responses.stream(model="small-chat", input="hi") as stream:
        response = stream.get_final_response()
    got = [("text", item.content[0].text) if item.type == "message" else ("call", item.name, json.loads(item.arguments))
           for item in response.output]
    assert got == expected(segs)
    assert (response.usage.input_tokens, response.usage.output_tokens) == (5, 9)


@CASES
@given(segs=segments(), cuts=st.lists(st.integers(1, 4000), max_size=12))
def test_messages_accumulates_what_the_chat_stream_said(server, segs, cuts):
    url, canned = server
    body = json.dumps({"model": "small-chat", "max_tokens": 9, "stream": True,
                       "messages": [{"role": "user", "content": "hi"}]}).encode()
    canned.body = translate(chat_sse(segs), cuts, MessagesStream(messages_schema.parse(body), input_tokens=5))
    client = anthropic.Anthropic(base_url=url, api_key="k", max_retries=0)
    with client.messages.stream(model="small-chat", max_tokens=9, messages=[{"role": "user", "content": "hi"}]) as s:
        message = s.get_final_message()
    got = [("text", block.text) if block.type == "text" else ("call", block.name, block.input)
           for block in message.content]
    assert got == expected(segs)
    assert (message.usage.input_tokens, message.usage.output_tokens) == (5, 9)
