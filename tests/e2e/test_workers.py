"""Several workers on one port: each its own SO_REUSEPORT socket, so the kernel spreads new
connections over them (one shared socket let whichever process woke first take them)."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.test_tls_reload import Serving, create_key, mock_server, write_config
from tests.fixtures.redis_server import redis_server, redis_server_session  # noqa: F401


@contextlib.asynccontextmanager
async def two_workers(tmp_path, redis_url: str, **server):
    """``tokenward serve`` with two workers on one Redis, and a key for tenant acme."""
    async with mock_server() as (mock, port):
        config = write_config(tmp_path / "gw.yaml", f"http://127.0.0.1:{port}/v1",
                              server={"workers": 2, **server}, store={"url": redis_url})
        key = create_key(config)
        gateway = await asyncio.to_thread(Serving, config, tmp_path)
        try:
            yield gateway, key
        finally:
            gateway.stop()


async def on_a_new_connection(gateway, key: str, model: str = "small-chat") -> httpx.Response:
    """One chat request on a connection of its own: the kernel picks a worker's socket for it."""
    async with httpx.AsyncClient() as http:
        return await http.post(gateway.url + "/v1/chat/completions", headers={"authorization": f"Bearer {key}"},
                               json={"model": model, "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}]})


def worker_of(resp: httpx.Response) -> str:
    return resp.headers["x-request-id"][:12]   # req_ + the worker's own prefix


async def test_two_workers_each_take_connections(tmp_path, redis_server):
    async with two_workers(tmp_path, redis_server.url) as (gateway, key):
        prefixes = set()
        for _ in range(40):
            resp = await on_a_new_connection(gateway, key)
            assert resp.status_code == 200
            prefixes.add(worker_of(resp))
        assert len(prefixes) == 2, prefixes


def test_several_workers_on_the_memory_store_are_refused(tmp_path):
    """Each worker would keep its own budgets: a tenant could spend its limits once per worker."""
    config = write_config(tmp_path / "gw.yaml", "http://127.0.0.1:9/v1", server={"workers": 2})
    for argv in (["check-config", "--config", str(config)], ["serve", "--config", str(config)]):
        done = subprocess.run([sys.executable, "-m", "tokenward", *argv], capture_output=True, text=True,
                              timeout=60, cwd=tmp_path)
        assert done.returncode == 2, done
        assert "server.workers" in done.stderr and "shared budget store" in done.stderr, done.stderr
        assert "Traceback" not in done.stderr
    one = write_config(tmp_path / "one.yaml", "http://127.0.0.1:9/v1")
    done = subprocess.run([sys.executable, "-m", "tokenward", "serve", "--config", str(one), "--workers", "3"],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.startswith("--workers: 3 workers need a shared budget store")
    assert subprocess.run([sys.executable, "-m", "tokenward", "check-config", "--config", str(one)],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path).returncode == 0


async def test_a_scrape_counts_every_workers_requests(tmp_path, redis_server):
    """Each worker counts in its own memory and the kernel gives a scrape to one of them: the
    one that answers sums them all, fresh, so every scrape sees every request, whichever
    worker it reaches, and no counter goes back between scrapes."""

    def admitted(text: str) -> float:
        samples = [s for f in text_string_to_metric_families(text) for s in f.samples]
        ok = sum(s.value for s in samples if s.name == "tokenward_decisions_total" and s.labels["reason"] == "ok"
                 and s.labels["route"] == "/v1/chat/completions")
        forwarded = [s.value for s in samples if s.name == "tokenward_stage_duration_seconds_count"
                     and s.labels["stage"] == "forward"]
        assert forwarded == [ok]              # one histogram series, summed over the workers
        return ok

    async with two_workers(tmp_path, redis_server.url, expose_metrics=True) as (gateway, key):
        sent, prefixes, seen = 0, set(), []
        for round_ in range(3):
            for _ in range(12):
                resp = await on_a_new_connection(gateway, key)
                assert resp.status_code == 200
                prefixes.add(worker_of(resp))
                sent += 1
            for _ in range(6):
                async with httpx.AsyncClient() as http:
                    scraped = await http.get(gateway.url + "/metrics")
                assert scraped.status_code == 200
                seen.append(admitted(scraped.text))
                assert seen[-1] == sent, (round_, seen)
        assert len(prefixes) == 2, prefixes
        assert seen == sorted(seen)


async def test_the_status_page_counts_every_workers_refusals(tmp_path, redis_server):
    """With no abuse store the status page's refusals of the last minutes are this replica's
    own: with two workers, both of theirs, whichever worker serves the page."""
    async with two_workers(tmp_path, redis_server.url) as (gateway, key):
        prefixes = set()
        for _ in range(16):   # a model the plan does not have: refused at entitlement
            resp = await on_a_new_connection(gateway, key, model="other-model")
            assert resp.status_code in (400, 403, 404), resp.text
            prefixes.add(worker_of(resp))
        assert len(prefixes) == 2, prefixes          # both workers refused some
        reason = resp.json()["error"]["code"]
        for _ in range(6):
            async with httpx.AsyncClient() as http:
                status = await http.get(gateway.url + "/admin/status.json",
                                        headers={"authorization": "Bearer admin-secret"})
            assert status.status_code == 200
            tenant = status.json()["tenants"]["acme"]
            assert tenant["refusals_scope"] == "this replica"
            assert tenant["refusals"] == {reason: 16}, tenant["refusals"]
