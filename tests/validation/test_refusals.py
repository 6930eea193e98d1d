"""Each validation reason code through a real gateway: status, code, param, backend untouched,
next to a control that gets through (at the limit where there is one)."""

from __future__ import annotations

import pytest

from tests.validation.harness import LAB_PLAN, chat, completion, data_url, image_part, png

pytestmark = pytest.mark.asyncio(loop_scope="module")

CHAT, COMPLETIONS, EMBEDDINGS = "/v1/chat/completions", "/v1/completions", "/v1/embeddings"


def nested(depth: int) -> dict:
    """A JSON schema exactly ``depth`` JSON levels deep (``{}`` is one level)."""
    schema: dict = {}
    for _ in range(depth - 1):
        schema = {"not": schema}
    return schema


def tool(name: str = "search", parameters: dict | None = None) -> dict:
    return {"type": "function", "function": {"name": name, "parameters": parameters or {"type": "object"}}}


async def test_invalid_json(client):
    bad = [
        b'{"model": "small-chat", "messages": [',                      # truncated
        b'{"model": "small-chat", "max_tokens": NaN}',                 # NaN literal
        b'{"model": "small-chat", "max_tokens": Infinity}',            # Infinity literal
        b'{"model": "small-chat", "messages": [{"role": "user", "content": "\xff\xfe"}], "max_tokens": 8}',
        b'{"model": "small-chat", "messages": [{"role": "user", "content": "\\ud800"}], "max_tokens": 8}',
        b'{"model": "small-chat", "messages": [{"role": "user", "content": "\\udc00x"}], "max_tokens": 8}',
        b'{"model": "small-chat", "messages": [{"role": "user", "content": "x"}], "max_tokens": 8} trailing',
        b'[1, 2, 3]',
    ]
    for raw in bad:
        await client.refused(CHAT, None, 400, "invalid_json", None, raw=raw)
    # A number that overflows to infinity is refused where it sits.
    raw = b'{"model": "small-chat", "messages": [{"role": "user", "content": "x"}], "max_tokens": 8, "temperature": 1e400}'
    await client.refused(CHAT, None, 400, "invalid_json", "temperature", raw=raw)
    # Control: a valid surrogate pair and non-ASCII UTF-8 pass.
    raw = b'{"model": "small-chat", "messages": [{"role": "user", "content": "\\ud83d\\ude00 caf\xc3\xa9"}], "max_tokens": 8}'
    await client.admitted(CHAT, None, raw=raw)


async def test_json_too_deep(client):
    limit = LAB_PLAN["max_schema_depth"]
    await client.refused(CHAT, chat(tools=[tool(parameters=nested(limit + 1))]), 400, "json_too_deep",
                         "tools[0].function.parameters")
    schema = {"name": "out", "schema": nested(limit + 1)}
    await client.refused(CHAT, chat(response_format={"type": "json_schema", "json_schema": schema}), 400,
                         "json_too_deep", "response_format.json_schema.schema")
    await client.admitted(CHAT, chat(tools=[tool(parameters=nested(limit))]))


async def test_nesting_past_the_decoder_recursion_bound_is_refused_not_a_500(client):
    raw = (b'{"model": "small-chat", "messages": [{"role": "user", "content": "x"}], "max_tokens": 8, '
           b'"tools": [{"type": "function", "function": {"name": "search", "parameters": '
           + b"[" * 5000 + b"]" * 5000 + b"}}]}")
    await client.refused(CHAT, None, 400, "json_too_deep", None, raw=raw)


async def test_free_form_size_cap(client):
    cap = LAB_PLAN["max_schema_bytes"]
    frame = len(b'{"type":"object","description":""}')
    at_cap = {"type": "object", "description": "x" * (cap - frame)}
    over = {"type": "object", "description": "x" * (cap - frame + 1)}
    await client.refused(CHAT, chat(tools=[tool(parameters=over)]), 400, "invalid_field",
                         "tools[0].function.parameters")
    await client.admitted(CHAT, chat(tools=[tool(parameters=at_cap)]))


