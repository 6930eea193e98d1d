"""The patterns added for issue 30: phone extensions and national formats, every card
brand's length with Luhn and issuer ranges, the USPS street suffixes and unit designators,
and dotted version numbers that are not IP addresses; with the look-alikes each must leave."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenward.pii.checksums import card_brand_plausible, luhn_valid
from tokenward.pii.digit_shapes import _USPS_SUFFIXES
from tokenward.pii.patterns import PatternDetector

DETECTOR = PatternDetector()


def found(text: str) -> list[tuple[str, str]]:
    return [(kind, text[s:e]) for s, e, kind in DETECTOR.find(text)]


def luhn_complete(body: str) -> str:
    """``body`` with the check digit that makes it pass Luhn."""
    for d in "0123456789":
        if luhn_valid(body + d):
            return body + d
    raise AssertionError(body)


@pytest.mark.parametrize("value", [
    "(818)801-4304x68817", "206.269.0743x9150", "+1-780-563-6083x7783", "415-555-0132 ext. 12",
    "(212) 555-0199 extension 4", "001-780-563-6083x7783",
    "0300 123 4567", "0121 234 5678", "(0161) 496 0066", "07400 123456", "+44(0)115 4960914",
    "030 123456", "01512 3456789", "+49 (0) 9141 777631", "(03449) 78690",
    "06 12 34 56 78", "01.23.45.67.89", "+33 (0)1 41 63 60 83",
    "06 12345678", "(02) 1234 5678", "03-1234-5678", "070-123 45 67", "0044 20 7946 0958",
])
def test_phone_numbers(value: str) -> None:
    assert found(f"Please call me at {value} tomorrow.") == [("PHONE", value)]


def test_bare_national_number_after_a_phone_keyword() -> None:
    assert found("Mobile: 07400123456") == [("PHONE", "07400123456")]
    assert found("Order 07400123456 shipped") == []


@pytest.mark.parametrize("text", [
    "Test data only: 012-345-6789 is not dialable.",          # NANP shape, invalid area code
    "Part 023-4567-89 replaces the old one.",                 # hyphens ending on two digits
    "The deadline moved to 05-12-2024 and then 05.12.2024.",  # dates
    "IBAN DE89 3704 0044 0532 0130 01 has a bad check digit.",
    "It costs 0.50 and 0.75 per unit.",
    "Build 0.29.14 shipped.",
])
def test_phone_lookalikes(text: str) -> None:
    assert found(text) == []


@pytest.mark.parametrize("body,length", [
    ("5018", 12), ("6304", 12), ("6759", 12), ("57", 12), ("0604", 12), ("6390", 16),  # Maestro
    ("1800", 15), ("2131", 15), ("3528", 16), ("3589", 19),                          # JCB
    ("62", 16), ("62", 19),                                                          # UnionPay
    ("6011", 16), ("65", 19), ("644", 16),                                           # Discover
    ("34", 15), ("37", 15), ("4", 13), ("4", 16), ("4", 19), ("51", 16), ("2221", 16),
    ("36", 14), ("300", 14), ("2200", 16),
])
def test_every_brand_length(body: str, length: int) -> None:
    number = luhn_complete(body + "3" * (length - len(body) - 1))
    assert card_brand_plausible(number)
    assert found(f"card {number} please") == [("CREDIT_CARD", number)]
    grouped = " ".join(number[i:i + 4] for i in range(0, length, 4))
    assert found(f"card {grouped} please") == [("CREDIT_CARD", grouped)]


@pytest.mark.parametrize("number", ["978030640615", "123456789012", "4111111111111112", "9999999999994"])
def test_card_lookalikes(number: str) -> None:
    assert found(f"Reference {number} attached") == []


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["5018", "6304", "1800", "2131", "62", "3528", "4", "34"]), st.data())
def test_luhn_and_range_decide(prefix: str, data) -> None:
    lengths = {"5018": (12, 19), "6304": (12, 19), "1800": (15, 15), "2131": (15, 15), "62": (16, 19),
               "3528": (16, 19), "4": (16, 16), "34": (15, 15)}[prefix]
    length = data.draw(st.integers(*lengths))
    middle = data.draw(st.text("0123456789", min_size=length - len(prefix) - 1, max_size=length - len(prefix) - 1))
    number = luhn_complete(prefix + middle)
    assert found(f"card {number} ok") == [("CREDIT_CARD", number)]
    wrong = number[:-1] + str((int(number[-1]) + 1) % 10)
    assert not luhn_valid(wrong)
    assert all(kind != "CREDIT_CARD" for kind, _ in found(f"card {wrong} ok"))


@pytest.mark.parametrize("suffix", sorted(set(_USPS_SUFFIXES.split())))
def test_every_usps_suffix(suffix: str) -> None:
    value = f"4892 Marquez {suffix}"
    assert found(f"Send it to {value} please") == [("STREET_ADDRESS", value)]


@pytest.mark.parametrize("unit", ["Apt. 507", "Suite 316", "Unit 4B", "Bldg 7", "Fl 3", "Rm 12", "Lot 9", "#12"])
def test_unit_designators(unit: str) -> None:
    value = f"210 Harding Stream {unit}"
    assert found(f"Ship to {value}, Chicago, IL 60601 today") == [
        ("STREET_ADDRESS", f"{value}, Chicago, IL 60601")]


def test_street_lookalikes() -> None:
    assert found("We need 10 Main Points in the summary and 3 Key Views.") == []


@pytest.mark.parametrize("text", [
    "After the upgrade to firmware 4.15.6.17 the router was fine.",
    "We pinned the agent at version 4.15.6.17 for now.",
    "Release notes for v4.15.6.17: faster start-up.",
    "The driver 10.0.19.41 was loaded twice.",
])
def test_versions_are_not_ip_addresses(text: str) -> None:
    assert found(text) == []


def test_ip_addresses_stay_ip_addresses() -> None:
    assert found("The server at 10.0.19.41 is down") == [("IP_ADDRESS", "10.0.19.41")]
    assert found("After the update, the host 192.168.1.20 stopped answering") == [("IP_ADDRESS", "192.168.1.20")]


# -- the trigger (digit_shapes.TRIGGER) is only an optimisation for the new shapes too -------------

class _EveryRun(PatternDetector):
    from tokenward.pii import patterns as _p

    _runs = staticmethod(_p._all_runs)


_SEPS = st.sampled_from([" ", "-", ".", " - ", ") ", "x", " ext. ", "/", ""])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.text("0123456789", min_size=1, max_size=6), _SEPS), min_size=1, max_size=6),
       st.sampled_from(["", "(", "+", "0", "00", "call ", "v", "firmware "]))
def test_trigger_agrees_on_phone_shaped_text(groups, lead: str) -> None:
    text = "Reach me at " + lead + "".join(g + s for g, s in groups) + " today, or 1800 123 456."
    assert DETECTOR.find(text) == _EveryRun().find(text)


def test_trigger_agrees_on_the_outside_set() -> None:
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from bench.eval_sets.pii import load

    full = _EveryRun()
    for row in load("dev") + load("test"):
        assert DETECTOR.find(row["text"]) == full.find(row["text"]), row["id"]
