"""The fan-out shapes of the vLLM advisories, and LiteLLM's pass-through list: each refused
by the gateway before any backend work (the backend's request counter does not move)."""

from __future__ import annotations

import base64

import pytest

from tests.validation.harness import chat, completion, image_part, png

pytestmark = pytest.mark.asyncio(loop_scope="module")

CHAT, COMPLETIONS, EMBEDDINGS = "/v1/chat/completions", "/v1/completions", "/v1/embeddings"


async def test_ghsa_3mwp_wvh9_7528_unbounded_n(client):
    """n fanned out synchronously into n sequences."""
    await client.refused(CHAT, chat(n=500), 400, "choices_limit", "n")
    await client.refused(COMPLETIONS, completion(n=10_000), 400, "choices_limit", "n")
    await client.refused(COMPLETIONS, completion(n=1, best_of=10_000), 400, "best_of_denied", "best_of")
    await client.refused(CHAT, chat(n=2, use_beam_search=True, max_tokens=64, messages=[
        {"role": "user", "content": "x" * 400}] * 6), 400, "aggregate_work_limit", "n")


async def test_ghsa_87x5_vmc3_756j_prompt_list_fan_out(client):
    """Every element of a prompt list became its own engine request."""
    await client.refused(COMPLETIONS, completion(["a"] * 1000), 400, "outer_item_limit", "prompt")
    await client.refused(COMPLETIONS, completion([[1, 2, 3]] * 1000), 400, "outer_item_limit", "prompt")
    await client.refused(EMBEDDINGS, {"model": "small-chat", "input": ["a"] * 5000}, 400, "outer_item_limit",
                         "input")
    await client.refused(EMBEDDINGS, {"model": "small-chat", "input": [[7]] * 5000}, 400, "outer_item_limit",
                         "input")


async def test_ghsa_pr7f_p5mw_fc87_several_prompt_embeds(client):
    """Several prompt_embeds entries, each an engine request (and a tensor to load)."""
    tensor = base64.b64encode(b"\x00" * 64).decode()
    await client.refused(COMPLETIONS, completion(prompt_embeds=[tensor] * 50), 400, "outer_item_limit",
                         "prompt_embeds")
    await client.refused(COMPLETIONS, completion(prompt_embeds=[tensor] * 4), 400, "outer_item_limit",
                         "prompt_embeds")  # the prompt already counts as one item
    # Refused outright where the plan does not enable vLLM extensions.
    before = await client.backend.requests()
    resp = await client.post(COMPLETIONS, completion(prompt_embeds=tensor), tenant="strict")
    assert resp.status_code == 403 and resp.json()["error"]["param"] == "prompt_embeds"
    assert await client.backend.requests() == before


async def test_prompt_embeds_with_no_input_is_refused_not_a_500(client):
    """Found by the OpenAPI fuzz: no prompt and an empty prompt_embeds made a request with
    no input item, and the work stage failed on it (500)."""
    tensor = base64.b64encode(b"\x00" * 64).decode()
    no_prompt = {"model": "small-chat", "max_tokens": 8}
    await client.refused(COMPLETIONS, {**no_prompt, "prompt_embeds": []}, 400, "invalid_field", "prompt_embeds")
    await client.refused(COMPLETIONS, {**no_prompt, "prompt_embeds": ""}, 400, "invalid_field", "prompt_embeds")
    await client.refused(COMPLETIONS, {**no_prompt, "prompt_embeds": [tensor, ""]}, 400, "invalid_field",
                         "prompt_embeds[1]")
    await client.admitted(COMPLETIONS, {**no_prompt, "prompt_embeds": [tensor]})       # the control
    await client.admitted(COMPLETIONS, completion(prompt_embeds=[]))                    # a prompt is input


async def test_ghsa_48jh_3gj7_fg8v_regex_without_timeout(client):
    """A caller's regex compiled by the backend with no timeout."""
    evil = "(a+)+$"
    await client.refused(CHAT, chat(guided_regex=evil), 400, "structured_output_denied", "guided_regex")
    await client.refused(COMPLETIONS, completion(guided_regex=evil), 400, "structured_output_denied", "guided_regex")
    await client.refused(CHAT, chat(guided_whitespace_pattern=evil), 400, "structured_output_denied",
                         "guided_whitespace_pattern")
    await client.refused(CHAT, chat(structured_outputs={"regex": evil}), 400, "structured_output_denied",
                         "structured_outputs.regex")
    schema = {"type": "string", "pattern": evil}
    await client.refused(CHAT, chat(guided_json=schema), 400, "structured_output_denied", "guided_json")
    await client.refused(CHAT, chat(response_format={"type": "json_schema",
                                                     "json_schema": {"name": "x", "schema": schema}}),
                         400, "structured_output_denied", "response_format.json_schema.schema")


async def test_ghsa_8737_qx52_hjff_token_ids_bounded_before_decoding(client):
    """Caller-supplied token ids must be bounded before anything decodes them."""
    await client.refused(COMPLETIONS, completion([1, 2, 10**12], model="tik-chat"), 400, "invalid_field", "prompt")
    await client.refused(COMPLETIONS, completion([[1], [100277]], model="tik-chat"), 400, "invalid_field",
                         "prompt[1]")
    await client.refused(COMPLETIONS, completion([-1]), 400, "invalid_field", "prompt")
    await client.refused(CHAT, chat(model="tik-chat", logit_bias={"999999": 1}), 400, "invalid_field",
                         "logit_bias")
    await client.refused(CHAT, chat(model="tik-chat", allowed_token_ids=[5, 10**9]), 400, "invalid_field",
                         "allowed_token_ids")
    # A long token-id prompt is counted exactly and checked against the context first.
    await client.refused(COMPLETIONS, completion(list(range(1000)), model="tik-chat"), 400, "context_too_large",
                         "prompt")
    await client.admitted(COMPLETIONS, completion([1, 2, 100276], model="tik-chat"))


async def test_uploads_refused_before_they_are_decoded(client):
    huge = "data:image/png;base64," + "A" * 40_000  # would decode to 30 KB; the cap is 300 bytes
    await client.refused(CHAT, chat([{"type": "image_url", "image_url": {"url": huge}}]), 400,
                         "attachment_rejected", "messages[0].content[0].image_url.url")
    await client.refused(CHAT, chat([{"type": "input_audio", "input_audio": {"data": "A" * 40_000, "format": "wav"}}]),
                         400, "attachment_rejected", "messages[0].content[0].input_audio.data")
    await client.admitted(CHAT, chat([image_part(png())]))


@pytest.mark.parametrize("field, value, code, param", [
    ("foo", 1, "unknown_field", "foo"),
    ("best_of", 2, "unknown_field", "best_of"),     # not a chat completions field
    ("n", 500, "choices_limit", "n"),
    ("max_tokens", -5, "invalid_field", "max_tokens"),
    ("temperature", 7, "invalid_field", "temperature"),
])
async def test_what_litellm_forwards_is_refused(client, field, value, code, param):
    await client.refused(CHAT, chat(**{field: value}), 400, code, param)
