"""The output screen (pii/output.py): personal data the model wrote, redacted in whole
answers and in streams split anywhere, with a bounded hold-back."""

from __future__ import annotations

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenward.pii.output import HOLD, OutputRedactor
from tokenward.pii.patterns import PatternDetector

from .test_placeholders import chunk, stream_text

DETECTOR = PatternDetector()
VALUES = ["jane.doe@example.com", "+1 415 555 0132", "4111 1111 1111 1111", "DE89370400440532013000",
          "192.168.10.20"]
WORDS = ["Sure,", "the", "office", "is", "open;", "write", "to", "or", "call", "order", "#1234", "v2.0.1",
         "{EMAIL_0}", "today.", "\n"]
EXPECTED_LABELS = {"jane.doe@example.com": "[EMAIL]", "+1 415 555 0132": "[PHONE]",
                   "4111 1111 1111 1111": "[CREDIT_CARD]", "DE89370400440532013000": "[IBAN]",
                   "192.168.10.20": "[IP_ADDRESS]"}


def whole(text: str) -> tuple[str, dict]:
    record: dict = {}
    body = orjson.dumps({"choices": [{"index": 0, "message": {"role": "assistant", "content": text}}]})
    out = orjson.loads(OutputRedactor(DETECTOR.find, record).whole(body))
    return out["choices"][0]["message"]["content"], record


def streamed(pieces: list[str], finish_chunk: bool) -> tuple[str, dict, int]:
    record: dict = {}
    redactor = OutputRedactor(DETECTOR.find, record)
    out, sent, longest_hold = [], 0, 0
    total = 0
    for piece in pieces:
        out += redactor.events([chunk(piece)])
        total += len(piece)
        longest_hold = max(longest_hold, sum(len(t) for t in redactor._pending.values()))
    if finish_chunk:
        out += redactor.events([chunk(None, finish="stop")])
    out += redactor.finish()
    return stream_text(out), record, longest_hold


texts = st.lists(st.sampled_from(WORDS + VALUES), min_size=1, max_size=30).map(" ".join)


@settings(max_examples=200, deadline=None)
@given(texts, st.lists(st.integers(0, 400), max_size=25), st.booleans())
def test_a_stream_split_anywhere_is_redacted_as_the_whole_answer_is(text, cuts, finish_chunk):
    bounds = sorted({0, len(text), *(c for c in cuts if c < len(text))})
    pieces = [text[a:b] for a, b in zip(bounds, bounds[1:])]
    expected, whole_record = whole(text)
    out, record, longest_hold = streamed(pieces, finish_chunk)
    assert out == expected
    assert not any(value in out for value in VALUES)
    assert record.get("output_redacted") == whole_record.get("output_redacted")
    assert longest_hold <= HOLD + max(len(v) for v in VALUES)   # bounded: never the whole answer


def test_each_value_gets_its_type_and_placeholders_are_left_for_the_restorer():
    text = " and ".join(VALUES) + " but {EMAIL_0} is the caller's own."
    out, record = whole(text)
    assert out == " and ".join(EXPECTED_LABELS[v] for v in VALUES) + " but {EMAIL_0} is the caller's own."
    assert record["output_redacted"] == {"EMAIL": 1, "PHONE": 1, "CREDIT_CARD": 1, "IBAN": 1, "IP_ADDRESS": 1}


def test_lookalikes_and_error_envelopes_pass_unchanged():
    text = "Order #123456 shipped on 2024-05-01 with version 10.2.3, total 1,234.56."
    assert whole(text) == (text, {})
    envelope = orjson.dumps({"error": {"message": "mail jane.doe@example.com", "code": "upstream_error"}})
    assert OutputRedactor(DETECTOR.find, {}).whole(envelope) == envelope


def test_a_keyworded_number_is_seen_with_its_keyword_however_it_arrives():
    text = "Noted. " * 12 + "Your bank account number 12345678901 is on file."
    expected, record = whole(text)
    assert "[BANK_ACCOUNT]" in expected and record["output_redacted"] == {"BANK_ACCOUNT": 1}
    for cut in range(70, len(text)):
        assert streamed([text[:cut], text[cut:]], False)[0] == expected
