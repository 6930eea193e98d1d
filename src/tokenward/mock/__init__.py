"""A fake OpenAI-compatible backend for demos, tests and benchmarks.

Steer it per request with ``x-mock-*`` headers (see ``steering``); read what it saw
at ``GET /_mock/stats``.
"""

from .app import MockUpstream
from .server import run_mock, start_mock, stop_mock
from .steering import HEADER_NAMES, Steering, parse_steering

__all__ = [
    "HEADER_NAMES",
    "MockUpstream",
    "Steering",
    "parse_steering",
    "run_mock",
    "start_mock",
    "stop_mock",
]
