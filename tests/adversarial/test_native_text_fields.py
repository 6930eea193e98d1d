"""Every field of the Responses and Messages APIs that carries text, forwarded to a native
upstream: a planted injection is screened (refused before the backend), a planted e-mail
never reaches the backend (masked, or the signed block that holds it left out), and a field
of opaque state holding either is refused as not the state the API issues. Each case sits
next to its control (the same request with harmless text) that the backend receives.

The backend is hostile and records the bytes it gets (tests/adversarial/native_backend.py).
"""

from __future__ import annotations

import json
from typing import Any, Callable

import pytest

from tests.adversarial.native_backend import EMAIL, INJECTION, MODEL, hostile_stack

HARMLESS = "The weather in Lisbon is mild this week."
SIG = "c2lnbmF0dXJlLW9mLWFudGhyb3BpYw=="


def _m(messages: list[dict[str, Any]], **top: Any) -> tuple[str, dict[str, Any]]:
    return "/v1/messages", {"model": MODEL, "max_tokens": 32, "messages": messages, **top}


def _r(items: Any, **top: Any) -> tuple[str, dict[str, Any]]:
    return "/v1/responses", {"model": MODEL, "max_output_tokens": 32, "input": items, **top}


USER = {"role": "user", "content": "Go on."}
CALL = {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "search", "input": {"q": "x"}}]}
SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}}

