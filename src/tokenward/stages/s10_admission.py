"""Admission: one atomic worst-case reservation per request against every budget, settled
on real usage however the request ends.

The amount is the work stage's ``reserve_tokens`` when it ran; otherwise prompt bytes
(a byte is never fewer tokens than it encodes) plus the clamped maximum output, read with
a cheap field peek. Cost units come from the model's per-million prices.

Release, exactly once per request (the runner calls one of the two hooks):

- ``on_complete``: the backend confirmed the end. Known usage settles (refund =
  reservation - actual); unknown usage keeps the full charge.
- ``on_abort``: known usage settles as above; with no usage, a request the backend never
  saw (a later stage refused it, it was cancelled before forwarding) is settled at zero
  work, and one the backend may have worked on keeps the full charge.

Settle is idempotent by reservation id: the held ticket is taken once, and the store's
record is deleted by the settle that uses it.
"""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any, Awaitable, Final, TYPE_CHECKING

from ..budget import policy
from ..budget.admission import Admitter, Decision
from ..budget.limits import JOB_LIMITS
from ..budget.policy import Prices
from ..config.schema import Config, PlanConfig
from ..control.metrics import EnforcementMetrics
from ..errors import Reason, Refusal
from ..http.responses import NO_RETRY
from ..jobs.book import JobBook
from ..observe.metrics import GatewayMetrics
from ..observe.work import WorkMetrics
from ..jobs.runs import JobRun
from ..pipeline.coroutines import is_coroutine
from ..pipeline.context import required
from ..pipeline.results import BudgetRecord, Reservation
from ..pipeline.stage import BaseStage, Deciding, Exit, ExitKind
from ..reconcile.usage import Usage

if TYPE_CHECKING:
    from ..jobs.terms import JobBudgets
    from ..pipeline.context import RequestContext
    from ..pipeline.results import Principal, Work


_NO_OUTPUT_ROUTES: Final = frozenset({"/v1/embeddings"})
_UNPRICED: Final = (policy.FREE, None)


def _int(value: object) -> int | None:
    return value if type(value) is int and value >= 0 else None


class Estimate:
    __slots__ = ("input", "tokens", "cost", "model")

    def __init__(self, input_tokens: int, tokens: int, cost: int, model: str | None) -> None:
        self.input = input_tokens
        self.tokens = tokens
        self.cost = cost
        self.model = model


