"""The classroom (issue 18): 30 keys of one tenant send near-identical prompts at once. It
looks like a campaign, and a signal says so: under an exemption nothing is done; without
one, the campaign rule asks for the operator's review, and no key is suspended."""

from __future__ import annotations

import pytest


from .helpers import T0, Clock, abuse_config, gateway, observed

STUDENTS = [f"student{i:02d}" for i in range(30)]


@pytest.fixture(autouse=True)
def _sketch_secret(monkeypatch):
    """A fixed secret for the prompt sketches. Under a secret generated per run, two
    students' prompts share no band now and then (MinHash LSH finds a pair this similar
    with a probability just under 1), and the campaign counts 29 keys, not 30."""
    monkeypatch.setenv("TOKENWARD_LOG_HASH_KEY", "classroom-test-sketch-secret")


def _prompt(name: str) -> dict:
    text = (f"Hi, I am {name}. Write a five paragraph essay about the causes of the First World War for "
            "Ms Rivera's tenth grade history class, with an introduction and a conclusion.")
    return {"model": "small-chat", "messages": [{"role": "user", "content": text}], "max_tokens": 400}


async def _classroom(gw, clock: Clock, exempt: bool, exempt_for: str = "30d"):
    keys = [await gw.new_key() for _ in STUDENTS]
    if exempt:
        resp = await gw.admin("/admin/abuse/exemptions", {"tenant": "acme", "for": exempt_for,
                                                          "reason": "school district: one class, one assignment",
                                                          "reviewer": "alice"})
        assert resp.status_code == 201, resp.text
    statuses = []
    for i, (name, key) in enumerate(zip(STUDENTS, keys)):
        clock.now = T0 + 10 * 3600 + i * 5
        resp = await gw.client.post("/v1/chat/completions", json=_prompt(name),
                                    headers={"authorization": f"Bearer {key}", "x-forwarded-for": "192.0.2.10"})
        statuses.append(resp.status_code)
    await observed(gw.parts.abuse, len(STUDENTS))
    taken = await gw.parts.abuse.flush()
    return statuses, taken, keys


async def test_classroom_under_an_exemption_is_not_acted_on(tmp_path, backend):
    clock = Clock(T0)
    async with gateway(abuse_config(tmp_path, backend.port, shadow=False), clock) as gw:
        statuses, taken, _ = await _classroom(gw, clock, exempt=True)
        assert statuses == [200] * 30
        assert taken == []
        assert [c.kind for c in gw.parts.control.view.controls] == ["exempt"]
        assert gw.parts.enforcement.exempted["campaign"] == 1   # the signal fired; the exemption held it
        assert not [a for a in await gw.audit() if a["action"].startswith("abuse:") and a["action"] != "abuse:exempt"]


async def test_classroom_without_an_exemption_is_raised_for_review_not_suspended(tmp_path, backend):
    clock = Clock(T0)
    async with gateway(abuse_config(tmp_path, backend.port, shadow=False), clock) as gw:
        statuses, taken, keys = await _classroom(gw, clock, exempt=False)
        assert statuses == [200] * 30
        assert [(c.kind, c.key_id, c.tenant, c.rule) for c in taken] == [("review", None, "acme", "campaign")]
        assert taken[0].signals["campaign_keys"] == 30 and taken[0].signals["campaign_tenants"] == 1
        controls = (await gw.admin("/admin/controls?tenant=acme")).json()["data"]
        assert [(c["kind"], c["scope"]) for c in controls] == [("review", "tenant:acme")]
        # a review is for the operator: every key still works
        resp = await gw.client.post("/v1/chat/completions", json=_prompt("late"),
                                    headers={"authorization": f"Bearer {keys[0]}"})
        assert resp.status_code == 200
        audit = [a for a in await gw.audit() if a["action"].startswith("abuse:")]
        assert [(a["action"], a["scope"], a["reason"]) for a in audit] == [
            ("abuse:review", "tenant:acme", "review: rule campaign")]


async def test_an_expired_exemption_no_longer_holds_the_signal(tmp_path, backend):
    """Granted for an hour at T0; the class meets ten hours later: the campaign rule acts
    as if there were none (a review), and the exemption is gone from the controls in force."""
    clock = Clock(T0)
    async with gateway(abuse_config(tmp_path, backend.port, shadow=False), clock) as gw:
        statuses, taken, _ = await _classroom(gw, clock, exempt=True, exempt_for="1h")
        assert statuses == [200] * 30
        assert [(c.kind, c.tenant, c.rule) for c in taken] == [("review", "acme", "campaign")]
        assert gw.parts.enforcement.exempted["campaign"] == 0
        controls = (await gw.admin("/admin/controls?tenant=acme")).json()["data"]
        assert [c["kind"] for c in controls] == ["review"]
