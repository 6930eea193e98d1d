"""Every refusal on /v1/messages and /v1/responses names a field the client's request has.

The stages after the dialect stage check the chat view; their refusals are named again in
the client's terms (dialects/params.py). This walks the refusal classes that carry a
``param`` (entitlement, validation, structured output, work), on both APIs, translated and
native, and resolves each param in the body the client sent. Each beside the control the
same gateway admits.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from tests.dialects.gateway import MODEL, dialect_gateway

_STEP = re.compile(r"\.?([A-Za-z_][A-Za-z0-9_]*)|\[(\d+)\]")


def resolve(body: Any, param: str) -> bool:
    """Whether ``param`` (``messages[1].content[0].input``) names a place in ``body``."""
    node = body
    for name, index in _STEP.findall(param):
        if name:
            if not isinstance(node, dict) or name not in node:
                return False
            node = node[name]
        else:
            if not isinstance(node, list) or int(index) >= len(node):
                return False
            node = node[int(index)]
    return True


SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}}
LONG = "word " * 40_000
HIDDEN_PATTERN = {"type": "object", "properties": {"q": {"type": "string", "pattern": "(a+)+$"}}}


def messages_cases() -> dict[str, tuple[dict[str, Any], str]]:
    base = {"model": MODEL, "max_tokens": 16}
    user = {"role": "user", "content": "hi"}
    return {
        "tool not entitled": ({**base, "messages": [user], "tools": [
            {"name": "get_weather", "input_schema": SCHEMA}, {"name": "rm_rf", "input_schema": SCHEMA}]},
            "tools_not_entitled"),
        "costly regex in a schema": ({**base, "messages": [user], "tools": [
            {"name": "get_weather", "input_schema": HIDDEN_PATTERN}]}, "structured_output_denied"),
        "output over the plan": ({**base, "max_tokens": 10 ** 6, "messages": [user]}, None),
        "a text too large for the context": ({**base, "messages": [
            {"role": "user", "content": "Go."},
            {"role": "assistant", "content": [{"type": "text", "text": "ok"}]},
            {"role": "user", "content": [{"type": "text", "text": "and"}, {"type": "text", "text": LONG}]}]},
            "context_too_large"),
        "a remote image": ({**base, "messages": [{"role": "user", "content": [
            {"type": "text", "text": "look"},
            {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}]}]},
            "remote_media_denied"),
    }


def responses_cases() -> dict[str, tuple[dict[str, Any], str]]:
    base = {"model": MODEL, "max_output_tokens": 16}
    return {
        "tool not entitled": ({**base, "input": "hi", "tools": [
            {"type": "function", "name": "get_weather", "parameters": SCHEMA},
            {"type": "function", "name": "rm_rf", "parameters": SCHEMA}]}, "tools_not_entitled"),
        "costly regex in a schema": ({**base, "input": "hi", "tools": [
            {"type": "function", "name": "get_weather", "parameters": HIDDEN_PATTERN}]}, "structured_output_denied"),
        "a text too large for the context": ({**base, "input": [
            {"role": "user", "content": "Go."},
            {"role": "user", "content": [{"type": "input_text", "text": "and"}, {"type": "input_text", "text": LONG}]}]},
            "context_too_large"),
        "a remote image": ({**base, "input": [{"role": "user", "content": [
            {"type": "input_text", "text": "look"},
            {"type": "input_image", "image_url": "https://example.com/a.png"}]}]}, "remote_media_denied"),
        "a namespace member not entitled": ({**base, "input": [
            {"type": "additional_tools", "role": "developer", "tools": [{"type": "namespace", "name": "ops",
                                                                         "description": "", "tools": [
                {"type": "function", "name": "rm_rf", "parameters": SCHEMA}]}]},
            {"role": "user", "content": "hi"}]}, "tools_not_entitled"),
    }


@pytest.mark.parametrize("native", [False, True], ids=["translated", "native"])
@pytest.mark.parametrize("dialect", ["messages", "responses"])
async def test_every_refusal_names_a_field_of_the_clients_request(tmp_path, dialect, native):
    dialects = ("chat", "responses", "messages") if native else ("chat",)
    cases = messages_cases() if dialect == "messages" else responses_cases()
    path = f"/v1/{dialect}"
    async with dialect_gateway(tmp_path, dialects) as (backend, gw):
        import httpx

        key = gw.extra["keys"]["team"]
        headers = ({"x-api-key": key, "anthropic-version": "2023-06-01"} if dialect == "messages"
                   else {"authorization": f"Bearer {key}"})
        async with httpx.AsyncClient(timeout=30) as client:
            control = {"model": MODEL, "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]} \
                if dialect == "messages" else {"model": MODEL, "max_output_tokens": 16, "input": "hi"}
            admitted = await client.post(gw.url + path, json=control, headers=headers)
            assert admitted.status_code == 200
            before = await backend.requests()
            for name, (body, reason) in cases.items():
                reply = await client.post(gw.url + path, content=json.dumps(body),
                                          headers={**headers, "content-type": "application/json"})
                if reason is None:     # clamped, not refused: the control of the clamp
                    assert reply.status_code == 200, (name, reply.text)
                    continue
                assert reply.status_code >= 400 and reply.headers["x-tokenward-reason"] == reason, (name, reply.text)
                error = reply.json()["error"]
                param = error.get("param") if dialect == "responses" else _anthropic_param(error)
                assert param and resolve(body, param), (name, param, error["message"])
            clamped = sum(1 for _, reason in cases.values() if reason is None)
            assert await backend.requests() == before + clamped   # only the clamped request went


def _anthropic_param(error: dict[str, Any]) -> str | None:
    """Anthropic's envelope has no ``param``: the gateway's is kept as ``param`` too."""
    return error.get("param")
