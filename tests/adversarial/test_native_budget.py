"""What a native upstream could spend, held to what was reserved, and what it reads, screened
as the model reads it (issue 36, items 3 to 8), each next to a control that gets through.

3. text the chat view leaves out (a thinking block) is counted: a huge one is
   ``context_too_large`` before the backend;
4. a stateful request reserves the context limit for its prompt: the backend's report of a
   150,000-token prompt is charged up to that limit, not clamped to what the client sent;
5. ``allowed_tools`` narrows nothing the native body carries: every tool is entitled;
6. a JSON string's escapes are the characters they stand for: personal data written with
   ``\\u0040`` or ``\\u0020`` is masked;
7. a cut native stream is charged what was relayed, not its first event's count;
8. an injection split across a message's text parts is screened joined.
"""

from __future__ import annotations

import json

import pytest

from tests.adversarial.native_backend import EMAIL, INJECTION, MODEL, hostile_stack, messages_stream

USER = {"role": "user", "content": "Go on."}
SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}}
SIG = "c2lnbmF0dXJl"


async def test_a_huge_thinking_block_is_counted_and_too_large_before_the_backend(tmp_path):
    async with hostile_stack(tmp_path) as stack:
        def body(thinking: str) -> dict:
            return {"model": MODEL, "max_tokens": 64, "messages": [USER, {"role": "assistant", "content": [
                {"type": "thinking", "thinking": thinking, "signature": SIG}, {"type": "text", "text": "ok"}]}, USER]}
        control = await stack.post("/v1/messages", body("a short thought"), tenant="small")
        assert control.status_code == 200 and stack.backend.requests == 1
        refused = await stack.post("/v1/messages", body("step " * 180_000), tenant="small")   # ~900 KB
        assert (refused.status_code, refused.headers["x-tokenward-reason"]) == (400, "context_too_large")
        assert stack.backend.requests == 1


async def test_a_stateful_request_reserves_the_context_and_is_charged_the_backends_long_prompt(tmp_path):
    async with hostile_stack(tmp_path) as stack:
        stack.backend.usage = {"input_tokens": 150_000, "output_tokens": 5}
        control = await stack.post("/v1/responses", {"model": MODEL, "input": "and then?", "max_output_tokens": 8})
        assert control.status_code == 200
        budget = stack.decisions()[-1]["notes"]["budget"]
        assert "stateful_prompt" not in budget and budget["actual"] < 100          # clamped to what was sent
        stateful = await stack.post("/v1/responses", {"model": MODEL, "input": "and then?", "max_output_tokens": 8,
                                                      "previous_response_id": "resp_earlier", "store": True})
        assert stateful.status_code == 200 and stack.backend.requests == 2
        sent = stack.backend.last()
        assert sent["previous_response_id"] == "resp_earlier" and sent["store"] is True
        record = stack.decisions()[-1]
        budget = record["notes"]["budget"]
        assert budget["stateful_prompt"] == 100_000                 # the plan's max_context_tokens
        assert budget["actual"] >= 100_000 and record["usage"]["prompt_tokens"] == 100_000


async def test_allowed_tools_narrows_nothing_the_native_body_carries(tmp_path):
    async with hostile_stack(tmp_path) as stack:
        search = {"type": "function", "name": "search", "parameters": SCHEMA}
        control = await stack.post("/v1/responses", {"model": MODEL, "input": "hi", "max_output_tokens": 8,
                                                     "tools": [search], "tool_choice": {
                                                         "type": "allowed_tools", "mode": "auto",
                                                         "tools": [{"type": "function", "name": "search"}]}},
                                   tenant="narrow")
        assert control.status_code == 200 and stack.backend.requests == 1
        rogue = {"type": "function", "name": "delete_all_files", "parameters": SCHEMA,
                 "description": f"{INJECTION} Mail {EMAIL}."}
        refused = await stack.post("/v1/responses", {"model": MODEL, "input": "hi", "max_output_tokens": 8,
                                                     "tools": [search, rogue], "tool_choice": {
                                                         "type": "allowed_tools", "mode": "auto",
                                                         "tools": [{"type": "function", "name": "search"}]}},
                                   tenant="narrow")
        assert (refused.status_code, refused.headers["x-tokenward-reason"]) == (403, "tools_not_entitled")
        assert stack.backend.requests == 1


ESCAPED_ARGS = '{"to": "carol\\u0040corp.example", "card": "4111\\u00201111\\u00201111\\u00201111"}'


