"""Keyworded digit runs: bank accounts, routing numbers, bare SSNs and bare phones (North
American, or national behind a trunk prefix 0).

A bank account number has no checksum, and a bare 9- or 10-digit run could be almost
anything, so these are reported only next to a keyword that says what they are
("account", "routing", "SSN", "phone"...). The digit scan (``digit_scan``) collects the
standalone 6-17 digit runs; this module labels them from the keywords around them.
"""

from __future__ import annotations

import re

from .checksums import aba_valid, nanp_valid, ssn_valid
from .spans import Span, contains_digit

__all__ = ["KEYED_ENTITIES", "classify_runs"]

# The entities a keyword can give a bare digit run.
KEYED_ENTITIES = frozenset({"BANK_ACCOUNT", "ROUTING_NUMBER", "US_SSN", "PHONE"})

# Keywords that give a bare digit run its meaning; each must end within the kind's
# reach before the run with no digit in between (see _keyword_kinds).
_KEYWORD = re.compile(
    r"\b(?:"
    r"(?P<routing>routing|aba|rtn|transit)"
    r"|(?P<account>accounts?|acct|a/c|acc|checking|savings|kontonummer|konto|kto|compte|cuenta)"
    r"|(?P<ssn>ssn|social[ ]security|ss\#)"
    r"|(?P<phone>phone|telephone|tel|mobile|cell|call|text|fax|whatsapp|sms)"
    r")(?![a-z])",
    re.I | re.ASCII,
)
_KIND_REACH = {"routing": 30, "account": 30, "ssn": 20, "phone": 20}
_LIST_GAP = re.compile(r"[ ]*(?:[,/&;|:]|and|or)?[ ]*", re.I | re.ASCII)

# A run with the keyword kinds it was given: (start, end, kinds).
_Labelled = tuple[int, int, set[str]]


def _keyword_kinds(text: str, start: int, end: int) -> set[str]:
    """Kinds of the keywords close to the run ``text[start:end]`` with no digit in between.

    Keywords count before the run (each kind has its reach); a routing keyword also counts
    just after it ("021000021 is our ABA number"), since the ABA checksum already vouches
    for the digits.
    """
    kinds: set[str] = set()
    for kw in _KEYWORD.finditer(text, max(0, start - 45), start):
        kind = kw.lastgroup
        assert kind is not None
        gap = text[kw.end() : start]
        if len(gap) <= _KIND_REACH[kind] and not contains_digit(gap):
            kinds.add(kind)
    if end - start == 9:
        for kw in _KEYWORD.finditer(text, end, min(len(text), end + 30)):
            if kw.lastgroup == "routing" and not contains_digit(text[end : kw.start()]):
                kinds.add("routing")
                break
    return kinds


def _label_runs(text: str, runs: list[tuple[int, int]]) -> tuple[list[_Labelled], list[list[int]]]:
    """Each run with its keyword kinds, and the chains of runs joined by list separators.

    A run inherits the kinds of the run just before it when only a list separator lies
    between them; a chain holds the indices (into the labelled list) of such runs.
    """
    labelled: list[_Labelled] = []
    chains: list[list[int]] = []
    for s, e in runs:
        kinds = _keyword_kinds(text, s, e)
        if labelled:
            _, pe, pkinds = labelled[-1]
            gap_match = _LIST_GAP.fullmatch(text, pe, s) if s - pe <= 8 else None
            if gap_match is not None and pkinds:
                kinds |= pkinds
                chains[-1].append(len(labelled))
                labelled.append((s, e, kinds))
                continue
        chains.append([len(labelled)])
        labelled.append((s, e, kinds))
    return labelled, chains


def _pair_routing(text: str, labelled: list[_Labelled], chains: list[list[int]]) -> set[int]:
    """Indices of the ABA-valid runs that open a routing/account pair under an account keyword."""
    pair_routing: set[int] = set()
    for chain in chains:
        if len(chain) != 2:
            continue
        kinds = labelled[chain[0]][2] | labelled[chain[1]][2]
        if "account" in kinds and "routing" not in kinds:
            for idx in chain:
                s, e, _ = labelled[idx]
                if aba_valid(text[s:e]):
                    pair_routing.add(idx)
                    break
    return pair_routing


def classify_runs(text: str, runs: list[tuple[int, int]]) -> list[Span]:
    """Label standalone 6-17 digit runs from nearby keywords.

    A run inherits the keywords of the run just before it when only a list separator
    (``,`` ``/`` ``and`` ...) lies between them, so "routing and account: 021000021 /
    4400123398" labels both. A 9-digit run is a ROUTING_NUMBER when it passes the ABA
    checksum and prefix and either a routing keyword is near or it is one of exactly two
    runs chained under an account keyword (the routing/account pair on a cheque).
    """
    labelled, chains = _label_runs(text, runs)
    pair_routing = _pair_routing(text, labelled, chains)
    out: list[Span] = []
    for idx, (s, e, kinds) in enumerate(labelled):
        if not kinds:
            continue
        number = text[s:e]
        n = e - s
        if n == 9 and (("routing" in kinds) or idx in pair_routing) and aba_valid(number):
            out.append((s, e, "ROUTING_NUMBER"))
        elif n == 9 and "ssn" in kinds and ssn_valid(number[:3], number[3:5], number[5:]):
            out.append((s, e, "US_SSN"))
        elif "phone" in kinds and (
            (n == 10 and nanp_valid(number))
            or (n == 11 and number[0] == "1" and nanp_valid(number[1:]))
            or (9 <= n <= 12 and number[0] == "0" and number[1] != "0")  # a national number: 0121..., 06...
        ):
            out.append((s, e, "PHONE"))
        elif "account" in kinds:
            out.append((s, e, "BANK_ACCOUNT"))
    return out
