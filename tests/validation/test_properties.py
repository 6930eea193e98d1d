"""Property: a valid request, generated from the schema within the plan's bounds, is admitted
and forwarded with the same meaning (texts normalized, max_tokens clamped, nothing else)."""

from __future__ import annotations

import copy
import json
import string

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.validation.harness import LAB_PLAN
from tests.validation.loop_harness import LoopGateway
from tokenward.validation.normalize import normal_form

CAP = LAB_PLAN["max_output_tokens"]
SETTINGS = settings(max_examples=250, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    harness = LoopGateway(tmp_path_factory.mktemp("properties"))
    yield harness
    harness.close()


text = st.text(st.characters(codec="utf-8"), max_size=40)
short = st.text(string.ascii_letters + string.digits + " _-", max_size=20)
name = st.text(string.ascii_letters + string.digits + "_-", min_size=1, max_size=16)

sampling = st.fixed_dictionaries({}, optional={
    "temperature": st.floats(0, 2), "top_p": st.floats(0, 1), "seed": st.integers(-(2**63), 2**63 - 1),
    "presence_penalty": st.floats(-2, 2), "frequency_penalty": st.floats(-2, 2),
    "stop": st.one_of(short, st.lists(short, max_size=LAB_PLAN["max_stop"])),
    "logit_bias": st.dictionaries(st.integers(0, 99_999).map(str), st.integers(-100, 100),
                                  max_size=LAB_PLAN["max_logit_bias"]),
    "user": short, "stream": st.booleans(), "n": st.integers(1, LAB_PLAN["max_n"]),
    "top_k": st.integers(-1, 100), "min_p": st.floats(0, 1),
})
parts = st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": text}),
                 min_size=1, max_size=LAB_PLAN["max_content_parts"])
content = st.one_of(text, parts)
message = st.one_of(
    st.fixed_dictionaries({"role": st.sampled_from(["system", "developer", "user"]), "content": content},
                          optional={"name": name}),
    st.fixed_dictionaries({"role": st.just("assistant"), "content": text}, optional={"name": name}),
    st.fixed_dictionaries({"role": st.just("tool"), "content": text, "tool_call_id": name}),
)
tool = st.fixed_dictionaries({"type": st.just("function"), "function": st.fixed_dictionaries(
    {"name": st.sampled_from(LAB_PLAN["allow_tools"])},
    optional={"description": short, "parameters": st.just({"type": "object", "properties": {"q": {"type": "string"}}})})})
chat = st.fixed_dictionaries(
    {"model": st.sampled_from(["small-chat", "tik-chat"]), "messages": st.lists(message, min_size=1, max_size=4),
     "max_tokens": st.integers(1, 3 * CAP)},
    optional={"tools": st.lists(tool, min_size=1, max_size=LAB_PLAN["max_tools"]),
              "response_format": st.sampled_from([{"type": "text"}, {"type": "json_object"}]),
              "logprobs": st.booleans(), "parallel_tool_calls": st.booleans()},
).flatmap(lambda body: sampling.map(lambda extra: {**body, **extra}))

prompts = st.one_of(
    text, st.lists(text, min_size=1, max_size=LAB_PLAN["max_outer_items"]),
    st.lists(st.integers(0, 100_000), min_size=1, max_size=40),
    st.lists(st.lists(st.integers(0, 100_000), min_size=1, max_size=10), min_size=1,
             max_size=LAB_PLAN["max_outer_items"]),
)
completion = st.fixed_dictionaries(
    {"model": st.just("small-chat"), "prompt": prompts, "max_tokens": st.integers(1, 3 * CAP)},
    optional={"echo": st.booleans(), "suffix": text, "logprobs": st.integers(0, 5)},
).flatmap(lambda body: sampling.map(lambda extra: {**body, **extra}))
embedding = st.fixed_dictionaries(
    {"model": st.just("small-chat"), "input": prompts},
    optional={"dimensions": st.integers(1, 4096), "encoding_format": st.sampled_from(["float", "base64"]),
              "user": short})


def expected_forwarded(body: dict) -> dict:
    """What the backend must read: the same request, normalized and clamped."""
    out = copy.deepcopy(body)
    for msg in out.get("messages", ()):
        if isinstance(msg["content"], str):
            msg["content"] = normal_form(msg["content"])
        else:
            for part in msg["content"]:
                part["text"] = normal_form(part["text"])
    for field in ("prompt", "input"):
        value = out.get(field)
        if isinstance(value, str):
            out[field] = normal_form(value)
        elif isinstance(value, list) and value and isinstance(value[0], str):
            out[field] = [normal_form(item) for item in value]
    if isinstance(out.get("suffix"), str):
        out["suffix"] = normal_form(out["suffix"])
    if "max_tokens" in out:
        out["max_tokens"] = min(out["max_tokens"], CAP)
    if out.get("stream") is True:
        out["stream_options"] = {"include_usage": True}  # the forwarder asks on the client's behalf
    return out


def _admitted_with_same_meaning(gw: LoopGateway, path: str, body: dict) -> None:
    before = gw.backend_requests
    status, answer = gw.call("POST", path, json.dumps(body).encode())
    assert status == 200, answer
    assert gw.backend_requests == before + 1
    assert gw.last_forwarded() == expected_forwarded(body)


@given(chat)
@SETTINGS
def test_valid_chat_requests_are_forwarded_with_the_same_meaning(gw, body):
    _admitted_with_same_meaning(gw, "/v1/chat/completions", body)


@given(completion)
@SETTINGS
def test_valid_completion_requests_are_forwarded_with_the_same_meaning(gw, body):
    _admitted_with_same_meaning(gw, "/v1/completions", body)


@given(embedding)
@SETTINGS
def test_valid_embedding_requests_are_forwarded_with_the_same_meaning(gw, body):
    _admitted_with_same_meaning(gw, "/v1/embeddings", body)
