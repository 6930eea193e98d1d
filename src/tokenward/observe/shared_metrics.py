"""Several workers, one ``/metrics``: the worker a scrape reaches answers for all of them.

With ``tokenward serve --workers N`` the kernel hands each connection to one worker
(SO_REUSEPORT) and each worker counts in its own memory, so a scrape answered from one
worker's numbers alone would show Prometheus another process's counters each time, which
it reads as resets. Instead the workers share a directory the parent makes (and removes):

- each worker writes its exposition there as ``<pid>.prom`` (written whole, then renamed
  into place) when asked, and listens for the asking on a Unix datagram socket
  ``<pid>.sock`` beside it (a socket, not a signal: a dead worker's pid may belong to
  another process by now; its socket only refuses);
- the worker a scrape reaches writes its own file, asks every other live worker for a fresh
  one, waits for them (at most ``WAIT_S``; a worker that does not answer in time counts
  with its last file), and answers the sum.

A worker's file only ever moves forward and the answering worker writes its own first, so
no worker's share of a counter goes back between two scrapes, whichever worker answers
each. A worker that died keeps its last file: what it counted happened. Counters and
histograms are summed, and so are the gauges of one process's state (its open streams,
its memory cache's bytes, the reserved tokens in flight on each upstream target); a gauge of
shared state takes the largest value (the controls in force: every worker reads the same),
and the budget store's ``up`` and an upstream target's the smallest (down if any worker's
breaker is open, or has ejected the target).
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

log = logging.getLogger("tokenward.metrics")

WAIT_S = 0.5
LARGEST = frozenset({"tokenward_controls_active"})
SMALLEST = frozenset({"tokenward_budget_store_up", "tokenward_upstream_target_up"})


class WorkerMetrics:
    """This worker's part in the shared directory."""

    def __init__(self, directory: str, registry: CollectorRegistry) -> None:
        self.dir = directory
        self.registry = registry
        self.pid = 0             # the worker's, once it starts (this is made before the fork)
        self._transport: Any = None

    @property
    def started(self) -> bool:
        return self._transport is not None

    def _path(self, pid: int, suffix: str) -> str:
        return os.path.join(self.dir, f"{pid}{suffix}")

    async def start(self) -> None:
        """Listen for the other workers' asking, and write a first snapshot."""
        loop = asyncio.get_running_loop()
        self.pid = os.getpid()
        path = self._path(self.pid, ".sock")
        if os.path.exists(path):
            os.unlink(path)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.bind(path)
        self._transport, _ = await loop.create_datagram_endpoint(lambda: _Asked(self), sock=sock)
        self.snapshot()

    def snapshot(self) -> None:
        """This worker's exposition, written whole and renamed into place."""
        text = generate_latest(self.registry)
        partial = self._path(self.pid, ".partial")
        with open(partial, "wb") as out:
            out.write(text)
        os.replace(partial, self._path(self.pid, ".prom"))

    async def exposition(self) -> bytes:
        """Every worker's numbers, summed, in Prometheus' text format."""
        return render(await self.families())

    async def families(self) -> list[Metric]:
        """Every worker's numbers, summed: this worker's fresh, the others' as fresh as they
        answer within WAIT_S."""
        try:
            self.snapshot()
        except OSError as exc:   # the directory is gone (the parent is stopping): this worker's own
            log.warning("metrics: cannot write this worker's snapshot (%s); answering with its own numbers", exc)
            return list(self.registry.collect())
        asked: dict[int, tuple[int, int]] = {}
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as out:
            out.setblocking(False)
            for pid in self._peers():
                before = self._stamp(pid)
                try:
                    out.sendto(b"snapshot", self._path(pid, ".sock"))
                except OSError:      # gone (refused, no socket): its last file stands
                    continue
                asked[pid] = before
        deadline = time.monotonic() + WAIT_S
        while asked and time.monotonic() < deadline:
            await asyncio.sleep(0.002)
            asked = {pid: stamp for pid, stamp in asked.items() if self._stamp(pid) == stamp}
        if asked:
            log.warning("metrics: worker(s) %s did not answer within %.1f s; their last numbers are used",
                        sorted(asked), WAIT_S)
        texts = []
        for pid in [self.pid, *self._peers()]:
            try:
                with open(self._path(pid, ".prom"), "rb") as f:
                    texts.append(f.read().decode())
            except OSError:
                continue
        return merged(texts)

    def _peers(self) -> list[int]:
        pids: list[int] = []
        try:
            names = os.listdir(self.dir)
        except OSError:
            return pids
        for name in names:
            stem, _, suffix = name.partition(".")
            if suffix == "prom" and stem.isdigit() and int(stem) != self.pid:
                pids.append(int(stem))
        return sorted(pids)

    def _stamp(self, pid: int) -> tuple[int, int]:
        """What changes when a worker writes its file anew (a rename makes a new inode)."""
        try:
            st = os.stat(self._path(pid, ".prom"))
        except OSError:
            return (0, 0)
        return (st.st_ino, st.st_mtime_ns)


class _Asked(asyncio.DatagramProtocol):
    def __init__(self, metrics: WorkerMetrics) -> None:
        self.metrics = metrics

    def datagram_received(self, data: bytes, addr: Any) -> None:
        try:
            self.metrics.snapshot()
        except OSError as exc:   # the directory went away (the parent is stopping)
            log.warning("metrics: cannot write this worker's snapshot: %s", exc)


def merge(texts: list[str]) -> bytes:
    """Expositions of the same registry in several processes, as one exposition."""
    return render(merged(texts))


def render(families: list[Metric]) -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Fixed(families))
    return generate_latest(registry)


def merged(texts: list[str]) -> list[Metric]:
    """Expositions of the same registry in several processes, as one: each sample summed over
    them (LARGEST and SMALLEST excepted), families and samples in first-seen order."""
    families: dict[str, Metric] = {}
    # family -> (sample name, its labels sorted) -> [its labels as first seen, value]
    values: dict[str, dict[tuple[str, tuple[tuple[str, str], ...]], list[Any]]] = {}
    for text in texts:
        for family in text_string_to_metric_families(text):
            merged = families.get(family.name)
            if merged is None:
                merged = families[family.name] = Metric(family.name, family.documentation, family.type)
                values[family.name] = {}
            into = values[family.name]
            pick = max if family.name in LARGEST else min if family.name in SMALLEST else None
            for sample in family.samples:
                key = (sample.name, tuple(sorted(sample.labels.items())))
                seen = into.get(key)
                if seen is None:
                    into[key] = [sample.labels, sample.value]
                else:
                    seen[1] = pick(seen[1], sample.value) if pick is not None else seen[1] + sample.value
    for name, family in families.items():
        for (sample_name, _), (labels, value) in values[name].items():
            family.add_sample(sample_name, labels, value)
    return list(families.values())


class _Fixed:
    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> list[Metric]:
        return self.families
