"""Normalization: NFKC, hidden characters stripped (counted) or refused, idempotent."""

from __future__ import annotations

import re
import sys
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenward.errors import Reason, Refusal
from tokenward.validation.normalize import _HIDDEN, _may_hide, HIDDEN_CLASS, Normalizer, normal_form

HIDDEN_CHARS = [chr(c) for c in range(sys.maxunicode + 1) if _HIDDEN.fullmatch(chr(c))]
# Text mixing ordinary characters with hidden ones, compatibility forms and combining marks.
texts = st.text(alphabet=st.one_of(
    st.characters(codec="utf-8"),
    st.sampled_from(HIDDEN_CHARS),
    st.sampled_from(["ﬁ", "ｆ", "²", "Ⅸ", "\u0301", "\u0308", "e", "ℌ", "㍿", "\u1100", "\u1161"]),
))


@given(texts)
@settings(max_examples=500, deadline=None)
def test_normalization_is_idempotent(text):
    once = normal_form(text)
    assert normal_form(once) == once
    assert _HIDDEN.search(once) is None
    assert unicodedata.is_normalized("NFKC", once)


@given(texts)
@settings(max_examples=300, deadline=None)
def test_normalizer_agrees_with_the_pure_function(text):
    norm = Normalizer(refuse_hidden=False)
    assert norm.text(text, "p") == normal_form(text)
    assert norm.hidden == len(_HIDDEN.findall(text))


def test_nfkc_never_produces_a_hidden_character():
    produced = [hex(c) for c in range(sys.maxunicode + 1)
                if not 0xD800 <= c <= 0xDFFF and _HIDDEN.search(unicodedata.normalize("NFKC", chr(c)))
                and not _HIDDEN.search(chr(c))]
    assert produced == []


def test_prefilter_never_misses_a_hidden_character():
    assert all(_may_hide(f"é{char}x") for char in HIDDEN_CHARS)


def test_hidden_class_covers_the_documented_ranges():
    for char in ("\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u202e", "\u2066", "\u2069", "\u200e",
                 "\u061c", "\U000e0001", "\U000e0041", "\U000e007f", "\U000e0100", "\u00ad", "\u180e"):
        assert re.fullmatch(f"[{HIDDEN_CLASS}]", char), hex(ord(char))
    for char in ("a", " ", "\u00a0", "é", "\u0301", "😀", "\U000e0080"):
        assert not _HIDDEN.search(char), hex(ord(char))


def test_strip_counts_and_nfkc():
    norm = Normalizer(refuse_hidden=False)
    assert norm.text("ﬁle ｆｕｌｌ x²", "p") == "file full x2"
    assert norm.text("e\u200b\u0301", "p") == "é"  # the stripped character let the accent compose
    assert norm.text("plain", "p") == "plain"
    assert (norm.hidden, norm.changed) == (1, 2)


def test_refuse_names_the_field():
    norm = Normalizer(refuse_hidden=True)
    assert norm.text("café ｆ", "p") == "café f"
    with pytest.raises(Refusal) as info:
        norm.text("tag\U000e0041", "messages[2].content")
    assert (info.value.reason, info.value.param) == (Reason.hidden_characters, "messages[2].content")
