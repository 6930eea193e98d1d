"""The official SDKs through the gateway, translated to chat completions for the mock backend.

``openai``: ``responses.create`` whole and streamed, ``responses.stream`` (the SDK's own
accumulator checks the event order), a function-tool round trip. ``anthropic``:
``messages.create``, ``messages.stream``, ``messages.count_tokens``, a ``tool_use`` round
trip. Each checks what the backend received (the chat request) and that the answer equals
the chat answer to the same request.
"""

from __future__ import annotations

import json

import anthropic
import openai
import pytest

from tokenward.tokenize.tiktoken_files import load_encoding

from tests.dialects.gateway import MODEL, anthropic_client, backend_body, dialect_gateway, openai_client

pytestmark = pytest.mark.usefixtures("sdk_clients_closed")   # tests/conftest.py

WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
QUESTION = "What is the weather in Paris today?"


@pytest.fixture
async def running(tmp_path):
    async with dialect_gateway(tmp_path) as pair:
        yield pair


async def chat_twin(gw, **body) -> str:
    """The content of the chat answer to the same request (the mock is deterministic)."""
    reply = await openai_client(gw).chat.completions.create(model=MODEL, **body)
    return reply.choices[0].message.content


# -- OpenAI's Responses API --------------------------------------------------------------------


async def test_responses_whole(running):
    backend, gw = running
    sdk = openai_client(gw)
    answer = await sdk.responses.create(model=MODEL, instructions="Be brief.", input="hello there",
                                        max_output_tokens=8, temperature=0.5)
    sent = await backend_body(backend)
    assert sent == {"model": MODEL, "max_tokens": 8, "temperature": 0.5,
                    "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hello there"}]}
    assert answer.object == "response" and answer.status == "incomplete"   # the mock ran to max_output_tokens
    assert answer.incomplete_details.reason == "max_output_tokens"
    twin = await chat_twin(gw, max_tokens=8, temperature=0.5,
                           messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hello there"}])
    assert answer.output_text == twin and twin
    assert answer.usage.output_tokens == 8 and answer.usage.input_tokens > 0
    assert answer.usage.total_tokens == answer.usage.input_tokens + 8


async def test_responses_streamed_with_the_sdks_accumulator(running):
    backend, gw = running
    sdk = openai_client(gw)
    # the mock answers 16 tokens: under the bound, the response completes
    async with sdk.responses.stream(model=MODEL, input="hello there", max_output_tokens=60) as stream:
        kinds = [event.type async for event in stream]
        final = await stream.get_final_response()
    assert (await backend_body(backend))["stream_options"] == {"include_usage": True}
    assert kinds[:2] == ["response.created", "response.in_progress"] and kinds[-1] == "response.completed"
    assert kinds.count("response.output_text.delta") == 16
    assert final.output_text == await chat_twin(gw, max_tokens=60, messages=[{"role": "user", "content": "hello there"}])
    assert final.usage.output_tokens == 16 and final.status == "completed"
    raw = await sdk.responses.create(model=MODEL, input="hello there", max_output_tokens=6, stream=True)
    numbers = [event.sequence_number async for event in raw]
    assert numbers == list(range(len(numbers)))


@pytest.mark.parametrize("stream", [False, True])
async def test_responses_function_tool_round_trip(running, stream):
    backend, gw = running
    sdk = openai_client(gw, **{"x-mock-tool-call": "get_weather", "x-mock-echo": "5"})
    tools = [{"type": "function", "name": "get_weather", "description": "Weather now", "parameters": WEATHER}]
    asked = [{"role": "user", "content": QUESTION}]
    if stream:
        async with sdk.responses.stream(model=MODEL, input=asked, tools=tools, max_output_tokens=200) as events:
            deltas = [e.delta async for e in events if e.type == "response.function_call_arguments.delta"]
            first = await events.get_final_response()
        assert len(deltas) > 1
    else:
        first = await sdk.responses.create(model=MODEL, input=asked, tools=tools, max_output_tokens=200)
    sent = await backend_body(backend)
    assert sent["tools"] == [{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER,
                                                               "description": "Weather now"}}]
    (call,) = [item for item in first.output if item.type == "function_call"]
    assert call.name == "get_weather" and json.loads(call.arguments) == {"echo": QUESTION}
    assert first.status == "completed"
    # the result goes back with the call, as an agent loop sends it
    plain = openai_client(gw, **{"x-mock-echo": "5"})
    second = await plain.responses.create(
        model=MODEL, tools=tools, max_output_tokens=200,
        input=[*asked, call, {"type": "function_call_output", "call_id": call.call_id, "output": "18C, sunny"}])
    sent = await backend_body(backend)
    assistant, result = sent["messages"][1], sent["messages"][2]
    assert assistant["role"] == "assistant" and assistant["tool_calls"][0]["id"] == call.call_id
    assert assistant["tool_calls"][0]["function"] == {"name": "get_weather", "arguments": call.arguments}
    assert result == {"role": "tool", "tool_call_id": call.call_id, "content": "18C, sunny"}
    assert second.output_text == QUESTION     # the echo: the last user text, as the backend got it


