"""Prometheus metrics, counted in plain dicts on the request path and exported on scrape.

prometheus-client's own counters take a lock per increment; a dict increment per request
is an order of magnitude cheaper, and a custom collector turns the dicts into metric
families only when someone scrapes.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import defaultdict

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

from ..pipeline.context import RequestContext


class GatewayMetrics:
    def __init__(self) -> None:
        # (route, decided_by, reason, tenant) -> count
        self.decisions: dict[tuple[str, str, str, str], int] = defaultdict(int)
        # stage -> [count, total nanoseconds]: ints, so a request adds to them without a
        # float division and a float per stage (a scrape converts)
        self.stage_time: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        self.tokens: dict[tuple[str, str, str], int] = defaultdict(int)
        self.open_streams: dict[str, int] = defaultdict(int)
        # (kind, detector, outcome, shadow) -> count; (kind, detector) -> score bucket counts + sum
        self.screening: dict[tuple[str, str, str, str], int] = defaultdict(int)
        self.scores: dict[tuple[str, str], list[float]] = {}

        # (tenant, outcome) -> count; tenant -> [tokens saved, cost saved in USD]
        self.cache: dict[tuple[str, str], int] = defaultdict(int)
        self.cache_saved: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
        self.cache_errors = 0
        self._cache_store = None

    SCORE_BUCKETS = (0.1, 0.3, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.0)

    def cached(self, tenant: str, outcome: str, tokens: int = 0, cost: float = 0.0) -> None:
        self.cache[(tenant, outcome)] += 1
        if tokens:
            saved = self.cache_saved[tenant]
            saved[0] += tokens
            saved[1] += cost

    def watch_cache(self, store) -> None:
        """The cache store whose size and evictions a scrape reports."""
        self._cache_store = store

    def screened(self, kind: str, detector: str, outcome: str, shadow: bool, score: float | None = None) -> None:
        """One screener's outcome for one request (shadow included), and its score."""
        self.screening[(kind, detector, outcome, "true" if shadow else "false")] += 1
        if score is not None:
            slot = self.scores.get((kind, detector))
            if slot is None:
                slot = self.scores[(kind, detector)] = [0.0] * (len(self.SCORE_BUCKETS) + 1)
            i = bisect_left(self.SCORE_BUCKETS, score)    # the first bucket whose bound is >= score
            if i < len(self.SCORE_BUCKETS):
                slot[i] += 1
            slot[-1] += score

    def observe(self, ctx: RequestContext) -> None:
        principal = ctx.principal
        tenant = principal.tenant if principal is not None else ""
        self.decisions[(ctx.path, ctx.deciding_stage or "", ctx.reason or "ok", tenant)] += 1
        stage_time = self.stage_time
        for name, ns in ctx.timings:
            slot = stage_time[name]
            slot[0] += 1
            slot[1] += ns
        usage = ctx.usage
        if usage.completion_tokens is not None:
            self.tokens[(tenant, "completion", usage.source)] += usage.completion_tokens
        if usage.prompt_tokens is not None:
            self.tokens[(tenant, "prompt", usage.source)] += usage.prompt_tokens

    def stage_totals(self) -> dict[str, tuple[int, float]]:
        """stage -> (runs, total nanoseconds) so far."""
        return {name: (calls, float(total)) for name, (calls, total) in list(self.stage_time.items())}

    def collect(self):
        decisions = CounterMetricFamily("tokenward_decisions", "Requests by route, deciding stage and reason",
                                        labels=["route", "stage", "reason", "tenant"])
        for key, count in list(self.decisions.items()):
            decisions.add_metric(list(key), count)
        yield decisions
        count = CounterMetricFamily("tokenward_stage_calls", "Stage runs", labels=["stage"])
        seconds = CounterMetricFamily("tokenward_stage_seconds", "Time spent in each stage", labels=["stage"])
        for name, (calls, total) in list(self.stage_time.items()):
            count.add_metric([name], calls)
            seconds.add_metric([name], total / 1e9)
        yield count
        yield seconds
        tokens = CounterMetricFamily("tokenward_tokens", "Tokens by tenant, kind and where the count came from",
                                     labels=["tenant", "kind", "source"])
        for key, value in list(self.tokens.items()):
            tokens.add_metric(list(key), value)
        yield tokens
        screened = CounterMetricFamily("tokenward_screening", "Screener outcomes by kind, detector and outcome",
                                       labels=["kind", "detector", "outcome", "shadow"])
        for key, value in list(self.screening.items()):
            screened.add_metric(list(key), value)
        yield screened
        scores = HistogramMetricFamily("tokenward_screening_score", "Screener scores", labels=["kind", "detector"])
        for key, slot in list(self.scores.items()):
            buckets, running = [], 0.0
            for bound, count in zip(self.SCORE_BUCKETS, slot):
                running += count
                buckets.append((str(bound), running))
            buckets.append(("+Inf", running))
            scores.add_metric(list(key), buckets, slot[-1])
        yield scores
        yield from self._collect_cache()
        streams = GaugeMetricFamily("tokenward_open_streams", "Open streams per tenant", labels=["tenant"])
        for tenant, value in list(self.open_streams.items()):
            streams.add_metric([tenant], value)
        yield streams


    def _collect_cache(self):
        lookups = CounterMetricFamily("tokenward_cache", "Cache lookups by tenant and outcome (hit, miss, bypass)",
                                      labels=["tenant", "outcome"])
        for key, value in list(self.cache.items()):
            lookups.add_metric(list(key), value)
        yield lookups
        saved = CounterMetricFamily("tokenward_cache_saved_tokens", "Tokens served from the cache", labels=["tenant"])
        cost = CounterMetricFamily("tokenward_cache_saved_usd", "What the tokens served from the cache cost",
                                   labels=["tenant"])
        for tenant, (tokens, usd) in list(self.cache_saved.items()):
            saved.add_metric([tenant], tokens)
            cost.add_metric([tenant], usd)
        yield saved
        yield cost
        yield CounterMetricFamily("tokenward_cache_store_errors", "Cache store calls that failed (served as misses)",
                                  value=self.cache_errors)
        store = self._cache_store
        if store is not None:
            yield CounterMetricFamily("tokenward_cache_evictions", "Entries evicted by the cache's bounds",
                                      value=store.evictions)
            size = store.size_bytes()
            if size is not None:
                yield GaugeMetricFamily("tokenward_cache_bytes", "Bytes held by the memory cache", value=size)


METRICS = GatewayMetrics()
_REGISTRY = CollectorRegistry(auto_describe=False)
_REGISTRY.register(METRICS)


def register(collector) -> None:
    """Another part's collector, scraped with these (control/metrics.py); once per process."""
    _REGISTRY.register(collector)


async def send_metrics(send) -> None:
    body = generate_latest(_REGISTRY)
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/plain; version=0.0.4; charset=utf-8"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
