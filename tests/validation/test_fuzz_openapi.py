"""Fuzzing the gateway from its own OpenAPI document: no 5xx and no traceback.

schemathesis reads ``GET /openapi.json`` from the running gateway and generates request
bodies for each POST operation, valid and invalid (its positive and negative modes).
Each generated case is sent as generated and in eight forms drawn by hypothesis (the
model and max_tokens fixed so validation goes deeper, then mutated: an unknown field at some
depth, the JSON truncated, a byte corrupted, a non-finite number or a lone surrogate
escape, deep nesting, a value of the wrong type), so the 10,000 requests cover both what
the schema describes and what it forbids. Called in-process as an ASGI app; admitted
requests reach the mock backend over loopback.
"""

from __future__ import annotations

import json
import random

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode

from tests.validation.loop_harness import LoopGateway

CASES = 1112
VARIANTS = 8
TOTAL = CASES * (1 + VARIANTS)  # 10,008
MODELS = ("small-chat", "tik-chat", "tiny-window")


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    harness = LoopGateway(tmp_path_factory.mktemp("fuzz"))
    yield harness
    harness.close()


def _operations(gw: LoopGateway) -> st.SearchStrategy:
    status, body = gw.call("GET", "/openapi.json", tenant=None)
    assert status == 200
    schema = schemathesis.openapi.from_dict(json.loads(body))
    ops = [result.ok() for result in schema.get_all_operations()]
    posts = [op for op in ops if op.method.upper() == "POST"]
    # The dialect routes (Responses, Messages) are in the document too, so they are fuzzed as well.
    assert {op.path for op in posts} == {"/v1/chat/completions", "/v1/completions", "/v1/embeddings",
                                         "/v1/responses", "/v1/messages", "/v1/messages/count_tokens"}
    return st.one_of([op.as_strategy(generation_mode=mode)
                      for op in posts for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)])


def _encode(value) -> bytes:
    return json.dumps(value, allow_nan=True, default=str).encode("utf-8", "surrogatepass")


def _paths(value, prefix=()):
    """Every (path, value) inside a decoded JSON value."""
    yield prefix, value
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, prefix + (key,))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _paths(item, prefix + (i,))


def _replace(root, path, new):
    if not path:
        return new
    node = root
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = new
    return root


def _variants(body, rng: random.Random) -> list[bytes]:
    doc = json.loads(_encode(body)) if body is not None else {}
    base = doc if isinstance(doc, dict) else {"value": doc}
    deeper = {**base, "model": rng.choice(MODELS), "max_tokens": rng.randint(1, 100)}
    raw = _encode(deeper)
    paths = list(_paths(json.loads(raw)))
    path, _ = rng.choice(paths)
    containers = [(p, v) for p, v in paths if isinstance(v, dict)]
    where, _ = rng.choice(containers)
    unknown = json.loads(raw)
    node = unknown
    for key in where:
        node = node[key]
    node[f"x_{rng.randint(0, 999)}"] = rng.choice([1, "x", None, [], {}])
    corrupt = bytearray(raw)
    corrupt[rng.randrange(len(corrupt))] = rng.choice([0xFF, 0xC0, 0x00, ord("{"), ord('"')])
    non_finite = _encode(_replace(json.loads(raw), path, rng.choice([float("nan"), float("inf"), 1e999])))
    surrogate = raw.replace(b'"', b'"\\ud800', 1) if rng.random() < 0.5 else raw.replace(b'"', b'"\\udfff\\ud800', 1)
    depth = rng.randint(30, 600) if rng.random() < 0.7 else rng.randint(900, 3000)
    marker = '"__deep_%d__"' % rng.randint(0, 10**9)
    deep = _encode(_replace(json.loads(raw), path, json.loads(marker)))
    deep = deep.replace(marker.encode(), b"[" * depth + b"]" * depth, 1)
    wrong_type = _encode(_replace(json.loads(raw), path, rng.choice([10**30, -1, 1.5, True, "s", [1, [2]], {"a": {}}])))
    return [raw, _encode(unknown), raw[: rng.randrange(len(raw))], bytes(corrupt), non_finite, surrogate, deep,
            wrong_type]


def test_no_5xx_and_no_traceback_in_10000_generated_requests(gw):
    strategy = _operations(gw)
    sent: list[int] = []
    statuses: dict[int, int] = {}

    def send(path: str, body: bytes, headers: dict | None = None, tenant: str | None = "lab") -> None:
        status, answer = gw.call("POST", path, body, headers, tenant=tenant)
        sent.append(status)
        statuses[status] = statuses.get(status, 0) + 1
        assert status < 500, (path, body[:500], answer)
        assert b"Traceback" not in answer
        if status >= 400:
            assert json.loads(answer)["error"]["code"] != "internal_error"

    @settings(max_examples=CASES, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(case=strategy, seed=st.integers(0, 2**32 - 1))
    def run(case, seed):
        rng = random.Random(seed)
        variants = _variants(case.body, rng)
        # As generated, with the generated credentials (usually refused at identity).
        generated = {k: v for k, v in (case.headers or {}).items() if k.lower() == "authorization"}
        send(case.path, _encode(case.body) if case.body is not None else b"", generated, tenant=None)
        for body in variants:
            send(case.path, body)

    run()
    print(f"\n{len(sent)} requests, statuses: {dict(sorted(statuses.items()))}")
    assert len(sent) >= TOTAL, len(sent)
    assert statuses.get(200, 0) > 0, statuses  # some generated requests were admitted
    assert gw.errors.records == [], [r.getMessage() for r in gw.errors.records[:5]]
