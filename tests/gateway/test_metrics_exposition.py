"""The operator's measures, read from GET /metrics as Prometheus parses them: each stage's
time as a histogram, the backend's time to answer, and what each API key was charged."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.budget.gateway_helpers import backend, budget_config, chat, in_process


def _samples(text: str) -> dict[str, list]:
    out: dict[str, list] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, []).append(sample)
    return out


def _value(samples: dict[str, list], name: str, **labels: str) -> float:
    found = [s.value for s in samples.get(name, []) if all(s.labels.get(k) == v for k, v in labels.items())]
    return sum(found)


async def _scrape(gw) -> dict[str, list]:
    response = await gw.client.get("/metrics")
    assert response.status_code == 200
    return _samples(response.text)


def _moved(before: dict[str, list], after: dict[str, list], name: str, **labels: str) -> float:
    """What this test added: the metrics are the process's, shared with earlier tests."""
    return _value(after, name, **labels) - _value(before, name, **labels)


@pytest.fixture
async def gw(tmp_path):
    """A gateway with /metrics exposed, a priced model and a budget that refuses nothing."""
    async with backend() as mock:
        path = budget_config(tmp_path, mock.port, server={"expose_metrics": True}, tpm=1_000_000)
        async with in_process(path) as running:
            yield running


async def test_stage_histograms_agree_with_the_counters_and_the_records(gw):
    key = await gw.new_key()
    before = await _scrape(gw)
    for _ in range(4):
        assert (await gw.client.post("/v1/chat/completions", json=chat(max_tokens=20), headers=key)).status_code == 200
    refused = await gw.client.post("/v1/chat/completions", json=chat(max_tokens=20))  # no credentials
    assert refused.status_code == 401
    records = await gw.wait_decisions(5)
    after = await _scrape(gw)

    def moved(name: str, **labels: str) -> float:
        return _moved(before, after, name, **labels)

    for stage in ("edge", "identity", "admission", "forward"):
        times_s = [r["stages_us"][stage] / 1e6 for r in records if stage in r["stages_us"]]
        calls = moved("tokenward_stage_calls_total", stage=stage)
        assert calls == moved("tokenward_stage_duration_seconds_count", stage=stage) == len(times_s)
        assert abs(moved("tokenward_stage_duration_seconds_sum", stage=stage)
                   - moved("tokenward_stage_seconds_total", stage=stage)) < 1e-9
        assert abs(moved("tokenward_stage_duration_seconds_sum", stage=stage) - sum(times_s)) < 1e-6
        # each bucket holds exactly the requests whose time for the stage is at or under it
        bounds = sorted({s.labels["le"] for s in after["tokenward_stage_duration_seconds_bucket"]}, key=float)
        assert bounds[0] == "8.191e-06" and bounds[-1] == "+Inf" and len(bounds) == 29   # 2**13 - 1 ns, doubling
        for le in bounds:
            held = moved("tokenward_stage_duration_seconds_bucket", stage=stage, le=le)
            assert held == sum(t <= float(le) for t in times_s), (stage, le)


async def test_the_backends_time_to_answer_is_a_histogram_per_upstream(gw):
    key = await gw.new_key()
    before = await _scrape(gw)
    slow = {**key, "x-mock-delay-ms": "300"}
    assert (await gw.client.post("/v1/chat/completions", json=chat(max_tokens=20), headers=slow)).status_code == 200
    streamed = await gw.client.post("/v1/chat/completions", json=chat(max_tokens=20, stream=True), headers=key)
    assert streamed.status_code == 200
    after = await _scrape(gw)

    def moved(name: str, **labels: str) -> float:
        return _moved(before, after, name, **labels)

    whole = {"upstream": "mock", "stream": "false"}
    assert moved("tokenward_upstream_response_seconds_count", **whole) == 1
    bounds = sorted({float(s.labels["le"]) for s in after["tokenward_upstream_response_seconds_bucket"]})
    below, above = max(b for b in bounds if b < 0.3), min(b for b in bounds if b >= 1.0)   # it waited 300 ms
    assert moved("tokenward_upstream_response_seconds_bucket", le=str(below), **whole) == 0
    assert moved("tokenward_upstream_response_seconds_bucket", le=str(above), **whole) == 1
    assert 0.3 <= moved("tokenward_upstream_response_seconds_sum", **whole) < 1.0
    assert moved("tokenward_upstream_response_seconds_count", upstream="mock", stream="true") == 1


