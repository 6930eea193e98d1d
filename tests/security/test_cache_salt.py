"""``upstreams.NAME.cache_salt``: each tenant's (or key's) partition of the engine's prefix cache.

Two replicas (two ``Gateway`` objects built from one config, one key store, one secret) in
front of a backend that records every body it receives (the bundled mock behind it, in
this event loop: upstream/memory.py). The salt each body carries is checked against the
formula docs/security.md gives, computed here independently.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, AsyncIterator

import httpx
import msgspec
import pytest
import yaml

from tests.support import chat
from tokenward.app import Gateway
from tokenward.config.loader import parse_config
from tokenward.errors import ConfigError
from tokenward.mock.app import MockUpstream
from tokenward.upstream.memory import MemoryTransport

SECRET = "6f1c0b7e4d2a9f8e3b5c7d1a0e9f8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a"
ENV = "TOKENWARD_CACHE_SALT_SECRET"
TENANTS = ("acme", "globex", "initech")


def config_text(tmp_path: Any, salted: str = "tenant", keyed: str = "key", extra_upstream: dict | None = None) -> str:
    upstream = {"base_url": "http://backend.invalid/v1", "read_timeout_s": 10}
    raw = {
        "upstreams": {
            "salted": {**upstream, "cache_salt": salted, "dialects": ["chat", "responses", "messages"],
                       **(extra_upstream or {})},
            "keyed": {**upstream, "cache_salt": keyed},
            "plain": upstream,
        },
        "models": {"salted-chat": {"upstream": "salted"}, "keyed-chat": {"upstream": "keyed"},
                   "plain-chat": {"upstream": "plain"}},
        "plans": {
            "team": {"models": ["salted-chat", "keyed-chat", "plain-chat"], "max_output_tokens": 256,
                     "allow_cache_salt": True},
            "basic": {"models": ["salted-chat", "plain-chat"], "max_output_tokens": 256},
        },
        "tenants": {"acme": {"plan": "team"}, "globex": {"plan": "team"}, "initech": {"plan": "basic"}},
        "keystore": {"url": f"sqlite:///{tmp_path}/keys.db"},
        "logging": {"decisions": str(tmp_path / "decisions.jsonl")},
    }
    return yaml.safe_dump(raw)


def expected(subject: str, scope: str = "tenant", client: str | None = None) -> str:
    """docs/security.md: HMAC-SHA256 under the secret of the compact JSON [scope, subject, client]."""
    message = json.dumps([scope, subject, client], separators=(",", ":"), ensure_ascii=False).encode()
    return hmac.new(SECRET.encode(), message, hashlib.sha256).hexdigest()


class Recording:
    """The mock backend, recording (path, decoded body) of every POST it receives."""

    def __init__(self) -> None:
        self.mock = MockUpstream()
        self.bodies: list[tuple[str, dict]] = []

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            first = await receive()             # the in-process transport sends the body whole
            self.bodies.append((scope["path"], json.loads(first["body"])))
            given = False

            async def replay() -> dict:
                nonlocal given
                if not given:
                    given = True
                    return first
                return await receive()

            await self.mock(scope, replay, send)
            return
        await self.mock(scope, receive, send)

    def last(self) -> dict:
        return self.bodies[-1][1]


class Replica:
    def __init__(self, gateway: Gateway, backend: Recording) -> None:
        self.gateway = gateway
        self.backend = backend
        self.http = httpx.AsyncClient(transport=httpx.ASGITransport(app=gateway), base_url="http://gateway")

    async def post(self, key: str, body: dict, path: str = "/v1/chat/completions") -> httpx.Response:
        return await self.http.post(path, json=body, headers={"authorization": f"Bearer {key}"})

    async def salt_of(self, key: str, body: dict, path: str = "/v1/chat/completions") -> str:
        answer = await self.post(key, body, path)
        assert answer.status_code == 200, answer.text
        return self.backend.last()["cache_salt"]


@contextlib.asynccontextmanager
async def replicas(text: str, count: int = 2) -> AsyncIterator[tuple[list[Replica], dict[str, str]]]:
    config = parse_config(text, environ={})
    made: list[Replica] = []
    try:
        for i in range(count):
            backend = Recording()
            transports = {name: MemoryTransport(backend) for name in ("salted", "keyed", "plain")}
            # the same config, but for the file each writes its decisions to
            logging = msgspec.structs.replace(config.logging, decisions=f"{config.logging.decisions}.{i}")
            gateway = Gateway(msgspec.structs.replace(config, logging=logging), transports=transports)
            await gateway.startup()
            made.append(Replica(gateway, backend))
        keys = {tenant: (await made[0].gateway.parts.keys.create(tenant))[0] for tenant in TENANTS}
        yield made, keys
    finally:
        for replica in made:
            await replica.http.aclose()
            await replica.gateway.shutdown()


@pytest.fixture
async def pair(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV, SECRET)
    async with replicas(config_text(tmp_path)) as made:
        yield made


def last_record(replica: Replica) -> dict:
    replica.gateway.parts.decisions.flush()
    lines = Path(replica.gateway.config.logging.decisions).read_text().splitlines()
    return json.loads(lines[-1])


async def test_each_tenant_its_own_salt_the_same_on_every_replica(pair):
    (one, two), keys = pair
    salts = {(tenant, i): await replica.salt_of(keys[tenant], chat("salted-chat", f"hi from {tenant}"))
             for tenant in ("acme", "globex") for i, replica in enumerate((one, two))}
    assert salts[("acme", 0)] == salts[("acme", 1)] == expected("acme")
    assert salts[("globex", 0)] == salts[("globex", 1)] == expected("globex")
    assert salts[("acme", 0)] != salts[("globex", 0)]
    assert all(len(s) == 64 and s == s.lower() and int(s, 16) >= 0 for s in salts.values())
    # a tenant's second request, and its completions, carry the same salt
    assert await one.salt_of(keys["acme"], {"model": "salted-chat", "prompt": "x", "max_tokens": 4},
                             "/v1/completions") == expected("acme")
    sent = one.backend.last()
    assert sent["prompt"] == "x" and sent["model"] == "salted-chat"        # nothing else changed


async def test_native_responses_and_messages_bodies_are_salted_too(pair):
    (one, _), keys = pair
    asked = {"model": "salted-chat", "input": "hello there", "max_output_tokens": 16}
    assert await one.salt_of(keys["globex"], asked, "/v1/responses") == expected("globex")
    assert one.backend.bodies[-1][0] == "/v1/responses"
    assert one.backend.last() == {**asked, "cache_salt": expected("globex")}
    message = {"model": "salted-chat", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}
    answer = await one.http.post("/v1/messages", json=message, headers={"x-api-key": keys["acme"],
                                                                         "anthropic-version": "2023-06-01"})
    assert answer.status_code == 200, answer.text
    assert one.backend.bodies[-1][0] == "/v1/messages"
    assert one.backend.last() == {**message, "cache_salt": expected("acme")}


async def test_key_scope_gives_each_key_its_own_salt(pair):
    (one, two), keys = pair
    first = next(r for r in await one.gateway.parts.keys.list("acme"))
    second, record = await one.gateway.parts.keys.create("acme")
    a1 = await one.salt_of(keys["acme"], chat("keyed-chat"))
    a2 = await two.salt_of(keys["acme"], chat("keyed-chat"))
    b = await two.salt_of(second, chat("keyed-chat"))
    assert a1 == a2 == expected(first.id, "key")
    assert b == expected(record.id, "key") != a1
    assert a1 != expected("acme") and b != expected("acme")            # not the tenant's salt either


async def test_a_client_salt_is_folded_in_never_forwarded_as_typed(pair):
    (one, two), keys = pair
    mine = await one.salt_of(keys["acme"], chat("salted-chat", cache_salt="end-user-7"))
    other = await one.salt_of(keys["acme"], chat("salted-chat", cache_salt="end-user-8"))
    theirs = await two.salt_of(keys["globex"], chat("salted-chat", cache_salt="end-user-7"))
    plain = await two.salt_of(keys["acme"], chat("salted-chat"))
    assert mine == expected("acme", client="end-user-7") == await two.salt_of(
        keys["acme"], chat("salted-chat", cache_salt="end-user-7"))
    assert len({mine, other, theirs, plain}) == 4                      # two salts of one tenant, one salt of two
    assert theirs == expected("globex", client="end-user-7")
    assert not any("end-user" in json.dumps(body) for _, body in one.backend.bodies + two.backend.bodies)
    assert await one.salt_of(keys["globex"], chat("salted-chat", cache_salt="end-user-9")) != mine
    notes = last_record(one)["notes"]
    assert notes["cache_salt"] == "tenant" and notes["client_cache_salt"] == "folded"


@pytest.mark.parametrize("salt", ["s" * 10_240, "user\x00\x1b[31m", "line\n", "caf\u00e9 au lait", ""],
                         ids=["10KB", "control", "newline", "not-ascii", "empty"])
async def test_an_oversized_or_control_character_salt_never_reaches_the_backend(pair, salt):
    (one, _), keys = pair
    before = len(one.backend.bodies)
    refused = await one.post(keys["acme"], chat("salted-chat", cache_salt=salt))
    assert refused.status_code == 400, refused.text
    assert refused.headers["x-tokenward-reason"] == "invalid_field" and refused.json()["error"]["param"] == "cache_salt"
    assert len(one.backend.bodies) == before                              # never forwarded
    assert (await one.salt_of(keys["acme"], chat("salted-chat", cache_salt="fine"))) == expected("acme", client="fine")


async def test_a_plan_without_allow_cache_salt_is_refused_its_salt(pair):
    (one, _), keys = pair
    before = len(one.backend.bodies)
    refused = await one.post(keys["initech"], chat("salted-chat", cache_salt="mine"))
    assert refused.status_code == 403 and refused.headers["x-tokenward-reason"] == "feature_not_entitled"
    assert len(one.backend.bodies) == before
    assert await one.salt_of(keys["initech"], chat("salted-chat")) == expected("initech")


async def test_no_salt_without_the_setting_and_a_client_salt_dropped(pair):
    (one, _), keys = pair
    answer = await one.post(keys["acme"], chat("plain-chat", "unsalted"))
    assert answer.status_code == 200 and "cache_salt" not in one.backend.last()
    assert one.backend.last() == chat("plain-chat", "unsalted")
    answer = await one.post(keys["acme"], chat("plain-chat", "dropped", cache_salt="end-user-7"))
    assert answer.status_code == 200 and one.backend.last() == chat("plain-chat", "dropped")
    assert last_record(one)["notes"]["client_cache_salt"] == "dropped"


async def test_no_salt_anywhere_when_no_upstream_salts(tmp_path, monkeypatch):
    monkeypatch.delenv(ENV, raising=False)                       # off needs no secret
    async with replicas(config_text(tmp_path, salted="off", keyed="off"), count=1) as ([one], keys):
        for model in ("salted-chat", "keyed-chat", "plain-chat"):
            answer = await one.post(keys["globex"], chat(model, "plain"))
            assert answer.status_code == 200 and one.backend.last() == chat(model, "plain")


@pytest.mark.parametrize("env_name", [None, "MY_SALT_SECRET"])
async def test_start_up_refused_without_the_secret_naming_the_variable(tmp_path, monkeypatch, env_name):
    monkeypatch.delenv(ENV, raising=False)
    monkeypatch.delenv("MY_SALT_SECRET", raising=False)
    extra = {"cache_salt_secret_env": env_name} if env_name else None
    text = config_text(tmp_path, keyed="off", extra_upstream=extra)
    named = env_name or ENV
    config = parse_config(text, environ={})
    with pytest.raises(ConfigError) as caught:
        await Gateway(config, transports={n: MemoryTransport(Recording()) for n in ("salted", "keyed", "plain")}
                      ).startup()
    assert named in str(caught.value) and caught.value.path == "upstreams.salted.cache_salt"
    path = tmp_path / "gateway.yaml"
    path.write_text(text)
    env = {k: v for k, v in os.environ.items() if k not in (ENV, "MY_SALT_SECRET")}
    checked = subprocess.run([sys.executable, "-m", "tokenward", "check-config", str(path)], capture_output=True,
                             text=True, env=env, timeout=60)
    assert checked.returncode == 2, checked
    assert named in checked.stdout + checked.stderr
    assert "upstreams.salted.cache_salt" in checked.stdout + checked.stderr
    env[named] = SECRET
    checked = subprocess.run([sys.executable, "-m", "tokenward", "check-config", str(path)], capture_output=True,
                             text=True, env=env, timeout=60)
    assert checked.returncode == 0, checked
    assert ("warning: plans.team.allow_cache_salt: a client's cache_salt is dropped on upstream keyed, plain"
            in checked.stderr)


async def test_a_short_secret_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV, "too-short")
    with pytest.raises(ConfigError) as caught:
        await Gateway(parse_config(config_text(tmp_path), environ={}),
                      transports={n: MemoryTransport(Recording()) for n in ("salted", "keyed", "plain")}).startup()
    assert ENV in str(caught.value) and "32" in str(caught.value)


async def test_a_salt_named_with_escapes_or_twice_is_still_the_clients(pair):
    (one, _), keys = pair
    head = b'{"model": "salted-chat", "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}], '
    sent = await one.http.post("/v1/chat/completions", content=head + b'"cache_\\u0073alt": "end-user-7"}',
                               headers={"authorization": f"Bearer {keys['acme']}", "content-type": "application/json"})
    assert sent.status_code == 200 and one.backend.last()["cache_salt"] == expected("acme", client="end-user-7")
    before = len(one.backend.bodies)
    hostile = await one.http.post("/v1/chat/completions",
                                  content=head + b'"cache_salt": "ok", "cache_\\u0073alt": "bad\\u0000"}',
                                  headers={"authorization": f"Bearer {keys['acme']}",
                                           "content-type": "application/json"})
    assert hostile.status_code == 400 and hostile.headers["x-tokenward-reason"] == "invalid_field"
    assert len(one.backend.bodies) == before