class AdmissionStage(BaseStage):
    name = "admission"
    needs = frozenset({"principal", "request", "work"})
    writes = frozenset({"reservation", "job"})
    holds = True

    def __init__(self, config: Config, admitter: Admitter, metrics: GatewayMetrics | None = None,
                 work: WorkMetrics | None = None, jobs: JobBook | None = None) -> None:
        self.admitter = admitter
        # the gateway's (assemble/gateway.py); a bench's own stage counts into its own
        self.metrics = metrics if metrics is not None else GatewayMetrics()
        self.work = work if work is not None else WorkMetrics()
        self._models = {name: (Prices.per_million(m.input_price_per_million, m.output_price_per_million), m.upstream)
                        for name, m in config.models.items()}
        self._shared_store = admitter.shared.store.name
        self.jobs = jobs if jobs is not None else JobBook(admitter, self.work)
        # API key id -> its [tokens, micro-USD] charged, the slot the metrics export
        self._key_slots: dict[str, list[int]] = {}

    def decide(self, ctx: RequestContext) -> Deciding:
        principal = ctx.principal
        if principal is None:
            ctx.note("budget", "skipped: no principal")  # identity always sets one once it runs
            return None
        route = ctx.route
        if route is None or not route.has_body:
            return None
        for name, value in ctx.headers:   # x-tokenward-job: the request joins an agent job
            if name == b"x-tokenward-job":
                return self._admit_in_job(ctx, principal, value.decode("latin-1").strip())
        return self._reserve(ctx, principal, None)

    async def _admit_in_job(self, ctx: RequestContext, principal: Principal, job_id: str) -> Refusal | None:
        resolved = await self.jobs.resolve(principal.tenant, job_id)
        if isinstance(resolved, Refusal):
            return resolved
        decided = self._reserve(ctx, principal, resolved)
        return await decided if is_coroutine(decided) else decided

    def _reserve(self, ctx: RequestContext, principal: Principal, job: JobBudgets | None
                 ) -> Refusal | None | Coroutine[Any, Any, Refusal | None]:
        entitlement = ctx.entitlement
        plan: PlanConfig = entitlement.plan if entitlement is not None else principal.plan
        estimate = self._estimate(ctx, plan)
        model = estimate.model
        priced = self._models.get(model) if model is not None else None
        if job is not None and job.meta.unit == policy.COST and (priced is None or priced[0] == policy.FREE):
            # a job budgeted in USD is bounded only by what its requests cost
            return Refusal(Reason.invalid_field, f"job {job.meta.id} is budgeted in USD and model {model!r} has no "
                                                 "price: such a job runs only priced models", param="model")
        upstream = priced[1] if priced is not None else None
        decision = self.admitter.reserve_now(principal.tenant, principal.plan_name, plan, principal.key_id, model,
                                             upstream, estimate.tokens, estimate.cost, job, principal.limits)
        if decision is None:   # a store that is waited for (Redis)
            return self._after_store(ctx, principal, estimate, job, self.admitter.reserve(
                principal.tenant, principal.plan_name, plan, principal.key_id, model, upstream, estimate.tokens,
                estimate.cost, job, principal.limits))
        return self._decided(ctx, principal, estimate, job, decision)

    async def _after_store(self, ctx: RequestContext, principal: Principal, estimate: Estimate,
                           job: JobBudgets | None, reserving: Awaitable[Decision]) -> Refusal | None:
        decided = self._decided(ctx, principal, estimate, job, await reserving)
        return await decided if is_coroutine(decided) else decided

    def _decided(self, ctx: RequestContext, principal: Principal, estimate: Estimate, job: JobBudgets | None,
                 decision: Decision) -> Refusal | None | Coroutine[Any, Any, Refusal]:
        limits = decision.limits
        record = BudgetRecord(estimated_input=estimate.input, reserved=estimate.tokens, reserved_cost=estimate.cost,
                              limits=tuple(limits), store="local" if decision.local else self._shared_store)
        if decision.shadow:
            record.shadow_would_reject = decision.shadow
        if ctx.work is not None and ctx.work.stateful:
            # the prompt side was reserved at the context limit (stages/s09_work.py)
            record.stateful_prompt = ctx.work.input_tokens
        ctx.note("budget", record)
        ticket = decision.ticket
        if ticket is None:
            record.refused_by = decision.limit or "store"
            self.work.refused(principal.tenant, estimate.tokens, decision.terminal, decision.retry_after, job is not None)
            if decision.limit in JOB_LIMITS:
                assert job is not None   # a job's limits refuse only a job's requests
                needed = estimate.cost if job.meta.unit == policy.COST else estimate.tokens
                return self.jobs.refused(principal.tenant, job, needed, decision.headers)
            return _upper_bound(_refusal(decision, estimate), ctx.work)
        ctx.reservation = Reservation(ticket.reservation_id, principal.tenant, estimate.tokens,
                                      estimate.cost, "streams" in limits, tuple(limits), record)
        if job is not None:
            record.job = job.meta.id
            ctx.job = self.jobs.runs.add(ctx, principal.tenant, job, ticket.reservation_id)
            self.work.job_request(principal.tenant, "admitted")
        if decision.headers:
            ctx.response_headers.extend(decision.headers)
        return None

    def _estimate(self, ctx: RequestContext, plan: PlanConfig) -> Estimate:
        work = ctx.work
        model, max_out, n = self._peek(ctx)
        priced = self._models.get(model) if model is not None else None
        prices = priced[0] if priced is not None else policy.FREE
        if work is not None:
            tokens = work.reserve_tokens
            input_tokens = work.input_tokens
            output = tokens - input_tokens
            return Estimate(input_tokens, tokens, prices.cost(input_tokens, output if output > 0 else 0), model)
        if ctx.path in _NO_OUTPUT_ROUTES:
            output = 0
        else:
            output = plan.max_output_tokens if max_out is None else min(max_out, plan.max_output_tokens)
            output *= min(max(n or 1, 1), max(plan.max_n, 1))
        prompt = len(ctx.body)
        return Estimate(prompt, prompt + output, prices.cost(prompt, output), model)

    @staticmethod
    def _peek(ctx: RequestContext) -> tuple[str | None, int | None, int | None]:
        request = ctx.request
        if request is not None:
            # validated: the clamped output bound and the candidates, already read
            return request.model, request.max_output_tokens or None, request.candidates
        peek = ctx.parsed.peek()
        if peek is None:
            return None, None, None  # validation names the problem; reserve the worst case
        model, max_tokens, completion, n = peek.model, peek.max_tokens, peek.max_completion_tokens, peek.n
        limit = _int(max_tokens)
        if limit is None:
            limit = _int(completion)
        return (model if isinstance(model, str) else None), limit, _int(n)

    def complete(self, ctx: RequestContext, usage: Usage) -> None:
        self._settle(ctx, usage, backend_saw_it=True)

    def abort(self, ctx: RequestContext, exit: Exit) -> None:
        usage = exit.usage if exit.usage is not None else ctx.usage
        saw_it = exit.kind is not ExitKind.REJECTED and (ctx.upstream_status is not None or ctx.deciding_stage == "forward")
        self._settle(ctx, usage, backend_saw_it=saw_it)

    def _settle(self, ctx: RequestContext, usage: Usage, backend_saw_it: bool) -> None:
        reservation = ctx.reservation
        if reservation is None:
            return
        if ctx.job is not None:
            self._job_ended(ctx, reservation, usage, backend_saw_it)
        ticket = self.admitter.keeper.open.get(reservation.reservation_id)
        if ticket is None:
            return  # already settled
        record = reservation.record
        reserved = reservation.tokens
        known = usage.known   # a property, Python code: read once
        if known:
            estimated = record.estimated_input if record is not None else reserved
            tokens, cost = settle_amounts(usage, reserved, reservation.cost_units, estimated,
                                          self._models.get(ctx.model or "", _UNPRICED)[0])
            mode = policy.SETTLE
        elif backend_saw_it:
            tokens, cost, mode = reserved, reservation.cost_units, policy.FULL
        else:
            tokens, cost, mode = 0, 0, policy.SETTLE
        self.admitter.settle_soon(ticket, tokens, cost, mode)
        principal = required(ctx.principal, "principal")
        spent = self._key_slots.get(principal.key_id)
        if spent is None:
            spent = self._key_slot(principal)
        spent[0] += tokens
        spent[1] += cost
        if record is not None:
            charged = tokens if mode == policy.SETTLE else reserved
            record.actual = tokens if mode == policy.SETTLE else None
            record.refunded = max(reserved - charged, 0)
            record.settle = "usage" if known else ("full" if mode == policy.FULL else "unused")

    def _key_slot(self, principal: Principal) -> list[int]:
        """Where a settle adds what a key was charged. The tenant's JWT callers share one
        slot, ``key_id="jwt"``: a series per end user would grow without bound, and a
        subject may name a person."""
        if principal.kind != "api_key":
            return self.metrics.key_slot(principal.tenant, "jwt")
        slot = self._key_slots[principal.key_id] = self.metrics.key_slot(principal.tenant, principal.key_id)
        return slot

    def _job_ended(self, ctx: RequestContext, reservation: Reservation, usage: Usage, backend_saw_it: bool) -> None:
        run = ctx.job
        assert isinstance(run, JobRun)   # this stage wrote it (admit)
        # completed: the backend finished the work and nothing ended the request otherwise
        completed = backend_saw_it and ctx.reason is None and (ctx.status or 0) < 400
        self.jobs.runs.remove(run)
        if reservation.reservation_id not in self.admitter.keeper.open:
            return  # settled already
        used = max(usage.prompt_tokens or 0, 0) + max(usage.completion_tokens or 0, 0)
        charged = used if usage.known else (reservation.tokens if backend_saw_it else 0)
        self.work.job_request(run.tenant, "completed" if completed else "ended", min(charged, reservation.tokens))


