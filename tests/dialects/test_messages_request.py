"""POST /v1/messages and /v1/messages/count_tokens: the strict parse and the translation.

The translation's output is decoded with the gateway's own strict chat schema."""

from __future__ import annotations

import json

import msgspec
import pytest

from tokenward.dialects import common
from tokenward.dialects.messages_schema import parse
from tokenward.dialects.messages_translate import chat_request, count_tokens_body, unsupported
from tokenward.errors import Refusal
from tokenward.validation.schemas import ChatCompletionRequest

_chat = msgspec.json.Decoder(ChatCompletionRequest)
BASE = {"model": "small-chat", "max_tokens": 64}


def translate(body: dict, count_tokens: bool = False) -> dict:
    encoded = common.encode(chat_request(parse(json.dumps(body).encode(), count_tokens=count_tokens)))
    _chat.decode(encoded)
    return json.loads(encoded)


def refused(body: dict, translating: bool = False, count_tokens: bool = False) -> Refusal:
    with pytest.raises(Refusal) as caught:
        parsed = parse(json.dumps(body).encode(), count_tokens=count_tokens)
        if translating:
            chat_request(parsed)
    return caught.value


def test_system_sampling_stop_sequences_and_user_id():
    chat = translate({**BASE, "system": "Be terse.", "messages": [{"role": "user", "content": "hi"}],
                      "stop_sequences": ["END", "STOP"], "temperature": 0.2, "top_p": 0.8,
                      "metadata": {"user_id": "u-7"}})
    assert chat == {"model": "small-chat", "max_tokens": 64, "stop": ["END", "STOP"], "temperature": 0.2,
                    "top_p": 0.8, "user": "u-7",
                    "messages": [{"role": "system", "content": "Be terse."}, {"role": "user", "content": "hi"}]}


def test_system_blocks_keep_their_parts():
    chat = translate({**BASE, "system": [{"type": "text", "text": "a", "cache_control": {"type": "ephemeral"}},
                                         {"type": "text", "text": "b"}],
                      "messages": [{"role": "user", "content": "hi"}]})
    assert chat["messages"][0] == {"role": "system", "content": [{"type": "text", "text": "a"},
                                                                 {"type": "text", "text": "b"}]}


