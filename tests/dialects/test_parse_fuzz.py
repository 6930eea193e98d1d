"""Seeded mutations of valid Responses and Messages bodies: the parse and the translation
either refuse with a reason code or give a chat request the gateway's strict chat schema
accepts; never another exception."""

from __future__ import annotations

import json
import random

import msgspec
import pytest

from tests.fuzzing import mutate
from tokenward.dialects import messages_schema, messages_translate, responses_schema, responses_translate
from tokenward.dialects.common import encode
from tokenward.errors import Refusal
from tokenward.validation.schemas import ChatCompletionRequest

_chat = msgspec.json.Decoder(ChatCompletionRequest)

RESPONSES = json.dumps({"model": "m", "instructions": "i", "max_output_tokens": 5, "stream": True, "input": [
    {"role": "user", "content": [{"type": "input_text", "text": "hi"},
                                 {"type": "input_image", "image_url": "data:image/png;base64,AA"}]},
    {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "c", "output": "ok"}],
    "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}], "tool_choice": "auto",
    "text": {"format": {"type": "json_schema", "name": "n", "schema": {"type": "object"}}}}).encode()
MESSAGES = json.dumps({"model": "m", "max_tokens": 5, "system": "s", "stop_sequences": ["E"], "messages": [
    {"role": "user", "content": [{"type": "text", "text": "hi"},
                                 {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                              "data": "AA"}}]},
    {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {"a": 1}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "ok"}]}],
    "tools": [{"name": "f", "input_schema": {"type": "object"}}], "tool_choice": {"type": "any"}}).encode()


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("schema, translate, body", [
    (responses_schema, responses_translate, RESPONSES), (messages_schema, messages_translate, MESSAGES)],
    ids=["responses", "messages"])
def test_mutated_bodies_refuse_or_translate(seed, schema, translate, body):
    rng = random.Random(seed)
    outcomes = {"refused": 0, "translated": 0}
    for _ in range(300):
        raw = mutate(rng, body)
        try:
            chat = translate.chat_request(schema.parse(raw))
        except Refusal as refusal:
            assert refusal.reason.status == 400 and refusal.message
            outcomes["refused"] += 1
            continue
        _chat.decode(encode(chat))
        outcomes["translated"] += 1
    assert outcomes["refused"] and outcomes["translated"], outcomes