# -- Anthropic's Messages API ------------------------------------------------------------------


async def test_messages_create(running):
    backend, gw = running
    async with anthropic_client(gw) as sdk:
        message = await sdk.messages.create(model=MODEL, max_tokens=8, system="Be brief.", stop_sequences=["###"],
                                            messages=[{"role": "user", "content": "hello there"}])
    sent = await backend_body(backend)
    assert sent == {"model": MODEL, "max_tokens": 8, "stop": ["###"],
                    "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hello there"}]}
    assert message.type == "message" and message.role == "assistant" and message.stop_reason == "max_tokens"
    twin = await chat_twin(gw, max_tokens=8, stop=["###"],
                           messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hello there"}])
    assert message.content[0].text == twin
    assert message.usage.output_tokens == 8 and message.usage.input_tokens > 0


async def test_messages_stream(running):
    backend, gw = running
    async with anthropic_client(gw) as sdk:
        async with sdk.messages.stream(model=MODEL, max_tokens=6,
                                       messages=[{"role": "user", "content": "hello there"}]) as stream:
            kinds = [event.type async for event in stream]
            final = await stream.get_final_message()
        counted = await sdk.messages.count_tokens(model=MODEL, messages=[{"role": "user", "content": "hello there"}])
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    assert final.content[0].text == await chat_twin(gw, max_tokens=6, messages=[{"role": "user", "content": "hello there"}])
    assert final.stop_reason == "max_tokens" and final.usage.output_tokens == 6
    # message_start carries the gateway's own prompt count, which count_tokens answers too
    assert final.usage.input_tokens > 0 and counted.input_tokens > 0


async def test_count_tokens_is_the_gateways_count_and_forwards_nothing(running):
    backend, gw = running
    before = await backend.requests()
    messages = [{"role": "user", "content": "How many tokens is this sentence, counted with o200k_base?"}]
    async with anthropic_client(gw) as sdk:
        counted = await sdk.messages.count_tokens(model=MODEL, system="You count.", messages=messages)
        longer = await sdk.messages.count_tokens(model=MODEL, system="You count.",
                                                 messages=[{"role": "user", "content": messages[0]["content"] * 3}])
    assert await backend.requests() == before
    words = len(load_encoding("o200k_base").encode(messages[0]["content"]))
    assert counted.input_tokens > words   # the text plus the chat template's tokens
    assert longer.input_tokens - counted.input_tokens == 2 * words
    record = gw.decisions()[-1]
    assert record["route"] == "/v1/messages/count_tokens" and record["answered_by"] == "count_tokens"
    assert record["notes"]["dialect"] == "messages" and "screening" not in record["stages_us"]
    assert record["notes"]["budget"]["reserved"] == longer.input_tokens + 1   # settled at zero: nothing ran


@pytest.mark.parametrize("stream", [False, True])
async def test_messages_tool_use_round_trip(running, stream):
    backend, gw = running
    tools = [{"name": "get_weather", "description": "Weather now", "input_schema": WEATHER}]
    asked = [{"role": "user", "content": QUESTION}]
    async with anthropic_client(gw, **{"x-mock-tool-call": "get_weather", "x-mock-echo": "4"}) as sdk:
        if stream:
            async with sdk.messages.stream(model=MODEL, max_tokens=200, tools=tools, messages=asked) as events:
                partial = [e async for e in events if e.type == "content_block_delta"]
                first = await events.get_final_message()
            assert len(partial) > 1 and all(e.delta.type == "input_json_delta" for e in partial)
        else:
            first = await sdk.messages.create(model=MODEL, max_tokens=200, tools=tools, messages=asked,
                                              tool_choice={"type": "tool", "name": "get_weather"})
            assert (await backend_body(backend))["tool_choice"] == {"type": "function",
                                                                    "function": {"name": "get_weather"}}
    (use,) = [block for block in first.content if block.type == "tool_use"]
    assert first.stop_reason == "tool_use" and use.name == "get_weather" and use.input == {"echo": QUESTION}
    async with anthropic_client(gw, **{"x-mock-echo": "4"}) as sdk:
        second = await sdk.messages.create(model=MODEL, max_tokens=200, tools=tools, messages=[
            *asked, {"role": "assistant", "content": first.content},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "18C, sunny"}]}])
    sent = await backend_body(backend)
    assistant, result = sent["messages"][1], sent["messages"][2]
    assert assistant["tool_calls"][0]["id"] == use.id and json.loads(
        assistant["tool_calls"][0]["function"]["arguments"]) == {"echo": QUESTION}
    assert result == {"role": "tool", "tool_call_id": use.id, "content": "18C, sunny"}
    assert second.content[0].text == QUESTION and second.stop_reason == "end_turn"


