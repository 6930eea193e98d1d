"""The examples count with a real tokenizer (tiktoken's o200k_base, shipped offline), so
their plans' context limits hold: on examples/gateway.yaml a prompt over the ``team`` plan's
``max_context_tokens`` is ``context_too_large`` (with ``estimate`` it was refused as a
budget four times its size); a model left on ``estimate`` says its figure is an upper bound."""

from __future__ import annotations

import re
import tempfile

import yaml

from tests.support import ROOT, base_config, chat, gateway_in_process, mock_backend

GATEWAY = ROOT / "examples" / "gateway.yaml"
# four messages of 200,000 characters: under max_part_chars and max_body_bytes, and
# 133,336 tokens in o200k_base, over the team plan's 128,000
LONG = [{"role": "user", "content": "hello " * 33_334} for _ in range(4)]


def _gateway_text(mock_url: str) -> str:
    keys = tempfile.mkdtemp(prefix="tw-keys-")
    return (GATEWAY.read_text().replace("http://127.0.0.1:9100/v1", mock_url)
            .replace("sqlite:///tokenward-keys.db", f"sqlite:///{keys}/keys.db")
            .replace("decisions: stdout", "decisions: off"))


def test_the_examples_models_use_a_real_tokenizer():
    for name in ("gateway.yaml", "quickstart.yaml"):
        models = yaml.safe_load((ROOT / "examples" / name).read_text())["models"]
        assert {m["tokenizer"] for m in models.values()} == {"tiktoken:o200k_base"}, name


async def test_a_prompt_over_the_plans_context_is_context_too_large_on_the_example():
    async with mock_backend() as mock, gateway_in_process(_gateway_text(mock.url)) as gw:
        assert gw.gateway.config.plans["team"].max_context_tokens == 128_000
        async with gw.client() as client:
            before = await mock.requests()
            refused = await client.post(gw.url + "/v1/chat/completions",
                                        json={"model": "large-chat", "max_tokens": 16, "messages": LONG})
            assert refused.status_code == 400, refused.text
            error = refused.json()["error"]
            assert error["code"] == "context_too_large"
            assert refused.headers["x-tokenward-reason"] == "context_too_large"
            counted = int(re.search(r"needs (\d+) prompt tokens", error["message"]).group(1))
            assert 133_336 <= counted < 134_000 and "the limit is 128000 tokens" in error["message"]
            assert await mock.requests() == before
            ok = await client.post(gw.url + "/v1/chat/completions",
                                   json={"model": "large-chat", "max_tokens": 16, "messages": LONG[:3]})
            assert ok.status_code == 200, ok.text
            assert await mock.requests() == before + 1


async def test_with_estimate_a_budget_refusal_says_its_figure_is_an_upper_bound():
    plan = "max_output_tokens: 4096, tokens_per_minute: 50000}"
    async with mock_backend() as mock, gateway_in_process(
            base_config(mock.url).replace("max_output_tokens: 4096}", plan)) as gw:
        async with gw.client() as client:
            before = await mock.requests()
            refused = await client.post(gw.url + "/v1/chat/completions",
                                        json={**chat(content="hello " * 40_000), "max_tokens": 16})
            assert refused.status_code == 429
            error = refused.json()["error"]
            assert error["code"] == "token_budget"
            assert "upper bound" in error["message"] and "estimate" in error["message"]
            assert await mock.requests() == before
            assert (await client.post(gw.url + "/v1/chat/completions", json=chat())).status_code == 200