# field -> (builds the request with the text at that field, "text" | "signed" | "opaque")
FIELDS: dict[str, tuple[Callable[[str], tuple[str, dict[str, Any]]], str]] = {
    "messages.thinking": (lambda t: _m([USER, {"role": "assistant", "content": [
        {"type": "thinking", "thinking": t, "signature": SIG}, {"type": "text", "text": "ok"}]}, USER]), "signed"),
    "messages.redacted_thinking": (lambda t: _m([USER, {"role": "assistant", "content": [
        {"type": "redacted_thinking", "data": t}, {"type": "text", "text": "ok"}]}, USER]), "opaque"),
    "messages.system_blocks": (lambda t: _m([USER], system=[{"type": "text", "text": t}]), "text"),
    "messages.system_turn": (lambda t: _m([USER, {"role": "system", "content": t}]), "text"),
    "messages.citation": (lambda t: _m([USER, {"role": "assistant", "content": [
        {"type": "text", "text": "ok", "citations": [{"type": "char_location", "cited_text": t, "document_index": 0,
                                                      "document_title": "d", "start_char_index": 0,
                                                      "end_char_index": 2}]}]}, USER]), "text"),
    "messages.document_text": (lambda t: _m([{"role": "user", "content": [
        {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": t}},
        {"type": "text", "text": "Summarize."}]}]), "text"),
    "messages.document_title": (lambda t: _m([{"role": "user", "content": [
        {"type": "document", "title": t, "source": {"type": "text", "media_type": "text/plain", "data": "x"}},
        {"type": "text", "text": "Summarize."}]}]), "text"),
    "messages.document_context": (lambda t: _m([{"role": "user", "content": [
        {"type": "document", "context": t, "source": {"type": "text", "media_type": "text/plain", "data": "x"}},
        {"type": "text", "text": "Summarize."}]}]), "text"),
    "messages.search_result": (lambda t: _m([{"role": "user", "content": [
        {"type": "search_result", "source": "https://e.com", "title": "r", "content": [{"type": "text", "text": t}]},
        {"type": "text", "text": "Use it."}]}]), "text"),
    "messages.tool_result": (lambda t: _m([USER, CALL, {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": t}]}], tools=[
        {"name": "search", "input_schema": SCHEMA}]), "text"),
    "messages.tool_use_input": (lambda t: _m([USER, {"role": "assistant", "content": [
        {"type": "tool_use", "id": "toolu_1", "name": "search", "input": {"q": t}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "none"}]}],
        tools=[{"name": "search", "input_schema": SCHEMA}]), "text"),
    "messages.tool_description": (lambda t: _m([USER], tools=[
        {"name": "search", "description": t, "input_schema": SCHEMA}]), "text"),
    "messages.tool_schema": (lambda t: _m([USER], tools=[{"name": "search", "input_schema": {
        "type": "object", "properties": {"q": {"type": "string", "description": t}}}}]), "text"),
    "messages.metadata": (lambda t: _m([USER], metadata={"user_id": t}), "text"),
    "messages.server_result": (lambda t: _m([USER, {"role": "assistant", "content": [
        {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "x"}},
        {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": [
            {"type": "web_search_result", "title": t, "url": "https://e.com", "encrypted_content": "YWJj"}]}]},
        USER]), "text"),
    "messages.compaction_instructions": (lambda t: _m([USER], context_management={"edits": [
        {"type": "compact_20260112", "instructions": t}]}), "text"),
    "responses.instructions": (lambda t: _r("Go on.", instructions=t), "text"),
    "responses.input_text": (lambda t: _r([{"role": "user", "content": [{"type": "input_text", "text": t}]}]), "text"),
    "responses.annotation": (lambda t: _r([{"role": "user", "content": "Hi"}, {
        "type": "message", "role": "assistant", "id": "msg_1", "status": "completed", "content": [
            {"type": "output_text", "text": "ok", "annotations": [
                {"type": "url_citation", "title": t, "url": "https://e.com", "start_index": 0, "end_index": 1}]}]},
        {"role": "user", "content": "Go on."}]), "text"),
    "responses.reasoning_summary": (lambda t: _r([{"role": "user", "content": "Hi"}, {
        "type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": t}]},
        {"role": "user", "content": "Go on."}]), "text"),
    "responses.reasoning_content": (lambda t: _r([{"role": "user", "content": "Hi"}, {
        "type": "reasoning", "id": "rs_1", "summary": [], "content": [{"type": "reasoning_text", "text": t}]},
        {"role": "user", "content": "Go on."}]), "text"),
    "responses.encrypted_content": (lambda t: _r([{"role": "user", "content": "Hi"}, {
        "type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": t},
        {"role": "user", "content": "Go on."}]), "opaque"),
    "responses.function_call_arguments": (lambda t: _r([{"role": "user", "content": "Hi"}, {
        "type": "function_call", "call_id": "call_1", "name": "search", "arguments": json.dumps({"q": t})},
        {"type": "function_call_output", "call_id": "call_1", "output": "none"}],
        tools=[{"type": "function", "name": "search", "parameters": SCHEMA}]), "text"),
    "responses.function_call_output": (lambda t: _r([{"role": "user", "content": "Hi"}, {
        "type": "function_call", "call_id": "call_1", "name": "search", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": t}],
        tools=[{"type": "function", "name": "search", "parameters": SCHEMA}]), "text"),
    "responses.metadata": (lambda t: _r("Go on.", metadata={"note": t}), "text"),
    "responses.client_metadata": (lambda t: _r("Go on.", client_metadata={"note": t}), "text"),
    "responses.tool_description": (lambda t: _r("Go on.", tools=[
        {"type": "function", "name": "search", "description": t, "parameters": SCHEMA}]), "text"),
    "responses.tool_parameters": (lambda t: _r("Go on.", tools=[{"type": "function", "name": "search", "parameters": {
        "type": "object", "properties": {"q": {"type": "string", "description": t}}}}]), "text"),
    "responses.namespace_member": (lambda t: _r([{"type": "additional_tools", "role": "developer", "tools": [
        {"type": "namespace", "name": "ops", "description": "", "tools": [
            {"type": "function", "name": "search", "description": t, "parameters": SCHEMA}]}]},
        {"role": "user", "content": "Go on."}]), "text"),
    "responses.custom_tool_input": (lambda t: _r([{"role": "user", "content": "Hi"}, {
        "type": "custom_tool_call", "call_id": "call_1", "name": "patch", "input": t},
        {"type": "custom_tool_call_output", "call_id": "call_1", "output": "done"}],
        tools=[{"type": "custom", "name": "patch"}]), "text"),
    "responses.server_item": (lambda t: _r([{"role": "user", "content": "Hi"}, {
        "type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search", "query": t}},
        {"role": "user", "content": "Go on."}]), "text"),
    "responses.prompt_variables": (lambda t: _r("Go on.", prompt={"id": "pmpt_1", "variables": {"topic": t}}),
                                   "text"),
}


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.parametrize("field", sorted(FIELDS))
async def test_a_planted_injection_is_screened_and_an_email_never_reaches_the_backend(tmp_path, field):
    build, kind = FIELDS[field]
    async with hostile_stack(tmp_path) as stack:
        backend = stack.backend
        harmless = SIG if kind == "opaque" else HARMLESS      # opaque state: as the API issues it
        path, body = build(harmless)
        control = await stack.post(path, body)
        assert control.status_code == 200, (field, control.text)      # the control reaches the backend
        assert backend.requests == 1 and harmless.encode() in backend.bodies[-1]

        path, body = build(INJECTION)
        refused = await stack.post(path, body)
        reason = "invalid_field" if kind == "opaque" else "content_blocked"
        assert (refused.status_code, refused.headers["x-tokenward-reason"]) == (400, reason), (field, refused.text)
        assert backend.requests == 1                                       # the backend never saw it

        path, body = build(f"Please write to {EMAIL} about it.")
        answered = await stack.post(path, body)
        if kind == "opaque":
            assert (answered.status_code, answered.headers["x-tokenward-reason"]) == (400, "invalid_field")
            assert backend.requests == 1
            return
        assert answered.status_code == 200, (field, answered.text)
        assert backend.requests == 2
        sent = backend.bodies[-1]
        assert EMAIL.encode() not in sent and b"carol" not in sent, field
        if kind == "signed":
            # a signed block masking would change is left out, never sent altered
            assert b'"thinking"' not in sent and SIG.encode() not in sent
        else:
            assert b"{EMAIL_0}" in sent


