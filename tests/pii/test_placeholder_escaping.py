"""One escaping rule for text that looks like a placeholder (pii/placeholders.py): what the
caller typed comes back exactly, in a whole answer and in a stream split anywhere, and a
stream is held back by a bounded tail only."""

from __future__ import annotations

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.pii.test_placeholders import chunk, stream_text
from tokenward.pii.placeholders import Masker

EMAILS = ("alice@example.com", "bob@ex.io")
TRICKY = ("{EMAIL_0}", "{{EMAIL_0}}", "{~EMAIL_0}", "{~~EMAIL_1}", "{" + "~" * 90 + "EMAIL_0}", "{EMAIL_",
          "{~", "~", "{", "}", "{{", "}}", "{PHONE_12}", "{EMAIL_1234567}", "{A_0}", "{EMAIL_0}}", "{{~EMAIL_0}")


def mask(pieces: list[tuple[str, bool]]) -> tuple[str, str, Masker]:
    """(what the caller sent, what the backend sees, the map); a piece flagged True is a
    detected value (its span), the others the caller's own text."""
    text, spans = "", []
    for piece, value in pieces:
        if value:
            spans.append((len(text), len(text) + len(piece), "EMAIL"))
        text += piece
    masker = Masker(restore=True)
    return text, masker.mask(text, spans), masker


def whole(masker: Masker, answer: str) -> str:
    restorer = masker.restorer()
    if restorer is None:
        return answer
    body = orjson.dumps({"choices": [{"index": 0, "message": {"content": answer}}]})
    return orjson.loads(restorer.whole(body))["choices"][0]["message"]["content"]


def streamed(masker: Masker, answer: str, cuts: list[int], finish_event: bool) -> str:
    restorer = masker.restorer()
    if restorer is None:
        return answer
    bounds = sorted({0, len(answer), *(c % (len(answer) + 1) for c in cuts)})
    out = []
    for a, b in zip(bounds, bounds[1:]):
        out += restorer.events([chunk(answer[a:b])])
        assert all(len(text) <= 40 for text in restorer._pending.values())   # the hold-back is bounded
    if finish_event:
        out += restorer.events([chunk(None, finish="stop")])
    out += restorer.finish()
    return stream_text(out)


def test_the_reported_cases_round_trip_whole_and_streamed():
    for pieces in ([("alice@example.com", True), (" and {{EMAIL_0}}", False)],
                   [("{{EMAIL_0}} and {EMAIL_0}", False)],
                   [("{EMAIL_0} and ", False), ("alice@example.com", True)],
                   [("{", False), ("alice@example.com", True), ("}", False)]):
        text, sent, masker = mask(pieces)
        assert "alice" not in sent
        assert whole(masker, sent) == text
        for cut in range(len(sent) + 1):          # every two-event split
            assert streamed(masker, sent, [cut], finish_event=False) == text, (text, cut)


def test_the_rule_on_the_wire():
    text, sent, masker = mask([("alice@example.com", True), (" {EMAIL_0} {~EMAIL_0} {{EMAIL_0}}", False)])
    assert sent == "{EMAIL_0} {~EMAIL_0} {~~EMAIL_0} {{~EMAIL_0}}"
    # a token the model made up, or another request's name, is left as it is
    assert whole(masker, "{EMAIL_7} {PHONE_0}") == "{EMAIL_7} {PHONE_0}"
    assert whole(masker, "{EMAIL_0}") == "alice@example.com"


def test_a_long_run_of_tildes_is_not_held_whole():
    text, sent, masker = mask([("bob@ex.io", True), ("{" + "~" * 500 + "EMAIL_0}", False)])
    restorer = masker.restorer()
    head = restorer.events([chunk(sent[:-3])])          # "...~~~EMAIL_" so far
    assert len(stream_text(head)) >= len(sent) - 50
    assert streamed(masker, sent, list(range(0, len(sent), 7)), False) == text


piece = st.one_of(
    st.tuples(st.sampled_from(TRICKY), st.just(False)),
    st.tuples(st.text(alphabet="{}~_EMAILPHON0123 x\"\\é", max_size=12), st.just(False)),
    st.tuples(st.text(max_size=6), st.just(False)),
    st.tuples(st.sampled_from(EMAILS), st.just(True)),
)


@settings(max_examples=500, deadline=None)
@given(st.lists(piece, max_size=12), st.lists(st.integers(0, 10_000), max_size=25), st.booleans())
def test_restored_stream_equals_restored_whole_equals_what_the_caller_sent(pieces, cuts, finish_event):
    text, sent, masker = mask(pieces)
    assert not any(value in sent for value in EMAILS)
    restored_whole = whole(masker, sent)
    assert restored_whole == text
    assert streamed(masker, sent, cuts, finish_event) == restored_whole