async def test_a_translated_request_is_cached_as_its_chat_view(running):
    """The cache keeps the chat answer: the same conversation as chat, Responses or Messages
    is one entry, each client getting it in its own API."""
    backend, gw = running
    chat = await openai_client(gw, "cached").chat.completions.create(
        model=MODEL, max_tokens=40, messages=[{"role": "user", "content": "hello there"}])
    raw = await openai_client(gw, "cached").responses.with_raw_response.create(
        model=MODEL, input="hello there", max_output_tokens=40)
    assert raw.headers["x-tokenward-cache"] == "hit" and raw.parse().output_text == chat.choices[0].message.content
    async with anthropic_client(gw, "cached") as sdk:
        async with sdk.messages.stream(model=MODEL, max_tokens=40,
                                       messages=[{"role": "user", "content": "hello there"}]) as events:
            final = await events.get_final_message()
    assert final.content[0].text == chat.choices[0].message.content
    assert await backend.requests() == 1      # only the chat request reached the backend


# -- a stream cut short ------------------------------------------------------------------------


async def test_a_stream_cut_short_ends_with_the_dialects_error_event(running):
    """The backend dies after a few chunks: each SDK raises the gateway's in-band error,
    written as its API's ``error`` event, after the text that did arrive."""
    backend, gw = running
    die = {"x-mock-die-after": "4"}
    texts = []
    with pytest.raises(openai.APIError) as caught:
        async with openai_client(gw, **die).responses.stream(model=MODEL, input="hello there",
                                                               max_output_tokens=60) as events:
            async for event in events:
                if event.type == "response.output_text.delta":
                    texts.append(event.delta)
    assert texts and "request req_" in str(caught.value)
    record = gw.decisions()[-1]
    assert record["route"] == "/v1/responses" and record["reason"] in ("upstream_unavailable", "upstream_truncated")
    async with anthropic_client(gw, **die) as sdk:
        with pytest.raises(anthropic.APIStatusError) as raised:
            async with sdk.messages.stream(model=MODEL, max_tokens=60,
                                           messages=[{"role": "user", "content": "hello there"}]) as stream:
                async for _ in stream:
                    pass
    assert raised.value.body["error"]["code"] == record["reason"]
    assert raised.value.body["error"]["type"] == "api_error"


