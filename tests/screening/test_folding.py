"""Folding's offsets (screening/folding.py): the sparse map agrees with mapping every
character one by one, whatever hidden, expanding or case-changing characters the text
holds."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tokenward.screening.folding import DROP, FOLD, NONWORD, fold
from tokenward.screening.injection import _tokens

ODD = ["\u200d", "\u200b", "\u00ad", "\x00", "ß", "ẞ", "ﬁ", "ﬀ", "…", "é", "e\u0301", "\u0301", "İ", "Σ", "ǅ",
       "Ⅻ", "ŉ", "㎞", "Ａ", "😀", "\U000e0041", "\U000e007f", "ı", "\ud800", "\udfff", "こ", "ジ", "—"]


def dense(text: str) -> tuple[str, list[int] | None]:
    """The map as one entry per folded character (what fold() did before it went sparse)."""
    norm = "".join(FOLD[ord(c)] for c in text)
    if len(norm) == len(text) and DROP not in norm:
        return norm, None
    out, idx = [], []
    for i, c in enumerate(text):
        f = FOLD[ord(c)].replace(DROP, "")
        out.append(f)
        idx += [i] * len(f)
    return "".join(out), idx + [len(text)]


@settings(max_examples=3000, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(ODD), st.sampled_from(list("aB z9@$.,!")), st.characters()),
                max_size=40).map("".join))
def test_the_sparse_map_is_the_per_character_map(text):
    norm, offsets = fold(text)
    expected, idx = dense(text)
    assert norm == expected
    if idx is None:
        assert offsets is None
    else:
        assert offsets is not None and [offsets[p] for p in range(len(norm) + 1)] == idx


@settings(max_examples=2000, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(ODD), st.sampled_from(list("aB z9@$.,!_-")), st.characters()),
                max_size=60).map("".join))
def test_tokens_blank_exactly_what_is_not_a_word_character(text):
    """The tokenizer maps a mostly-ASCII text's ASCII as bytes and its few other characters
    one by one; it must agree with the regex it replaces."""
    norm = fold(text)[0]
    assert _tokens(norm) == NONWORD.sub(" ", norm)
