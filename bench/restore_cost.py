"""What the placeholder escaping rule (pii/placeholders.py) costs against the rule before it,
side by side in one process: masking a prompt, restoring a whole answer, and restoring a
stream of its 35 16-character events (placeholders split across events, and the JSON braces of the text).

    python bench/restore_cost.py [--rev GIT_REV_OF_THE_OLD_RULE]

Prints microseconds per operation, best of 7 repeats (timeit), old and new.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import timeit
from pathlib import Path

import orjson

from tokenward.upstream.sse import SseEvent

REPO = Path(__file__).resolve().parents[1]
PROMPT = ("Please write to alice@example.com and cc bob@example.org about the {draft} and the JSON "
          '{"a": 1, "b": [1, 2]}; my template says {EMAIL_0}. ') * 4
SPANS_OF = ("alice@example.com", "bob@example.org")


def _old_module(rev: str):
    source = subprocess.run(["git", "-C", str(REPO), "show", f"{rev}:src/tokenward/pii/placeholders.py"],
                            capture_output=True, text=True, check=True).stdout
    spec = importlib.util.spec_from_loader("tokenward.pii._old_placeholders", loader=None)
    module = importlib.util.module_from_spec(spec)
    module.__package__ = "tokenward.pii"
    exec(compile(source, "old_placeholders.py", "exec"), module.__dict__)
    return module


def _spans(text: str) -> list[tuple[int, int, str]]:
    spans = []
    for value in SPANS_OF:
        start = text.find(value)
        while start != -1:
            spans.append((start, start + len(value), "EMAIL"))
            start = text.find(value, start + 1)
    return sorted(spans)


def _chunk(text: str | None, finish: str | None = None) -> SseEvent:
    delta = {"content": text} if text is not None else {}
    return SseEvent(b"data: " + orjson.dumps({"id": "x", "object": "chat.completion.chunk", "model": "m",
                                               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
                    + b"\n\n")


def _measure(module) -> dict[str, float]:
    spans = _spans(PROMPT)
    masker = module.Masker(True)
    sent = masker.mask(PROMPT, spans)
    body = orjson.dumps({"choices": [{"index": 0, "message": {"content": sent}}]})
    pieces = [sent[i:i + 16] for i in range(0, len(sent), 16)]
    events = [_chunk(p) for p in pieces] + [_chunk(None, "stop")]

    def mask() -> None:
        module.Masker(True).mask(PROMPT, spans)

    def whole() -> None:
        masker.restorer().whole(body)

    def stream() -> None:
        restorer = masker.restorer()
        for event in events:
            restorer.events([event])
        restorer.finish()

    out = {}
    for name, fn in (("mask_us", mask), ("whole_us", whole), ("stream_35_events_us", stream)):
        n = 200
        out[name] = round(min(timeit.repeat(fn, number=n, repeat=7)) / n * 1e6, 1)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rev", default="4029903^")
    args = parser.parse_args()
    from tokenward.pii import placeholders

    print(json.dumps({"old": _measure(_old_module(args.rev)), "new": _measure(placeholders),
                      "prompt_chars": len(PROMPT)}, indent=2))


if __name__ == "__main__":
    sys.exit(main())