# -- images ------------------------------------------------------------------------------------

# a 1x1 PNG
PNG = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")


async def test_images_reach_the_backend_as_chat_image_parts(running):
    backend, gw = running
    url = f"data:image/png;base64,{PNG}"
    await openai_client(gw).responses.create(model=MODEL, max_output_tokens=8, input=[{"role": "user", "content": [
        {"type": "input_text", "text": "What is this?"}, {"type": "input_image", "image_url": url, "detail": "low"}]}])
    sent = (await backend_body(backend))["messages"][0]["content"]
    assert sent == [{"type": "text", "text": "What is this?"},
                    {"type": "image_url", "image_url": {"url": url, "detail": "low"}}]
    async with anthropic_client(gw) as sdk:
        await sdk.messages.create(model=MODEL, max_tokens=8, messages=[{"role": "user", "content": [
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
            {"type": "text", "text": "What is this?"}]}])
    sent = (await backend_body(backend))["messages"][0]["content"]
    assert sent == [{"type": "image_url", "image_url": {"url": url}}, {"type": "text", "text": "What is this?"}]
    record = gw.decisions()[-1]
    assert record["status"] == 200 and record["notes"]["dialect"] == "messages"


async def test_a_dialect_request_runs_in_an_agent_job(running):
    """x-tokenward-job on /v1/responses and /v1/messages: each admitted request is an
    attempt of the job and its usage is the job's spend, as on chat."""
    backend, gw = running
    key = gw.extra["keys"]["team"]
    async with gw.client() as http:
        made = (await http.post(gw.url + "/v1/jobs", json={"budget_tokens": 5000},
                                headers={"authorization": f"Bearer {key}"})).json()
        job = {"x-tokenward-job": made["id"]}
        first = await openai_client(gw, **job).responses.create(model=MODEL, input="hello there", max_output_tokens=8)
        async with anthropic_client(gw, **job) as sdk:
            second = await sdk.messages.create(model=MODEL, max_tokens=8,
                                               messages=[{"role": "user", "content": "hello there"}])
        state = (await http.get(gw.url + f"/v1/jobs/{made['id']}", headers={"authorization": f"Bearer {key}"})).json()
    assert state["attempts"] == 2
    used = first.usage.total_tokens + second.usage.input_tokens + second.usage.output_tokens
    assert state["spent_tokens"] == used and state["reserved_tokens"] == 0


async def test_stream_usage_is_what_was_charged_and_the_bound_what_was_used(tmp_path):
    """As the clients read them: a translated Messages stream's ``message_start`` carries the
    gateway's count of the prompt and its ``message_delta`` the figures the request was
    charged (here counted by the gateway: the backend reports none); a Responses object
    echoes the output bound the gateway used (clamped to the plan's 512)."""
    async with dialect_gateway(tmp_path) as (backend, gw):
        async with anthropic_client(gw, **{"x-mock-no-usage": "1", "x-mock-tokens": "7"}) as sdk:
            async with sdk.messages.stream(model=MODEL, max_tokens=50,
                                           messages=[{"role": "user", "content": "hello"}]) as events:
                started = None
                async for event in events:
                    if event.type == "message_start":
                        started = event.message.usage.input_tokens
                final = await events.get_final_message()
        record = gw.decisions()[-1]
        charged = record["usage"]["completion_tokens"]
        assert record["usage"]["source"] == "counted" and charged >= 7
        assert final.usage.output_tokens == charged and started == record["notes"]["budget"]["estimated_input"]
        sdk_oai = openai_client(gw)
        answer = await sdk_oai.responses.create(model=MODEL, input="hello", max_output_tokens=4000)
        assert answer.max_output_tokens == 512
        async with sdk_oai.responses.stream(model=MODEL, input="hello", max_output_tokens=4000) as stream:
            done = await stream.get_final_response()
        assert done.max_output_tokens == 512 and done.usage.output_tokens == gw.decisions()[-1]["usage"][
            "completion_tokens"]
