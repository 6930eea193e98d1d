"""Where the gateway's memory goes under mixed traffic: tracemalloc snapshots of a real
``tokenward serve`` after 30,000 and after 90,000 mixed requests (bench/cardinality_soak.py's
mix), and the allocation sites that grew between them.

    python bench/mixed_tracemalloc.py

The gateway is started with bench/tracemalloc_hook/ on its PYTHONPATH: a ``sitecustomize``
that starts tracemalloc (4 frames) and dumps a snapshot on SIGUSR2; nothing in the project
changes. tracemalloc makes the gateway slower and larger: compare the two snapshots, not
RSS with other runs. Output: bench/results/2026-12-03/mixed_tracemalloc.txt.
"""
import asyncio, os, signal, sys, tempfile, time, glob, tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import yaml
from harness import Procs
from overhead import probe, start_backend, start_gateway, start_redis, write_config
import cardinality_soak as cs
os.environ["TW_TRACE"] = "/tmp/twtrace/snap"
os.environ["PYTHONPATH"] = str(Path(__file__).resolve().parent / "tracemalloc_hook") + (":" + os.environ["PYTHONPATH"] if os.environ.get("PYTHONPATH") else "")
os.makedirs("/tmp/twtrace", exist_ok=True)
for f in glob.glob("/tmp/twtrace/snap.*"): os.unlink(f)
with tempfile.TemporaryDirectory() as name, Procs(Path(name), 1800) as procs:
    tmp = Path(name)
    _, backend_url = start_backend(procs, 1000)
    store_url = start_redis(procs, tmp)
    config = write_config("full", tmp, backend_url, store_url)
    raw = yaml.safe_load(config.read_text()); raw["server"]["expose_metrics"] = True; raw["store"]["timeout_ms"] = 1000
    raw["logging"]["decisions"] = "off"; config.write_text(yaml.safe_dump(raw, sort_keys=False))
    gw, url = start_gateway(procs, config, None, None)
    key = probe(url, None, config, tmp)
    host, port = url.removeprefix("http://").split(":"); port = int(port)
    async def run(n, start):
        return await cs._drive(host, port, 32, cs._mixed_request(host, port, key), n, start)
    asyncio.run(run(30000, 0)); time.sleep(1)
    os.kill(gw.pid, signal.SIGUSR2); time.sleep(5)
    print("rss", cs._rss_kib(gw.pid), flush=True)
    asyncio.run(run(60000, 30000)); time.sleep(1)
    os.kill(gw.pid, signal.SIGUSR2); time.sleep(5)
    print("rss", cs._rss_kib(gw.pid), flush=True)
snaps = sorted(glob.glob("/tmp/twtrace/snap.*"))
a, b = (tracemalloc.Snapshot.load(s) for s in snaps[:2])
print("traced total", sum(s.size for s in a.statistics("filename")), sum(s.size for s in b.statistics("filename")))
for stat in b.compare_to(a, "traceback")[:12]:
    print(stat.size_diff, stat.count_diff, "\n   ", "\n    ".join(stat.traceback.format()[-8:]))