def test_tool_use_and_tool_result_round_trip_into_chat_messages():
    chat = translate({**BASE, "messages": [
        {"role": "user", "content": [{"type": "text", "text": "what is this?"},
                                     {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                                  "data": "iVBORw0KGgo="}},
                                     {"type": "image", "source": {"type": "url", "url": "https://e.com/x.jpg"}}]},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "hmm", "signature": "sig"},
            {"type": "text", "text": "Looking it up."},
            {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"q": "x", "n": 2}},
            {"type": "tool_use", "id": "toolu_2", "name": "lookup", "input": {}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "found"},
            {"type": "tool_result", "tool_use_id": "toolu_2", "is_error": True,
             "content": [{"type": "text", "text": "not found"}]},
            {"type": "text", "text": "and now?"}]}]})
    assert chat["messages"] == [
        {"role": "user", "content": [
            {"type": "text", "text": "what is this?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
            {"type": "image_url", "image_url": {"url": "https://e.com/x.jpg"}}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Looking it up."}], "tool_calls": [
            {"id": "toolu_1", "type": "function", "function": {"name": "lookup", "arguments": "{\"q\": \"x\", \"n\": 2}"}},
            {"id": "toolu_2", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "toolu_1", "content": "found"},
        {"role": "tool", "tool_call_id": "toolu_2", "content": [{"type": "text", "text": "not found"}]},
        {"role": "user", "content": [{"type": "text", "text": "and now?"}]},
    ]


@pytest.mark.parametrize("choice, expected, parallel", [
    ({"type": "auto"}, "auto", None),
    ({"type": "any"}, "required", None),
    ({"type": "none"}, "none", None),
    ({"type": "tool", "name": "lookup", "disable_parallel_tool_use": True},
     {"type": "function", "function": {"name": "lookup"}}, False),
])
def test_tools_and_tool_choice(choice, expected, parallel):
    schema = {"type": "object", "properties": {"q": {"type": "string"}}}
    chat = translate({**BASE, "messages": [{"role": "user", "content": "x"}], "tool_choice": choice,
                      "tools": [{"name": "lookup", "description": "search", "input_schema": schema,
                                 "cache_control": {"type": "ephemeral"}}]})
    assert chat["tools"] == [{"type": "function", "function": {"name": "lookup", "description": "search",
                                                               "parameters": schema}}]
    assert chat["tool_choice"] == expected
    assert chat.get("parallel_tool_calls") is parallel


def test_streaming_asks_for_usage():
    chat = translate({**BASE, "stream": True, "messages": [{"role": "user", "content": "x"}]})
    assert chat["stream"] is True and chat["stream_options"] == {"include_usage": True}


def test_count_tokens_needs_no_max_tokens_and_counts_the_same_prompt():
    body = {"model": "m", "system": "s", "messages": [{"role": "user", "content": "x"}],
            "tools": [{"name": "f", "input_schema": {"type": "object"}}]}
    chat = translate(body, count_tokens=True)
    assert "max_tokens" not in chat and chat["messages"][0] == {"role": "system", "content": "s"}
    assert refused({**body, "max_tokens": 5}, count_tokens=True).param == "max_tokens"
    assert json.loads(count_tokens_body(17)) == {"input_tokens": 17}


@pytest.mark.parametrize("body, reason, param", [
    ({"model": "m", "messages": [{"role": "user", "content": "x"}]}, "invalid_field", "max_tokens"),
    ({**BASE, "messages": [{"role": "user", "content": "x"}], "n": 2}, "unknown_field", "n"),
    ({**BASE, "messages": [{"role": "user", "content": [{"type": "text", "text": "x", "q": 1}]}]},
     "unknown_field", "messages[0].content[0].q"),
    ({**BASE, "messages": [{"role": "critic", "content": "x"}]}, "invalid_field", "messages[0].role"),
    ({**BASE, "messages": [{"role": "user", "content": "x"}], "temperature": 1.5}, "invalid_field", "temperature"),
    ({**BASE, "messages": [{"role": "user", "content": "x"}], "tool_choice": {"type": "required"}},
     "invalid_field", "tool_choice.type"),
    ({**BASE, "messages": [{"role": "user", "content": "x"}], "tools": [{"name": "f"}]},
     "invalid_field", "tools[0].input_schema"),
    ({**BASE, "messages": [{"role": "user", "content": "x"}],
      "tools": [{"name": "f", "input_schema": {}, "extra": 1}]}, "unknown_field", "tools[0].extra"),
    ({**BASE, "messages": [{"role": "user", "content": "x"}], "tools": [{"type": "teleport_2031"}]},
     "invalid_field", "tools[0].type"),
    ({**BASE, "messages": []}, "invalid_field", "messages"),
    ({**BASE, "messages": [{"role": "user", "content": [{"type": "image", "source": {
        "type": "base64", "media_type": "image/tiff", "data": "AA"}}]}]},
     "invalid_field", "messages[0].content[0].source.media_type"),
])
def test_strict_parse_refuses_by_name(body, reason, param):
    refusal = refused(body)
    assert (refusal.reason.name, refusal.param) == (reason, param)


@pytest.mark.parametrize("content, param", [
    ([{"type": "tool_use", "id": "t", "name": "f", "input": {}}], "messages[0].content[0]"),
    ([{"type": "text", "text": "x"}, {"type": "tool_use", "id": "t", "name": "f", "input": {}}],
     "messages[0].content[1]"),
])
def test_blocks_in_the_wrong_role_are_refused(content, param):
    refusal = refused({**BASE, "messages": [{"role": "user", "content": content}]}, translating=True)
    assert (refusal.reason.name, refusal.param) == ("invalid_field", param)


def test_a_tool_use_input_must_be_an_object():
    body = {**BASE, "messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": [
        {"type": "tool_use", "id": "t", "name": "f", "input": [1, 2]}]}]}
    refusal = refused(body, translating=True)
    assert (refusal.reason.name, refusal.param) == ("invalid_field", "messages[1].content[0].input")


@pytest.mark.parametrize("extra, param", [
    ({"tools": [{"type": "web_search_20250305", "name": "web_search"}]}, "tools"),
    ({"tools": [{"type": "bash_20250124", "name": "bash"}]}, "tools"),
    ({"mcp_servers": [{"type": "url", "url": "https://mcp.example", "name": "x"}]}, "mcp_servers"),
    ({"container": "container_1"}, "container"),
    ({"messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": [
        {"type": "image", "source": {"type": "url", "url": "https://e.com/a.png"}}]}]}]},
     "messages[0].content[0].content[0]"),
])
def test_what_only_a_native_upstream_can_do_is_refused_when_translating(extra, param):
    body = {**BASE, "messages": [{"role": "user", "content": "x"}], **extra}
    parsed = parse(json.dumps(body).encode())
    assert [u.param for u in unsupported(parsed)] == [param]
    refusal = refused(body, translating=True)
    assert refusal.param == param and ("natively" in refusal.message or "equivalent" in refusal.message)


