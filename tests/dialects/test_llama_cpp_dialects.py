"""Both dialects in front of the real llama.cpp server of the suite, translated to chat.

The server (``llama-cpp-python[server]``, tests/e2e/test_llama_cpp.py's fixtures: the tiny
model with its own tokenizer.json) serves only chat completions. The official SDKs talk
Responses and Messages to the gateway; the reference is the server's own count on the
non-streamed chat twin of each request (the model is deterministic). Streamed usage in
both dialects equals it, and ``count_tokens`` equals the server's prompt count.
"""

from __future__ import annotations

import anthropic
import openai
import pytest

from tests.e2e.test_llama_cpp import gateway_config, server, tiny  # noqa: F401 - fixtures
from tests.fixtures.llama_server import available
from tests.support import gateway_in_process

pytestmark = [
    pytest.mark.skipif(not available(), reason="llama-cpp-python[server] is not installed: run scripts/llama-wheel.sh"),
    pytest.mark.timeout(180),
    pytest.mark.usefixtures("sdk_clients_closed"),   # tests/conftest.py
]

SAID = "hello the gateway"
MAX = 48


@pytest.fixture
async def gw(tiny, server, tmp_path):  # noqa: F811 - the fixtures imported above
    config = gateway_config(tiny, server, tmp_path).replace("    max_messages: 300\n",
                                                            "    max_messages: 300\n    allow_tools: [lookup]\n")
    assert "allow_tools" in config
    async with gateway_in_process(config, tmp_path / "decisions.jsonl") as running:
        yield running


async def twin(gw, system: str | None = None) -> openai.types.chat.ChatCompletion:
    """The server's own answer and counts for the same request as chat, not streamed."""
    messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": SAID}]
    client = openai.AsyncOpenAI(base_url=gw.url + "/v1", api_key=gw.key, max_retries=0, timeout=60)
    return await client.chat.completions.create(model="tiny", max_tokens=MAX, messages=messages)


def messages_client(gw) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(base_url=gw.url, api_key=gw.key, max_retries=0, timeout=60)


async def test_responses_whole_and_streamed_match_the_server(gw):
    reference = await twin(gw, "be brief")
    client = openai.AsyncOpenAI(base_url=gw.url + "/v1", api_key=gw.key, max_retries=0, timeout=60)
    whole = await client.responses.create(model="tiny", instructions="be brief", input=SAID, max_output_tokens=MAX)
    assert whole.output_text == reference.choices[0].message.content
    assert (whole.usage.input_tokens, whole.usage.output_tokens) == (reference.usage.prompt_tokens,
                                                                     min(reference.usage.completion_tokens, MAX))
    stream = await client.responses.create(model="tiny", instructions="be brief", input=SAID, max_output_tokens=MAX,
                                           stream=True)
    deltas, final = [], None
    async for event in stream:
        if event.type == "response.output_text.delta":
            deltas.append(event.delta)
        elif event.type in ("response.completed", "response.incomplete"):
            final = event.response
    assert "".join(deltas) == reference.choices[0].message.content
    # llama.cpp's stream carries no usage: the gateway's count, equal to the server's
    assert final.usage.output_tokens == min(reference.usage.completion_tokens, MAX)
    assert final.usage.input_tokens == reference.usage.prompt_tokens
    record = gw.decisions()[-1]
    assert record["route"] == "/v1/responses" and record["usage"]["completion_tokens"] == final.usage.output_tokens


async def test_messages_create_stream_and_count_tokens_match_the_server(gw):
    reference = await twin(gw, "be brief")
    asked = [{"role": "user", "content": SAID}]
    async with messages_client(gw) as sdk:
        whole = await sdk.messages.create(model="tiny", max_tokens=MAX, system="be brief", messages=asked)
        async with sdk.messages.stream(model="tiny", max_tokens=MAX, system="be brief", messages=asked) as events:
            text = "".join([piece async for piece in events.text_stream])
            final = await events.get_final_message()
        counted = await sdk.messages.count_tokens(model="tiny", system="be brief", messages=asked)
    expected = reference.choices[0].message.content
    assert whole.content[0].text == expected == text == final.content[0].text
    billed = min(reference.usage.completion_tokens, MAX)
    assert whole.usage.output_tokens == billed and final.usage.output_tokens == billed
    assert whole.usage.input_tokens == final.usage.input_tokens == reference.usage.prompt_tokens
    assert counted.input_tokens == reference.usage.prompt_tokens


async def test_a_tool_result_round_trip_reaches_the_server_as_chat(gw):
    """The second half of a tool round trip (the call and its result sent back) in each
    dialect: the server takes the translated chat request and answers."""
    client = openai.AsyncOpenAI(base_url=gw.url + "/v1", api_key=gw.key, max_retries=0, timeout=60)
    answer = await client.responses.create(model="tiny", max_output_tokens=16, input=[
        {"role": "user", "content": SAID},
        {"type": "function_call", "call_id": "call_1", "name": "lookup", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "the gateway"}])
    assert answer.output_text and answer.usage.output_tokens > 0
    async with messages_client(gw) as sdk:
        message = await sdk.messages.create(model="tiny", max_tokens=16, messages=[
            {"role": "user", "content": SAID},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "the gateway"}]}])
    assert message.content[0].text and message.usage.output_tokens > 0
