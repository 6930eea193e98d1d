"""Every series whose label set the configuration fixes, exported from the start at zero.

A counter that appears only once something happens leaves a dashboard's panel at "No
data" on a fresh gateway, and makes ``rate()``/``increase()`` miss the first event (no
earlier sample to compare with). So, once a gateway has started, each family the
dashboard (deploy/grafana/tokenward.json) and the alerts (deploy/prometheus/alerts.yml)
read gets a zero sample for every label set known from the configuration: its tenants,
stages, upstreams, screening detectors, cache tenants, abuse rules, operator actions and
the API keys the key store holds at start. Nothing here is taken from a request, so the
series stay bounded by the configuration (observe/routes.py says why that matters).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ..identity.parts import tenant_plans
from ..stages.s12_screening import ScreeningStage

if TYPE_CHECKING:
    from .gateway import Parts


log = logging.getLogger("tokenward.metrics")

OPERATOR_ACTIONS = ("pause", "resume", "cancel-streams")     # control/admin.py
MAX_KEYS = 10_000       # keys listed at start beyond this are seeded when they first charge


async def seed(parts: Parts) -> None:
    config = parts.config
    metrics, enforcement = parts.metrics, parts.enforcement
    tenants = tuple(config.tenants)
    paths = [r.path for r in config.routes or ()]
    route = "/v1/chat/completions" if "/v1/chat/completions" in paths else (paths[0] if paths else "other")
    for tenant in tenants:
        metrics.decisions[(route, "", "ok", tenant)] += 0
        metrics.open_streams[tenant] += 0
        for kind in ("prompt", "completion"):
            metrics.tokens[(tenant, kind, "reported")] += 0
        for table in (enforcement.reserved, enforcement.settled, enforcement.settled_reserved):
            table[tenant] += 0
        if config.jwt.issuers:
            metrics.key_slot(tenant, "jwt")
    for stage in [*(s.name for s in parts.stages), "forward"]:
        metrics.stage_time[stage]          # a defaultdict: the zero histogram
    for upstream in config.upstreams:
        metrics.upstream_slots(upstream)
    _seed_screening(parts)
    if config.cache is not None:
        for tenant, (_, plan) in tenant_plans(config).items():
            if plan.cache:
                for outcome in ("hit", "miss", "bypass"):
                    metrics.cache[(tenant, outcome)] += 0
                metrics.cache_saved[tenant]
    if config.abuse is not None:
        for rule in config.abuse.rules:
            shadow = "true" if rule.shadow or config.abuse.shadow else "false"
            enforcement.actions[(rule.action, rule.name, rule.subject, shadow, "true")] += 0
            enforcement.exempted[rule.name] += 0
    if parts.admin is not None:
        for tenant in tenants:
            for action in OPERATOR_ACTIONS:
                enforcement.controls[(action, tenant)] += 0
    await _seed_keys(parts)


def _seed_screening(parts: Parts) -> None:
    metrics = parts.metrics
    for stage in parts.stages:
        for policy in stage.policies.values() if isinstance(stage, ScreeningStage) else ():
            if policy.injection_screener is not None and policy.injection is not None:
                shadow = "true" if policy.injection.shadow else "false"
                metrics.screening[("injection", policy.injection_screener.name, "pass", shadow)] += 0
                key = ("injection", policy.injection_screener.name)
                metrics.scores.setdefault(key, [0.0] * (len(metrics.SCORE_BUCKETS) + 1))
            if policy.pii_screener is not None and policy.pii is not None:
                shadow = "true" if policy.pii.shadow else "false"
                metrics.screening[("pii", policy.pii_screener.name, "pass", shadow)] += 0


async def _seed_keys(parts: Parts) -> None:
    keys = parts.keys
    if keys is None:
        return
    try:
        records = await keys.list()
    except Exception as exc:   # a key store that cannot list now: its keys appear when they charge
        log.warning("metrics: the key store's keys were not listed at start (%s)", type(exc).__name__)
        return
    for record in records[:MAX_KEYS]:
        if record.tenant in parts.config.tenants and record.status != "revoked":
            parts.metrics.key_slot(record.tenant, record.id)
