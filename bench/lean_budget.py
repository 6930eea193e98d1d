"""The lean budget reference of issue 5's "for scale" line: a pass-through proxy that counts
the prompt with tiktoken, reserves before forwarding and settles after (two EVALSHA calls,
through the gateway's own RESP client and Lua scripts), and writes a decision record. None
of the gateway's stages, runner, headers or bookkeeping: what is left is the floor of
"count + reserve + forward + settle + record" on this machine.

Used by candidate_proxy.py as ``--client lean-budget`` with BENCH_STORE_URL and
BENCH_RECORD_PATH in the environment, and by ``overhead.py --pipeline full`` as its reference.
"""

from __future__ import annotations

import itertools
import os
import time
from pathlib import Path

import msgspec
import yaml

from candidate_proxy import LeanClient
from tokenward.budget import policy
from tokenward.budget.store import ReserveCall, SettleCall

BENCH_DIR = Path(__file__).resolve().parent


class _Usage(msgspec.Struct):
    prompt_tokens: int = 0
    completion_tokens: int = 0


class _Answer(msgspec.Struct):
    usage: _Usage | None = None


class LeanBudgetClient(LeanClient):
    def __init__(self, base: str) -> None:
        from tokenward.budget.limits import Budgets
        from tokenward.budget.redis import RedisStore
        from tokenward.config.loader import parse_config
        from tokenward.tokenize.tiktoken_files import load_encoding

        super().__init__(base)
        raw = yaml.safe_load((BENCH_DIR / "full.yaml").read_text())
        config = parse_config(yaml.safe_dump(raw), environ={})
        self.plan = config.plans["bench"]
        self.budgets = Budgets(config)
        self.store = RedisStore(os.environ["BENCH_STORE_URL"], 0.05)
        self.encoding = load_encoding("cl100k_base")   # tiktoken, from local files (no download)
        self.decode = msgspec.json.Decoder().decode
        self.answer = msgspec.json.Decoder(_Answer).decode
        self.record = msgspec.json.Encoder().encode_into
        self.buffer = bytearray()
        self.log = open(os.environ["BENCH_RECORD_PATH"], "ab")  # noqa: SIM115 - lives as long as the proxy
        self.ids = itertools.count(1)

    async def post(self, path: str, body: bytes) -> tuple[int, bytes, bytes]:
        request = self.decode(body)
        prompt = sum(len(self.encoding.encode(m["content"])) for m in request["messages"])
        tokens = prompt + request.get("max_tokens", self.plan.max_output_tokens)
        now_ms = int(time.time() * 1000)
        budget = self.budgets.tenant("bench", self.plan, None, now_ms)
        layout, rid = budget.layout, "lean%x" % next(self.ids)
        [outcome] = await self.store.reserve([ReserveCall(layout, rid, now_ms, now_ms + 30_000,
                                                          budget.amounts(tokens, 0))])
        if not outcome.ok:
            return 429, b"application/json", b'{"error":{"code":"token_budget"}}'
        status, ctype, data = await super().post(path, body)
        usage = self.answer(data).usage or _Usage()
        actual = usage.prompt_tokens + usage.completion_tokens
        await self.store.settle([SettleCall(layout.leases_key, rid, layout.record_key(rid), layout.keys,
                                            int(time.time() * 1000), actual, 0, policy.SETTLE, layout)])
        buffer = self.buffer
        self.record({"id": rid, "status": status, "reserved": tokens, "actual": actual}, buffer, len(buffer))
        buffer += b"\n"
        if len(buffer) > 65536:
            self.log.write(buffer)
            self.log.flush()
            buffer.clear()
        return status, ctype, data