async def test_the_control_text_goes_as_the_client_wrote_it_and_nothing_else_does(tmp_path):
    """Rendered from the parse: a field no one reads (an unknown member) is refused by name,
    and what goes is the parse's own encoding (no duplicate key survives)."""
    async with hostile_stack(tmp_path) as stack:
        raw = (b'{"model": "small-chat", "max_tokens": 16, "messages": [{"role": "user", "content": "'
               + INJECTION.encode() + b'", "content": "hello"}]}')
        answered = await stack.post("/v1/messages", raw)
        assert answered.status_code == 200 and stack.backend.requests == 1
        sent = stack.backend.last()
        assert sent["messages"] == [{"role": "user", "content": "hello"}] and INJECTION.encode() not in \
            stack.backend.bodies[-1]
        refused = await stack.post("/v1/messages", {"model": MODEL, "max_tokens": 16, "messages": [USER],
                                                    "surprise": {"text": INJECTION}})
        assert (refused.status_code, refused.headers["x-tokenward-reason"]) == (400, "unknown_field")
        assert stack.backend.requests == 1


async def test_a_native_text_is_normalized_whether_its_character_comes_as_utf8_or_as_an_escape(tmp_path):
    """What is screened is what is sent: a hidden character is stripped and a compatibility
    form folded (NFKC) in a native body's text, whether the body holds the character as UTF-8
    or as a ``\\u`` escape (an ASCII body); an ASCII body without one goes as the client wrote it."""
    odd = "Go\u200b on, \uff21"      # a zero-width space, a fullwidth A
    async with hostile_stack(tmp_path) as stack:
        backend = stack.backend
        for ensure_ascii in (True, False):
            for path, body, read in (
                    ("/v1/messages", {"model": MODEL, "max_tokens": 16, "messages": [{"role": "user", "content": odd}]},
                     lambda sent: sent["messages"][0]["content"]),
                    ("/v1/responses", {"model": MODEL, "max_output_tokens": 16, "input": odd, "instructions": odd},
                     lambda sent: (sent["input"], sent["instructions"]))):
                raw = json.dumps(body, ensure_ascii=ensure_ascii).encode()
                assert raw.isascii() is ensure_ascii
                before = backend.requests
                answered = await stack.post(path, raw)
                assert answered.status_code == 200, answered.text
                assert backend.requests == before + 1
                got = read(backend.last())
                assert got in ("Go on, A", ("Go on, A", "Go on, A")), (ensure_ascii, path, got)
        path, body = _m([{"role": "user", "content": "C:\\users\\u200b stays"}])
        answered = await stack.post(path, body)
        assert answered.status_code == 200
        assert backend.last()["messages"][0]["content"] == "C:\\users\\u200b stays"