def test_the_control_with_client_tools_and_thinking_is_translated():
    body = {**BASE, "messages": [{"role": "user", "content": "x"}], "thinking": {"type": "enabled",
            "budget_tokens": 2048}, "tools": [{"type": "custom", "name": "f", "input_schema": {"type": "object"}}]}
    assert unsupported(parse(json.dumps(body).encode())) == []
    assert translate(body)["tools"][0]["function"]["name"] == "f"


USER_TURN = {"role": "user", "content": "hi"}


@pytest.mark.parametrize("body, param, says", [
    ({**BASE, "messages": [USER_TURN], "fallbacks": [{"model": "other"}]}, "fallbacks", "not accepted"),
    ({**BASE, "messages": [USER_TURN], "billing_policy": "x"}, "billing_policy", "not accepted"),
    ({**BASE, "messages": [USER_TURN, {"role": "assistant", "content": ""}]}, "messages[1].content",
     "Missing required parameter"),
    ({**BASE, "messages": [{"role": "user", "content": "hi", "clear_at": "never"}]}, "messages[0].clear_at",
     "only a system message"),
    ({**BASE, "messages": [{"role": "system", "content": [{"type": "image", "source": {
        "type": "url", "url": "https://e.com/a.png"}}]}, USER_TURN]}, "messages[0].content[0]", "holds text blocks"),
    ({**BASE, "messages": [{"role": "user", "content": [{"type": "text", "text": "a"}, {
        "type": "container_upload", "file_id": "file_1"}]}]}, "messages[0].content[1]", "not accepted"),
    ({**BASE, "messages": [{"role": "user", "content": [{"type": "image", "source": {
        "type": "file", "file_id": "file_1"}}]}]}, "messages[0].content[0].source.file_id", "not accepted"),
])
def test_a_field_or_block_the_gateway_cannot_honour_is_refused_by_its_place(body, param, says):
    refusal = refused(body)
    assert (refusal.reason.name, refusal.param) == ("invalid_field", param)
    assert says in refusal.message


def test_fields_that_mean_nothing_to_a_backend_are_dropped_and_a_system_turn_may_be_empty():
    parsed = parse(json.dumps({**BASE, "messages": [{"role": "system", "content": "", "clear_at": "never"}, USER_TURN],
                               "diagnostics": {"previous_message_id": "msg_1"}, "workspace_id": "w"}).encode())
    req = parsed.request
    assert req.diagnostics is msgspec.UNSET and req.workspace_id is msgspec.UNSET
    assert parse(json.dumps({**BASE, "messages": [USER_TURN]}).encode()).request.messages[0].content == "hi"
