"""Measures of admitted and refused work, for agent jobs and every request (docs/jobs.md).

Counted in plain dicts where admission decides (the admission stage, the job book) and
turned into metric families only on a scrape, like ``metrics.py``. What they answer:

- denied work: the worst-case tokens of requests the admission stage refused, and how
  many refusals were terminal (the client must not retry: spend caps, a request larger
  than any bucket, every job refusal) against retryable (``Retry-After``);
- queue delay: the gateway keeps no queue; the wait it imposes is the ``Retry-After`` it
  answers, a histogram per tenant;
- per agent job request: admitted, completed (the backend finished the work), ended
  otherwise, refused; and the tokens charged to jobs. Cost per completed task is
  ``job_spent_tokens / job_requests{outcome="completed"}``, retry amplification
  ``job_requests{outcome="admitted"} / job_requests{outcome="completed"}``.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Iterator, Mapping, TypeVar

from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily
from prometheus_client.metrics_core import Metric

RETRY_BUCKETS = (1, 2, 5, 10, 30, 60)
Labels = TypeVar("Labels", bound=tuple[str, ...])   # one family's label values


class WorkMetrics:
    def __init__(self) -> None:
        self.refused_tokens: dict[tuple[str, str], int] = defaultdict(int)    # (tenant, kind) -> tokens
        self.refusals: dict[tuple[str, str], int] = defaultdict(int)
        self.retry_after: dict[str, list[float]] = {}                         # tenant -> bucket counts + sum
        self.job_requests: dict[tuple[str, str], int] = defaultdict(int)      # (tenant, outcome)
        self.job_spent: dict[str, int] = defaultdict(int)
        self.jobs: dict[tuple[str, str], int] = defaultdict(int)              # (tenant, event)

    def refused(self, tenant: str, tokens: int, terminal: bool, retry_after: int | None, job: bool) -> None:
        kind = "terminal" if terminal else "retryable"
        self.refused_tokens[(tenant, kind)] += tokens
        self.refusals[(tenant, kind)] += 1
        if job:
            self.job_requests[(tenant, "refused_" + kind)] += 1
        if retry_after is not None:
            slot = self.retry_after.get(tenant)
            if slot is None:
                # a count per bucket, one for above the last, and the sum
                slot = self.retry_after[tenant] = [0.0] * (len(RETRY_BUCKETS) + 2)
            at = next((i for i, bound in enumerate(RETRY_BUCKETS) if retry_after <= bound), len(RETRY_BUCKETS))
            slot[at] += 1
            slot[-1] += retry_after

    def job_request(self, tenant: str, outcome: str, charged: int = 0) -> None:
        self.job_requests[(tenant, outcome)] += 1
        if charged:
            self.job_spent[tenant] += charged

    def job_event(self, tenant: str, event: str) -> None:
        self.jobs[(tenant, event)] += 1

    def collect(self) -> Iterator[Metric]:
        yield _counter("tokenward_refused_work_tokens", "Worst-case tokens of requests refused at admission",
                       ["tenant", "kind"], self.refused_tokens)
        yield _counter("tokenward_admission_refusals", "Admission refusals, terminal or retryable",
                       ["tenant", "kind"], self.refusals)
        delay = HistogramMetricFamily("tokenward_retry_after_seconds", "The wait a refusal asks for (Retry-After): "
                                      "the queueing the gateway imposes", labels=["tenant"])
        for tenant, slot in list(self.retry_after.items()):
            buckets, running = [], 0.0
            for bound, count in zip(RETRY_BUCKETS, slot):
                running += count
                buckets.append((str(bound), running))
            buckets.append(("+Inf", running + slot[len(RETRY_BUCKETS)]))
            delay.add_metric([tenant], buckets, slot[-1])
        yield delay
        yield _counter("tokenward_job_requests", "Requests in agent jobs by outcome", ["tenant", "outcome"],
                       self.job_requests)
        yield _counter("tokenward_job_spent_tokens", "Tokens charged to agent jobs", ["tenant"],
                       {(t,): v for t, v in list(self.job_spent.items())})
        yield _counter("tokenward_jobs", "Agent jobs created, cancelled, exhausted", ["tenant", "event"], self.jobs)


def _counter(name: str, doc: str, labels: list[str], values: Mapping[Labels, int]) -> CounterMetricFamily:
    family = CounterMetricFamily(name, doc, labels=labels)
    for key, value in list(values.items()):
        family.add_metric(list(key), value)
    return family
