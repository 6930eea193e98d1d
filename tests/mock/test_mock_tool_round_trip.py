"""An agent's tool round trip under one unchanging header set: ``x-mock-tool-call`` with
``x-mock-tool-args`` (the call's arguments as given) and ``x-mock-tool-once`` (a call only
while the conversation holds no tool result), on chat, Messages and Responses."""

from __future__ import annotations

import json

import pytest
from tests.mock._mock_helpers import chat, sse_events

STEER = {"x-mock-tool-call": "Read", "x-mock-tool-args": '{"file_path":"/w/note.txt"}', "x-mock-tool-once": "1"}


def _events(text: str) -> list[dict]:
    return [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ")]


@pytest.mark.parametrize("stream", [False, True])
async def test_chat_calls_once_then_answers_text(mock, stream):
    first = await mock.client.post("/v1/chat/completions", json=chat("read it", stream=stream), headers=STEER)
    if stream:
        events = [e for e in sse_events(first.text) if e != "[DONE]"]
        args = "".join(c["delta"].get("tool_calls", [{}])[0].get("function", {}).get("arguments", "")
                       for e in events for c in e["choices"])
        assert events[-1]["choices"][0]["finish_reason"] == "tool_calls"
    else:
        message = first.json()["choices"][0]["message"]
        args = message["tool_calls"][0]["function"]["arguments"]
        assert message["tool_calls"][0]["function"]["name"] == "Read"
    assert json.loads(args) == {"file_path": "/w/note.txt"}
    messages = [{"role": "user", "content": "read it"},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "call_0", "type": "function", "function": {"name": "Read", "arguments": args}}]},
                {"role": "tool", "tool_call_id": "call_0", "content": "42"}]
    second = await mock.client.post("/v1/chat/completions", json={"model": "m", "messages": messages},
                                    headers=STEER)
    answer = second.json()["choices"][0]
    assert answer["finish_reason"] == "stop" and "tool_calls" not in answer["message"]


async def test_messages_call_carries_the_arguments_then_text(mock):
    body = {"model": "m", "max_tokens": 64, "messages": [{"role": "user", "content": "read it"}]}
    first = (await mock.client.post("/v1/messages", json=body, headers=STEER)).json()
    assert first["stop_reason"] == "tool_use"
    assert first["content"][0]["input"] == {"file_path": "/w/note.txt"}
    body["messages"] += [{"role": "assistant", "content": first["content"]},
                         {"role": "user", "content": [{"type": "tool_result", "tool_use_id": first["content"][0]["id"],
                                                       "content": "42"}]}]
    second = (await mock.client.post("/v1/messages", json=body, headers=STEER)).json()
    assert second["stop_reason"] == "end_turn" and second["content"][0]["type"] == "text"


@pytest.mark.parametrize("stream", [False, True])
async def test_responses_call_inside_a_namespace(mock, stream):
    steer = {**STEER, "x-mock-tool-call": "clock.sleep", "x-mock-tool-args": '{"duration_ms":1}'}
    body = {"model": "m", "input": "sleep", "stream": stream}
    reply = await mock.client.post("/v1/responses", json=body, headers=steer)
    item = (_events(reply.text)[-1]["response"] if stream else reply.json())["output"][0]
    assert (item["type"], item["namespace"], item["name"]) == ("function_call", "clock", "sleep")
    assert json.loads(item["arguments"]) == {"duration_ms": 1}
    body["input"] = [{"role": "user", "content": "sleep"}, item,
                     {"type": "function_call_output", "call_id": item["call_id"], "output": "slept"}]
    second = await mock.client.post("/v1/responses", json={**body, "stream": False}, headers=steer)
    assert second.json()["output"][0]["type"] == "message"


async def test_bad_tool_arguments_are_a_clear_400(mock):
    reply = await mock.client.post("/v1/chat/completions", json=chat(),
                                   headers={"x-mock-tool-call": "f", "x-mock-tool-args": "[1, 2]"})
    assert reply.status_code == 400
    assert "x-mock-tool-args: expected a JSON object" in reply.json()["error"]["message"]
