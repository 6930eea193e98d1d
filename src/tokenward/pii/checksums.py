"""Check digits and checksums that tell a real identifier from a look-alike.

A pattern alone finds shapes, and most shapes in ordinary text (order numbers, dates,
hashes, tracking ids) are not personal data. The identifiers below carry their own
redundancy -- a check digit, a mod-97 remainder, a hash -- so validating a candidate
removes nearly all look-alikes for a few integer operations. Every function takes the
candidate as written, accepts only ASCII digits where digits are meant (``str.isdigit``
also accepts superscripts and other scripts' digits), and never raises on malformed
input: it returns ``False``/``None``.
"""

from __future__ import annotations

import hashlib

__all__ = [
    "IBAN_LENGTHS",
    "aba_valid",
    "base58_decode",
    "base58check_valid",
    "bech32_decode",
    "bitcoin_base58_valid",
    "card_brand_plausible",
    "iban_valid",
    "luhn_valid",
    "nanp_valid",
    "segwit_address_valid",
    "ssn_valid",
]


def _ascii_digits(text: str) -> bool:
    """True for a non-empty run of 0-9 only."""
    return text.isascii() and text.isdigit()


# --- Luhn (payment cards) --------------------------------------------------------


def luhn_valid(number: str) -> bool:
    """ISO/IEC 7812 Luhn check on the digits of ``number`` (spaces and hyphens ignored)."""
    digits = number.replace(" ", "").replace("-", "")
    if not _ascii_digits(digits):
        return False
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i & 1:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


# (first digits as an int, prefix width, allowed lengths) -- IIN ranges of the networks
# whose cards turn up in text. A Luhn-valid number outside them (an ISBN-13 starting 978,
# a 16-digit gift code) is not reported as a card.
_CARD_RANGES: tuple[tuple[int, int, int, frozenset[int]], ...] = (
    (4, 4, 1, frozenset({13, 16, 19})),  # Visa
    (51, 55, 2, frozenset({16})),  # Mastercard
    (2221, 2720, 4, frozenset({16})),  # Mastercard 2-series
    (34, 34, 2, frozenset({15})),  # American Express
    (37, 37, 2, frozenset({15})),  # American Express
    (6011, 6011, 4, frozenset(range(16, 20))),  # Discover
    (644, 649, 3, frozenset(range(16, 20))),  # Discover
    (65, 65, 2, frozenset(range(16, 20))),  # Discover / RuPay
    (62, 62, 2, frozenset(range(16, 20))),  # UnionPay
    (3528, 3589, 4, frozenset(range(16, 20))),  # JCB
    (35, 35, 2, frozenset({16})),  # JCB numbers outside 3528-3589 that generators and test suites issue
    (1800, 1800, 4, frozenset({15})),  # JCB (15 digits)
    (2131, 2131, 4, frozenset({15})),  # JCB (15 digits)
    (300, 305, 3, frozenset(range(14, 20))),  # Diners Club
    (3095, 3095, 4, frozenset(range(14, 20))),  # Diners Club
    (36, 36, 2, frozenset(range(14, 20))),  # Diners Club International
    (38, 39, 2, frozenset(range(14, 20))),  # Diners Club
    (2200, 2204, 4, frozenset(range(16, 20))),  # Mir
    (60, 60, 2, frozenset({16})),  # RuPay
    (5018, 5018, 4, frozenset(range(12, 20))),  # Maestro
    (5020, 5020, 4, frozenset(range(12, 20))),  # Maestro
    (5038, 5038, 4, frozenset(range(12, 20))),  # Maestro
    (5893, 5893, 4, frozenset(range(12, 20))),  # Maestro
    (6304, 6304, 4, frozenset(range(12, 20))),  # Maestro
    (6759, 6759, 4, frozenset(range(12, 20))),  # Maestro
    (6761, 6763, 4, frozenset(range(12, 20))),  # Maestro
    (56, 58, 2, frozenset(range(12, 20))),  # Maestro
    (604, 604, 4, frozenset(range(12, 20))),  # Maestro (0604)
    (6390, 6390, 4, frozenset(range(12, 20))),  # Maestro
)


def card_brand_plausible(digits: str) -> bool:
    """True when ``digits`` (no separators) starts with a card network's IIN and has that network's length."""
    if not _ascii_digits(digits):
        return False
    n = len(digits)
    for lo, hi, width, lengths in _CARD_RANGES:
        if n in lengths and lo <= int(digits[:width]) <= hi and (lo >= 10 ** (width - 1) or digits[0] == "0"):
            return True
    return False


