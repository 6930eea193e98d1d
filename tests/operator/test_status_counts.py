"""The status page without abuse signals: per-tenant screening outcomes are counted (they
came only from the signals' shared counts before), and a spend is shown to the fraction of
a cent it has ($0.000115, never 0.00)."""

from __future__ import annotations

from tests.control.conftest import ADMIN, bearer, chat, gateway, write_config
from tests.identity.conftest import backend  # noqa: F401  (the mock backend fixture)

SCREENING = {"policies": {"standard": {"pii": {"mode": "redact", "entities": ["EMAIL"]}}}}
MODELS = {"small-chat": {"upstream": "local", "context_window": 32768,
                         "input_price_per_million": 1.5, "output_price_per_million": 4.0}}
PLANS = {"team": {"models": ["small-chat"], "screening": "standard", "daily_spend_usd": 5}}
TENANTS = {"acme": {"plan": "team"}, "globex": {"plan": "team"}}


async def test_status_counts_screening_per_tenant_and_shows_small_spend(tmp_path, backend):
    config = write_config(tmp_path, backend.port, screening=SCREENING, models=MODELS, plans=PLANS,
                          tenants=TENANTS)
    async with gateway(config) as gw:
        assert gw.gateway.parts.abuse is None
        key = await gw.new_key("acme")
        mail = chat(messages=[{"role": "user", "content": "write to jane.doe@example.com please"}])
        for body in (mail, mail, chat()):
            resp = await gw.client.post("/v1/chat/completions", json=body, headers=bearer(key))
            assert resp.status_code == 200, resp.text
        data = (await gw.client.get("/admin/status.json", headers=ADMIN)).json()
        acme = data["tenants"]["acme"]
        assert acme["screening"].get("pii:redact") == 2, acme["screening"]
        assert data["tenants"]["globex"]["screening"] == {}
        spend = next(row for row in acme["budget"] if row["kind"] == "spend")
        assert 0 < spend["used"] < 0.01
        html = (await gw.client.get("/admin/status", headers=ADMIN)).text
        shown = f"{spend['used']:.6f}".rstrip("0")
        # as `tokenward budget show` writes it (budget/policy.py usd_text); was "0.00 of 5.0 USD"
        assert f"</span> ${shown} of $5.00" in html
        assert "Screening outcomes, last 5 min (this replica)" in html
