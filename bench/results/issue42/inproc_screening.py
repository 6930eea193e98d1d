"""In-process gateway, screening policy standard on a 2 KB prose prompt, N requests (for callgrind:
run at two N and divide the difference). Usage: python inproc_screening.py SRC TOKENIZER POLICY N x"""
import sys, asyncio, time, tempfile, gc
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from tokenward.app import Gateway
from tokenward.config.loader import parse_config
from tokenward.mock.app import MockUpstream
from tokenward.upstream.memory import MemoryTransport
CONFIG = """
upstreams:
  mock: {{base_url: "http://backend.invalid/v1", read_timeout_s: 10}}
models:
  bench-chat: {{upstream: mock, tokenizer: "{tok}", context_window: 131072}}
screening:
  policies:
    standard:
      injection: {{detector: heuristic}}
      pii: {{detector: patterns, mode: tokenize}}
plans:
  team: {{models: [bench-chat], max_context_tokens: 131072, max_output_tokens: 16, tokens_per_minute: 1000000000, requests_per_minute: 100000000, max_request_work: 100000000, screening: {scr}}}
tenants:
  bench: {{plan: team}}
keystore: {{url: "sqlite:///{tmp}/keys.db", cache_ttl_s: 3600.0, last_used_flush_s: 3600.0}}
logging: {{decisions: "off"}}
"""
async def main():
    tmp = tempfile.mkdtemp()
    import itertools
    ticks = itertools.count(1_800_000_000_000)
    gw = Gateway(parse_config(CONFIG.format(tmp=tmp, tok=sys.argv[2], scr=sys.argv[3]), environ={}), transports={"mock": MemoryTransport(MockUpstream())}, clock=lambda: next(ticks) / 1000)
    await gw.startup()
    key = (await gw.services.keys.create("bench"))[0]
    prose = "The quarterly report covers revenue, operating costs and the hiring plan for the next quarters. "
    prompt = (prose * 30)[:2048]
    body = ('{"model":"bench-chat","max_tokens":16,"messages":[{"role":"user","content":"%s"}]}' % prompt).encode()
    scope = {"type": "http", "method": "POST", "path": "/v1/chat/completions", "query_string": b"",
             "headers": [(b"authorization", f"Bearer {key}".encode()), (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]}
    async def one():
        given = False
        async def receive():
            nonlocal given
            if not given:
                given = True
                return {"type": "http.request", "body": body, "more_body": False}
            await asyncio.Event().wait()
        st = []
        async def send(m):
            if m["type"] == "http.response.start": st.append(m["status"])
        await gw(scope, receive, send)
        assert st == [200], st
    for _ in range(int(sys.argv[4])): await one()
    if len(sys.argv) > 5:
        await gw.shutdown(); return
    best = []
    for _ in range(5):
        gc.collect()
        t0 = time.thread_time_ns()
        for _ in range(1000): await one()
        best.append((time.thread_time_ns() - t0) / 1000 / 1000)
    print(sys.argv[1], sys.argv[2], sys.argv[3], "us/req min", round(min(best), 1), "median", round(sorted(best)[2], 1))
    await gw.shutdown()
asyncio.run(main())