# --- IBAN (ISO 13616) ------------------------------------------------------------

# IBAN length per country (SWIFT IBAN registry). A country missing here is not accepted:
# a mod-97 check alone lets one random candidate in 97 through.
IBAN_LENGTHS: dict[str, int] = {
    "AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22,
    "BH": 22, "BR": 29, "BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22,
    "DK": 18, "DO": 28, "EE": 20, "EG": 29, "ES": 24, "FI": 18, "FO": 18, "FR": 27,
    "GB": 22, "GE": 22, "GI": 23, "GL": 18, "GR": 27, "GT": 28, "HR": 21, "HU": 28,
    "IE": 22, "IL": 23, "IQ": 23, "IS": 26, "IT": 27, "JO": 30, "KW": 30, "KZ": 20,
    "LB": 28, "LC": 32, "LI": 21, "LT": 20, "LU": 20, "LV": 21, "MC": 27, "MD": 24,
    "ME": 22, "MK": 19, "MR": 27, "MT": 31, "MU": 30, "NL": 18, "NO": 15, "PK": 24,
    "PL": 28, "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22, "SA": 24, "SC": 31,
    "SE": 24, "SI": 19, "SK": 24, "SM": 27, "ST": 25, "SV": 28, "TL": 23, "TN": 24,
    "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20,
}


# ISO 13616 turns letters into numbers before the mod-97: A=10 ... Z=35.
_IBAN_LETTERS = {ord(c): str(10 + i) for i, c in enumerate("ABCDEFGHIJKLMNOPQRSTUVWXYZ")}


def iban_valid(iban: str) -> bool:
    """ISO 13616: known country, that country's length, alphanumeric BBAN, mod 97 == 1.

    Spaces are ignored; letters must be upper case (the printed and electronic forms).
    """
    compact = iban.replace(" ", "")
    if not compact.isascii() or len(compact) < 5:
        return False
    country, check = compact[:2], compact[2:4]
    if IBAN_LENGTHS.get(country) != len(compact) or not _ascii_digits(check):
        return False
    if not compact.isalnum() or compact != compact.upper():
        return False
    numeric = (compact[4:] + compact[:4]).translate(_IBAN_LETTERS)
    return int(numeric) % 97 == 1


# --- ABA routing numbers -----------------------------------------------------------


def _aba_prefix_ok(prefix: int) -> bool:
    """Federal Reserve routing symbol: 00-12 banks, 21-32 thrifts, 61-72 electronic, 80 traveller's cheques."""
    return prefix <= 12 or 21 <= prefix <= 32 or 61 <= prefix <= 72 or prefix == 80


def aba_valid(number: str) -> bool:
    """ABA routing transit number: 9 digits, a Federal Reserve prefix, and the 3-7-1 checksum."""
    if len(number) != 9 or not _ascii_digits(number) or number == "000000000":
        return False
    if not _aba_prefix_ok(int(number[:2])):
        return False
    d = [ord(c) - 48 for c in number]
    return (3 * (d[0] + d[3] + d[6]) + 7 * (d[1] + d[4] + d[7]) + (d[2] + d[5] + d[8])) % 10 == 0


# --- US Social Security numbers and NANP phone numbers ---------------------------------


def ssn_valid(area: str, group: str, serial: str) -> bool:
    """SSA rules: area not 000, 666 or 900-999; group not 00; serial not 0000."""
    if not (_ascii_digits(area + group + serial) and len(area) == 3 and len(group) == 2 and len(serial) == 4):
        return False
    if area == "000" or area == "666" or area[0] == "9":
        return False
    return group != "00" and serial != "0000"


def nanp_valid(digits: str) -> bool:
    """North American number (10 digits): area code and exchange both start with 2-9."""
    return len(digits) == 10 and _ascii_digits(digits) and digits[0] >= "2" and digits[3] >= "2"


# --- Bitcoin: base58check ------------------------------------------------------------

_B58_ALPHABET = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
_B58_INDEX = {c: i for i, c in enumerate(_B58_ALPHABET)}


