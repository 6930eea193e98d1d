"""Health, readiness, metrics and the one-record-per-request rule."""

from __future__ import annotations


from tests.support import chat


async def test_health_and_readiness(gw):
    async with gw.client() as client:
        assert (await client.get(gw.url + "/healthz")).json() == {"status": "ok"}
        ready = await client.get(gw.url + "/readyz")
    assert ready.status_code == 200 and ready.headers["x-request-id"]


async def test_readiness_follows_the_backend(tmp_path):
    """/readyz probes each upstream (cached for health_ttl_s): 503 naming the upstream while
    its backend is down, 200 again once it is back; an upstream marked ready_required:
    false is reported but never makes the gateway unready."""
    import asyncio

    from tests.support import base_config, gateway_in_process, mock_backend

    async with mock_backend() as mock:
        port = mock.port
        extra = ("  spare: {base_url: 'http://127.0.0.1:9/v1', ready_required: false}\n")
        config = base_config(mock.url, extra="").replace("upstreams:\n", "upstreams:\n" + extra, 1)
        config = config.replace("read_timeout_s: 10", "read_timeout_s: 10\n    health_ttl_s: 0.05")
        async with gateway_in_process(config, tmp_path / "d.jsonl") as gw:
            async with gw.client() as client:
                ready = await client.get(gw.url + "/readyz")
                assert ready.status_code == 200, ready.text
                body = ready.json()
                assert body["upstreams"]["mock"]["healthy"] is True
                assert body["upstreams"]["spare"] == {**body["upstreams"]["spare"], "healthy": False, "required": False}
                before = (await mock.stats())["by_path"].get("/v1/models", 0)
                assert before >= 1   # the first check probed
                await asyncio.gather(*(client.get(gw.url + "/readyz") for _ in range(20)))
                # twenty checks inside one TTL share a probe or two, not twenty
                assert (await mock.stats())["by_path"].get("/v1/models", 0) - before <= 2
            # the backend goes away
            from tokenward.mock.server import stop_mock

            await stop_mock(mock.server)
            await asyncio.sleep(0.1)
            async with gw.client() as client:
                down = await client.get(gw.url + "/readyz")
            assert down.status_code == 503 and down.json()["status"] == "unavailable"
            assert down.json()["upstreams"]["mock"]["healthy"] is False
            # and comes back on the same port
            from tokenward.mock.server import start_mock

            server, _, _ = await start_mock("127.0.0.1", port)
            try:
                await asyncio.sleep(0.1)
                async with gw.client() as client:
                    assert (await client.get(gw.url + "/readyz")).status_code == 200
            finally:
                await stop_mock(server)


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
    assert 'tokenward_decisions_total{reason="route_denied",route="other",stage="edge",tenant=""}' in text
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
    before = gw.metrics.stage_totals()
    async with gw.client() as client:
        for _ in range(3):
            assert (await client.post(gw.url + "/v1/chat/completions", json=chat())).status_code == 200
        assert (await client.get(gw.url + "/v1/other")).status_code == 404              # edge refuses
        assert (await client.post(gw.url + "/v1/chat/completions", content=b"{",
                                  headers={"content-type": "text/plain"})).status_code == 415
    after = gw.metrics.stage_totals()
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


async def test_two_gateways_in_one_process_count_apart(make_gateway):
    """Each gateway gets its own metrics from its assembly (observe/telemetry.py): a request
    through one moves its counters and not the other's; nothing is process-wide."""
    async with make_gateway() as one, make_gateway() as other:
        async with one.client() as client:
            for _ in range(3):
                assert (await client.post(one.url + "/v1/chat/completions", json=chat())).status_code == 200
        async with other.client() as client:
            assert (await client.post(other.url + "/v1/chat/completions", json=chat())).status_code == 200
        ok = lambda gw: sum(v for (route, _, reason, _), v in gw.metrics.decisions.items()   # noqa: E731
                            if route == "/v1/chat/completions" and reason == "ok")
        assert (ok(one), ok(other)) == (3, 1)
        assert one.gateway.parts.enforcement is not other.gateway.parts.enforcement
        assert one.gateway.parts.enforcement.budget_health is not other.gateway.parts.enforcement.budget_health
