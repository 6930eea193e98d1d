"""The route label and the decision record's route, old (the raw path) against new (the template;
observe/routes.py), side by side in one process: ns per call of GatewayMetrics.observe and
build_record for a matched and an unmatched path. Needs two trees: OLD and NEW, copies of src/
with the old and new observe/ (paths below). One-off measurement behind docs/benchmarks.md."""
import importlib.util, timeit, types, sys
from tokenward.reconcile.usage import Usage
def load(path, name):
    src = open(path).read()
    spec = importlib.util.spec_from_loader(name, loader=None)
    m = importlib.util.module_from_spec(spec); m.__package__ = "tokenward.observe"
    exec(compile(src, path, "exec"), m.__dict__); return m
old_m = load("/tmp/twb/src/tokenward/observe/metrics.py", "tokenward.observe._old_metrics")
new_m = load("/tmp/twn/src/tokenward/observe/metrics.py", "tokenward.observe._new_metrics")
old_d = load("/tmp/twb/src/tokenward/observe/decision_log.py", "tokenward.observe._old_dl")
new_d = load("/tmp/twn/src/tokenward/observe/decision_log.py", "tokenward.observe._new_dl")
def ctx(path, matched):
    return types.SimpleNamespace(route=types.SimpleNamespace(path=path) if matched else None, path=path,
        principal=types.SimpleNamespace(tenant="acme", key_id="k1"), deciding_stage="forward", reason=None,
        timings=[("edge", 1000), ("identity", 2000)], usage=Usage(10, 5, "reported"), request_id="r1", method="POST",
        lifecycle=types.SimpleNamespace(state=types.SimpleNamespace(value="done")), status=200, model="m", stream=False,
        upstream_status=200, started_ns=0, notes=None, answered_by=None, screening=None)
for label, c in (("matched", ctx("/v1/chat/completions", True)), ("unmatched", ctx("/v1/path.x@y.org/x", False))):
    for name, obs, rec in (("old", old_m.GatewayMetrics().observe, old_d.build_record), ("new", new_m.GatewayMetrics().observe, new_d.build_record)):
        t1 = min(timeit.repeat(lambda: obs(c), number=20000, repeat=7)) / 20000 * 1e9
        t2 = min(timeit.repeat(lambda: rec(c, 1000), number=20000, repeat=7)) / 20000 * 1e9
        print(label, name, f"observe {t1:.0f} ns, build_record {t2:.0f} ns")