async def test_unknown_model(client):
    await client.refused(CHAT, chat(model="no-such-model"), 404, "unknown_model", "model")
    await client.refused(EMBEDDINGS, {"model": "no-such-model", "input": "x"}, 404, "unknown_model", "model")
    # Said first even when the rest of the body is also wrong.
    await client.refused(CHAT, {"model": "no-such-model", "messages": []}, 404, "unknown_model", "model")


@pytest.mark.parametrize("body, param", [
    (chat(foo=1), "foo"),
    (chat(best_of=2), "best_of"),   # a completions field, not a chat one
    ({"model": "small-chat", "messages": [{"role": "user", "content": "x", "foo": 1}], "max_tokens": 8},
     "messages[0].foo"),
    (chat([{"type": "text", "text": "x", "extra": True}]), "messages[0].content[0].extra"),
    (chat([{"type": "image_url", "image_url": {"url": data_url(png()), "foo": 1}}]),
     "messages[0].content[0].image_url.foo"),
    (chat(tools=[{"type": "function", "function": {"name": "search", "foo": 1}}]), "tools[0].function.foo"),
    (chat(stream=True, stream_options={"include_usage": True, "foo": 1}), "stream_options.foo"),
    (chat(response_format={"type": "json_schema", "json_schema": {"name": "x", "foo": 1}}),
     "response_format.json_schema.foo"),
])
async def test_unknown_field(client, body, param):
    error = await client.refused(CHAT, body, 400, "unknown_field", param)
    assert param in error["message"]


async def test_unknown_field_other_routes(client):
    await client.refused(COMPLETIONS, completion(foo=1), 400, "unknown_field", "foo")
    await client.refused(EMBEDDINGS, {"model": "small-chat", "input": "x", "foo": 1}, 400, "unknown_field", "foo")
    await client.admitted(EMBEDDINGS, {"model": "small-chat", "input": "x", "dimensions": 8,
                                       "encoding_format": "float"})


@pytest.mark.parametrize("body, param", [
    (chat(temperature=7), "temperature"),
    (chat(temperature=-0.1), "temperature"),
    (chat(top_p=1.5), "top_p"),
    (chat(max_tokens=-5), "max_tokens"),
    (chat(max_tokens=0), "max_tokens"),
    (chat(max_tokens="8"), "max_tokens"),
    (chat(n=0), "n"),
    (chat(presence_penalty=3), "presence_penalty"),
    (chat(top_logprobs=21, logprobs=True), "top_logprobs"),
    (chat(logit_bias={"abc": 1}), "logit_bias"),
    (chat(logit_bias={"12": 101}), "logit_bias"),
    (chat(stream="yes"), "stream"),
    (chat(5), "messages[0].content"),
    ({"model": "small-chat", "messages": [{"role": "bot", "content": "x"}], "max_tokens": 8}, "messages[0].role"),
    ({"model": "small-chat", "messages": [{"content": "x"}], "max_tokens": 8}, "messages[0].role"),
    ({"model": "small-chat", "messages": [], "max_tokens": 8}, "messages"),
    ({"model": "small-chat", "max_tokens": 8}, "messages"),
    ({"model": "small-chat", "messages": [{"role": "tool", "content": "x"}], "max_tokens": 8},
     "messages[0].tool_call_id"),
    (chat([{"type": "video_url", "video_url": {"url": "x"}}]), "messages[0].content[0].type"),
    (chat(tool_choice="sometimes"), "tool_choice"),
    # a named tool_choice outside the plan is entitlement's (tools_not_entitled); a nameless one is validation's
    (chat(tool_choice={"type": "function", "function": {}}), "tool_choice.function.name"),
])
async def test_invalid_field(client, body, param):
    await client.refused(CHAT, body, 400, "invalid_field", param)


async def test_invalid_field_controls_at_the_range_limits(client):
    await client.admitted(CHAT, chat(temperature=2, top_p=1, presence_penalty=-2, frequency_penalty=2,
                                     top_logprobs=20, logprobs=True, seed=-(2**63), user="u" * 256))
    await client.refused(CHAT, chat(user="u" * 257), 400, "invalid_field", "user")
    await client.refused(COMPLETIONS, completion(prompt=[1, "a"]), 400, "invalid_field", "prompt")
    await client.refused(COMPLETIONS, completion(prompt=[]), 400, "invalid_field", "prompt")
    await client.refused(COMPLETIONS, completion(prompt=[[1], []]), 400, "invalid_field", "prompt[1]")
    await client.refused(COMPLETIONS, completion(prompt=1.5), 400, "invalid_field", "prompt")


