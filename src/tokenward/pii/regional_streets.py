"""Street addresses of the regions a policy names (``pii.regions``), found from the house number.

A house number and a street-type word in the language of the region, in the order that
language writes them: ``12 Baker Street`` (GB, US), ``8, avenue Lesage`` (FR) put the number
first; ``Hauptstraße 12`` / ``Berliner Str. 5`` (DE), ``Lindenlaan 7`` (NL), ``Calle Mayor 5``
(ES), ``Via Roma, 12`` (IT) put it last. A postal code of the region right after the street
is part of the span.

Why it is shaped this way: an alternation of some two hundred street words tried at every
position of a window costs ~0.3 us a character, 600 us on 2 KB of prose with numbers. Here
nothing is tried away from a number:

- number first: one pattern that begins with a digit, so ``re`` skips to the digits in C
  and tries the street words only after a number, a space and a capital (EN) or after a
  number and a French street word;
- number last: the same pass over the text reversed finds the numbers written right after
  a capitalised word (``Roma, 12``, ``Str. 5``, ``Lindenlaan 7``); only for those are the
  few words before the number looked up in the region's street words, and the street
  pattern tried anchored where one is.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from .digit_shapes import USPS_SUFFIXES
from .spans import Span

__all__ = ["StreetFinder"]

# English: the USPS Publication 28 C1 street suffixes but the two-letter abbreviations ("Is",
# "Mt", "Pr", read in any case, are words: "the Resolver is"; pii/digit_shapes.py), the usual
# short ones, and the British street words USPS lacks
_EN_WORDS = frozenset({w.lower() for w in USPS_SUFFIXES if len(w) >= 3} | {
    "st", "rd", "ave", "ln", "dr", "pl", "ct", "sq", "cir", "hwy", "way", "row", "run", "key",
    "close", "gardens", "terrace", "mews", "parade", "rise", "vale", "wharf", "yard", "centre", "grove",
    "hill", "row", "walk", "green", "view", "way", "embankment", "approach", "broadway", "circus", "quay",
    "drove", "gate", "end", "side", "croft", "chase", "lea", "leys", "mead", "dene", "glade", "fold"})
_FR_WORDS = ("rue", "avenue", "av", "boulevard", "bd", "place", "chemin", "allée", "allee", "impasse", "quai",
             "route", "cours", "passage", "square", "voie", "sentier", "rond-point", "esplanade", "promenade",
             "faubourg", "villa", "cité", "cite", "hameau", "parvis")
# Streets French writes without a house number too ("rue de Cohen"): in lower case, before a name
_FR_BARE = ("rue ", "avenue ", "boulevard ", "chemin ", "allée ", "impasse ", "quai ", "cours ")
# Number last: the street word ends the word before the number (DE, NL) ...
_SUFFIXES = {
    "DE": ("straße", "strasse", "str", "weg", "allee", "platz", "gasse", "ring", "damm", "ufer", "chaussee",
           "steig", "pfad", "markt", "hof", "graben", "berg", "brücke", "kamp", "stieg", "wall", "zeile"),
    "NL": ("straat", "laan", "weg", "plein", "gracht", "kade", "dijk", "singel", "boulevard", "park", "hof",
           "pad", "steeg", "markt", "dreef", "burg", "baan", "haven", "wal", "erf", "veld", "plantsoen"),
}
# ... or opens the street's name a few words before it (ES, IT).
_OPENERS = {
    "ES": ("calle", "c/", "c.", "avenida", "pasadizo", "vial", "costanilla", "bulevar", "senda", "subida",
           "avda", "av", "plaza", "pza", "paseo", "callejón", "callejon", "camino",
           "carrer", "ronda", "travesía", "travesia", "vía", "via", "glorieta", "pasaje", "urbanización",
           "urbanizacion", "cañada", "canada", "carretera", "rambla", "acceso", "alameda", "bajada", "cuesta",
           "plazuela", "polígono", "poligono", "puerta", "sector", "vereda", "partida", "barrio"),
    "IT": ("via", "viale", "piazza", "piazzale", "corso", "largo", "vicolo", "contrada", "incrocio", "borgo",
           "rotonda", "strada", "canale", "stretto", "lungomare", "lungotevere", "salita", "vico", "calle",
           "campo", "rione", "traversa"),
}
_LANGS = {"US": ("EN",), "CA": ("EN", "FR"), "GB": ("EN",), "IE": ("EN",), "AU": ("EN",), "DE": ("DE",),
          "AT": ("DE",), "CH": ("DE", "FR", "IT"), "FR": ("FR",), "BE": ("FR", "NL"), "ES": ("ES",),
          "IT": ("IT",), "NL": ("NL",), "PT": ("ES",), "SE": ("DE",), "PL": ("DE",), "BR": ("ES",)}
_POSTAL = {
    "US": r"\d{5}(?:-\d{4})?", "GB": r"[A-Z]{1,2}\d[A-Z\d]? ?\d[A-Z]{2}", "DE": r"\d{5}", "AT": r"\d{4}",
    "CH": r"\d{4}", "FR": r"\d{5}", "BE": r"\d{4}", "ES": r"\d{5}", "IT": r"\d{5}", "NL": r"\d{4} ?[A-Z]{2}",
    "PT": r"\d{4}-\d{3}", "SE": r"\d{3} ?\d{2}", "PL": r"\d{2}-\d{3}", "BR": r"\d{5}-?\d{3}", "CA": r"[A-Z]\d[A-Z] ?\d[A-Z]\d",
    "IE": r"[A-Z]\d{2} ?[A-Z\d]{4}", "AU": r"\d{4}"}
_NAME = r"[A-ZÀ-ÖØ-Þ][\w'’.-]{0,30}"
# a house number's tail after its first digit: 742, 7a, 12-14, 3/7, 5 bis
_NUM_TAIL = r"[0-9]{0,4}(?:[ -]?[a-zA-Z]\b|[-/][0-9]{1,4}| ?(?:bis|ter)\b)?"
_NUM = rf"[0-9]{_NUM_TAIL}"
_UNITS = ("flat", "studio", "apartment", "apt", "apt.", "unit", "suite", "room")
_DIGIT_RUN = re.compile(r"[0-9]+")
_NUMBER_WORDS = frozenset(("nº", "n°", "no", "n.", "n"))
_WORD = re.compile(r"[^\W\d_][^\s,;:()\d]*")


# abbreviations written with their dot in the patterns (the word look-up drops it)
_DOTTED = {"str": r"str\.", "avda": r"avda\.?", "pza": r"pza\.", "av": r"av\."}


def _alternation(words: Iterable[str]) -> str:
    """The words as one alternation factored by first letter (``a(?:lley|ve)|b(?:...)``): re
    tries alternatives one by one, so two hundred words tried where none starts cost ~3 us; this
    way a failure costs one look per first letter."""
    by_first: dict[str, list[str]] = {}
    for w in sorted(set(words), key=lambda w: (-len(w), w)):
        by_first.setdefault(w[0], []).append(_DOTTED.get(w, re.escape(w))[len(re.escape(w[0])):])
    return "|".join(f"{re.escape(c)}(?:{'|'.join(rests)})" for c, rests in sorted(by_first.items()))


class StreetFinder:
    """STREET_ADDRESS spans of the regions' languages (``find(text, out)``)."""

    def __init__(self, regions: Iterable[str]) -> None:
        regions = tuple(regions)
        langs = {lang for r in regions for lang in _LANGS.get(r, ())}
        postal = "|".join(sorted({_POSTAL[r] for r in regions if r in _POSTAL}))
        tail = rf"(?:,? (?:{postal})\b)?" if postal else ""
        first = []   # the pattern after the house number's first digit
        if "EN" in langs:
            units = "|".join(rf"(?<=(?i:{re.escape(u)}) [0-9])" for u in _UNITS)
            # the street word in any case but capitals ("5 PM EST" is a time)
            street = rf"(?:{_NAME} ){{1,3}}(?![A-Z]{{2}})(?i:{_alternation(_EN_WORDS)})s?\b\.?"
            # "12 Baker Street"; after a unit, "Flat 17, Janet Meadows" or "Studio 12\nO'Neill Isle"
            first += [rf"{_NUM_TAIL} {street}", rf"(?:{units}){_NUM_TAIL}[,\n ]\s?{street}"]
        if "FR" in langs:
            first.append(rf"{_NUM_TAIL},? (?i:{_alternation(_FR_WORDS)}) (?:(?:de|du|des|de la|de l'|d')\s?)?{_NAME}(?: {_NAME}){{0,3}}")
        self._bare = re.compile(rf"(?:{'|'.join(_FR_BARE)})(?:(?:de|du|des|de la|de l'|d')[ ]?)?"
                                rf"{_NAME}(?: {_NAME}){{0,3}}") if "FR" in langs else None
        self._first = re.compile(rf"[0-9](?<![\w][0-9])(?:{'|'.join(first)}){tail}") if first else None
        last = []
        for lang in ("DE", "NL"):
            if lang in langs:   # one word with the type at its end, or a name and the type word apart
                words = _alternation(_SUFFIXES[lang])
                last.append(rf"(?:{_NAME}[ -])?[A-ZÀ-ÖØ-Þ][\w-]{{0,30}}(?i:{words})\.? {_NUM}\b")
                last.append(rf"(?:[A-ZÀ-ÖØ-Þ][\w-]{{1,30}} ){{1,2}}(?i:{words})\.? {_NUM}\b")
        for lang in ("ES", "IT"):
            if lang in langs:
                words = _alternation(_OPENERS[lang])
                last.append(rf"(?i:{words}) (?:(?:de|del|de la|de los|de las|della|dei|di|delle|degli)\s)?"
                            rf"(?:{_NAME} ){{0,3}}{_NAME},? (?:n[º°o.]\s?)?{_NUM}\b")
        self._last = re.compile(rf"(?:{'|'.join(last)}){tail}") if last else None
        # For the trigger (pii/regional.py): a number then a capital, or the first two letters of a
        # French street word ("bis"/"ter" too); a number after a word (capitalised: checked here).
        heads = sorted({w[:2] for w in _FR_WORDS} | {"bi", "te"}) if "FR" in langs else []
        self.first_lookahead = None if self._first is None else (
            rf"(?=[0-9]*+(?:[-/][0-9]++|[a-zA-Z])?,?[ \n][ ]?(?:[A-ZÀ-ÖØ-Þ]{''.join('|' + h for h in heads)}))")
        # a house number is not followed by "%", ":" or a decimal part ("40%", "10:30", "2.5")
        self.last_lookbehind = None if self._last is None else (
            r"(?:(?<=[^\W\d_][ ][0-9])|(?<=[^\W\d_][.,][ ][0-9]))(?=[0-9]*+[a-zA-Z/-]?[0-9]*+(?:[ ,;)\n]|\.(?![0-9])|\Z))")
        self._suffixes = tuple({w for lang in ("DE", "NL") if lang in langs for w in _SUFFIXES[lang]})
        # looked up without their dot ("avda." and "avda", "c." as "c"), the pattern has them written
        self._openers = frozenset(w.rstrip(".") for lang in ("ES", "IT") if lang in langs for w in _OPENERS[lang])
        self._written = self._openers | {w + "." for w in self._openers}

    def without_number(self, text: str, out: list[Span]) -> None:
        """French streets written without a house number ("rue de Cohen", "boulevard Lévy"):
        a street word in lower case, then a capitalised name, found from the word by str.find
        (text without those words costs a few scans)."""
        if self._bare is None:
            return
        for word in _FR_BARE:
            i = text.find(word)
            while i >= 0:
                if (i == 0 or not text[i - 1].isalnum()) and (m := self._bare.match(text, i)):
                    self._add(text, m.start(), m.end(), out)
                i = text.find(word, i + 1)

    def number_first(self, text: str, start: int, out: list[Span]) -> None:
        """A street whose house number starts at ``start`` ("12 Baker Street", "8, avenue Lesage")."""
        if self._first is not None and (m := self._first.match(text, start)):
            self._add(text, self._with_unit(text, start), m.end(), out)

    def number_last(self, text: str, start: int, out: list[Span]) -> None:
        """A street ending at the house number that starts at ``start``, when the word before
        the number is capitalised ("Roma, 12", "Str. 5", "Lindenlaan 7", "Roma, nº 12")."""
        if self._last is None:
            return
        end = _DIGIT_RUN.match(text, start).end()  # type: ignore[union-attr]  # a digit is at start
        j = start - 2                         # the character before the space
        for _ in range(2):
            if j >= 0 and text[j] in ".,":
                j -= 1
            word = text.rfind(" ", max(0, j - 40), j) + 1
            if text[word:j + 1].lower() not in _NUMBER_WORDS:
                break
            j = word - 2                      # "nº 12": the word before it
        if j >= 0 and text[word].isupper():
            self._number_last(text, word, start, end, out)

    def _number_last(self, text: str, word: int, number: int, number_end: int, out: list[Span]) -> None:
        """A street ending at the number ``text[number:number_end]``, ``word`` being the start of
        the word before it. First a cheap look: the word ends with a street word (DE, NL) or a
        street word opens one of the six words before it (ES, IT); only then is the pattern tried,
        anchored at the street word (and at the two words before it)."""
        assert self._last is not None
        lo = max(0, word - 80)
        near = text[lo:number].lower().split()[-7:]
        if self._written.isdisjoint(near) and not (near and near[-1].rstrip(".,").endswith(self._suffixes)):
            return
        words = list(_WORD.finditer(text, lo, number_end))[-7:]
        for i, w in enumerate(words):
            lw = w.group().lower().rstrip(".")
            if lw in self._openers or lw.endswith(self._suffixes):
                for start in [v.start() for v in words[max(0, i - 2):i]] + [w.start()]:
                    m = self._last.match(text, start)
                    if m is not None and m.end() >= number_end:
                        self._add(text, m.start(), m.end(), out)
                        return

    @staticmethod
    def _with_unit(text: str, start: int) -> int:
        """The start of "Flat 17, ..." when a unit word is right before the number."""
        if start < 3 or text[start - 1] != " ":
            return start
        lo = max(0, start - 12)
        space = text.rfind(" ", lo, start - 1)
        unit = space + 1 if space >= 0 else lo
        return unit if text[unit:start - 1].lower() in _UNITS else start

    @staticmethod
    def _add(text: str, start: int, end: int, out: list[Span]) -> None:
        # a unit on its own line ("Flat 17\nJanet Meadows"): the street line is masked (a span
        # never holds a control character: pii/patterns.py)
        cut = text.rfind("\n", start, end)
        out.append((start if cut < 0 else cut + 1, end, "STREET_ADDRESS"))
