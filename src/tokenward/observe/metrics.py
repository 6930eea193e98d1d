"""Prometheus metrics, counted in plain dicts on the request path and exported on scrape.

prometheus-client's own counters take a lock per increment; a dict increment per request
is an order of magnitude cheaper, and a custom collector turns the dicts into metric
families only when someone scrapes.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import defaultdict
from typing import Final, Iterator, Protocol

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.metrics_core import Metric

from ..pipeline.context import RequestContext
from .routes import RouteLabels


class PoolStates(Protocol):
    """What a scrape reads of the upstreams' pools (upstream/targets.py ``TargetTable``)."""

    def target_states(self) -> list[tuple[str, str, bool, int]]: ...


class CacheSizes(Protocol):
    """What a scrape reads of the cache store (cache/store.py ``CacheStore``)."""

    evictions: int

    def size_bytes(self) -> int | None: ...


# Time histograms (a stage, a backend's first answer) count in powers of two of a
# nanosecond: a value goes to slot ``ns.bit_length()``, the bucket of the values below
# 2**slot ns, one integer method call where a bisect over bounds compares ~5 ints through
# the generic protocol (~640 instructions against ~80: eleven per request). Exported from
# 2**13 ns (8.2 us) to 2**40 ns (18 min), each bound exact: ``le`` = (2**b - 1) ns.
NS_SLOTS: Final = 65                                    # bit lengths 0..64
NS_TOTAL: Final = NS_SLOTS                              # then the total (a positive index: CPython's
                                                 # list fast path takes no negative one)
EXPORTED_BITS = range(13, 41)