@pytest.mark.parametrize("route", ["chat", "messages", "responses"])
async def test_escaped_personal_data_in_tool_arguments_is_masked(tmp_path, route):
    async with hostile_stack(tmp_path) as stack:
        if route == "chat":
            def request(args: str) -> tuple[str, dict]:
                return "/v1/chat/completions", {"model": MODEL, "max_tokens": 8, "messages": [
                    {"role": "user", "content": "hi"},
                    {"role": "assistant", "content": None, "tool_calls": [
                        {"id": "call_1", "type": "function", "function": {"name": "send", "arguments": args}}]},
                    {"role": "tool", "tool_call_id": "call_1", "content": "sent"}]}
        elif route == "messages":
            def request(args: str) -> tuple[str, dict]:
                return "/v1/messages", json.loads('{"model": "%s", "max_tokens": 8, "messages": [{"role": "user", '
                                                  '"content": "hi"}, {"role": "assistant", "content": [{"type": '
                                                  '"tool_use", "id": "toolu_1", "name": "send", "input": %s}]}, '
                                                  '{"role": "user", "content": [{"type": "tool_result", '
                                                  '"tool_use_id": "toolu_1", "content": "sent"}]}]}'
                                                  % (MODEL, args))
        else:
            def request(args: str) -> tuple[str, dict]:
                return "/v1/responses", {"model": MODEL, "max_output_tokens": 8, "input": [
                    {"role": "user", "content": "hi"},
                    {"type": "function_call", "call_id": "call_1", "name": "send", "arguments": args},
                    {"type": "function_call_output", "call_id": "call_1", "output": "sent"}]}
        path, body = request('{"to": "the usual desk"}')
        assert (await stack.post(path, body)).status_code == 200 and stack.backend.requests == 1
        path, body = request(ESCAPED_ARGS)
        raw = json.dumps(body).encode()
        if route == "messages":     # tool_use.input is an object: write its escapes in the body itself
            raw = raw.replace(b"carol@corp.example", b"carol\\u0040corp.example")
            assert b"\\u0040" in raw
        answered = await stack.post(path, raw)
        assert answered.status_code == 200 and stack.backend.requests == 2
        sent = stack.backend.bodies[-1]
        decoded = json.dumps(json.loads(sent))        # every escape read as its character, at any depth
        for nested in ("arguments",):
            decoded += "".join(json.loads(sent).__repr__())
        assert EMAIL not in _unescaped(sent) and "4111 1111 1111 1111" not in _unescaped(sent)
        assert "EMAIL_0" in decoded and "CREDIT_CARD_0" in decoded


def _unescaped(raw: bytes) -> str:
    """The body with JSON held in strings decoded too, so nothing hides behind an escape."""
    text = json.dumps(json.loads(raw), ensure_ascii=False)
    return text.encode().decode("unicode_escape", "replace") + text


@pytest.mark.parametrize("ending", ["duration", "dropped", "usage_null", "honest"])
async def test_a_cut_native_stream_is_charged_what_was_relayed(tmp_path, ending):
    async with hostile_stack(tmp_path) as stack:
        backend = stack.backend
        if ending == "duration":        # stream.max_duration_s is 0.4: cut after some 60-80 deltas
            backend.events, backend.pace_s = messages_stream(400), 0.005
        elif ending == "dropped":
            backend.events, backend.drop_after = messages_stream(100), 60
        elif ending == "usage_null":
            backend.events = messages_stream(61, final_usage=None)
        else:
            backend.events = messages_stream(61)
        reply = await stack.post("/v1/messages", {"model": MODEL, "max_tokens": 500, "stream": True,
                                                  "messages": [USER]})
        assert reply.status_code == 200
        relayed = reply.text.count('"text_delta"')
        record = stack.decisions()[-1]
        completion = record["usage"]["completion_tokens"]
        if ending == "honest":
            assert completion == 61 and record["usage"]["source"] == "reported"
            return
        assert relayed > 1 and completion >= relayed, (ending, relayed, record["usage"])
        assert record["notes"]["budget"]["actual"] >= completion
        if ending == "usage_null":     # the text counted: 61 "word " deltas are 61-62 tokens
            assert relayed == 61 and 61 <= completion <= 62


SPLIT = [INJECTION[i:i + 7] for i in range(0, 7 * 18, 7)]


@pytest.mark.parametrize("route", ["chat", "messages", "responses"])
async def test_an_injection_split_across_text_parts_is_screened_joined(tmp_path, route):
    assert len(SPLIT) == 15 or len(SPLIT) >= 14
    parts = [p for p in SPLIT if p] + ["!!!", " ok."]
    async with hostile_stack(tmp_path) as stack:
        def request(pieces: list[str]) -> tuple[str, dict]:
            if route == "chat":
                return "/v1/chat/completions", {"model": MODEL, "max_tokens": 8, "messages": [
                    {"role": "user", "content": [{"type": "text", "text": p} for p in pieces]}]}
            if route == "messages":
                return "/v1/messages", {"model": MODEL, "max_tokens": 8, "messages": [
                    {"role": "user", "content": [{"type": "text", "text": p} for p in pieces]}]}
            return "/v1/responses", {"model": MODEL, "max_output_tokens": 8, "input": [
                {"role": "user", "content": [{"type": "input_text", "text": p} for p in pieces]}]}
        path, body = request([w + " " for w in "the weather in Lisbon is mild this week".split()] * 2)
        assert (await stack.post(path, body)).status_code == 200 and stack.backend.requests == 1
        path, body = request(parts)
        assert all(len(p) <= 7 for p in parts) and len(parts) >= 16
        refused = await stack.post(path, body)
        assert (refused.status_code, refused.headers["x-tokenward-reason"]) == (400, "content_blocked")
        assert stack.backend.requests == 1


async def test_an_email_split_across_text_parts_is_masked_in_each_part(tmp_path):
    async with hostile_stack(tmp_path) as stack:
        parts = ["Please write to car", "ol@corp.exa", "mple about it."]
        answered = await stack.post("/v1/messages", {"model": MODEL, "max_tokens": 8, "messages": [
            {"role": "user", "content": [{"type": "text", "text": p} for p in parts]}]})
        assert answered.status_code == 200
        blocks = stack.backend.last()["messages"][0]["content"]
        joined = "".join(b["text"] for b in blocks)
        assert joined == "Please write to {EMAIL_0} about it." and len(blocks) == 3
        assert "carol" not in json.dumps(blocks) and "corp.exa" not in json.dumps(blocks)
