"""A plan's ``default_max_tokens`` fills a missing output bound: the request is admitted,
reserved and forwarded with it, and ``x-tokenward-max-tokens`` says what the gateway set;
a bound above the plan's cap is clamped and said the same way. A plan without the default
still refuses ``max_tokens_required`` (nothing reaches the backend)."""

from __future__ import annotations

from pathlib import Path

from tests.support import base_config, gateway_in_process, mock_backend

EXTRA = """
  defaulted: {models: [small-chat], max_output_tokens: 500, default_max_tokens: 40}
"""
MESSAGES = [{"role": "user", "content": "hello there"}]


def _config(mock_url: str, decisions: Path) -> str:
    text = base_config(mock_url, decisions=str(decisions))
    # a second plan with the default, and a tenant on it (the first tenant keeps `team`)
    text = text.replace("plans:\n", "plans:" + EXTRA, 1)
    return text.replace("  acme: {plan: team}\n", "  acme: {plan: team}\n  initech: {plan: defaulted}\n", 1)


def _reserved(gw, request_id: str) -> int:
    record = next(r for r in gw.decisions() if r["request_id"] == request_id)
    return record["notes"]["budget"]["reserved"]


async def test_a_missing_max_tokens_is_filled_reserved_forwarded_and_said(tmp_path):
    decisions = tmp_path / "decisions.jsonl"
    async with mock_backend() as mock, gateway_in_process(_config(mock.url, decisions), decisions) as gw:
        key = await gw.new_key("initech")
        async with gw.client() as client:
            client.headers["authorization"] = f"Bearer {key}"
            reply = await client.post(gw.url + "/v1/chat/completions",
                                      json={"model": "small-chat", "messages": MESSAGES})
            assert reply.status_code == 200, reply.text
            assert reply.headers["x-tokenward-max-tokens"] == "40"
            assert (await mock.stats())["last_request"]["body"]["max_tokens"] == 40
            assert reply.json()["usage"]["completion_tokens"] <= 40
            # the reservation holds the default output, not the plan's cap of 500
            reserved = _reserved(gw, reply.headers["x-request-id"])
            assert 40 < reserved < 500, reserved

            # a bound the client set and the plan allows: untouched, no header
            given = await client.post(gw.url + "/v1/chat/completions",
                                      json={"model": "small-chat", "messages": MESSAGES, "max_tokens": 7})
            assert given.status_code == 200 and "x-tokenward-max-tokens" not in given.headers
            assert (await mock.stats())["last_request"]["body"]["max_tokens"] == 7

            # a huge bound is clamped to the plan's cap, and the answer says so
            huge = await client.post(gw.url + "/v1/chat/completions",
                                     json={"model": "small-chat", "messages": MESSAGES,
                                           "max_completion_tokens": 1_000_000, "stream": True})
            assert huge.status_code == 200 and huge.headers["x-tokenward-max-tokens"] == "500"
            assert (await mock.stats())["last_request"]["body"]["max_completion_tokens"] == 500


async def test_without_a_default_a_missing_bound_is_still_refused(tmp_path):
    decisions = tmp_path / "decisions.jsonl"
    async with mock_backend() as mock, gateway_in_process(_config(mock.url, decisions), decisions) as gw:
        async with gw.client() as client:
            before = await mock.requests()
            refused = await client.post(gw.url + "/v1/chat/completions",
                                        json={"model": "small-chat", "messages": MESSAGES})
            assert refused.status_code == 400
            assert refused.json()["error"]["code"] == "max_tokens_required"
            assert refused.headers["x-tokenward-reason"] == "max_tokens_required"
            assert await mock.requests() == before
            control = await client.post(gw.url + "/v1/chat/completions",
                                        json={"model": "small-chat", "messages": MESSAGES, "max_tokens": 5})
            assert control.status_code == 200 and await mock.requests() == before + 1


async def test_the_header_says_the_bound_the_backend_got_after_masking_cut_it(tmp_path):
    """Masking personal data that lengthens the prompt takes the growth off max_tokens
    (stages/s13_transform.py): the answer says the bound the backend was given."""
    policy = "screening:\n  policies:\n    masked: {pii: {mode: tokenize, entities: [EMAIL]}}\n"
    text = base_config("http://placeholder", extra=policy)
    async with mock_backend() as mock:
        text = text.replace("http://placeholder", mock.url).replace(
            "max_output_tokens: 4096}", "max_output_tokens: 4096, screening: masked}")
        async with gateway_in_process(text) as gw, gw.client() as client:
            reply = await client.post(gw.url + "/v1/chat/completions", json={
                "model": "small-chat", "max_tokens": 50,
                "messages": [{"role": "user", "content": "write to a@b.io and c@d.io"}]})
            assert reply.status_code == 200, reply.text
            sent = (await mock.stats())["last_request"]["body"]["max_tokens"]
            assert sent < 50 and reply.headers["x-tokenward-max-tokens"] == str(sent)
