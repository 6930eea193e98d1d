"""Native forwarding: the mock declared ``dialects: [chat, responses, messages]`` serves both APIs itself.

A request no stage changed goes to the upstream's own ``/v1/responses`` or ``/v1/messages``
as the client sent it; the answer comes back as the upstream wrote it, its usage read from
the dialect's own fields (the decision record's, clamped as a chat backend's). What only a
native upstream can do (``previous_response_id``, ``store: true``) is forwarded there. A
request the gateway had to change (personal data masked) goes as its chat view, translated,
unless it asks for upstream state, which is then refused.
"""

from __future__ import annotations

import json

import anthropic
import openai
import pytest

from tests.dialects.gateway import MODEL, anthropic_client, backend_body, dialect_gateway, openai_client

pytestmark = pytest.mark.usefixtures("sdk_clients_closed")   # tests/conftest.py

ALL = ("chat", "responses", "messages")


@pytest.fixture
async def running(tmp_path):
    async with dialect_gateway(tmp_path, ALL) as pair:
        yield pair


async def by_path(backend) -> dict[str, int]:
    return (await backend.stats())["by_path"]


async def test_responses_whole_and_streamed_natively(running):
    backend, gw = running
    sdk = openai_client(gw)
    whole = await sdk.responses.create(model=MODEL, instructions="Be brief.", input="hello there",
                                       max_output_tokens=40, metadata={"run": "7"})
    assert await backend_body(backend) == {"model": MODEL, "instructions": "Be brief.", "input": "hello there",
                                           "max_output_tokens": 40, "metadata": {"run": "7"}}
    assert whole.id.startswith("resp_mock-") and whole.output_text == "tok " * 16
    record = gw.decisions()[-1]
    assert record["route"] == "/v1/responses" and record["upstream_status"] == 200
    assert record["usage"] == {"prompt_tokens": whole.usage.input_tokens, "completion_tokens": 16,
                               "source": "reported"}
    async with sdk.responses.stream(model=MODEL, input="hello there", max_output_tokens=40) as stream:
        deltas = [e.delta async for e in stream if e.type == "response.output_text.delta"]
        final = await stream.get_final_response()
    assert final.id.startswith("resp_mock-") and "".join(deltas) == final.output_text == "tok " * 16
    assert (await by_path(backend)).get("/v1/responses") == 2 and "/v1/chat/completions" not in await by_path(backend)
    record = gw.decisions()[-1]
    assert record["usage"] == {"prompt_tokens": final.usage.input_tokens, "completion_tokens": 16,
                               "source": "reported"}


async def test_messages_create_stream_and_count_tokens_natively(running):
    backend, gw = running
    asked = [{"role": "user", "content": "hello there"}]
    async with anthropic_client(gw) as sdk:
        whole = await sdk.messages.create(model=MODEL, max_tokens=10, messages=asked)
        async with sdk.messages.stream(model=MODEL, max_tokens=10, messages=asked) as events:
            text = "".join([piece async for piece in events.text_stream])
            final = await events.get_final_message()
        counted = await sdk.messages.count_tokens(model=MODEL, messages=asked)
    assert whole.id.startswith("msg_mock-") and whole.stop_reason == "max_tokens"
    assert text == final.content[0].text == whole.content[0].text == "tok " * 10
    assert final.usage.output_tokens == 10
    assert (await by_path(backend)) == {"/v1/messages": 2}          # count_tokens forwarded nothing
    record = gw.decisions()[-2]
    assert record["usage"] == {"prompt_tokens": final.usage.input_tokens, "completion_tokens": 10,
                               "source": "reported"}
    assert counted.input_tokens > 0


async def test_upstream_state_goes_to_a_native_upstream(running):
    backend, gw = running
    sdk = openai_client(gw)
    answer = await sdk.responses.create(model=MODEL, input="and then?", max_output_tokens=8,
                                        previous_response_id="resp_earlier", store=True)
    sent = await backend_body(backend)
    assert sent["previous_response_id"] == "resp_earlier" and sent["store"] is True
    assert answer.output_text == "tok " * 8
    assert await by_path(backend) == {"/v1/responses": 1}


async def test_a_masked_request_goes_natively_masked_and_is_restored(running):
    """Personal data masked (tokenize): the dialect body rendered from the parse goes to the
    upstream's own endpoint with placeholders, and the native answer (whole and streamed)
    gets the values back; a request that names upstream state is masked the same way."""
    backend, gw = running
    text = "Mail jane.doe@example.com about it."
    sdk = openai_client(gw, "screened", **{"x-mock-echo": "3"})
    answer = await sdk.responses.create(model=MODEL, input=text, max_output_tokens=100)
    assert answer.output_text == text
    assert await by_path(backend) == {"/v1/responses": 1}
    sent = await backend_body(backend)
    assert "jane.doe" not in json.dumps(sent) and "{EMAIL_0}" in sent["input"]
    streamed = []
    async with sdk.responses.stream(model=MODEL, input=text, max_output_tokens=100) as events:
        async for event in events:
            if event.type == "response.output_text.delta":
                streamed.append(event.delta)
        final = await events.get_final_response()
    assert "".join(streamed) == final.output_text == text
    answer = await sdk.responses.create(model=MODEL, input=text, max_output_tokens=100,
                                        previous_response_id="resp_1", store=True)
    sent = await backend_body(backend)
    assert sent["previous_response_id"] == "resp_1" and "jane.doe" not in json.dumps(sent)
    assert answer.output_text == text


WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}}
QUESTION = "What is the weather in Paris today?"