def settle_amounts(usage: Usage, reserved: int, reserved_cost: int, estimated_input: int,
                   prices: Prices) -> tuple[int, int]:
    """(tokens, cost units) a request with known ``usage`` is settled on. ``usage`` was
    clamped where it was read (pipeline/bounds.py); clamped again here, so a settle never
    charges more than the reservation nor refunds more than it."""
    prompt = usage.prompt_tokens
    if prompt is None:
        prompt = estimated_input
    completion = usage.completion_tokens or 0
    prompt = prompt if prompt > 0 else 0
    completion = completion if completion > 0 else 0
    return min(prompt + completion, reserved), min(prices.cost(prompt, completion), reserved_cost)


def _refusal(decision: Decision, estimate: Estimate) -> Refusal:
    reason = decision.reason
    assert reason is not None   # a decision without a ticket names why
    headers: list[tuple[bytes, bytes]] = list(decision.headers)
    if decision.retry_after is not None:
        headers.append((b"retry-after", b"%d" % decision.retry_after))
    elif reason is Reason.concurrency_limit and not decision.terminal:
        headers.append((b"retry-after", b"1"))   # a slot frees when a request ends: no time to promise
    if decision.terminal:
        headers.append(NO_RETRY)
    limit = decision.limit
    if reason is Reason.budget_store_unavailable:
        return Refusal(reason, "the budget store is unavailable; try again shortly")
    if reason is Reason.spend_cap:
        period = "day" if limit in ("spend_daily", "key_spend_daily") else "month"
        whose = "this API key's own" if limit is not None and limit.startswith("key_") else "the"
        return Refusal(reason, f"{whose} spend cap for this {period} is reached", headers=tuple(headers))
    if reason is Reason.concurrency_limit:
        what = "open requests" if limit == "streams" else "reserved in-flight tokens"
        return Refusal(reason, f"too many {what} for this tenant; retry when one finishes", headers=tuple(headers))
    if reason is Reason.rate_limited:
        return Refusal(reason, f"request rate limit reached ({limit}); retry after {decision.retry_after}s",
                       headers=tuple(headers))
    if decision.terminal:
        return Refusal(reason, f"this request needs {estimate.tokens} tokens, more than the {limit} budget holds",
                       param="max_tokens", headers=tuple(headers))
    return Refusal(reason, f"this request needs {estimate.tokens} tokens of the {limit} budget; "
                           f"retry after {decision.retry_after}s", param="max_tokens", headers=tuple(headers))


def _upper_bound(refusal: Refusal, work: Work | None) -> Refusal:
    """With the ``estimate`` tokenizer the tokens a refusal names are an upper bound: said."""
    if work is not None and work.tokenizer.startswith("estimate") and "this request needs" in refusal.message:
        refusal.message += (" (an upper bound: this model's tokenizer is `estimate`, which counts every byte of the "
                            "prompt as a token; configure its real tokenizer for exact counts)")
    return refusal


def build(config: Config, admitter: Admitter, jobs: JobBook, metrics: GatewayMetrics,
          work_metrics: WorkMetrics, enforcement: EnforcementMetrics) -> AdmissionStage:
    enforcement.budget_health = admitter.shared.health   # what tokenward_budget_store_up reports
    return AdmissionStage(config, admitter, metrics, work_metrics, jobs)
