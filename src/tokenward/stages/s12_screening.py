"""Screening: injection and personal-data detectors under the plan's graded policy.

The plan names a policy (``plans.<plan>.screening``; docs/screening.md). Every text the
backend will receive from the caller is screened, as the model reads it: the route says
which (``Route.texts``: validation/texts.py for chat, completions and embeddings; a
dialect's own parse when its body goes to the backend natively), a message's text parts
joined into one text:

- injection: a score in [0, 1]; at ``block_at`` or above the request is refused
  (400 ``content_blocked``, naming the detector), at ``restrict_at`` or above it is
  admitted *restricted* (the transform stage removes its tools and clamps its output to
  the plan's ``restricted_max_output_tokens``), below it is only recorded;
- personal data: the entities found; ``log`` records them, ``block`` refuses
  (``content_blocked`` naming the detector and the types, never a value), ``redact`` and
  ``tokenize`` leave the spans for the transform stage, which masks every one of them:
  masking is never gated on a weaker check than the detector itself.

``shadow: true`` on a screener decides and records (``would`` in the record, counted in
the metrics) and enforces nothing. A screener that fails or overruns its latency budget
is ``on_failure``: ``closed`` refuses with 503 ``screening_unavailable``, ``open`` admits
and records. Scores, outcomes and entity counts go into the decision record and the
metrics; no text ever does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Awaitable, Callable

from ..config.schema import Config, InjectionScreening, PiiScreening, ScreeningPolicy
from ..errors import ConfigError, MissingExtra, Reason, Refusal
from ..observe.metrics import GatewayMetrics
from ..pipeline.stage import BaseStage
from ..pii.placeholders import LOOKALIKE
from ..pii.spans import Span as Found
from ..screening import screener as screening
from ..screening.detectors import injection_screener, pii_screener
from ..validation.result import NormalizedRequest
from ..pipeline.context import required
from ..pipeline.results import Screening
from ..validation.texts import TOOL_OUTPUT

if TYPE_CHECKING:
    from ..pipeline.context import RequestContext

# a screener's answer and the microseconds it took
Ran = tuple[screening.ScreenResult, float]


class CompiledPolicy:
    __slots__ = ("injection", "injection_screener", "pii", "pii_screener", "output_find", "tool_output",
                 "tool_output_screener")

    def __init__(self, name: str, policy: ScreeningPolicy) -> None:
        self.injection: InjectionScreening | None = policy.injection
        self.pii: PiiScreening | None = policy.pii if policy.pii is not None and policy.pii.mode != "off" else None
        self.injection_screener: screening.Screener | None = None
        self.pii_screener: screening.Screener | None = None
        # tool results and attachments' text under their own detector (injection.tool_output)
        self.tool_output = self.injection.tool_output if self.injection is not None else None
        self.tool_output_screener: screening.Screener | None = None
        self.output_find: Callable[[str], list[Found]] | None = None
        try:
            if self.injection is not None:
                self.injection_screener = injection_screener(self.injection.detector, self.injection)
        except ImportError as exc:
            raise MissingExtra(f"screening.policies.{name}.injection.detector", str(exc)) from None
        except ValueError as exc:
            raise ConfigError(f"screening.policies.{name}.injection.detector", str(exc)) from None
        try:
            if self.tool_output is not None:
                self.tool_output_screener = injection_screener(self.tool_output.detector, self.tool_output)
        except ImportError as exc:
            raise MissingExtra(f"screening.policies.{name}.injection.tool_output.detector", str(exc)) from None
        except ValueError as exc:
            raise ConfigError(f"screening.policies.{name}.injection.tool_output.detector", str(exc)) from None
        try:
            if self.pii is not None:
                self.pii_screener = pii_screener(self.pii.detector, self.pii.entities, self.pii.regions)
        except ImportError as exc:
            raise MissingExtra(f"screening.policies.{name}.pii", str(exc)) from None
        except ValueError as exc:
            raise ConfigError(f"screening.policies.{name}.pii", str(exc)) from None
        if self.pii is not None and self.pii.output == "redact":
            from ..pii.patterns import ENTITIES, PatternDetector

            # the built-in patterns (linear time, inline): the types of the policy they know
            wanted = [e for e in self.pii.entities or ENTITIES if e in ENTITIES]
            if not wanted:
                raise ConfigError(f"screening.policies.{name}.pii.output",
                                  f"none of the policy's entities is one the built-in patterns find ({', '.join(ENTITIES)})")
            self.output_find = PatternDetector(wanted).find


def _failed(metrics: GatewayMetrics, kind: str, detector: str, exc: screening.ScreenerFailed, closed: bool,
            shadow: bool, record: dict[str, Any]) -> Refusal | None:
    outcome = "unavailable" if closed else "failed_open"
    record[kind] = {"detector": detector, "outcome": outcome, "failure": exc.why}
    if shadow:
        record[kind]["shadow"] = True
    metrics.screened(kind, detector, outcome, shadow)
    if closed and not shadow:
        return Refusal(Reason.screening_unavailable, f"content screening ({detector}) is unavailable; retry shortly",
                       headers=((b"retry-after", b"1"),))
    return None


class ScreeningStage(BaseStage):
    name = "screening"
    needs = frozenset({"route", "request"})
    writes = frozenset({"screening"})

    def __init__(self, policies: dict[str, CompiledPolicy], metrics: GatewayMetrics | None = None) -> None:
        self.policies = policies
        self.metrics = metrics if metrics is not None else GatewayMetrics()   # the gateway's (assemble/gateway.py)

    async def admit(self, ctx: RequestContext) -> Refusal | None:
        name = ctx.plan.screening
        if name is None:
            return None
        request = ctx.request
        if not isinstance(request, NormalizedRequest):
            return None
        policy = self.policies[name]
        result = ctx.screening = Screening(required(ctx.route, "route").texts(request))
        if policy.injection is not None:
            # with injection.tool_output, tool results and attachments' text (units of kind
            # tool_output) get its screener, the rest injection's; texts keep their places
            texts = result.texts
            tools = [u.kind == TOOL_OUTPUT for u in result.units] if policy.tool_output is not None else None
            for key, cfg, screener, kind in (("injection", policy.injection, policy.injection_screener, False),
                                             ("tool_output", policy.tool_output, policy.tool_output_screener, True)):
                if cfg is None or (tools is not None and kind not in tools):
                    continue
                only = texts if tools is None else [t if k == kind else "" for t, k in zip(texts, tools)]
                assert screener is not None   # (compiled with its config)
                ran = _screen(self.metrics, "injection", cfg, screener, result, only)
                if ran is not None and not isinstance(ran, (tuple, Refusal)):   # answers later (a model, a service)
                    ran = await _later(self.metrics, "injection", cfg, screener, result, ran)
                refusal = self._injection(cfg, screener, result, ran, key)
                if refusal is not None:
                    return refusal
        if policy.pii is not None:
            pii_screener = policy.pii_screener
            assert pii_screener is not None   # (compiled with its config)
            ran = _screen(self.metrics, "pii", policy.pii, pii_screener, result)
            if ran is not None and not isinstance(ran, (tuple, Refusal)):
                ran = await _later(self.metrics, "pii", policy.pii, pii_screener, result, ran)
            return self._pii(policy, result, ran)
        return None

    def _injection(self, cfg: InjectionScreening, screener: screening.Screener, result: Screening,
                   ran: Ran | Refusal | None, key: str = "injection") -> Refusal | None:
        if isinstance(ran, Refusal) or ran is None:
            return ran
        found, took_us = ran
        score = round(float(found.score), 4) if found.score else 0.0
        outcome = "block" if score >= cfg.block_at else "restrict" if score >= cfg.restrict_at else "pass"
        entry: dict[str, Any] = {"detector": screener.name, "score": score, "outcome": outcome, "us": round(took_us, 1)}
        if found.spans:
            entry["signals"] = sorted({span.label for span in found.spans})
        if cfg.shadow:
            entry["shadow"] = True
        result.record[key] = entry
        self.metrics.screened("injection", screener.name, outcome, cfg.shadow, score)
        if cfg.shadow or outcome == "pass":
            return None
        if outcome == "restrict":
            result.restrict = True
            return None
        return Refusal(Reason.content_blocked, f"the request was blocked by content screening ({screener.name})")

    def _pii(self, policy: CompiledPolicy, result: Screening, ran: Ran | Refusal | None) -> Refusal | None:
        cfg, screener = policy.pii, policy.pii_screener
        assert cfg is not None and screener is not None
        if isinstance(ran, Refusal) or ran is None:
            return ran
        found, took_us = ran
        counts: dict[str, int] = {}
        for span in found.spans:
            counts[span.label] = counts.get(span.label, 0) + 1
        mode = cfg.mode
        if not counts:
            outcome = "pass"
        else:
            outcome = {"log": "logged", "block": "block", "redact": "redact", "tokenize": "tokenize"}[mode]
        entry: dict[str, Any] = {"detector": screener.name, "mode": mode, "outcome": outcome, "us": round(took_us, 1)}
        if counts:
            entry["entities"] = counts
        if cfg.shadow:
            entry["shadow"] = True
        result.record["pii"] = entry
        self.metrics.screened("pii", screener.name, outcome, cfg.shadow)
        if cfg.shadow:
            return None
        result.output_find = policy.output_find
        if outcome == "block":
            types = ", ".join(sorted(counts))
            return Refusal(Reason.content_blocked,
                           f"personal data ({types}) found by content screening ({screener.name}); "
                           f"this plan does not accept it")
        if mode in ("redact", "tokenize") and (counts or (mode == "tokenize" and _typed_lookalikes(result.texts))):
            result.pii_spans = found.spans
            result.pii_mode = mode
            result.pii_detector = screener.name
        return None


def _screen(metrics: GatewayMetrics, kind: str, cfg: InjectionScreening | PiiScreening,
            screener: screening.Screener, result: Screening,
            texts: list[str] | None = None) -> Ran | Awaitable[Ran] | Refusal | None:
    """(result, microseconds), an awaitable of that (``_later``), or what a failure means
    under ``on_failure``: a Refusal (closed) or None (open: admitted, recorded)."""
    try:
        # a screener may declare its own budget for a policy that sets none: Threaded (the
        # built-in model detectors) or a plugin's object, outside code the protocol leaves free
        budget_ms: float = (cfg.timeout_ms if cfg.timeout_ms is not None
                            else getattr(screener, "default_timeout_ms", screening.DEFAULT_TIMEOUT_MS))
        return screening.start(screener, result.texts if texts is None else texts, budget_ms / 1000)
    except screening.ScreenerFailed as exc:
        return _failed(metrics, kind, screener.name, exc, cfg.on_failure == "closed", cfg.shadow, result.record)


async def _later(metrics: GatewayMetrics, kind: str, cfg: InjectionScreening | PiiScreening,
                 screener: screening.Screener, result: Screening, pending: Awaitable[Ran]) -> Ran | Refusal | None:
    try:
        return await pending
    except screening.ScreenerFailed as exc:
        return _failed(metrics, kind, screener.name, exc, cfg.on_failure == "closed", cfg.shadow, result.record)


def _typed_lookalikes(texts: list[str]) -> bool:
    """Text that looks like a placeholder must be neutralized even when nothing is masked."""
    for text in texts:
        if "{" in text and LOOKALIKE.search(text):
            return True
    return False


def build(config: Config, metrics: GatewayMetrics) -> ScreeningStage | None:
    policies = config.screening.policies
    if not policies:
        return None
    used: set[object] = {plan.screening for plan in config.plans.values()}
    used |= {t.overrides.get("screening") for t in config.tenants.values() if isinstance(t.overrides, dict)}
    compiled = {}
    for name, policy in policies.items():
        try:
            compiled[name] = CompiledPolicy(name, policy)
        except MissingExtra:
            if name in used:
                raise
            # a policy no plan uses may name an extra that is not installed (check-config warns)
    return ScreeningStage(compiled, metrics)
