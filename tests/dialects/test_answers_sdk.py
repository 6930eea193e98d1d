"""Whole answers: a chat completion translated to each dialect, read by the official SDKs.

The translated bytes are served over loopback and read by ``client.responses.create`` /
``client.messages.create``, so the SDKs' own response models judge them; the SDKs' output
is then sent back as the next request (the tool round trip) through the strict parsers."""

from __future__ import annotations

import json

import anthropic
import openai
import pytest

from tokenward.dialects import messages_schema, messages_translate, responses_schema, responses_translate
from tokenward.dialects.common import encode
from tokenward.errors import Refusal

from .loopback import serving

TOOL_SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def completion(content: str | None, calls: list[tuple[str, str, str]] = (), finish: str = "stop",
               usage: tuple[int, int] = (11, 7), **choice) -> dict:
    message: dict = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = [{"id": cid, "type": "function", "function": {"name": name, "arguments": args}}
                                 for cid, name, args in calls]
    return {"id": "chatcmpl-1", "object": "chat.completion", "created": 1700000000, "model": "small-chat",
            "choices": [{"index": 0, "message": message, "finish_reason": finish, **choice}],
            "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage),
                      "prompt_tokens_details": {"cached_tokens": 4}}}


def via_openai(body: dict, answer: dict) -> openai.types.responses.Response:
    parsed = responses_schema.parse(json.dumps(body).encode())
    with serving(200, encode(responses_translate.response_from_chat(answer, parsed))) as (url, _):
        client = openai.OpenAI(base_url=url + "/v1", api_key="k", max_retries=0)
        return client.responses.create(**body)


def via_anthropic(body: dict, answer: dict) -> anthropic.types.Message:
    parsed = messages_schema.parse(json.dumps(body).encode())
    with serving(200, encode(messages_translate.message_from_chat(answer, parsed))) as (url, _):
        client = anthropic.Anthropic(base_url=url, api_key="k", max_retries=0)
        return client.messages.create(**body)


def test_responses_text_answer_and_usage():
    body = {"model": "small-chat", "input": "hello", "instructions": "be kind", "max_output_tokens": 50,
            "metadata": {"team": "a"}}
    response = via_openai(body, completion("Hi there."))
    assert response.output_text == "Hi there."
    assert response.status == "completed" and response.incomplete_details is None
    assert response.id.startswith("resp_") and response.output[0].id.startswith("msg_")
    assert (response.instructions, response.max_output_tokens, response.metadata) == ("be kind", 50, {"team": "a"})
    usage = response.usage
    assert (usage.input_tokens, usage.output_tokens, usage.total_tokens) == (11, 7, 18)
    assert usage.input_tokens_details.cached_tokens == 4


def test_responses_length_is_incomplete():
    response = via_openai({"model": "small-chat", "input": "hello"}, completion("Hi th", finish="length"))
    assert response.status == "incomplete"
    assert response.incomplete_details.reason == "max_output_tokens"
    assert response.output_text == "Hi th"