def base58_decode(text: str) -> bytes | None:
    """Bitcoin base58 to bytes (each leading '1' is a zero byte); None on a character outside the alphabet."""
    n = 0
    for ch in text:
        value = _B58_INDEX.get(ch)
        if value is None:
            return None
        n = n * 58 + value
    body = n.to_bytes((n.bit_length() + 7) // 8, "big") if n else b""
    pad = len(text) - len(text.lstrip("1"))
    return b"\x00" * pad + body


def base58check_valid(text: str) -> bool:
    """Base58check: the last 4 bytes are the first 4 of sha256(sha256(the rest))."""
    raw = base58_decode(text)
    if raw is None or len(raw) < 5:
        return False
    payload, checksum = raw[:-4], raw[-4:]
    return hashlib.sha256(hashlib.sha256(payload).digest()).digest()[:4] == checksum


def bitcoin_base58_valid(address: str) -> bool:
    """Mainnet P2PKH ('1', version 0x00) or P2SH ('3', version 0x05): 25 bytes with a good checksum."""
    if not 26 <= len(address) <= 35:
        return False
    raw = base58_decode(address)
    if raw is None or len(raw) != 25 or raw[0] not in (0x00, 0x05):
        return False
    return hashlib.sha256(hashlib.sha256(raw[:21]).digest()).digest()[:4] == raw[21:]


# --- Bitcoin: bech32 / bech32m (BIP-173, BIP-350) --------------------------------------

_BECH32_CHARSET = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"
_BECH32_INDEX = {c: i for i, c in enumerate(_BECH32_CHARSET)}
_BECH32_GEN = (0x3B6A57B2, 0x26508E6D, 0x1EA119FA, 0x3D4233DD, 0x2A1462B3)
BECH32_CONST = 1
BECH32M_CONST = 0x2BC830A3


def _generator_xor(top: int) -> int:
    """XOR of the generator terms that the 5 bits of ``top`` select."""
    acc = 0
    for i in range(5):
        if (top >> i) & 1:
            acc ^= _BECH32_GEN[i]
    return acc


# One lookup per symbol instead of BIP-173's five conditional XORs.
_BECH32_TABLE = tuple(_generator_xor(top) for top in range(32))


def _bech32_polymod(values: list[int]) -> int:
    """BCH checksum over GF(32) from BIP-173."""
    chk = 1
    for value in values:
        chk = ((chk & 0x1FFFFFF) << 5) ^ value ^ _BECH32_TABLE[chk >> 25]
    return chk


def bech32_decode(text: str) -> tuple[str, list[int], int] | None:
    """(hrp, data without checksum, checksum constant) for a valid bech32 or bech32m string, else None.

    The constant says which variant verified: ``BECH32_CONST`` or ``BECH32M_CONST``.
    """
    if not text.isascii() or len(text) > 90 or any(ord(c) < 33 or ord(c) > 126 for c in text):
        return None
    if text.lower() != text and text.upper() != text:
        return None  # mixed case is invalid
    text = text.lower()
    pos = text.rfind("1")
    if pos < 1 or pos + 7 > len(text):
        return None
    hrp = text[:pos]
    data: list[int] = []
    for ch in text[pos + 1 :]:
        value = _BECH32_INDEX.get(ch)
        if value is None:
            return None
        data.append(value)
    expanded = [ord(c) >> 5 for c in hrp] + [0] + [ord(c) & 31 for c in hrp]
    const = _bech32_polymod(expanded + data)
    if const not in (BECH32_CONST, BECH32M_CONST):
        return None
    return hrp, data[:-6], const


def _convert_bits(data: list[int], from_bits: int, to_bits: int) -> list[int] | None:
    """Regroup 5-bit words into bytes without padding; None if the leftover bits are not zero padding."""
    acc = bits = 0
    out: list[int] = []
    maxv = (1 << to_bits) - 1
    for value in data:
        acc = (acc << from_bits) | value
        bits += from_bits
        while bits >= to_bits:
            bits -= to_bits
            out.append((acc >> bits) & maxv)
    if bits >= from_bits or (acc << (to_bits - bits)) & maxv:
        return None
    return out


def segwit_address_valid(address: str, hrp: str = "bc") -> bool:
    """A segwit address for ``hrp``: v0 with bech32 and a 20/32-byte program, v1-16 with bech32m and 2-40 bytes."""
    decoded = bech32_decode(address)
    if decoded is None or decoded[0] != hrp or not decoded[1]:
        return False
    _, data, const = decoded
    version = data[0]
    if version > 16:
        return False
    program = _convert_bits(data[1:], 5, 8)
    if program is None or not 2 <= len(program) <= 40:
        return False
    if version == 0:
        return const == BECH32_CONST and len(program) in (20, 32)
    return const == BECH32M_CONST
