"""Counting a stream's output from its events (llama.cpp reports none)."""

from __future__ import annotations

import orjson
import pytest

from tokenward.reconcile.stream_usage import DONE, ERROR, MALFORMED, OTHER, TOKENS, USAGE_ONLY, StreamUsage
from tokenward.reconcile.usage import Usage
from tokenward.tokenize.registry import build_counter
from tokenward.wire.sse import SseEvent


class Account(StreamUsage):
    """StreamUsage fed with data bytes, as the tests write them."""

    def observe(self, data):
        return super().observe(SseEvent(b"data: " + data + b"\n\n"))


def chunk(delta=None, text=None, finish=None, index=0, **extra) -> bytes:
    choice = {"index": index, "finish_reason": finish}
    if delta is not None:
        choice["delta"] = delta
    if text is not None:
        choice["text"] = text
    return orjson.dumps({"id": "c1", "object": "chat.completion.chunk", "created": 5, "model": "m",
                         "choices": [choice], **extra})


def test_role_and_finish_chunks_are_not_tokens_empty_content_is():
    account = Account()
    assert account.observe(chunk({"role": "assistant"})) == OTHER
    assert account.observe(chunk({"role": "assistant", "content": ""})) == OTHER   # OpenAI's role chunk
    assert account.observe(chunk({"content": "Hel"})) == TOKENS
    assert account.observe(chunk({"content": ""})) == TOKENS      # a token with no whole character yet
    assert account.observe(chunk({"content": "lo"})) == TOKENS
    assert account.observe(chunk({}, finish="length")) == OTHER
    assert account.observe(b"[DONE]") == DONE
    assert account.token_events == 3 and account.unfinished() == [] and account.saw_done
    assert account.usage(7) == Usage(7, 3, "counted")
    assert (account.stream_id, account.object, account.created, account.model) == ("c1", "chat.completion.chunk", 5, "m")


def test_completions_tool_calls_and_choices_apart():
    account = Account()
    account.observe(chunk(text=""))                      # llama.cpp's first completion chunk
    account.observe(chunk(text=" hi", index=1))
    account.observe(chunk({"tool_calls": [{"index": 0, "function": {"name": "f", "arguments": "{"}}]}, index=2))
    account.observe(chunk(text="", finish="stop"))
    assert account.token_events == 3 and sorted(account.unfinished()) == [1, 2]


def test_a_tokenizer_counts_merged_chunks_and_empty_events_on_top():
    counter = build_counter("tiktoken:cl100k_base")
    account = Account(counter)
    # one chunk carrying several tokens (a server's held-back bytes), one empty event
    account.observe(chunk({"content": "internationalization is hard"}))
    account.observe(chunk({"content": ""}))
    by_text = counter.count("internationalization is hard") + 1
    assert account.counted_output() == max(2, by_text) == by_text


def test_reported_usage_wins_and_a_usage_only_chunk_is_marked():
    account = Account(build_counter("tiktoken:cl100k_base"))
    account.observe(chunk({"content": "x"}))
    kind = account.observe(orjson.dumps({"id": "c1", "choices": [], "usage": {"prompt_tokens": 3,
                                                                              "completion_tokens": 9}}))
    assert kind == USAGE_ONLY and account.usage(99) == Usage(3, 9, "reported")


@pytest.mark.parametrize("data,kind", [
    (b'{"error": {"message": "boom"}}', ERROR),
    (b"not json", MALFORMED),                                 # the relay ends the stream here
    (b'{"choices": [{"delta": {"content": 5}}]}', TOKENS),   # a type we did not expect: counted, noted
    (b'[1, 2]', MALFORMED),                                   # JSON, but not a chunk
])
def test_odd_events_never_raise(data, kind):
    account = Account()
    assert account.observe(data) == kind