async def test_each_key_is_charged_what_its_requests_settled_to(gw):
    """Two keys of one tenant: each key's tokens and USD equal its own requests' settled usage
    at the model's prices (1 USD per million prompt tokens, 2 per million completion)."""
    one, two = await gw.new_key(), await gw.new_key()
    used = {}
    for key, times in ((one, 3), (two, 1)):
        prompt = completion = 0
        for _ in range(times):
            reply = await gw.client.post("/v1/chat/completions", json=chat(max_tokens=30), headers=key)
            usage = reply.json()["usage"]
            prompt += usage["prompt_tokens"]
            completion += usage["completion_tokens"]
        used[key["authorization"]] = (prompt, completion)
    await gw.settled()
    records = await gw.wait_decisions(4)
    samples = await _scrape(gw)
    key_ids = sorted({r["key_id"] for r in records})
    assert len(key_ids) == 2
    per_key = {r["key_id"]: 0 for r in records}
    for record in records:
        per_key[record["key_id"]] += record["usage"]["prompt_tokens"] + record["usage"]["completion_tokens"]
    assert sorted(per_key.values()) == sorted(p + c for p, c in used.values())
    for key_id, tokens in per_key.items():
        assert _value(samples, "tokenward_key_charged_tokens_total", tenant="acme", key_id=key_id) == tokens
    total_usd = sum(-(-(p * 1000 + c * 2000) // 1000) / 1e6 for p, c in used.values())
    charged_usd = sum(_value(samples, "tokenward_key_spend_usd_total", tenant="acme", key_id=k) for k in key_ids)
    assert abs(charged_usd - total_usd) < 1e-9 and charged_usd > 0


def test_workers_expositions_merge_into_one():
    """What a scrape answers for several workers (observe/shared_metrics.py): counters and
    histograms summed sample by sample, a series only one worker has kept, the controls in
    force (shared state, the same in every worker) not multiplied, the store down if any
    worker sees it down."""
    from tokenward.observe.shared_metrics import merge

    one = """# HELP tokenward_decisions_total Requests
# TYPE tokenward_decisions_total counter
tokenward_decisions_total{route="/v1/chat/completions",stage="forward",reason="ok",tenant="acme"} 3.0
# HELP tokenward_stage_duration_seconds Time
# TYPE tokenward_stage_duration_seconds histogram
tokenward_stage_duration_seconds_bucket{stage="edge",le="0.001"} 2.0
tokenward_stage_duration_seconds_bucket{stage="edge",le="+Inf"} 3.0
tokenward_stage_duration_seconds_count{stage="edge"} 3.0
tokenward_stage_duration_seconds_sum{stage="edge"} 0.5
# HELP tokenward_controls_active Controls
# TYPE tokenward_controls_active gauge
tokenward_controls_active{kind="pause",shadow="false"} 2.0
# HELP tokenward_budget_store_up Up
# TYPE tokenward_budget_store_up gauge
tokenward_budget_store_up 1.0
"""
    two = one.replace("} 3.0\n# HELP tokenward_stage", "} 4.0\n# HELP tokenward_stage").replace(
        "tokenward_budget_store_up 1.0", "tokenward_budget_store_up 0.0").replace(
        'tenant="acme"} 4.0', 'tenant="acme"} 4.0\ntokenward_decisions_total{route="/v1/chat/completions",'
                              'stage="admission",reason="token_budget",tenant="acme"} 1.0')
    merged = {(s.name, tuple(sorted(s.labels.items()))): s.value
              for f in text_string_to_metric_families(merge([one, two]).decode()) for s in f.samples}
    ok = ("tokenward_decisions_total", (("reason", "ok"), ("route", "/v1/chat/completions"), ("stage", "forward"),
                                        ("tenant", "acme")))
    assert merged[ok] == 7.0
    assert merged[("tokenward_decisions_total", (("reason", "token_budget"), ("route", "/v1/chat/completions"),
                                                 ("stage", "admission"), ("tenant", "acme")))] == 1.0
    assert merged[("tokenward_stage_duration_seconds_bucket", (("le", "0.001"), ("stage", "edge")))] == 4.0
    assert merged[("tokenward_stage_duration_seconds_bucket", (("le", "+Inf"), ("stage", "edge")))] == 6.0
    assert merged[("tokenward_stage_duration_seconds_sum", (("stage", "edge"),))] == 1.0
    assert merged[("tokenward_controls_active", (("kind", "pause"), ("shadow", "false")))] == 2.0
    assert merged[("tokenward_budget_store_up", ())] == 0.0
    assert merge([one]).decode().count("tokenward_decisions_total{") == 1