class GatewayMetrics:
    def __init__(self) -> None:
        # (route, decided_by, reason, tenant) -> count
        self.decisions: dict[tuple[str, str, str, str], int] = defaultdict(int)
        # the route labels a decision may take (observe/routes.py): the configured routes
        self.routes = RouteLabels()
        # stage -> [a count per bit length of the nanoseconds (NS_SLOTS), total nanoseconds]:
        # ints, so a request adds to them without a float division and a float per stage
        # (a scrape converts)
        self.stage_time: dict[str, list[int]] = defaultdict(lambda: [0] * (NS_SLOTS + 1))
        # (upstream, "true" | "false" for stream) -> the same, for the time a backend took to
        # answer a request's head
        self.upstream_head: dict[tuple[str, str], list[int]] = {}
        # (tenant, key id) -> [tokens charged, micro-USD charged], at settle
        self.key_spend: dict[tuple[str, str], list[int]] = {}
        self.tokens: dict[tuple[str, str, str], int] = defaultdict(int)
        # (upstream, dimension) -> usage reports clamped to the request's bounds (pipeline/bounds.py)
        self.usage_clamped: dict[tuple[str, str], int] = defaultdict(int)
        self.open_streams: dict[str, int] = defaultdict(int)
        # (kind, detector, outcome, shadow) -> count; (kind, detector) -> score bucket counts + sum
        self.screening: dict[tuple[str, str, str, str], int] = defaultdict(int)
        self.scores: dict[tuple[str, str], list[float]] = {}

        # (tenant, outcome) -> count; tenant -> [tokens saved, cost saved in USD]
        self.cache: dict[tuple[str, str], int] = defaultdict(int)
        self.cache_saved: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
        self.cache_errors = 0
        self._cache_store: CacheSizes | None = None
        self._pools: PoolStates | None = None

    SCORE_BUCKETS = (0.1, 0.3, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.0)

    def cached(self, tenant: str, outcome: str, tokens: int = 0, cost: float = 0.0) -> None:
        self.cache[(tenant, outcome)] += 1
        if tokens:
            saved = self.cache_saved[tenant]
            saved[0] += tokens
            saved[1] += cost

    def watch_pools(self, pools: PoolStates) -> None:
        """The upstream table whose targets a scrape reports (a reload's replaces the old one's)."""
        self._pools = pools

    def watch_cache(self, store: CacheSizes) -> None:
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
        route = ctx.route     # the label is the route's template, never the path (observe/routes.py)
        self.decisions[(route.path if route is not None else self.routes.template(ctx.path), ctx.deciding_stage or "",
                        ctx.reason or "ok", tenant)] += 1
        stage_time = self.stage_time
        for name, ns in ctx.timings:      # add_ns, inlined: ten stages a request
            slot = stage_time[name]
            slot[ns.bit_length()] += 1
            slot[NS_TOTAL] += ns
        usage = ctx.usage
        if usage.completion_tokens is not None:
            self.tokens[(tenant, "completion", usage.source)] += usage.completion_tokens
        if usage.prompt_tokens is not None:
            self.tokens[(tenant, "prompt", usage.source)] += usage.prompt_tokens

    def stage_totals(self) -> dict[str, tuple[int, float]]:
        """stage -> (runs, total nanoseconds) so far."""
        return {name: (sum(slot[:-1]), float(slot[-1])) for name, slot in list(self.stage_time.items())}

    def upstream_slots(self, upstream: str) -> tuple[list[int], list[int]]:
        """The slots of an upstream's time-to-answer histogram: (whole answers, streams),
        indexed by ``stream``. The forwarder keeps them on its target and adds to them with
        ``add_ns``: no key built, no dict looked up per request."""
        head = self.upstream_head
        return (head.setdefault((upstream, "false"), [0] * (NS_SLOTS + 1)),
                head.setdefault((upstream, "true"), [0] * (NS_SLOTS + 1)))

    def usage_out_of_bounds(self, upstream: str, dimension: str) -> None:
        """A backend's usage count (``prompt_tokens``, ``completion_tokens``) was clamped."""
        self.usage_clamped[(upstream, dimension)] += 1

    def key_slot(self, tenant: str, key_id: str) -> list[int]:
        """[tokens charged, micro-USD charged] for one API key (a settle adds to it)."""
        slot = self.key_spend.get((tenant, key_id))
        if slot is None:
            slot = self.key_spend[(tenant, key_id)] = [0, 0]
        return slot

    def collect(self) -> Iterator[Metric]:
        decisions = CounterMetricFamily("tokenward_decisions", "Requests by route, deciding stage and reason",
                                        labels=["route", "stage", "reason", "tenant"])
        key: tuple[str, ...]   # each family's label values
        for key, decided in list(self.decisions.items()):
            decisions.add_metric(list(key), decided)
        yield decisions
        count = CounterMetricFamily("tokenward_stage_calls", "Stage runs", labels=["stage"])
        seconds = CounterMetricFamily("tokenward_stage_seconds", "Time spent in each stage", labels=["stage"])
        durations = HistogramMetricFamily("tokenward_stage_duration_seconds",
                                          "Time of one stage for one request (forward: until the answer ended)",
                                          labels=["stage"])
        for name, slot in list(self.stage_time.items()):
            buckets, calls = _ns_buckets(slot)
            count.add_metric([name], calls)
            seconds.add_metric([name], slot[-1] / 1e9)
            durations.add_metric([name], buckets, slot[-1] / 1e9)
        yield count
        yield seconds
        yield durations
        heads = HistogramMetricFamily("tokenward_upstream_response_seconds",
                                      "From sending a request to a backend to its response head (for a stream: "
                                      "the wait before the first event can come)", labels=["upstream", "stream"])
        for key, slot in list(self.upstream_head.items()):
            heads.add_metric(list(key), _ns_buckets(slot)[0], slot[-1] / 1e9)
        yield heads
        key_tokens = CounterMetricFamily("tokenward_key_charged_tokens", "Tokens charged at settle, by API key",
                                         labels=["tenant", "key_id"])
        key_usd = CounterMetricFamily("tokenward_key_spend_usd", "What was charged at settle in USD (priced models), "
                                      "by API key", labels=["tenant", "key_id"])
        for key, (tokens_charged, micro_usd) in list(self.key_spend.items()):
            key_tokens.add_metric(list(key), tokens_charged)
            key_usd.add_metric(list(key), micro_usd / 1e6)
        yield key_tokens
        yield key_usd
        tokens = CounterMetricFamily("tokenward_tokens", "Tokens by tenant, kind and where the count came from",
                                     labels=["tenant", "kind", "source"])
        for key, value in list(self.tokens.items()):
            tokens.add_metric(list(key), value)
        yield tokens
        clamped = CounterMetricFamily("tokenward_usage_out_of_bounds", "Backend usage reports clamped to what the "
                                      "request could use, by upstream and dimension", labels=["upstream", "dimension"])
        for key, value in list(self.usage_clamped.items()):
            clamped.add_metric(list(key), value)
        yield clamped
        screened = CounterMetricFamily("tokenward_screening", "Screener outcomes by kind, detector and outcome",
                                       labels=["kind", "detector", "outcome", "shadow"])
        for key, value in list(self.screening.items()):
            screened.add_metric(list(key), value)
        yield screened
        scores = HistogramMetricFamily("tokenward_screening_score", "Screener scores", labels=["kind", "detector"])
        for key, score_slot in list(self.scores.items()):
            buckets, running = [], 0.0
            for bound, in_bucket in zip(self.SCORE_BUCKETS, score_slot):
                running += in_bucket
                buckets.append((str(bound), running))
            buckets.append(("+Inf", running))
            scores.add_metric(list(key), buckets, score_slot[-1])
        yield scores
        yield from self._collect_cache()
        streams = GaugeMetricFamily("tokenward_open_streams", "Open streams per tenant", labels=["tenant"])
        for tenant, value in list(self.open_streams.items()):
            streams.add_metric([tenant], value)
        yield streams
        yield from self._collect_targets()

    def _collect_targets(self) -> Iterator[Metric]:
        pools = self._pools
        if pools is None:
            return
        up = GaugeMetricFamily("tokenward_upstream_target_up", "1 while a target of an upstream's pool is "
                               "admitted, 0 while it is ejected", labels=["upstream", "target"])
        inflight = GaugeMetricFamily("tokenward_upstream_target_inflight_tokens", "Reserved tokens (prompt + output, "
                                     "worst case) of the requests in flight on a target", labels=["upstream", "target"])
        for upstream, target, admitted, tokens in pools.target_states():
            up.add_metric([upstream, target], 1 if admitted else 0)
            inflight.add_metric([upstream, target], tokens)
        yield up
        yield inflight


    def _collect_cache(self) -> Iterator[Metric]:
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


def add_ns(slot: list[int], ns: int) -> None:
    """One observation into a time histogram's slot (``stage_time``, ``upstream_head``)."""
    slot[ns.bit_length()] += 1
    slot[NS_TOTAL] += ns


def _ns_buckets(slot: list[int]) -> tuple[list[tuple[str, float]], int]:
    """Cumulative (le, count) pairs in seconds from a time histogram's slot, and the count.
    Bit length b holds the values of 2**(b-1) to 2**b - 1 ns, so the bucket up to
    (2**b - 1) ns is everything through slot b."""
    buckets: list[tuple[str, float]] = []
    running, b = sum(slot[:EXPORTED_BITS.start]), EXPORTED_BITS.start
    for b in EXPORTED_BITS:
        running += slot[b]
        buckets.append((str(((1 << b) - 1) / 1e9), running))
    running += sum(slot[b + 1:NS_SLOTS])
    buckets.append(("+Inf", running))
    return buckets, running
