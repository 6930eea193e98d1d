"""The estimate tokenizer is an upper bound: never below the real tiktoken count, for text
and for whole chat requests (overheads included)."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenward.tokenize.counters import EstimateCounter
from tokenward.tokenize.registry import build_counter
from tokenward.tokenize.requests import chat_tokens
from tokenward.validation.schemas import ChatCompletionRequest

ESTIMATE = EstimateCounter()


@pytest.fixture(scope="module")
def exact():
    return [build_counter("tiktoken:cl100k_base"), build_counter("tiktoken:o200k_base")]


# Text that stresses byte-level BPE: every plane, whitespace runs, digits, emoji, CJK.
texts = st.text(alphabet=st.one_of(st.characters(codec="utf-8"), st.sampled_from(" \n\t0123456789")),
                max_size=400)


@given(texts)
@settings(max_examples=500, deadline=None)
def test_estimate_never_undercounts_text(exact, text):
    for counter in exact:
        assert ESTIMATE.count(text) >= len(counter.encoding.encode_ordinary(text))


roles = st.sampled_from(["system", "developer", "user", "assistant"])
messages = st.lists(st.fixed_dictionaries(
    {"role": roles, "content": texts},
    optional={"name": st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=20)}),
    min_size=1, max_size=6)


@given(messages)
@settings(max_examples=200, deadline=None)
def test_estimate_never_undercounts_a_chat_request(exact, msgs):
    body = msgspec.json.encode({"model": "m", "messages": msgs, "max_tokens": 1})
    request = msgspec.json.decode(body, type=ChatCompletionRequest)
    bound = chat_tokens(request, ESTIMATE)
    for counter in exact:
        assert bound >= chat_tokens(request, counter)


def test_estimate_is_the_utf8_length():
    assert ESTIMATE.count("hello") == 5
    assert ESTIMATE.count("héllo") == 6
    assert ESTIMATE.count("😀") == 4
    assert ESTIMATE.count_raw(b'{"a": 1}') == 8