def test_responses_function_tool_round_trip():
    tools = [{"type": "function", "name": "weather", "parameters": TOOL_SCHEMA, "strict": True}]
    first = {"model": "small-chat", "input": "weather in Paris and Rome?", "tools": tools}
    response = via_openai(first, completion(None, [("call_1", "weather", '{"city":"Paris"}'),
                                                   ("call_2", "weather", '{"city":"Rome"}')], "tool_calls"))
    calls = [item for item in response.output if item.type == "function_call"]
    assert [(c.call_id, c.name, json.loads(c.arguments)) for c in calls] == [
        ("call_1", "weather", {"city": "Paris"}), ("call_2", "weather", {"city": "Rome"})]
    assert response.tools[0].name == "weather"
    # What the Agents SDK sends next: the items as returned, then the outputs.
    second = {"model": "small-chat", "tools": tools, "input": [
        {"role": "user", "content": "weather in Paris and Rome?"},
        *[item.model_dump(exclude_unset=True) for item in response.output],
        {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
        {"type": "function_call_output", "call_id": "call_2", "output": "rain"}]}
    chat = responses_translate.chat_request(responses_schema.parse(json.dumps(second).encode()))
    assert [m["role"] for m in chat["messages"]] == ["user", "assistant", "tool", "tool"]
    assert [c["id"] for c in chat["messages"][1]["tool_calls"]] == ["call_1", "call_2"]
    final = via_openai(second, completion("Sunny in Paris, rain in Rome."))
    assert final.output_text == "Sunny in Paris, rain in Rome."


def test_messages_text_answer_and_usage():
    body = {"model": "small-chat", "max_tokens": 50, "messages": [{"role": "user", "content": "hello"}]}
    message = via_anthropic(body, completion("Hi there."))
    assert [b.type for b in message.content] == ["text"] and message.content[0].text == "Hi there."
    assert message.stop_reason == "end_turn" and message.id.startswith("msg_")
    # Anthropic's input_tokens leave out what was read from the cache
    assert (message.usage.input_tokens, message.usage.cache_read_input_tokens) == (7, 4)
    assert message.usage.output_tokens == 7


@pytest.mark.parametrize("finish, choice, stop_reason, stop_sequence", [
    ("stop", {}, "end_turn", None),
    ("length", {}, "max_tokens", None),
    ("tool_calls", {}, "tool_use", None),
    ("stop", {"stop_reason": "END"}, "stop_sequence", "END"),
    ("stop", {"stop_reason": 128009}, "end_turn", None),    # vLLM: a stop token id, not a sequence
])
def test_messages_stop_reasons(finish, choice, stop_reason, stop_sequence):
    body = {"model": "small-chat", "max_tokens": 50, "stop_sequences": ["END"],
            "messages": [{"role": "user", "content": "hello"}]}
    message = via_anthropic(body, completion("x", finish=finish, **choice))
    assert (message.stop_reason, message.stop_sequence) == (stop_reason, stop_sequence)


def test_messages_tool_use_round_trip():
    tools = [{"name": "weather", "description": "the weather", "input_schema": TOOL_SCHEMA}]
    first = {"model": "small-chat", "max_tokens": 50, "tools": tools,
             "messages": [{"role": "user", "content": "weather in Paris?"}]}
    message = via_anthropic(first, completion("Let me look.", [("call_9", "weather", '{"city": "Paris"}')],
                                              "tool_calls"))
    assert message.stop_reason == "tool_use"
    text, use = message.content
    assert (text.text, use.id, use.name, use.input) == ("Let me look.", "call_9", "weather", {"city": "Paris"})
    second = {**first, "messages": [
        *first["messages"],
        {"role": "assistant", "content": [block.model_dump(exclude_none=True) for block in message.content]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "sunny"}]}]}
    chat = messages_translate.chat_request(messages_schema.parse(json.dumps(second).encode()))
    assert chat["messages"][1]["tool_calls"][0]["id"] == "call_9"
    assert chat["messages"][2] == {"role": "tool", "tool_call_id": "call_9", "content": "sunny"}
    assert via_anthropic(second, completion("Sunny.")).content[0].text == "Sunny."


def test_messages_arguments_that_are_not_an_object_are_an_upstream_error():
    parsed = messages_schema.parse(b'{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"}]}')
    with pytest.raises(Refusal) as caught:
        messages_translate.message_from_chat(completion(None, [("c", "f", "[1,")], "tool_calls"), parsed)
    assert caught.value.reason.name == "upstream_error" and "`f`" in caught.value.message


def test_an_answer_with_two_choices_is_refused():
    answer = completion("a")
    answer["choices"].append({**answer["choices"][0], "index": 1})
    parsed = responses_schema.parse(b'{"model":"m","input":"x"}')
    with pytest.raises(Refusal) as caught:
        responses_translate.response_from_chat(answer, parsed)
    assert caught.value.reason.name == "upstream_error"
