"""The config's glob patterns (config/globs.py): matching, and the overlap decision that
model aliases rest on, checked against brute force."""

from __future__ import annotations

import itertools
import re

import pytest
from hypothesis import given, settings, strategies as st

from tokenward.config import parse_config
from tokenward.config.aliases import ModelAliases
from tokenward.config.globs import GlobSet, glob_set, matches, overlap, pattern_error

# a small alphabet makes collisions likely; "c" stands for any character neither pattern names
patterns = st.text(alphabet="ab*?", min_size=1, max_size=3)


def _every_name(longest: int) -> list[str]:
    return ["".join(p) for n in range(longest + 1) for p in itertools.product("abc", repeat=n)]


NAMES = _every_name(6)


@settings(max_examples=300, deadline=None)
@given(patterns, patterns)
def test_overlap_is_exact_against_brute_force(first, second):
    """A common name, when one exists, is at most as long as both patterns' literals
    together: every name up to 6 characters over {a, b, c} decides it for these patterns."""
    witness = overlap(first, second)
    brute = next((n for n in NAMES if matches(first, n) and matches(second, n)), None)
    assert (witness is None) == (brute is None), (first, second, witness, brute)
    if witness is not None:
        assert matches(first, witness) and matches(second, witness)
    assert (overlap(second, first) is None) == (witness is None)   # symmetric


@settings(max_examples=200, deadline=None)
@given(st.lists(patterns, min_size=1, max_size=4), st.text(alphabet="abc*?.", max_size=6))
def test_a_glob_set_admits_what_one_of_its_patterns_matches(listed, name):
    assert (name in GlobSet(listed)) == any(matches(p, name) for p in listed)


@pytest.mark.parametrize("pattern,name,expected", [
    ("*", "Read", True), ("*", "", True), ("mcp__*", "mcp__github__create_issue", True),
    ("mcp__*", "mcp_github", False), ("multi_agent_v1.*", "multi_agent_v1.spawn_agent", True),
    ("multi_agent_v1.*", "multi_agent_v1", False), ("claude-?-x", "claude-3-x", True),
    ("claude-?-x", "claude-37-x", False), ("Read", "read", False),   # case counts
    ("a.b", "aXb", False),   # a dot is a dot, not a regex
    ("gpt-5*", "gpt-5.1-codex", True), ("gpt-5*", "gpt-4o", False),
])
def test_matching(pattern, name, expected):
    assert matches(pattern, name) is expected
    assert (name in glob_set((pattern,))) is expected


@pytest.mark.parametrize("pattern,problem", [
    ("", "an empty pattern matches nothing"),
    ("a[bc]", "'[' is not supported"), ("{a,b}", "'{' is not supported"), ("a\\*", "'\\\\' is not supported"),
    ("Read File", "whitespace or a control character"), ("a\tb", "whitespace or a control character"),
    ("x" * 257, "at most 256 characters"),
])
def test_malformed_patterns_say_why(pattern, problem):
    assert problem in (pattern_error(pattern) or "")


def test_a_name_matching_no_pattern_is_not_admitted_and_regex_syntax_is_literal():
    tools = GlobSet(["search", "mcp__*"])
    assert "search" in tools and "mcp__x" in tools
    assert "searc" not in tools and "(search)" not in tools and 42 not in tools
    assert not GlobSet([]) and "anything" not in GlobSet([])
    assert re.escape("x") == "x"   # the stdlib's escape is what makes ``.`` literal above


ALIASES = """
upstreams: {mock: {base_url: "http://127.0.0.1:9/v1"}}
models:
  big: {upstream: mock, aliases: ["claude-opus-*", "claude-sonnet-*", "opus"]}
  small: {upstream: mock, aliases: ["claude-haiku-*", "gpt-5*"]}
  claude-opus-legacy: {upstream: mock}
"""


def test_an_exact_name_wins_then_the_one_alias_that_matches():
    aliases = ModelAliases(parse_config(ALIASES, environ={}))
    assert aliases.resolve("claude-opus-legacy") == "claude-opus-legacy"   # exact, though claude-opus-* matches
    assert aliases.resolve("claude-opus-4-8") == "big"
    assert aliases.match("claude-sonnet-5") == ("big", "claude-sonnet-*")
    assert aliases.match("opus") == ("big", "opus")
    assert aliases.resolve("gpt-5.1-codex") == "small" and aliases.resolve("claude-haiku-4-5") == "small"
    assert aliases.resolve("gpt-4o") is None and aliases.resolve("claude") is None
    assert aliases.listed("big") == ["opus"] and aliases.listed("small") == []


def test_one_models_own_aliases_may_overlap():
    cfg = parse_config(ALIASES.replace('"opus"]', '"opus", "claude-*"]').replace('"claude-haiku-*", ', ""),
                       environ={})
    aliases = ModelAliases(cfg)
    assert aliases.resolve("claude-opus-4") == "big" and aliases.resolve("claude-haiku-4") == "big"
