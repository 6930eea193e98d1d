"""``python -m tokenward.mock [--host H] [--port P] [--capacity-tokens-per-s N]
[--prefill-tokens-per-s P] [--kv-cache-tokens K]``: the mock without the full CLI."""

import argparse

from .server import run_mock

parser = argparse.ArgumentParser(prog="python -m tokenward.mock")
parser.add_argument("--host", default="127.0.0.1")
parser.add_argument("--port", type=int, default=9100)
parser.add_argument("--capacity-tokens-per-s", type=float, default=None)
parser.add_argument("--prefill-tokens-per-s", type=float, default=0.0)
parser.add_argument("--kv-cache-tokens", type=int, default=0)
args = parser.parse_args()
run_mock(args.host, args.port, args.capacity_tokens_per_s, args.prefill_tokens_per_s, args.kv_cache_tokens)
