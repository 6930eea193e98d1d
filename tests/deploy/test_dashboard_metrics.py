"""Every metric the Grafana dashboard (deploy/grafana/tokenward.json) and the alert rules
(deploy/prometheus/alerts.yml) use is exported at GET /metrics, with samples, by a gateway
that has seen the traffic they describe (refusals, settled usage, screening, the cache, an
automatic suspension, an operator's pause and cancel)."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import httpx
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.control.conftest import bearer, chat, gateway, write_config

ROOT = Path(__file__).resolve().parents[2]
NAME = re.compile(r"\btokenward_[a-z0-9_]+\b")


def _exprs(node) -> list[str]:
    """Every PromQL expression in a dashboard: panel targets, annotations, template queries."""
    found = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("expr", "definition") and isinstance(value, str):
                found.append(value)
            elif key == "query" and isinstance(value, dict) and isinstance(value.get("query"), str):
                found.append(value["query"])
            else:
                found += _exprs(value)
    elif isinstance(node, list):
        for item in node:
            found += _exprs(item)
    return found


def used_metrics() -> dict[str, set[str]]:
    dashboard = json.loads((ROOT / "deploy/grafana/tokenward.json").read_text())
    rules = yaml.safe_load((ROOT / "deploy/prometheus/alerts.yml").read_text())
    alert_exprs = [rule["expr"] for group in rules["groups"] for rule in group["rules"]]
    return {"dashboard": {n for e in _exprs(dashboard) for n in NAME.findall(e)},
            "alerts": {n for e in alert_exprs for n in NAME.findall(e)}}


def test_the_files_parse_and_use_metrics():
    used = used_metrics()
    assert len(used["dashboard"]) >= 15 and len(used["alerts"]) >= 6
    dashboard = json.loads((ROOT / "deploy/grafana/tokenward.json").read_text())
    assert dashboard["uid"] == "tokenward" and all("gridPos" in p for p in dashboard["panels"])
    names = [r["alert"] for g in yaml.safe_load((ROOT / "deploy/prometheus/alerts.yml").read_text())["groups"]
             for r in g["rules"]]
    for wanted in ("TokenwardBudgetStoreDown", "TokenwardRefusalSpike", "TokenwardReservedToActualDrift",
                   "TokenwardAutomaticSuspension"):
        assert wanted in names


async def test_every_metric_they_use_is_exported(tmp_path, backend):
    rules = [{"name": "burst", "when": {"hour_requests": 4}, "action": "suspend", "duration_s": 600}]
    config = write_config(
        tmp_path, backend.port, server={"expose_metrics": True},
        abuse={"shadow": False, "batch_s": 0.1, "min_history_days": 0, "rules": rules},
        screening={"policies": {"standard": {"injection": {"detector": "heuristic"}}}},
        cache={"store": "memory"},
        tenants={"acme": {"plan": "team", "overrides": {"screening": "standard", "cache": True}}})
    async with gateway(config, environ={"TOKENWARD_CACHE_KEY": "k" * 32}) as gw:
        key, exempt = bearer(await gw.new_key()), await gw.new_key()
        assert (await gw.admin("/admin/abuse/exemptions", {"key_id": exempt, "for": "1h",
                                                           "reason": "load test"})).status_code == 201
        for i in range(6):
            for who in (key, bearer(exempt)):
                body = chat(messages=[{"role": "user", "content": f"question {i % 2}"}])
                assert (await gw.client.post("/v1/chat/completions", json=body, headers=who)).status_code in (200, 403)
            await asyncio.sleep(0.12)
        await gw.client.post("/v1/chat/completions", json=chat(max_tokens=10**9), headers=bearer(exempt))
        assert (await gw.admin("/admin/tenants/acme/pause", {"capability": "tools", "for": "1h",
                                                             "reason": "r"})).status_code == 200
        assert (await gw.admin("/admin/tenants/acme/cancel-streams", {"reason": "r"})).status_code == 200
        text = (await gw.client.get("/metrics")).text
    exported = {sample.name for family in text_string_to_metric_families(text) for sample in family.samples}
    used = used_metrics()
    for where, names in used.items():
        missing = sorted(names - exported)
        assert not missing, f"{where} uses metrics /metrics does not export (with samples): {missing}"
    assert 'tokenward_abuse_actions_total{action="suspend",automatic="true",rule="burst",shadow="false",subject="key"}' in text


async def test_a_fresh_gateway_exports_every_metric_they_use(tmp_path, backend):
    """Issue 31 item 7: before any request, every metric the dashboard and the alerts name
    has a sample (zeros for the label sets the configuration fixes: assemble/known_series.py), so
    no panel says "No data". A separate process: this one's metrics saw other tests."""
    from tests.identity.conftest import ADMIN_TOKEN, ADMIN_TOKEN_ENV
    from tests.support import spawn_gateway

    rules = [{"name": "burst", "when": {"hour_requests": 4}, "action": "suspend", "duration_s": 600}]
    config = write_config(
        tmp_path, backend.port, server={"expose_metrics": True},
        abuse={"shadow": False, "batch_s": 0.1, "min_history_days": 0, "rules": rules},
        screening={"policies": {"standard": {"injection": {"detector": "heuristic"},
                                             "pii": {"mode": "tokenize"}}}},
        cache={"store": "memory"},
        tenants={"acme": {"plan": "team", "overrides": {"screening": "standard", "cache": True}}})
    environ = {"TOKENWARD_CACHE_KEY": "k" * 32, ADMIN_TOKEN_ENV: ADMIN_TOKEN}
    async with gateway(config, environ=environ) as gw:     # a key in the store, as after any first day
        await gw.new_key()
    proc = await asyncio.to_thread(spawn_gateway, config, environ)    # the backend answers meanwhile
    try:
        async with httpx.AsyncClient(base_url=proc.url, timeout=10.0) as client:
            text = (await client.get("/metrics")).text
    finally:
        await asyncio.to_thread(proc.stop)
    exported = {sample.name for family in text_string_to_metric_families(text) for sample in family.samples}
    for where, names in used_metrics().items():
        missing = sorted(names - exported)
        assert not missing, f"{where} uses metrics a fresh gateway does not export (with samples): {missing}"
    for wanted in ('tokenward_abuse_actions_total{action="suspend",automatic="true",rule="burst",shadow="false",'
                   'subject="key"} 0.0', 'tokenward_abuse_exempted_total{rule="burst"} 0.0',
                   'tokenward_cache_saved_tokens_total{tenant="acme"} 0.0',
                   'tokenward_cache_saved_usd_total{tenant="acme"} 0.0',
                   'tokenward_controls_active{kind="suspend",shadow="false"} 0.0'):
        assert wanted in text, wanted
    assert "route=\"other\"" not in text      # nothing happened: no request was counted
