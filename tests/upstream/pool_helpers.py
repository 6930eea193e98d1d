"""A gateway in this loop in front of a pool of targets, and what tests read of it."""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
from pathlib import Path
from typing import Any, AsyncIterator, Iterable

from prometheus_client.parser import text_string_to_metric_families

from tests.support import RunningGateway, gateway_in_process

URL = "/v1/chat/completions"


def pool_config(urls: Iterable[str], decisions: Path, upstream: str = "", targets: Iterable[str] | None = None,
                plan: str = "", tenants: Iterable[str] = ("acme",)) -> str:
    """One upstream ``pool`` over ``urls`` (each target's extra fields in ``targets``), its
    extra settings in ``upstream`` (YAML flow-mapping members, each starting with ", "), and
    ``tenants`` on one plan (the test's key is the first's)."""
    extras = list(targets) if targets is not None else None
    entries = [f"{{url: {url}{extras[i] if extras else ''}}}" for i, url in enumerate(urls)]
    keystore = os.path.join(tempfile.mkdtemp(prefix="tw-keys-"), "keys.db")
    return f"""
server: {{expose_metrics: true}}
upstreams:
  pool: {{targets: [{", ".join(entries)}], forward_headers: ["x-mock-*"], read_timeout_s: 10{upstream}}}
models:
  small-chat: {{upstream: pool, context_window: 32768}}
plans:
  team: {{models: [small-chat], max_output_tokens: 4096, tokens_per_minute: 100000000, requests_per_minute: 100000,
          max_concurrent_streams: 100{plan}}}
tenants: {{{", ".join(f"{tenant}: {{plan: team}}" for tenant in tenants)}}}
logging: {{decisions: "{decisions}"}}
keystore: {{url: "sqlite:///{keystore}"}}
"""


@contextlib.asynccontextmanager
async def pool_gateway(urls: Iterable[str], tmp_path: Path, upstream: str = "", targets: Iterable[str] | None = None,
                       plan: str = "", tenants: Iterable[str] = ("acme",)) -> AsyncIterator[RunningGateway]:
    decisions = tmp_path / f"decisions-{os.urandom(4).hex()}.jsonl"
    async with gateway_in_process(pool_config(urls, decisions, upstream, targets, plan, tenants), decisions) as gw:
        yield gw


def records_by_id(gw: RunningGateway) -> dict[str, dict[str, Any]]:
    return {record["request_id"]: record for record in gw.decisions()}


async def record_of(gw: RunningGateway, request_id: str, timeout: float = 5.0) -> dict[str, Any]:
    """The decision record of a request, once it is written (a cancelled one's comes late)."""
    for _ in range(int(timeout / 0.02)):
        record = records_by_id(gw).get(request_id)
        if record is not None:
            return record
        await asyncio.sleep(0.02)
    raise AssertionError(f"no decision record for {request_id}")


def served_by(record: dict[str, Any]) -> str:
    """The target that answered (the last one tried)."""
    return record["notes"]["targets"][-1]


async def target_gauges(gw: RunningGateway) -> dict[tuple[str, str], float]:
    """{(metric, target): value} of the two per-target gauges, from GET /metrics."""
    async with gw.client() as client:
        text = (await client.get(gw.url + "/metrics")).text
    out = {}
    for family in text_string_to_metric_families(text):
        if family.name.startswith("tokenward_upstream_target_"):
            for sample in family.samples:
                out[(sample.name, sample.labels["target"])] = sample.value
    return out


async def eventually(check, timeout: float = 10.0, every: float = 0.05) -> None:
    """Wait until ``check()`` (sync or async) is true."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        result = check()
        if asyncio.iscoroutine(result):
            result = await result
        if result:
            return
        if loop.time() > deadline:
            raise AssertionError("condition never held")
        await asyncio.sleep(every)


def charged_tokens(gw: RunningGateway) -> int:
    """Tokens charged at settle to the tenant's keys so far (tokenward_key_charged_tokens)."""
    return sum(slot[0] for (tenant, _), slot in gw.metrics.key_spend.items() if tenant == "acme")


def usage_total(body: dict[str, Any]) -> int:
    usage = body["usage"]
    return usage["prompt_tokens"] + usage["completion_tokens"]
