"""Run ``tokenward serve`` with only some pipeline stages registered, or with a part
switched off to price it (bench use only; nothing here changes the installed gateway).

    BENCH_STAGES=edge python bench/gateway_launcher.py serve --config F --port 0
    BENCH_WITHOUT=watch,gc python bench/gateway_launcher.py serve --config F --port 0

BENCH_STAGES: the foundation benchmark of issue 2 is "edge + forward + decision record";
while other issues add stages to the same tree, this drops the other slots from
``stages.order.STAGES`` in this process only, before the gateway builds its stages. The
decision records' ``stages_us`` keys show what ran either way.

BENCH_WITHOUT (experiments, comma-separated): ``watch`` (no per-request disconnect-watcher
task), ``record`` (no decision record and metrics update), ``proxyheaders`` (uvicorn
without its proxy-headers middleware), ``gcfreeze`` (gc.freeze() after start-up), ``gc``
(gc.freeze() and a generation-0 threshold of 50,000). BENCH_DIAG=1: print garbage-collection pauses and event-loop
lateness to stderr at exit. BENCH_GC=g0,g1,g2: garbage-collector thresholds after start-up. Without these variables it is exactly ``python -m tokenward``.
"""

import gc
import os
import sys

from tokenward.cli.main import main


def keep_only_stages(wanted: str) -> None:
    keep = {slot.strip() for slot in wanted.split(",") if slot.strip()}
    try:
        from tokenward.stages import order
    except ImportError:   # a tree from before stages/order.py (bench/ab.py against an old commit)
        return _keep_only_factories(keep)
    try:
        order.STAGES = order.only(keep)   # read by Services when it builds the stages
    except KeyError as exc:
        sys.exit(f"BENCH_STAGES: {exc}")


def _keep_only_factories(keep: set[str]) -> None:
    from tokenward.pipeline import order as old_order   # the string table before issue 28

    unknown = keep - set(old_order.STAGE_ORDER)
    if unknown:
        sys.exit(f"BENCH_STAGES names unknown slots: {sorted(unknown)}")
    for slot in list(old_order.STAGE_FACTORIES):
        if slot not in keep:
            del old_order.STAGE_FACTORIES[slot]


def switch_off(parts: set[str]) -> None:
    if "watch" in parts:
        try:
            from tokenward.pipeline.disconnect import DisconnectWatch
        except ImportError:   # before issue 28 it lived in http/
            from tokenward.http.disconnect import DisconnectWatch

        DisconnectWatch.arm = lambda self: None
        DisconnectWatch.disarm = lambda self: None
    if "record" in parts:
        from tokenward.app import Gateway

        Gateway._finish = lambda self, ctx: None
    if "proxyheaders" in parts:
        import uvicorn

        original = uvicorn.Config.__init__

        def no_proxy_headers(self, *args, **kwargs):
            kwargs["proxy_headers"] = False
            original(self, *args, **kwargs)

        uvicorn.Config.__init__ = no_proxy_headers
    if "gc" in parts or "gcfreeze" in parts:
        from tokenward.app import Gateway

        startup = Gateway.startup
        raise_threshold = "gc" in parts

        async def startup_then_freeze(self):
            await startup(self)
            gc.collect()
            gc.freeze()  # start-up objects are never collected: keep them out of every scan
            if raise_threshold:
                gc.set_threshold(50_000, 20, 100)

        Gateway.startup = startup_then_freeze


def set_gc_thresholds(spec: str) -> None:
    """BENCH_GC=g0,g1,g2: the garbage collector's thresholds after start-up (experiment)."""
    from tokenward.app import Gateway

    thresholds = tuple(int(part) for part in spec.split(","))
    startup = Gateway.startup

    async def startup_then_thresholds(self):
        await startup(self)
        gc.set_threshold(*thresholds)

    Gateway.startup = startup_then_thresholds


def diagnose() -> None:
    """BENCH_DIAG=1: time every garbage collection and the event loop's lateness, and print
    a summary line to stderr every 5 s (uvicorn re-raises SIGTERM, so there is no "at exit")."""
    import asyncio
    import time

    from tokenward.app import Gateway

    pauses: dict[int, list[float]] = {0: [], 1: [], 2: []}
    started: list[float] = [0.0]

    def on_gc(phase: str, info: dict) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
        else:
            pauses[info["generation"]].append(time.perf_counter() - started[0])

    gc.callbacks.append(on_gc)

    def report(lateness: list[float]) -> None:
        parts = [f"gen{gen} {len(t)}x max {max(t) * 1000:.1f} ms" for gen, t in pauses.items() if t]
        ordered = sorted(lateness)
        pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000  # noqa: E731
        print(f"BENCH_DIAG gc: {', '.join(parts) or 'none'}; loop lateness (5 ms timer) p50 {pick(0.5):.2f} "
              f"p99 {pick(0.99):.2f} max {ordered[-1] * 1000:.1f} ms", file=sys.stderr, flush=True)
        for times in pauses.values():
            times.clear()

    async def watch_loop() -> None:
        lateness: list[float] = []
        next_report = time.perf_counter() + 5
        while True:
            due = time.perf_counter() + 0.005
            await asyncio.sleep(0.005)
            now = time.perf_counter()
            lateness.append(now - due)
            if now >= next_report:
                report(lateness)
                lateness = []
                next_report = now + 5

    startup = Gateway.startup

    async def startup_and_watch(self):
        await startup(self)
        self._bench_lag_task = asyncio.get_running_loop().create_task(watch_loop())

    Gateway.startup = startup_and_watch


def trace_memory(path: str) -> None:
    """BENCH_TRACEMALLOC=FILE: trace allocations; SIGUSR2 writes the top live allocation
    sites (by line) to FILE, e.g. while streams are open (bench/idle_streams.py --trace)."""
    import signal
    import tracemalloc

    tracemalloc.start(1)

    def dump(signum, frame) -> None:
        stats = tracemalloc.take_snapshot().statistics("lineno")
        with open(path, "w") as out:
            for stat in stats[:60]:
                out.write(f"{stat.size / 1024:10.1f} KiB {stat.count:8d} {stat.traceback}\n")

    signal.signal(signal.SIGUSR2, dump)


if os.environ.get("BENCH_DIAG"):
    diagnose()
if os.environ.get("BENCH_TRACEMALLOC"):
    trace_memory(os.environ["BENCH_TRACEMALLOC"])
if os.environ.get("BENCH_STAGES") is not None:
    keep_only_stages(os.environ["BENCH_STAGES"])
if os.environ.get("BENCH_WITHOUT"):
    switch_off({part.strip() for part in os.environ["BENCH_WITHOUT"].split(",")})
if os.environ.get("BENCH_GC"):
    set_gc_thresholds(os.environ["BENCH_GC"])

sys.argv[0] = "tokenward"
main()
