"""Health, readiness, metrics and the one-record-per-request rule."""

from __future__ import annotations


from tests.support import chat


async def test_health_and_readiness(gw):
    async with gw.client() as client:
        assert (await client.get(gw.url + "/healthz")).json() == {"status": "ok"}
        ready = await client.get(gw.url + "/readyz")
    assert ready.status_code == 200 and ready.headers["x-request-id"]


async def test_metrics_hidden_unless_configured(gw, mock):
    async with gw.client() as client:
        resp = await client.get(gw.url + "/metrics")
    assert resp.status_code == 404 and resp.json()["error"]["code"] == "route_denied"


async def test_metrics_count_decisions_when_exposed(make_gateway, mock):
    async with make_gateway("server: {expose_metrics: true}\n") as running:
        async with running.client() as client:
            await client.post(running.url + "/v1/chat/completions", json=chat())
            await client.get(running.url + "/v1/nope")
            text = (await client.get(running.url + "/metrics")).text
    assert 'tokenward_decisions_total{reason="route_denied",route="/v1/nope",stage="edge",tenant=""}' in text
    assert 'tokenward_stage_seconds_total{stage="edge"}' in text


async def test_exactly_one_record_per_request_and_no_secrets(gw, mock):
    secret = "sk-very-secret-client-key"
    prompt = "my private prompt text"
    async with gw.client() as client:
        for _ in range(3):
            await client.post(gw.url + "/v1/chat/completions", json=chat(content=prompt),
                              headers={"authorization": f"Bearer {secret}"})
        await client.get(gw.url + "/v1/other")
    records = gw.decisions()
    assert len(records) == 4
    assert len({r["request_id"] for r in records}) == 4
    raw = gw.decisions_path.read_text()
    assert secret not in raw and prompt not in raw and "tok tok" not in raw


async def test_stage_metrics_add_up_to_the_decision_records(gw, mock):
    """Per-stage run counts and times in the metrics equal the records' stages_us, whichever
    stage a request ended at (the metrics sum clock readings per boundary, in bulk)."""
    from tokenward.observe.metrics import METRICS

    before = METRICS.stage_totals()
    async with gw.client() as client:
        for _ in range(3):
            assert (await client.post(gw.url + "/v1/chat/completions", json=chat())).status_code == 200
        assert (await client.get(gw.url + "/v1/other")).status_code == 404              # edge refuses
        assert (await client.post(gw.url + "/v1/chat/completions", content=b"{",
                                  headers={"content-type": "text/plain"})).status_code == 415
    after = METRICS.stage_totals()
    records = gw.decisions()
    assert len(records) == 5
    expected: dict[str, list] = {}
    for record in records:
        for stage, us in record["stages_us"].items():
            slot = expected.setdefault(stage, [0, 0.0])
            slot[0] += 1
            slot[1] += us * 1000
    assert expected["edge"][0] == 5 and expected["forward"][0] == 3
    for stage, (runs, ns) in expected.items():
        runs_before, ns_before = before.get(stage, (0, 0))
        assert after[stage][0] - runs_before == runs
        assert abs((after[stage][1] - ns_before) - ns) <= 1e-6 * ns + 1
