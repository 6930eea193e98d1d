"""Cache entries built from whole answers and from streams, and the keys they are kept under."""

from __future__ import annotations

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenward.cache.entry import StreamAssembly, from_body
from tokenward.cache.key import cache_key
from tokenward.wire.chunks import parsed
from tokenward.wire.sse import SseEvent

SECRET = b"s" * 32


def test_keys_ignore_order_spacing_stream_user_and_limit_but_not_tenant_or_content():
    a = b'{"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5, "stream": true}'
    b = b'{"user":"x","messages":[{"content":"hi","role":"user"}],"model":"m","max_tokens":9}'
    ka, la = cache_key(SECRET, "tw", "acme", a)
    kb, lb = cache_key(SECRET, "tw", "acme", b)
    assert ka == kb and (la, lb) == (5, 9)
    assert cache_key(SECRET, "tw", "globex", a)[0] != ka
    assert cache_key(SECRET, "tw", "acme", a.replace(b"hi", b"ho"))[0] != ka
    assert "hi" not in ka and ka.startswith("tw:{t:")


def test_a_whole_answer_round_trips_as_a_stream_and_back():
    body = orjson.dumps({"object": "chat.completion", "model": "m", "usage": {"prompt_tokens": 3,
                                                                              "completion_tokens": 4},
                         "choices": [{"index": i, "message": {"role": "assistant", "content": f"answer {i}"},
                                      "finish_reason": "stop"} for i in range(2)]})
    entry = from_body(body, 16)
    events = entry.events("r1", include_usage=True)
    rebuilt = StreamAssembly()
    for event in events:
        chunk = parsed(event)
        if chunk is not None:
            rebuilt.add(chunk)
    again = rebuilt.entry(entry.usage, 16)
    assert [c.content for c in again.choices] == ["answer 0", "answer 1"]
    assert [c.finish_reason for c in again.choices] == ["stop", "stop"]
    assert orjson.loads(again.body("r2"))["choices"][1]["message"]["content"] == "answer 1"
    assert orjson.loads(events[-1].data)["usage"] == {"prompt_tokens": 3, "completion_tokens": 4}


def test_what_an_entry_may_serve():
    body = orjson.dumps({"object": "chat.completion", "model": "m",
                         "choices": [{"index": 0, "message": {"content": "x"}, "finish_reason": "length"}]})
    cut = from_body(body, 16)
    assert cut.serves(16) and not cut.serves(32) and not cut.serves(8)
    natural = from_body(body.replace(b'"length"', b'"stop"'), 16)
    assert natural.serves(32) and not natural.serves(8)
    with_logprobs = body.replace(b'"finish_reason"', b'"logprobs":{"content":[]},"finish_reason"')
    assert from_body(with_logprobs, 16) is None


def test_tool_calls_are_put_back_together():
    asm = StreamAssembly()
    pieces = ['{"q":', ' "paris', '"}']
    events = [{"choices": [{"index": 0, "delta": {"role": "assistant", "tool_calls": [
        {"index": 0, "id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": ""}}]}}]}]
    events += [{"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": p}}]}}]}
               for p in pieces]
    events += [{"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}]
    for event in events:
        asm.add(parsed(SseEvent(b"data: " + orjson.dumps({"object": "chat.completion.chunk", **event}) + b"\n\n")))
    entry = asm.entry(None, 10)
    assert entry.choices[0].tool_calls == [{"id": "call_1", "type": "function",
                                            "function": {"name": "lookup", "arguments": '{"q": "paris"}'}}]


_TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_TEXT, _TEXT, _TEXT, st.sampled_from(["stop", "length"])), min_size=1, max_size=3),
       st.randoms(use_true_random=False))
def test_a_stream_split_and_interleaved_anyhow_is_put_back_together(answers, rng):
    """Each choice's content, refusal and reasoning sent in random pieces, the choices'
    chunks interleaved, some chunks carrying nothing: the entry holds each field whole
    (None where it was never sent), and the finish reasons."""
    pending = []                 # per choice, its chunks in order
    for index, (content, refusal, reasoning, _) in enumerate(answers):
        own = []
        for field, text in (("content", content), ("refusal", refusal), ("reasoning_content", reasoning)):
            cuts = sorted(rng.sample(range(len(text) + 1), min(len(text) + 1, rng.randint(0, 4))))
            bounds = [0, *cuts, len(text)]
            own += [(index, {field: text[a:b]}) for a, b in zip(bounds, bounds[1:])]
        own.insert(rng.randint(0, len(own)), (index, {}))
        pending.append(own)
    chunks = []                  # the choices interleaved at random, each one's order kept
    while any(pending):
        chunks.append(rng.choice([own for own in pending if own]).pop(0))
    asm = StreamAssembly()
    for index, delta in chunks:
        asm.add(parsed(SseEvent(b"data: " + orjson.dumps({"object": "chat.completion.chunk", "model": "m", "choices": [
            {"index": index, "delta": delta, "finish_reason": None}]}) + b"\n\n")))
    for index, (*_, finish) in enumerate(answers):
        asm.add(parsed(SseEvent(b"data: " + orjson.dumps({"object": "chat.completion.chunk", "choices": [
            {"index": index, "delta": {}, "finish_reason": finish}]}) + b"\n\n")))
    entry = asm.entry(None, 8)
    assert entry.model == "m" and [c.index for c in entry.choices] == list(range(len(answers)))
    for choice, (content, refusal, reasoning, finish) in zip(entry.choices, answers):
        assert choice.content == content                   # "" when none: a chat answer has content
        assert choice.refusal == (refusal or None) and choice.reasoning_content == (reasoning or None)
        assert choice.finish_reason == finish
