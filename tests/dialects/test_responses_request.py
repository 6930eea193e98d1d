"""POST /v1/responses: the strict parse and the translation into a chat-completions request.

The translation's output is decoded with the gateway's own strict chat schema, so every
request it makes is one the chat pipeline accepts as it stands."""

from __future__ import annotations

import json

import msgspec
import pytest

from tokenward.dialects import common
from tokenward.dialects.responses_schema import parse
from tokenward.dialects.responses_translate import chat_request, unsupported
from tokenward.errors import Refusal
from tokenward.validation.schemas import ChatCompletionRequest

_chat = msgspec.json.Decoder(ChatCompletionRequest)


def translate(body: dict) -> dict:
    chat = chat_request(parse(json.dumps(body).encode()))
    encoded = common.encode(chat)
    _chat.decode(encoded)          # the gateway's strict chat schema accepts it
    return json.loads(encoded)


def refused(body: dict | bytes, translating: bool = False) -> Refusal:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    with pytest.raises(Refusal) as caught:
        parsed = parse(raw)
        if translating:
            chat_request(parsed)
    return caught.value


def test_string_input_and_instructions_become_system_and_user_messages():
    chat = translate({"model": "small-chat", "instructions": "Answer in French.", "input": "hello",
                      "max_output_tokens": 64, "temperature": 0.5, "top_p": 0.9, "user": "u-1"})
    assert chat == {"model": "small-chat", "max_tokens": 64, "temperature": 0.5, "top_p": 0.9, "user": "u-1",
                    "messages": [{"role": "system", "content": "Answer in French."},
                                 {"role": "user", "content": "hello"}]}


def test_items_become_messages_with_tool_calls_and_tool_results():
    chat = translate({"model": "m", "input": [
        {"role": "developer", "content": "be brief"},
        {"role": "user", "content": [{"type": "input_text", "text": "weather in Paris and Rome?"},
                                     {"type": "input_image", "image_url": "https://example.com/a.png",
                                      "detail": "low"}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "checking"}]},
        {"type": "function_call", "call_id": "call_1", "name": "weather", "arguments": "{\"city\":\"Paris\"}"},
        {"type": "function_call", "call_id": "call_2", "name": "weather", "arguments": "{\"city\":\"Rome\"}"},
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "opaque"},
        {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
        {"type": "function_call_output", "call_id": "call_2", "output": [{"type": "input_text", "text": "rain"}]},
    ]})
    assert chat["messages"] == [
        {"role": "developer", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "weather in Paris and Rome?"},
                                     {"type": "image_url", "image_url": {"url": "https://example.com/a.png",
                                                                         "detail": "low"}}]},
        {"role": "assistant", "content": [{"type": "text", "text": "checking"}], "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Paris\"}"}},
            {"id": "call_2", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Rome\"}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
        {"role": "tool", "tool_call_id": "call_2", "content": [{"type": "text", "text": "rain"}]},
    ]


