"""The abuse engine: every ``batch_s``, the decisions observed since the last batch go to
the shared store in one round trip, come back as each subject's signals against its own
history, and the policy's proposals become actions (control/service.py), each audited.

Everything here runs in one background task, never on a request's path; a failing store
loses that batch's observations (counted), never a request.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import Any, Callable

from ..config.schema import AbuseConfig, Config
from ..control.metrics import EnforcementMetrics
from ..control.model import Control
from .batch import aggregate
from .network import NetworkHasher, client_address
from .batch import Acc
from .observe import AT, Observation, Observer
from .policy import Proposal, propose
from .signals import params_of, signals
from .store import SEP, Band, BandCall, SubjectCall, new_secret

log = logging.getLogger("tokenward.abuse")
CLAIM_MS = 10_000   # a replica's claim on acting on a subject: the others' views catch up meanwhile


def _params(proposal: Proposal) -> dict[str, Any] | None:
    rule = proposal.rule
    if rule.action == "reduce_concurrency":
        return {"concurrency": rule.concurrency}
    if rule.action == "restrict":
        return {"max_output_tokens": rule.max_output_tokens, "no_tools": rule.no_tools}
    return None


def near_duplicates(owners: list[str], bands: list[Band]) -> dict[str, tuple[int, int]]:
    """key id -> (distinct keys, distinct tenants) that sent a prompt sharing any band with
    its own: the union of its bands' members (a band's own count where it lists fewer)."""
    members: dict[str, set[str]] = {}
    largest: dict[str, tuple[int, int]] = {}
    for owner, band in zip(owners, bands):
        members.setdefault(owner, set()).update(band.members)
        best = largest.get(owner, (0, 0))
        largest[owner] = (max(best[0], band.keys), max(best[1], band.tenants))
    out = {}
    for owner, seen in members.items():
        tenants = {m.split(SEP, 1)[0] for m in seen}
        out[owner] = (max(len(seen), largest[owner][0]), max(len(tenants), largest[owner][1]))
    return out


class AbuseEngine:
    def __init__(self, config: Config, store: Any, ops: Any, runtime: Any, clock: Callable[[], float] = time.time,
                 enforcement: EnforcementMetrics | None = None) -> None:
        # the gateway's (assemble/gateway.py): batches, observations, actions and exemptions counted
        self.enforcement = enforcement if enforcement is not None else EnforcementMetrics()
        cfg = config.abuse
        assert cfg is not None
        self.cfg: AbuseConfig = cfg
        self.hash_env = self.cfg.hash_key_env or config.logging.hash_key_env
        self.params = params_of(self.cfg)
        self.observer = Observer(clock, self.cfg.max_buffer, self.cfg.network_header)
        self.store = store
        self.ops = ops
        self.runtime = runtime
        self._clock = clock
        self._network: NetworkHasher | None = None
        self._sketcher: Any = None
        self._task: asyncio.Task[None] | None = None
        self._last_sweep = 0.0
        self._lock = asyncio.Lock()
        self._failing = False

    async def start(self) -> None:
        secret_text = os.environ.get(self.hash_env, "")
        if secret_text:
            secret = secret_text.encode()
        else:
            log.warning("%s is not set: the abuse signals' hash secret is generated and kept in the store",
                        self.hash_env)
            secret = await self.store.shared_secret(new_secret())
        self._network = NetworkHasher(secret)
        if self.cfg.campaign.enabled:
            from .sketch import Sketcher

            self._sketcher = Sketcher(secret, self.cfg.campaign)
        self._task = asyncio.get_running_loop().create_task(self._run(), name="tokenward-abuse-batches")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.cfg.batch_s)
            try:
                await self.flush()
                now = self._clock()
                if now - self._last_sweep >= self.cfg.sweep_s:
                    self._last_sweep = now
                    await self.store.sweep(int(now), self.params)
            except Exception as exc:
                self.enforcement.store_errors += 1
                if not self._failing:   # once per outage, not once a second
                    log.warning("abuse signal batches are failing (the batch is lost): %s", exc)
                self._failing = True
            else:
                if self._failing:
                    log.warning("abuse signal batches work again")
                self._failing = False

    def _source(self, source: bytes | str | None) -> str | None:
        network = self._network
        assert network is not None   # start() sets it, before the first batch
        if isinstance(source, bytes):   # the proxy header's value
            return network.of(client_address(source))
        return network.of(source)   # the peer's address (or None)

    async def flush(self) -> list[Control]:
        """Send what was observed since the last batch; the actions it led to."""
        async with self._lock:
            observations, prompts = self.observer.take()
            if not observations:
                return []
            started = time.perf_counter()
            try:
                return await self._batch(observations, prompts)
            finally:
                self.enforcement.batches += 1
                self.enforcement.observations += len(observations)
                self.enforcement.batch_seconds += time.perf_counter() - started

    async def _batch(self, observations: list[Observation], prompts: dict[str, Any]) -> list[Control]:
        now = int(max(o[AT] for o in observations))
        keys, tenants = aggregate(observations, self._source)
        for key_id, request in prompts.items():
            acc = keys.get(key_id)
            if acc is not None:
                acc.prompt = request
        calls = [SubjectCall("k:" + k, acc.batch()) for k, acc in keys.items()]
        calls += [SubjectCall("t:" + t, acc.batch()) for t, acc in tenants.items()]
        raws = await self.store.observe(calls, now, self.params)
        campaign = await self._campaign(keys, now)
        by_tenant: dict[str, tuple[int, int]] = {}
        for key_id, sizes in campaign.items():
            tenant = keys[key_id].tenant
            best = by_tenant.get(tenant, (0, 0))
            by_tenant[tenant] = (max(best[0], sizes[0]), max(best[1], sizes[1]))
        proposals: list[Proposal] = []
        for call, raw in zip(calls, raws):
            kind, _, name = call.subject.partition(":")
            if kind == "k":
                tenant = keys[name].tenant
                found = signals(raw, self.cfg, campaign.get(name, (0, 0)))
                proposals += propose(self.cfg, "key", tenant, name, found)
            else:
                found = signals(raw, self.cfg, by_tenant.get(name, (0, 0)))
                proposals += propose(self.cfg, "tenant", name, None, found)
        return await self._act(proposals, now)

    async def _campaign(self, keys: dict[str, Acc], now: int) -> dict[str, tuple[int, int]]:
        """key id -> (distinct keys, distinct tenants) of the largest campaign its prompt is in."""
        sketcher = self._sketcher
        if sketcher is None:
            return {}
        from ..validation.texts import chat_units, texts_of

        calls: list[BandCall] = []
        owners: list[str] = []
        budget = self.cfg.campaign.max_prompts_per_batch
        for key_id, acc in keys.items():
            if budget <= 0:
                break
            if acc.prompt is None:
                continue
            budget -= 1
            bands = sketcher.bands_of(texts_of(chat_units(acc.prompt)))
            for band in bands or ():
                calls.append(BandCall(band, f"{acc.tenant}{SEP}{key_id}"))
                owners.append(key_id)
        cfg = self.cfg.campaign
        bands = await self.store.campaign(calls, now, int(cfg.window_s), cfg.max_members)
        return near_duplicates(owners, bands)

    async def _act(self, proposals: list[Proposal], now: int) -> list[Control]:
        taken: list[Control] = []
        for proposal in proposals:
            rule, tenant, key_id = proposal.rule, proposal.tenant, proposal.key_id
            view = self.runtime.view
            if view.exempt(tenant, key_id, self._clock()):
                self.enforcement.exempted[rule.name] += 1
                continue
            if view.strongest(tenant, key_id, self._clock(), proposal.shadow) >= proposal.severity:
                continue
            claim = f"{tenant}{SEP}{key_id or ''}{SEP}{rule.action}{SEP}{int(proposal.shadow)}"
            if not await self.store.claim(claim, int(self._clock() * 1000), CLAIM_MS):
                continue   # another replica is acting on it right now
            reason = f"{'shadow: would ' if proposal.shadow else ''}{rule.action}: rule {rule.name}"
            control = await self.ops.act(rule.action, tenant, key_id, rule.duration_s, reason, rule=rule.name,
                                         signals=proposal.signals, params=_params(proposal), shadow=proposal.shadow)
            self.enforcement.actions[(rule.action, rule.name, "key" if key_id else "tenant",
                                 "true" if proposal.shadow else "false", "true")] += 1
            log.info("abuse action %s on %s (rule %s%s)", rule.action, control.scope, rule.name,
                     ", shadow" if proposal.shadow else "")
            taken.append(control)
        return taken
