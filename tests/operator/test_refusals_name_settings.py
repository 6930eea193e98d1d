"""Refusals that tell what to change: a feature a plan does not enable names the plan's
``features`` setting (and the feature's name in it); the admin API says which environment
variable is unset; a request without ``max_tokens`` hears that a plan can set
``default_max_tokens``. Each refusal leaves the backend's counter where it was, beside a
control request that gets through."""

from __future__ import annotations

import pytest

from tests.support import base_config, chat, gateway_in_process, mock_backend

CASES = [
    ({"top_k": 5}, "top_k", "`features` list enables it with `top_k` (or `vllm_extensions`)"),
    ({"repetition_penalty": 1.1}, "repetition_penalty", "with `repetition_penalty` (or `vllm_extensions`)"),
    ({"chat_template_kwargs": {"enable_thinking": False}}, "chat_template_kwargs",
     "with `chat_template_kwargs` (or `vllm_extensions`)"),
    ({"logprobs": True}, "logprobs", "`features` list enables it with `logprobs`"),
    ({"top_logprobs": 2, "logprobs": True}, "logprobs", "with `logprobs`"),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}}},
     "response_format", "with `structured_output`"),
]


@pytest.mark.parametrize("extra,param,says", CASES, ids=[c[1] + str(i) for i, c in enumerate(CASES)])
async def test_a_feature_refusal_names_the_plan_setting(extra, param, says):
    async with mock_backend() as mock, gateway_in_process(base_config(mock.url)) as gw:
        async with gw.client() as client:
            before = await mock.requests()
            refused = await client.post(gw.url + "/v1/chat/completions", json=chat(**extra))
            assert refused.status_code == 403, refused.text
            error = refused.json()["error"]
            assert error["code"] == "feature_not_entitled"
            assert refused.headers["x-tokenward-reason"] == error["code"]
            assert error["param"] == param
            assert says in error["message"], error["message"]
            assert await mock.requests() == before
            assert (await client.post(gw.url + "/v1/chat/completions", json=chat())).status_code == 200
            assert await mock.requests() == before + 1


async def test_with_the_feature_in_the_plan_the_same_request_passes():
    features = "max_output_tokens: 4096, features: [top_k, logprobs]}"
    async with mock_backend() as mock, gateway_in_process(
            base_config(mock.url).replace("max_output_tokens: 4096}", features)) as gw:
        async with gw.client() as client:
            for extra in ({"top_k": 5}, {"logprobs": True}):
                ok = await client.post(gw.url + "/v1/chat/completions", json=chat(**extra))
                assert ok.status_code == 200, ok.text


async def test_the_admin_api_names_the_unset_variable(monkeypatch):
    monkeypatch.delenv("TW_TEST_ADMIN_TOKEN_UNSET", raising=False)
    async with mock_backend() as mock, gateway_in_process(
            base_config(mock.url, extra="admin: {token_env: TW_TEST_ADMIN_TOKEN_UNSET}\n")) as gw:
        async with gw.client() as client:
            before = await mock.requests()
            admin = await client.get(gw.url + "/admin/keys")
            assert admin.status_code == 404 and admin.json()["error"]["code"] == "route_denied"
            message = admin.json()["error"]["message"]
            assert "TW_TEST_ADMIN_TOKEN_UNSET" in message and "not set" in message, message
            assert await mock.requests() == before
            assert (await client.post(gw.url + "/v1/chat/completions", json=chat())).status_code == 200


async def test_max_tokens_required_says_a_plan_can_set_default_max_tokens():
    async with mock_backend() as mock, gateway_in_process(base_config(mock.url)) as gw:
        async with gw.client() as client:
            before = await mock.requests()
            refused = await client.post(gw.url + "/v1/chat/completions", json=chat(max_tokens=None))
            assert refused.status_code == 400
            error = refused.json()["error"]
            assert error["code"] == "max_tokens_required" and error["param"] == "max_tokens"
            assert "default_max_tokens" in error["message"], error["message"]
            assert await mock.requests() == before
            assert (await client.post(gw.url + "/v1/chat/completions", json=chat())).status_code == 200