def test_a_function_call_with_no_assistant_message_before_it_opens_one():
    chat = translate({"model": "m", "input": [
        {"role": "user", "content": "hi"},
        {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c", "output": "ok"}]})
    assert chat["messages"][1] == {"role": "assistant", "content": "", "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}


def test_tools_tool_choice_text_format_and_streaming():
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    chat = translate({"model": "m", "input": "x", "stream": True, "parallel_tool_calls": False,
                      "tools": [{"type": "function", "name": "weather", "description": "d", "parameters": schema,
                                 "strict": True}],
                      "tool_choice": {"type": "function", "name": "weather"},
                      "text": {"format": {"type": "json_schema", "name": "answer", "schema": schema, "strict": True}},
                      "reasoning": {"effort": "low", "summary": "auto"}})
    assert chat["tools"] == [{"type": "function", "function": {"name": "weather", "description": "d",
                                                               "strict": True, "parameters": schema}}]
    assert chat["tool_choice"] == {"type": "function", "function": {"name": "weather"}}
    assert chat["parallel_tool_calls"] is False
    assert chat["response_format"] == {"type": "json_schema",
                                       "json_schema": {"name": "answer", "schema": schema, "strict": True}}
    assert chat["stream"] is True and chat["stream_options"] == {"include_usage": True}
    assert chat["reasoning_effort"] == "low"


def test_free_form_schemas_are_forwarded_byte_for_byte():
    body = b'{"model":"m","input":"x","tools":[{"type":"function","name":"f","parameters":{"b": 1,  "a":[ ]}}]}'
    encoded = common.encode(chat_request(parse(body)))
    assert b'"parameters":{"b": 1,  "a":[ ]}' in encoded


@pytest.mark.parametrize("choice, tools, expected", [
    ({"type": "allowed_tools", "mode": "required", "tools": [{"type": "function", "name": "b"}]}, ["b"], "required"),
    ({"type": "allowed_tools", "mode": "auto", "tools": [{"type": "function", "name": "a"}]}, ["a"], "auto"),
    ("none", ["a", "b"], "none"),
])
def test_allowed_tools_narrow_the_tool_list(choice, tools, expected):
    chat = translate({"model": "m", "input": "x", "tool_choice": choice, "tools": [
        {"type": "function", "name": "a"}, {"type": "function", "name": "b"}]})
    assert [t["function"]["name"] for t in chat["tools"]] == tools
    assert chat["tool_choice"] == expected


@pytest.mark.parametrize("body, param", [
    ({"model": "m", "input": "x", "frobnicate": 1}, "frobnicate"),
    ({"model": "m", "input": [{"role": "user", "content": "x", "name": "n"}]}, "input[0].name"),
    ({"model": "m", "input": [{"role": "user", "content": [{"type": "input_text", "text": "x", "y": 1}]}]},
     "input[0].content[0].y"),
    ({"model": "m", "input": [{"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}", "z": 0}]},
     "input[0].z"),
    ({"model": "m", "input": "x", "tools": [{"type": "function", "name": "f", "extra": True}]}, "tools[0].extra"),
    ({"model": "m", "input": "x", "text": {"format": {"type": "json_schema", "name": "a", "schema": {}, "q": 1}}},
     "text.format.q"),
])
def test_unknown_fields_are_refused_by_name(body, param):
    refusal = refused(body)
    assert (refusal.reason.name, refusal.param) == ("unknown_field", param)
    assert param in refusal.message


@pytest.mark.parametrize("body, param", [
    ({"model": "m", "input": [{"type": "teleport_call", "x": 1}]}, "input[0].type"),
    ({"model": "m", "input": "x", "tools": [{"type": "teleport"}]}, "tools[0].type"),
    ({"model": "m", "input": "x", "max_output_tokens": 0}, "max_output_tokens"),
    ({"model": "m", "input": "x", "temperature": 3}, "temperature"),
    ({"model": "m", "input": [{"role": "critic", "content": "x"}]}, "input[0].role"),
    ({"model": "m"}, "input"),
    ({"model": "m", "input": [{"role": "user", "content": [{"type": "output_text", "text": "x"}]}]},
     "input[0].content[0]"),
    ({"model": "m", "input": [{"role": "system", "content": [{"type": "input_image", "image_url": "u"}]}]},
     "input[0].content[0]"),
])
def test_invalid_values_are_refused_by_name(body, param):
    refusal = refused(body, translating=True)
    assert (refusal.reason.name, refusal.param) == ("invalid_field", param)


@pytest.mark.parametrize("extra, param", [
    ({"previous_response_id": "resp_1"}, "previous_response_id"),
    ({"store": True}, "store"),
    ({"background": True}, "background"),
    ({"conversation": "conv_1"}, "conversation"),
    ({"prompt": {"id": "pmpt_1"}}, "prompt"),
    ({"tools": [{"type": "web_search"}]}, "tools"),
    ({"tools": [{"type": "file_search", "vector_store_ids": ["vs_1"]}]}, "tools"),
    ({"truncation": "auto"}, "truncation"),
    ({"max_tool_calls": 3}, "max_tool_calls"),
    ({"input": [{"type": "item_reference", "id": "msg_1"}]}, "input[0]"),
    ({"input": [{"role": "user", "content": [{"type": "input_image", "file_id": "file-1"}]}]},
     "input[0].content[0].file_id"),
    ({"input": [{"type": "function_call_output", "call_id": "c",
                 "output": [{"type": "input_image", "image_url": "data:image/png;base64,AA"}]}]}, "input[0].output[0]"),
])
def test_what_only_a_native_upstream_can_do_is_refused_when_translating(extra, param):
    body = {"model": "m", "input": "x", **extra}
    parsed = parse(json.dumps(body).encode())
    assert [u.param for u in unsupported(parsed)] == [param]
    refusal = refused(body, translating=True)
    assert refusal.param == param
    assert refusal.reason.name == "invalid_field"
    assert "natively" in refusal.message or "equivalent" in refusal.message


def test_the_stateless_control_is_translated():
    """store: false, no previous response, function tools only: nothing is kept aside."""
    body = {"model": "m", "input": "x", "store": False, "previous_response_id": None, "background": False,
            "truncation": "disabled", "include": ["reasoning.encrypted_content"],
            "tools": [{"type": "function", "name": "f"}]}
    assert unsupported(parse(json.dumps(body).encode())) == []
    assert translate(body)["messages"] == [{"role": "user", "content": "x"}]


def test_an_earlier_answers_logprobs_and_the_openai_only_settings_are_dropped_by_the_parse():
    said = {"type": "message", "role": "assistant", "content": [
        {"type": "output_text", "text": "ok", "annotations": [], "logprobs": [{"token": "ok", "logprob": -0.1}]}]}
    parsed = parse(json.dumps({"model": "m", "input": [{"role": "user", "content": "hi"}, said, {
        "role": "user", "content": "more"}], "moderation": {"model": "x"}, "access_programs": ["p"]}).encode())
    assert parsed.items[1].content[0].logprobs is msgspec.UNSET
    assert parsed.request.moderation is msgspec.UNSET and parsed.request.access_programs is msgspec.UNSET


@pytest.mark.parametrize("tools, added", [
    ([{"type": "function", "name": "ops__search"}, {"type": "namespace", "name": "ops", "description": "",
                                                    "tools": [{"type": "function", "name": "search"}]}], None),
    ([{"type": "function", "name": "ops__search"}], [{"type": "namespace", "name": "ops", "description": "",
                                                      "tools": [{"type": "function", "name": "search"}]}]),
])
def test_two_tools_a_chat_backend_would_see_under_one_name_are_refused(tools, added):
    items: list = [{"role": "user", "content": "hi"}]
    if added is not None:
        items.insert(0, {"type": "additional_tools", "role": "developer", "tools": added})
    refusal = refused({"model": "m", "input": items, "tools": tools})
    assert (refusal.reason.name, refusal.param) == ("invalid_field", "tools")
    assert "ops__search" in refusal.message
    assert parse(json.dumps({"model": "m", "input": items[-1:], "tools": tools[:1]}).encode()).flat[0].chat_name \
        == "ops__search"
