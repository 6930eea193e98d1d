"""``python -m tokenward.mock [--host H] [--port P]``: the mock without the full CLI."""

import argparse

from .server import run_mock

parser = argparse.ArgumentParser(prog="python -m tokenward.mock")
parser.add_argument("--host", default="127.0.0.1")
parser.add_argument("--port", type=int, default=9100)
args = parser.parse_args()
run_mock(args.host, args.port)