@pytest.mark.parametrize("stream", [False, True])
async def test_responses_function_tool_round_trip_natively(running, stream):
    backend, gw = running
    sdk = openai_client(gw, **{"x-mock-tool-call": "get_weather"})
    tools = [{"type": "function", "name": "get_weather", "parameters": WEATHER}]
    asked = [{"role": "user", "content": QUESTION}]
    if stream:
        async with sdk.responses.stream(model=MODEL, input=asked, tools=tools, max_output_tokens=100) as events:
            deltas = [e.delta async for e in events if e.type == "response.function_call_arguments.delta"]
            first = await events.get_final_response()
        assert len(deltas) > 1
    else:
        first = await sdk.responses.create(model=MODEL, input=asked, tools=tools, max_output_tokens=100)
    (call,) = first.output
    assert call.type == "function_call" and json.loads(call.arguments) == {"echo": QUESTION}
    result = {"type": "function_call_output", "call_id": call.call_id, "output": "18C, sunny"}
    second = await openai_client(gw).responses.create(model=MODEL, tools=tools, max_output_tokens=100,
                                                      input=[*asked, call, result])
    sent = await backend_body(backend)
    assert sent["input"][1]["call_id"] == call.call_id and sent["input"][2] == result   # as the client sent it
    assert second.output_text == "tok " * 16
    assert await by_path(backend) == {"/v1/responses": 2}


@pytest.mark.parametrize("stream", [False, True])
async def test_messages_tool_use_round_trip_natively(running, stream):
    backend, gw = running
    tools = [{"name": "get_weather", "input_schema": WEATHER}]
    asked = [{"role": "user", "content": QUESTION}]
    async with anthropic_client(gw, **{"x-mock-tool-call": "get_weather"}) as sdk:
        if stream:
            async with sdk.messages.stream(model=MODEL, max_tokens=100, tools=tools, messages=asked) as events:
                first = await events.get_final_message()
        else:
            first = await sdk.messages.create(model=MODEL, max_tokens=100, tools=tools, messages=asked)
    (use,) = first.content
    assert use.type == "tool_use" and use.input == {"echo": QUESTION} and first.stop_reason == "tool_use"
    async with anthropic_client(gw) as sdk:
        second = await sdk.messages.create(model=MODEL, max_tokens=100, tools=tools, messages=[
            *asked, {"role": "assistant", "content": first.content},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "18C, sunny"}]}])
    sent = await backend_body(backend)
    assert sent["messages"][2]["content"][0] == {"type": "tool_result", "tool_use_id": use.id, "content": "18C, sunny"}
    assert second.content[0].text == "tok " * 16
    assert await by_path(backend) == {"/v1/messages": 2}


async def test_a_native_stream_without_usage_is_counted(running):
    """The upstream's stream reports no usage: its text is counted with the model's tokenizer."""
    from tokenward.tokenize.tiktoken_files import load_encoding

    backend, gw = running
    sdk = openai_client(gw, **{"x-mock-no-usage": "1"})
    async with sdk.responses.stream(model=MODEL, input="hello there", max_output_tokens=40) as stream:
        final = await stream.get_final_response()
    assert final.usage is None and final.output_text == "tok " * 16
    record = gw.decisions()[-1]
    assert record["usage"]["source"] == "counted"
    assert record["usage"]["completion_tokens"] == len(load_encoding("o200k_base").encode("tok " * 16))
    assert record["usage"]["prompt_tokens"] == record["notes"]["budget"]["estimated_input"]


async def test_a_native_answer_is_never_cached(running):
    """The cache keeps chat answers; a native one is in the dialect's own shape, so a request
    that may go natively skips the cache (x-tokenward-cache: bypass) and a chat request with
    the same chat view never gets a Responses body."""
    backend, gw = running
    sdk = openai_client(gw, "cached")
    for _ in range(2):
        raw = await sdk.responses.with_raw_response.create(model=MODEL, input="hello there", max_output_tokens=40)
        assert raw.headers["x-tokenward-cache"] == "bypass" and raw.parse().output_text == "tok " * 16
    assert await by_path(backend) == {"/v1/responses": 2}
    chat = await sdk.chat.completions.create(model=MODEL, max_tokens=40, messages=[{"role": "user", "content": "hello there"}])
    assert chat.object == "chat.completion" and chat.choices[0].message.content == "tok " * 16
    assert (await by_path(backend))["/v1/chat/completions"] == 1


async def test_tools_the_upstream_runs_need_the_plans_server_tools_feature(running):
    backend, gw = running
    search = [{"type": "web_search_20250305", "name": "web_search"}]
    asked = [{"role": "user", "content": "news?"}]
    async with anthropic_client(gw) as sdk:
        with pytest.raises(anthropic.PermissionDeniedError) as caught:
            await sdk.messages.create(model=MODEL, max_tokens=8, messages=asked, tools=search)
    assert caught.value.body["error"]["code"] == "feature_not_entitled"
    assert caught.value.response.headers["x-tokenward-reason"] == "feature_not_entitled"
    assert await by_path(backend) == {}
    async with anthropic_client(gw, "tooled") as sdk:
        await sdk.messages.create(model=MODEL, max_tokens=8, messages=asked, tools=search)
    assert (await backend_body(backend))["tools"] == search and await by_path(backend) == {"/v1/messages": 1}
    with pytest.raises(openai.PermissionDeniedError):
        await openai_client(gw).responses.create(model=MODEL, input="news?", max_output_tokens=8,
                                                 tools=[{"type": "web_search"}])
    await openai_client(gw, "tooled").responses.create(model=MODEL, input="news?", max_output_tokens=8,
                                                       tools=[{"type": "web_search"}])
    assert await by_path(backend) == {"/v1/messages": 1, "/v1/responses": 1}
