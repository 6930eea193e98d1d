"""The status page in headless Chromium (Debian's package, driven by Playwright): it
renders per tenant, shows an automatic suspension within a few seconds of it happening
without a reload, and a screenshot is taken (written to docs/status-page.png only with
TOKENWARD_REFRESH_DOCS=1, so a test run leaves the checkout as it was). The JSON beside it
carries the same numbers; neither holds a key, a prompt or an address."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from .conftest import ADMIN, ADMIN_TOKEN, bearer, chat, gateway, write_config

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
DOCS_SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "status-page.png"
RULES = [{"name": "burst", "when": {"hour_requests": 8}, "action": "suspend", "duration_s": 3600}]
SECRET_PROMPT = "the launch code is 0000-SECRET"


@pytest.fixture
def chromium():
    if not os.path.exists(CHROMIUM):
        pytest.fail("Debian's chromium is not installed; run scripts/test.sh, which installs it")
    return CHROMIUM


async def test_status_page_in_chromium(tmp_path, backend, chromium):
    screenshot = DOCS_SCREENSHOT if os.environ.get("TOKENWARD_REFRESH_DOCS") == "1" else tmp_path / "status-page.png"
    from playwright.async_api import async_playwright

    config = write_config(tmp_path, backend.port,
                          abuse={"shadow": False, "batch_s": 0.2, "min_history_days": 0, "rules": RULES,
                                 "network_header": "x-forwarded-for"},
                          tenants={"acme": {"plan": "team"}, "globex": {"plan": "free"}})
    async with gateway(config) as gw:
        plaintext = await gw.new_key()
        key = bearer(plaintext)
        for _ in range(3):
            body = chat(messages=[{"role": "user", "content": SECRET_PROMPT}])
            resp = await gw.client.post("/v1/chat/completions", json=body,
                                        headers={**key, "x-forwarded-for": "198.51.100.77"})
            assert resp.status_code == 200, resp.text
        resp = await gw.admin("/admin/tenants/globex/pause", {"capability": "tools", "for": "2h",
                                                             "reason": "tool misuse report", "reviewer": "ops"})
        assert resp.status_code == 200
        async with async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=chromium, args=ARGS)
            try:
                context = await browser.new_context(http_credentials={"username": "ops", "password": ADMIN_TOKEN},
                                                    viewport={"width": 1200, "height": 900})
                page = await context.new_page()
                resp = await page.goto(gw.url + "/admin/status")
                assert resp.status == 200
                assert await page.locator("h1").inner_text() == "tokenward status"
                assert await page.locator("section.tenant").count() == 4   # acme, globex, initech, umbrella
                assert "pause tools" in await page.locator('section[data-tenant="globex"] .controls').inner_text()
                await page.evaluate("window.__loadedOnce = true")

                for _ in range(6):   # the ninth request would be past the rule: the engine suspends
                    await gw.client.post("/v1/chat/completions", json=chat(), headers=key)
                deadline = time.monotonic() + 5
                while not [c for c in gw.parts.control.view.controls if c.kind == "suspend"]:
                    assert time.monotonic() < deadline, "the engine never suspended the key"
                    await asyncio.sleep(0.05)
                suspended_at = time.monotonic()
                refused = await gw.client.post("/v1/chat/completions", json=chat(), headers=key)
                assert refused.json()["error"]["code"] == "key_suspended"
                acme = page.locator('section[data-tenant="acme"] .controls')
                await acme.get_by_text("suspend", exact=True).wait_for(timeout=5000)
                shown_after = time.monotonic() - suspended_at
                assert shown_after < 5.0
                assert await page.evaluate("window.__loadedOnce === true"), "the page reloaded"
                text = await page.locator("#tenants").inner_text()
                assert "automatic (rule burst)" in text and f"key:{plaintext[3:19]}" in text
                await page.screenshot(path=str(screenshot), full_page=True)
                html = await page.content()
            finally:
                await browser.close()
        data = (await gw.client.get("/admin/status.json", headers=ADMIN)).json()
    assert screenshot.stat().st_size > 10_000
    assert data["tenants"]["acme"]["budget"] and data["tenants"]["globex"]["controls"][0]["capability"] == "tools"
    for secret in (plaintext, plaintext[20:], SECRET_PROMPT, "198.51.100"):
        assert secret not in html and secret not in str(data)
    print(f"status page showed the suspension {shown_after:.2f} s after it happened")


async def test_status_page_needs_the_admin_credential(tmp_path, backend):
    async with gateway(write_config(tmp_path, backend.port)) as gw:
        resp = await gw.client.get("/admin/status")
        assert resp.status_code == 401 and resp.headers["www-authenticate"] == 'Basic realm="tokenward admin"'
        resp = await gw.client.get("/admin/status", auth=("ops", "wrong"))
        assert resp.status_code == 401
        resp = await gw.client.get("/admin/status", auth=("ops", ADMIN_TOKEN))
        assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/html")
        assert "nonce-" in resp.headers["content-security-policy"]


async def test_status_page_refreshes_when_opened_with_credentials_in_its_url(tmp_path, backend, chromium):
    """``http://ops:TOKEN@host/admin/status``: fetch refuses a URL with credentials, and a
    relative one resolves against the page's own (credentialed) URL; the page builds its
    refresh URL from ``location.origin`` instead, so the refresh keeps working."""
    from playwright.async_api import async_playwright

    async with gateway(write_config(tmp_path, backend.port)) as gw:
        url = gw.url.replace("http://", f"http://ops:{ADMIN_TOKEN}@") + "/admin/status"
        async with async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=chromium, args=ARGS)
            try:
                page = await (await browser.new_context()).new_page()
                resp = await page.goto(url)
                assert resp.status == 200
                stamp = page.locator("#updated")
                first = await stamp.inner_text()
                deadline = time.monotonic() + 6
                while (text := await stamp.inner_text()) == first:
                    assert time.monotonic() < deadline, "the page never refreshed"
                    await asyncio.sleep(0.2)
                assert "update failed" not in text, text
                assert await page.locator("section.tenant").count() >= 1
            finally:
                await browser.close()
