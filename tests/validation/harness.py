"""The gateway under test for validation and work: small, explicit plan limits.

Every bound of the ``lab`` plan is small so a test can send a request exactly at the
limit (the control that gets through) and one past it. Keys are created through the
identity stage's key service (``Gateway.parts.keys``), the same path as the CLI.
"""

from __future__ import annotations

import asyncio
import base64
import struct
import zlib
from pathlib import Path
from typing import Any

import httpx
import orjson
import yaml

from tests.support import MockBackend, RunningGateway
from tests.support import chat as support_chat

LAB_PLAN: dict[str, Any] = {
    "models": ["small-chat", "tik-chat", "tiny-window"],
    "max_context_tokens": 4096,
    "max_output_tokens": 64,
    "tokens_per_minute": 10**9,
    "requests_per_minute": 10**9,
    "max_concurrent_streams": 64,
    "allow_system_prompt": True,
    "allow_tools": ["search", "calc"],
    "allow_files": ["image/png", "text/plain", "audio/wav"],
    "max_n": 3,
    "allow_best_of": True,
    "max_best_of": 4,
    "max_outer_items": 4,
    "max_messages": 6,
    "max_content_parts": 3,
    "max_stop": 2,
    "max_tools": 2,
    "max_logit_bias": 3,
    "max_part_chars": 400,
    "max_schema_bytes": 400,
    "max_schema_depth": 4,
    "max_attachment_bytes": 300,
    "max_request_work": 3000,
    "attachment_surcharge": 10,
    "structured_output_surcharge": 20,
    "features": ["structured_output", "vllm_extensions", "logprobs"],
}
TIK_WINDOW = 300
TINY_WINDOW = 60   # under the plan's 64 output tokens: the output alone can fill it
NARROW_CONTEXT = 50


def lab_config(mock_url: str, tmp_path: Path, **lab_overrides: Any) -> str:
    plans = {
        "lab": {**LAB_PLAN, **lab_overrides},
        "strict": {**LAB_PLAN, "hidden_characters": "refuse", "allow_best_of": False, "max_best_of": 1,
                   "features": []},
        "narrow": {**LAB_PLAN, "max_context_tokens": NARROW_CONTEXT},
    }
    raw = {
        "upstreams": {"local": {"base_url": mock_url, "forward_headers": ["x-mock-*"], "read_timeout_s": 10}},
        "models": {
            "small-chat": {"upstream": "local", "context_window": 4096, "tokenizer": "estimate",
                           "serves": ["chat", "completions", "embeddings"]},
            "tik-chat": {"upstream": "local", "context_window": TIK_WINDOW, "tokenizer": "tiktoken:cl100k_base",
                         "serves": ["chat", "completions", "embeddings"]},
            "tiny-window": {"upstream": "local", "context_window": TINY_WINDOW, "tokenizer": "estimate",
                            "serves": ["chat", "completions", "embeddings"]},
        },
        "plans": plans,
        "tenants": {"lab": {"plan": "lab"}, "strict": {"plan": "strict"}, "narrow": {"plan": "narrow"}},
        "keystore": {"url": f"sqlite:///{tmp_path}/keys.db"},
        "logging": {"decisions": str(tmp_path / "decisions.jsonl")},
    }
    return yaml.safe_dump(raw)


async def create_keys(gateway: Any, tenants: tuple[str, ...] = ("lab", "strict", "narrow")) -> dict[str, str]:
    keys = gateway.parts.keys
    return {tenant: (await keys.create(tenant, name=f"validation-{tenant}"))[0] for tenant in tenants}


class Client:
    """Requests to the gateway with a tenant's key, and the backend's request counter."""

    def __init__(self, running: RunningGateway, backend: MockBackend, keys: dict[str, str]) -> None:
        self.running = running
        self.backend = backend
        self.keys = keys
        self.http = httpx.AsyncClient(base_url=running.url, timeout=10.0)

    async def post(self, path: str, body: Any, tenant: str = "lab", raw: bytes | None = None) -> httpx.Response:
        content = raw if raw is not None else orjson.dumps(body)
        headers = {"authorization": f"Bearer {self.keys[tenant]}", "content-type": "application/json"}
        return await self.http.post(path, content=content, headers=headers)

    async def last_body(self) -> Any:
        stats = await self.backend.stats()
        return stats["last_request"]["body"]

    async def refused(self, path: str, body: Any, status: int, code: str, param: str | None,
                      tenant: str = "lab", raw: bytes | None = None) -> dict:
        """Assert a refusal: status, reason code, param, and the backend never saw it."""
        before = await self.backend.requests()
        resp = await self.post(path, body, tenant, raw)
        assert resp.status_code == status, resp.text
        error = resp.json()["error"]
        assert error["code"] == code, error
        assert error["param"] == param, error
        assert await self.backend.requests() == before, "a refused request reached the backend"
        return error

    async def admitted(self, path: str, body: Any, tenant: str = "lab", raw: bytes | None = None) -> httpx.Response:
        """Assert the control: the request got through to the backend and back."""
        before = await self.backend.requests()
        resp = await self.post(path, body, tenant, raw)
        assert resp.status_code == 200, resp.text
        assert await self.backend.requests() == before + 1
        return resp

    async def aclose(self) -> None:
        await self.http.aclose()


def chat(content: Any = "hello there", model: str = "small-chat", **extra: Any) -> dict:
    """tests/support.py's chat, content first (these tests vary the content)."""
    return support_chat(model, content, **extra)


def completion(prompt: Any = "hello", model: str = "small-chat", **extra: Any) -> dict:
    return {"model": model, "prompt": prompt, "max_tokens": 8, **extra}


def png(width: int = 2, height: int = 2, size: int | None = None) -> bytes:
    """A PNG header with the given dimensions, padded (inside a chunk) to ``size`` bytes."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    head = b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", ihdr)
    tail = _chunk(b"IEND", b"")
    if size is None:
        return head + _chunk(b"IDAT", zlib.compress(b"\x00" * 7)) + tail
    pad = size - len(head) - len(tail) - 12
    assert pad >= 0
    return head + _chunk(b"tEXt", b"k\x00" + b"x" * (pad - 2)) + tail


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def data_url(data: bytes, declared: str = "image/png") -> str:
    return f"data:{declared};base64,{base64.b64encode(data).decode()}"


def image_part(data: bytes, declared: str = "image/png") -> dict:
    return {"type": "image_url", "image_url": {"url": data_url(data, declared)}}


async def wait_for(predicate, timeout: float = 2.0) -> Any:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if loop.time() > deadline:
            raise AssertionError("condition never held")
        await asyncio.sleep(0.02)