async def test_max_tokens_required(client):
    body = chat()
    del body["max_tokens"]
    await client.refused(CHAT, body, 400, "max_tokens_required", "max_tokens")
    await client.refused(CHAT, {**body, "max_tokens": None}, 400, "max_tokens_required", "max_tokens")
    body_c = completion()
    del body_c["max_tokens"]
    await client.refused(COMPLETIONS, body_c, 400, "max_tokens_required", "max_tokens")
    await client.admitted(CHAT, {**body, "max_completion_tokens": 1})
    await client.admitted(CHAT, {**body, "max_tokens": 1})


async def test_max_tokens_clamped_to_the_plan(client):
    cap = LAB_PLAN["max_output_tokens"]
    await client.admitted(CHAT, chat(max_tokens=100_000, temperature=0.5))
    forwarded = await client.last_body()
    assert forwarded["max_tokens"] == cap and forwarded["temperature"] == 0.5
    await client.admitted(CHAT, chat(max_completion_tokens=cap + 1, max_tokens=None))
    forwarded = await client.last_body()
    assert forwarded["max_completion_tokens"] == cap and forwarded["max_tokens"] is None
    # At the cap nothing changes: the body is forwarded as sent.
    sent = chat(max_tokens=cap, stop=["\n"])
    await client.admitted(CHAT, sent)
    assert await client.last_body() == sent


async def test_choices_limit(client):
    max_n = LAB_PLAN["max_n"]
    await client.refused(CHAT, chat(n=max_n + 1), 400, "choices_limit", "n")
    await client.refused(COMPLETIONS, completion(n=max_n + 1), 400, "choices_limit", "n")
    await client.admitted(CHAT, chat(n=max_n))


async def test_best_of(client):
    cap = LAB_PLAN["max_best_of"]
    await client.refused(COMPLETIONS, completion(best_of=cap + 1), 400, "best_of_denied", "best_of")
    await client.refused(COMPLETIONS, completion(best_of=2, n=3), 400, "invalid_field", "best_of")
    await client.admitted(COMPLETIONS, completion(best_of=cap, n=1))
    # Not allowed on the plan: refused before the backend (the entitlement stage decides first).
    before = await client.backend.requests()
    resp = await client.post(COMPLETIONS, completion(best_of=2), tenant="strict")
    assert resp.status_code == 403 and resp.json()["error"]["code"] == "feature_not_entitled"
    assert resp.json()["error"]["param"] == "best_of"
    assert await client.backend.requests() == before


async def test_outer_item_limit(client):
    limit = LAB_PLAN["max_outer_items"]
    await client.refused(COMPLETIONS, completion(["a"] * (limit + 1)), 400, "outer_item_limit", "prompt")
    await client.refused(COMPLETIONS, completion([[1, 2]] * (limit + 1)), 400, "outer_item_limit", "prompt")
    await client.refused(EMBEDDINGS, {"model": "small-chat", "input": ["a"] * (limit + 1)}, 400,
                         "outer_item_limit", "input")
    await client.admitted(COMPLETIONS, completion(["a"] * limit))
    await client.admitted(COMPLETIONS, completion([[1, 2]] * limit))
    await client.admitted(EMBEDDINGS, {"model": "small-chat", "input": ["a"] * limit})
    # One token-id list is one item, however long.
    await client.admitted(COMPLETIONS, completion(list(range(50))))


