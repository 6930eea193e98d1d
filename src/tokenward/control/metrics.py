"""Metrics of enforcement: abuse signals and actions, operator controls, the budget's
reserved-to-actual drift, and whether the budget store answers. Counted in plain dicts
(observe/metrics.py says why) and turned into families on scrape.

One per gateway (services.py), registered with its metrics exposition (observe/telemetry.py);
the parts it reports on attach themselves to it as they are built.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Iterator, Protocol

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from msgspec import UNSET

from ..budget.guard import StoreHealth
from ..pipeline.results import BudgetRecord
from ..config.abuse import ACTIONS
from .model import KINDS
from .runtime import ControlRuntime


class _DroppedCount(Protocol):
    @property
    def dropped(self) -> int: ...


class SignalIntake(Protocol):
    """What the metrics read of the abuse engine (abuse/engine.py, a layer above): its
    observer's count of decisions dropped by a full buffer."""

    @property
    def observer(self) -> _DroppedCount: ...


class EnforcementMetrics:
    def __init__(self) -> None:
        # (action, rule, subject, shadow, automatic) -> count
        self.actions: dict[tuple[str, str, str, str, str], int] = defaultdict(int)
        self.exempted: dict[str, int] = defaultdict(int)          # rule -> proposals an exemption stopped
        self.controls: dict[tuple[str, str], int] = defaultdict(int)   # (operator action, tenant) -> count
        self.reserved: dict[str, int] = defaultdict(int)          # tenant -> tokens reserved
        self.settled: dict[str, int] = defaultdict(int)           # tenant -> tokens settled on usage
        self.settled_reserved: dict[str, int] = defaultdict(int)  # tenant -> what those had reserved
        self.observations = 0
        self.batches = 0
        self.batch_seconds = 0.0
        self.store_errors = 0
        self.runtime: ControlRuntime | None = None   # the controls in force, cancels done
        self.engine: SignalIntake | None = None      # abuse/engine.py: dropped observations
        self.budget_health: StoreHealth | None = None   # the shared budget store's (none: memory, up)

    def settle(self, tenant: str, record: BudgetRecord | None) -> None:
        """A request's budget record once released (the control stage): what was reserved
        and, when it settled on reported or counted usage, what it used."""
        if record is None or record.refused_by is not UNSET:
            return
        reserved = record.reserved
        self.reserved[tenant] += reserved
        actual = record.actual
        if isinstance(actual, int):
            self.settled[tenant] += actual
            self.settled_reserved[tenant] += reserved

    def collect(self) -> Iterator[Metric]:
        yield from self._collect_abuse()
        yield from self._collect_controls()
        yield from self._collect_budget()

    def _collect_abuse(self) -> Iterator[Metric]:
        actions = CounterMetricFamily("tokenward_abuse_actions", "Abuse actions taken (shadow: recorded only)",
                                      labels=["action", "rule", "subject", "shadow", "automatic"])
        for key, count in list(self.actions.items()):
            actions.add_metric(list(key), count)
        yield actions
        exempted = CounterMetricFamily("tokenward_abuse_exempted", "Proposed actions an exemption stopped",
                                       labels=["rule"])
        for rule, count in list(self.exempted.items()):
            exempted.add_metric([rule], count)
        yield exempted
        yield CounterMetricFamily("tokenward_abuse_observations", "Decisions fed to the abuse signals",
                                  value=self.observations)
        engine = self.engine
        yield CounterMetricFamily("tokenward_abuse_dropped", "Decisions dropped by a full signal buffer",
                                  value=engine.observer.dropped if engine is not None else 0)
        yield CounterMetricFamily("tokenward_abuse_batches", "Signal batches sent to the store", value=self.batches)
        yield CounterMetricFamily("tokenward_abuse_batch_seconds", "Time spent in signal batches",
                                  value=self.batch_seconds)
        yield CounterMetricFamily("tokenward_abuse_store_errors", "Signal batches the store did not take",
                                  value=self.store_errors)

    def _collect_controls(self) -> Iterator[Metric]:
        active = GaugeMetricFamily("tokenward_controls_active", "Controls in force (abuse actions, pauses, "
                                   "exemptions), by kind", labels=["kind", "shadow"])
        # every kind at zero from the start (a dashboard panel shows 0, not "No data")
        counts: dict[tuple[str, str], int] = {(kind, "false"): 0 for kind in sorted(KINDS)}
        counts.update({(kind, "true"): 0 for kind in ACTIONS})
        runtime = self.runtime
        if runtime is not None:
            now = runtime.now()
            for control in runtime.view.controls:
                if control.active_at(now):
                    key = (control.kind, "true" if control.shadow else "false")
                    counts[key] = counts.get(key, 0) + 1
        for key, value in counts.items():
            active.add_metric(list(key), value)
        yield active
        operator = CounterMetricFamily("tokenward_operator_actions", "Operator controls done through this replica",
                                       labels=["action", "tenant"])
        for key, value in list(self.controls.items()):
            operator.add_metric(list(key), value)
        yield operator
        yield CounterMetricFamily("tokenward_streams_cancelled", "Open requests ended by an operator's cancel",
                                  value=runtime.cancelled if runtime is not None else 0)

    def _collect_budget(self) -> Iterator[Metric]:
        reserved = CounterMetricFamily("tokenward_reserved_tokens", "Tokens reserved by admitted requests",
                                       labels=["tenant"])
        settled = CounterMetricFamily("tokenward_settled_tokens", "Tokens used, by requests settled on usage",
                                      labels=["tenant"])
        settled_reserved = CounterMetricFamily("tokenward_settled_reserved_tokens",
                                               "What the requests settled on usage had reserved", labels=["tenant"])
        for tenant, value in list(self.reserved.items()):
            reserved.add_metric([tenant], value)
        for tenant, value in list(self.settled.items()):
            settled.add_metric([tenant], value)
            settled_reserved.add_metric([tenant], self.settled_reserved[tenant])
        yield reserved
        yield settled
        yield settled_reserved
        health = self.budget_health
        up = 0 if health is not None and not health.up else 1
        yield GaugeMetricFamily("tokenward_budget_store_up", "1 while the shared budget store answers: its "
                                "last call (a request's, a settle's, /readyz's probe) succeeded; the memory "
                                "store is always up", value=up)

