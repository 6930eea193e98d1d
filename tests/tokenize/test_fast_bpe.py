"""The fastcount extra (tokenize/fast_bpe.py: bpe-openai) gives tiktoken's counts exactly:
on generated text (any Unicode, whitespace runs, long repeats, digits, contractions) and on
real text nobody here wrote (Python's standard library sources, the captured agents'
requests in tests/fixtures/agents). A reservation must never undercount, so one text
counted differently fails."""

from __future__ import annotations

import json
import sysconfig
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tokenward.tokenize import fast_bpe
from tokenward.tokenize.registry import build_counter
from tokenward.tokenize.tiktoken_files import load_encoding

if fast_bpe._load_bindings() is None:   # installed by scripts/test.sh (the test extra pins it)
    pytest.skip("bpe-openai is not installed", allow_module_level=True)


def test_the_package_itself_is_not_imported():
    """Its __init__ reads every vocabulary it ships (1.1 s, +60 MiB): the extension alone is loaded."""
    import sys

    build_counter("tiktoken:o200k_base")
    assert "bpe_openai" not in sys.modules

ENCODINGS = ("o200k_base", "cl100k_base")
AGENTS = Path(__file__).resolve().parents[1] / "fixtures" / "agents"


@pytest.fixture(scope="module")
def pairs():
    """encoding -> (tiktoken's count, the fast count)"""
    out = {}
    for name in ENCODINGS:
        encode = load_encoding(name).encode_ordinary
        fast = fast_bpe.exact_count(name, load_encoding(name))
        assert fast is not None, f"bpe-openai refused {name}: its probes disagree with tiktoken"
        out[name] = (lambda text, encode=encode: len(encode(text)), fast)
    return out


def _same(pairs, text: str) -> None:
    for name, (reference, fast) in pairs.items():
        assert fast(text) == reference(text), (name, text[:200])


_pieces = st.one_of(
    st.text(max_size=60),                                                   # any code point
    st.text(alphabet=" \t\n\r\x0b\x0c\u00a0\u2003\u3000\u200b", max_size=60),  # whitespace runs
    st.text(alphabet="0123456789.,-+ ", max_size=60),                       # digits
    st.sampled_from(["'s", "'S", "'ll", "'VE", "\u2019s", "\r\n", "  \n\n", "::", "->", "}}", "é", "日本語", "🙂",
                     "👨\u200d👩\u200d👧", "\u0301", "ǅ"]),
    st.tuples(st.characters(), st.integers(1, 3000)).map(lambda ch_n: ch_n[0] * ch_n[1]),  # long repeats
    st.tuples(st.text(min_size=1, max_size=4), st.integers(1, 400)).map(lambda t_n: t_n[0] * t_n[1]),
)


@given(st.lists(_pieces, max_size=16).map("".join))
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_generated_text(pairs, text):
    _same(pairs, text)


def _stdlib_sample(limit: int = 700_000) -> list[str]:
    """Every 25th module of the stdlib (sorted paths), whole, up to ``limit`` characters."""
    root = Path(sysconfig.get_paths()["stdlib"])
    files = [p for p in sorted(root.rglob("*.py")) if "site-packages" not in p.parts]
    out, size = [], 0
    for path in files[::25]:
        text = path.read_text(encoding="utf-8", errors="surrogateescape")
        out.append(text)
        size += len(text)
        if size > limit:
            break
    return out


def test_python_standard_library_sources(pairs):
    texts = _stdlib_sample()
    assert len(texts) > 20
    for text in texts:
        _same(pairs, text)


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    if isinstance(value, dict):
        return [s for item in value.values() for s in _strings(item)]
    return []


def test_captured_agents_requests(pairs):
    seen = 0
    for path in sorted(AGENTS.glob("*.json")):
        for request in json.loads(path.read_text())["requests"]:
            strings = _strings(request["body"])
            for text in [*strings, "\n".join(strings)]:
                _same(pairs, text)
                seen += 1
    assert seen > 50


def test_a_lone_surrogate_is_counted_by_tiktoken(pairs):
    text = "a JSON string may carry \ud800 alone"
    _same(pairs, text)


def test_a_binding_that_disagrees_on_a_probe_is_not_used(monkeypatch, caplog):
    _bindings = fast_bpe._load_bindings()

    class Off:
        def __init__(self, inner) -> None:
            self.inner = inner

        def count(self, text: str) -> int:
            return self.inner.count(text) - (1 if "🙂" in text else 0)   # one token short, on one probe

    real = _bindings.tokenizer_for_encoding
    monkeypatch.setattr(_bindings, "tokenizer_for_encoding", lambda name: Off(real(name)))
    monkeypatch.setattr(fast_bpe, "_load_bindings", lambda: _bindings)
    assert fast_bpe.exact_count("o200k_base", load_encoding("o200k_base")) is None
    assert "differently from tiktoken" in caplog.text
    assert build_counter("tiktoken:o200k_base").counted_by == "tiktoken"


def test_without_the_package_tiktoken_counts(monkeypatch):
    import importlib.util

    real_find = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "bpe_openai" else real_find(name, *a))
    counter = build_counter("tiktoken:cl100k_base")
    assert counter.counted_by == "tiktoken" and counter.count("hello world") == 2


def test_the_registry_counts_with_it_where_installed():
    counter = build_counter("tiktoken:o200k_base")
    assert counter.counted_by == "bpe-openai"
    assert counter.count("hello world") == 2