async def test_structural_bounds(client):
    plan = LAB_PLAN
    msgs = [{"role": "user", "content": "x"}] * plan["max_messages"]
    await client.refused(CHAT, {**chat(), "messages": msgs + [msgs[0]]}, 400, "invalid_field", "messages")
    await client.admitted(CHAT, {**chat(), "messages": msgs})
    parts = [{"type": "text", "text": "x"}] * plan["max_content_parts"]
    await client.refused(CHAT, chat(parts + [parts[0]]), 400, "invalid_field", "messages[0].content")
    await client.admitted(CHAT, chat(parts))
    cap = plan["max_part_chars"]
    await client.refused(CHAT, chat("x" * (cap + 1)), 400, "invalid_field", "messages[0].content")
    await client.refused(CHAT, chat([{"type": "text", "text": "x" * (cap + 1)}]), 400, "invalid_field",
                         "messages[0].content[0].text")
    await client.refused(COMPLETIONS, completion(["a", "x" * (cap + 1)]), 400, "invalid_field", "prompt[1]")
    await client.admitted(CHAT, chat("x" * cap))
    tools = [tool("search"), tool("calc")]
    await client.refused(CHAT, chat(tools=tools + [tool("search")]), 400, "invalid_field", "tools")
    await client.admitted(CHAT, chat(tools=tools))
    await client.refused(CHAT, chat(stop=["a", "b", "c"]), 400, "invalid_field", "stop")
    await client.refused(CHAT, chat(stop="s" * 1025), 400, "invalid_field", "stop")
    await client.refused(CHAT, chat(stop=["a", "s" * 1025]), 400, "invalid_field", "stop[1]")
    await client.admitted(CHAT, chat(stop=["a", "s" * 1024]))
    bias = {str(i): 1 for i in range(plan["max_logit_bias"])}
    await client.refused(CHAT, chat(logit_bias={**bias, "99": 1}), 400, "invalid_field", "logit_bias")
    await client.admitted(CHAT, chat(logit_bias=bias))


async def test_structured_output_denied(client):
    await client.refused(CHAT, chat(guided_regex="(a+)+$"), 400, "structured_output_denied", "guided_regex")
    await client.refused(CHAT, chat(guided_grammar="root ::= 'a'"), 400, "structured_output_denied",
                         "guided_grammar")
    await client.refused(CHAT, chat(structured_outputs={"regex": "(a|b)*a(a|b){20}"}), 400,
                         "structured_output_denied", "structured_outputs.regex")
    schema = {"type": "object", "properties": {"code": {"type": "string", "pattern": "^(a+)+$"}}}
    fmt = {"type": "json_schema", "json_schema": {"name": "out", "schema": schema}}
    await client.refused(CHAT, chat(response_format=fmt), 400, "structured_output_denied",
                         "response_format.json_schema.schema")
    await client.refused(CHAT, chat(tools=[tool(parameters={"patternProperties": {"^x(a+)+": {}}})]), 400,
                         "structured_output_denied", "tools[0].function.parameters")
    # Controls: a schema without regexes (a property merely *named* pattern), json guided decoding.
    schema = {"type": "object", "properties": {"pattern": {"type": "string"}}, "required": ["pattern"]}
    await client.admitted(CHAT, chat(response_format={"type": "json_schema",
                                                      "json_schema": {"name": "out", "schema": schema}}))
    await client.admitted(CHAT, chat(guided_json={"type": "object"}))
    await client.admitted(CHAT, chat(structured_outputs={"choice": ["yes", "no"]}))
    # cheap regexes (validation/regex_cost.py) need no feature: Claude Code's, a key pattern
    cheap = {"type": "object", "properties": {"id": {"type": "string", "pattern": "^wf_[a-z0-9-]{6,}$"}},
             "patternProperties": {"^x-[a-z]+$": {}}}
    await client.admitted(CHAT, chat(tools=[tool(parameters=cheap)]))
    await client.admitted(CHAT, chat(structured_outputs={"regex": "(a|a)*b"}))   # a DFA of three states


