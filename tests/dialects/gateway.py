"""A gateway in front of the mock backend for the dialect tests, and the official SDKs' clients.

Tenants: ``team`` (tools ``get_weather`` allowed, real token counts with tiktoken),
``rpm1`` (one request a minute: the second is a budget refusal), ``screened`` (the
heuristic injection detector and personal data in ``tokenize`` mode), ``cached`` (the
response cache on), ``tooled`` (tools the upstream runs itself enabled: ``server_tools``).
"""

from __future__ import annotations

import contextlib
import json
from typing import Any, AsyncIterator

import anthropic
import openai
import yaml

from tests.support import MockBackend, RunningGateway, gateway_in_process, mock_backend

TENANTS = ("team", "rpm1", "screened", "cached", "tooled")
MODEL = "small-chat"


def config(mock_url: str, tmp_path: Any, dialects: tuple[str, ...] = ("chat",)) -> str:
    plan = {"models": [MODEL], "max_output_tokens": 512, "allow_tools": ["get_weather"], "tokens_per_minute": 1_000_000,
            "allow_files": ["image/png"]}
    raw = {
        "upstreams": {"mock": {"base_url": mock_url, "forward_headers": ["x-mock-*"], "read_timeout_s": 10,
                               "dialects": list(dialects)}},
        "models": {MODEL: {"upstream": "mock", "tokenizer": "tiktoken:o200k_base", "context_window": 32768}},
        "screening": {"policies": {"strict": {"injection": {"detector": "heuristic"},
                                              "pii": {"mode": "tokenize"}}}},
        "plans": {"team": plan, "rpm1": {**plan, "requests_per_minute": 1},
                  "screened": {**plan, "screening": "strict"}, "cached": {**plan, "cache": True},
                  "tooled": {**plan, "features": ["server_tools"]}},
        "cache": {"store": "memory"},
        "tenants": {name: {"plan": name} for name in TENANTS},
        "keystore": {"url": f"sqlite:///{tmp_path}/keys.db"},
        "logging": {"decisions": str(tmp_path / "decisions.jsonl")},
    }
    return yaml.safe_dump(raw)


@contextlib.asynccontextmanager
async def dialect_gateway(tmp_path: Any, dialects: tuple[str, ...] = ("chat",)
                          ) -> AsyncIterator[tuple[MockBackend, RunningGateway]]:
    async with mock_backend() as backend:
        async with gateway_in_process(config(backend.url, tmp_path, dialects), tmp_path / "decisions.jsonl") as gw:
            gw.extra["keys"] = {name: await gw.new_key(name) for name in TENANTS}
            yield backend, gw


def openai_client(gw: RunningGateway, tenant: str = "team", **headers: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=gw.url + "/v1", api_key=gw.extra["keys"][tenant], max_retries=0,
                              default_headers=headers)


def anthropic_client(gw: RunningGateway, tenant: str = "team", max_retries: int = 0,
                     **headers: str) -> anthropic.AsyncAnthropic:
    """Anthropic's client sends the key as ``x-api-key`` with ``anthropic-version``."""
    return anthropic.AsyncAnthropic(base_url=gw.url, api_key=gw.extra["keys"][tenant], max_retries=max_retries,
                                    default_headers=headers)


async def work_requests(backend: MockBackend) -> int:
    return await backend.requests()


async def backend_body(backend: MockBackend) -> dict[str, Any]:
    body: dict[str, Any] = await backend.last_body()
    return body


def dumped(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)