async def test_remote_media_denied(client):
    await client.refused(CHAT, chat([{"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}]),
                         400, "remote_media_denied", "messages[0].content[0].image_url.url")
    await client.refused(CHAT, chat([{"type": "text", "text": "see"},
                                     {"type": "image_url", "image_url": {"url": "http://169.254.169.254/x"}}]),
                         400, "remote_media_denied", "messages[0].content[1].image_url.url")
    await client.refused(CHAT, chat([{"type": "file", "file": {"file_id": "file-abc"}}]), 400,
                         "remote_media_denied", "messages[0].content[0].file.file_id")
    await client.refused(CHAT, chat([{"type": "file", "file": {"file_data": "https://example.com/a.pdf"}}]),
                         400, "remote_media_denied", "messages[0].content[0].file.file_data")
    await client.admitted(CHAT, chat([{"type": "text", "text": "what is this?"}, image_part(png())]))


async def test_attachment_rejected(client):
    cap = LAB_PLAN["max_attachment_bytes"]
    param = "messages[0].content[0].image_url.url"
    await client.refused(CHAT, chat([image_part(png(size=cap + 1))]), 400, "attachment_rejected", param)
    await client.refused(CHAT, chat([{"type": "image_url", "image_url": {"url": "data:image/png;base64,%%%"}}]),
                         400, "attachment_rejected", param)
    await client.refused(CHAT, chat([image_part(b"\x00\x01\x02 not an image")]), 400, "attachment_rejected", param)
    # The declared type is ignored: text labelled image/png is not an image.
    await client.refused(CHAT, chat([image_part(b"plain text, really")]), 400, "attachment_rejected", param)
    await client.refused(CHAT, chat([image_part(png(width=100_000, height=100_000))]), 400,
                         "attachment_rejected", param)
    await client.admitted(CHAT, chat([image_part(png(size=cap))]))


async def test_files_not_entitled(client):
    pdf = b"%PDF-1.7\n" + b"0" * 40
    param = "messages[0].content[0].file.file_data"
    await client.refused(CHAT, chat([{"type": "file", "file": {"file_data": data_url(pdf, "text/plain"),
                                                                "filename": "a.txt"}}]),
                         403, "files_not_entitled", param)
    gif = b"GIF89a\x02\x00\x02\x00" + b"\x00" * 20
    await client.refused(CHAT, chat([image_part(gif)]), 403, "files_not_entitled",
                         "messages[0].content[0].image_url.url")
    text = b"meeting notes: ship it"
    await client.admitted(CHAT, chat([{"type": "file", "file": {"file_data": data_url(text, "application/pdf"),
                                                                 "filename": "notes.txt"}}]))


async def test_feature_gates(client):
    # Enabled by vllm_extensions on the lab plan; refused on the strict plan (no features).
    await client.admitted(CHAT, chat(top_k=20, min_p=0.1, repetition_penalty=1.1))
    before = await client.backend.requests()
    resp = await client.post(CHAT, chat(top_k=20), tenant="strict")
    assert resp.status_code == 403 and resp.json()["error"]["code"] == "feature_not_entitled"
    assert resp.json()["error"]["param"] == "top_k"
    assert await client.backend.requests() == before
    # Enabled, but still bounded.
    await client.refused(CHAT, chat(stop_token_ids=[1, 2, 3]), 400, "invalid_field", "stop_token_ids")
    await client.refused(CHAT, chat(min_tokens=9), 400, "invalid_field", "min_tokens")
    await client.refused(CHAT, chat(priority=-1), 400, "invalid_field", "priority")
    await client.refused(CHAT, chat(kv_transfer_params=nested(6)), 400, "json_too_deep", "kv_transfer_params")
    await client.admitted(CHAT, chat(stop_token_ids=[1, 2], min_tokens=8, priority=0))


async def test_a_stream_forwards_the_validated_body_and_asks_for_usage(client):
    """The forwarder changes a streaming body (it asks the backend for usage the client did
    not ask for) starting from the body validation left: clamped and normalized."""
    body = chat("ｈｉ\u200b", stream=True)
    body["max_tokens"] = 10_000
    resp = await client.admitted(CHAT, body)
    sent = await client.last_body()
    assert sent["max_tokens"] == 64 and sent["stream_options"] == {"include_usage": True}
    assert sent["messages"][0]["content"] == "hi"
    assert '"usage"' not in resp.text            # the extra usage chunk was not passed on
    assert resp.text.rstrip().endswith("data: [DONE]")


async def test_streaming_request_is_admitted(client):
    resp = await client.admitted(CHAT, chat(stream=True, stream_options={"include_usage": True}))
    assert resp.text.rstrip().endswith("data: [DONE]")
    resp = await client.admitted(CHAT, chat(stream=True))
    assert "[DONE]" in resp.text
