"""Phone numbers and street addresses of the regions a policy names (``pii.regions``).

Phones: a candidate is a run of digits with the separators people write (spaces, dots,
dashes, slashes, brackets, a leading ``+`` or ``00``), 7 to 20 digits; it is reported only
when Google's libphonenumber metadata (the ``phonenumbers`` package) says it is a *valid*
number: in its international form for any country, or in the national form of one of the
policy's regions (a Spanish ``612 345 678``, a German ``(030) 1234567``). A candidate preceded
by a word that says it is something else (ISBN, IMEI, tracking, order, part, serial, SKU,
invoice, version...) or shaped like one (13 digits from 978/979, 15 plain digits, dotted
version numbers) is left alone.

Streets: a house number and a street-type word in the language of the region, in the
order that language writes them: ``12 Baker Street`` (GB, US), ``Hauptstraße 12`` / ``Berliner
Str. 5`` (DE), ``Lindenlaan 7`` (NL), ``8, avenue Lesage`` (FR), ``Calle Mayor 5`` (ES),
``Via Roma, 12`` (IT); a postal code of the region right after it is part of the span.

``phonenumbers`` is imported only when a policy names regions (the ``regions`` extra).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from .spans import Span

REGIONS = ("US", "CA", "GB", "IE", "DE", "AT", "CH", "FR", "BE", "ES", "IT", "NL", "PT", "SE", "PL", "BR", "AU")
_PHONE = re.compile(r"(?<![\w.+/-])(?:\+|00)?\(?\d[\d ().\-/]{5,22}\d(?![\w/-]|\.\d)")
_NOT_A_PHONE = re.compile(
    r"(?:isbn(?:-1[03])?|imei|imsi|iccid|tracking|track|order|part|p/n|sku|serial|s/n|invoice|ref(?:erence)?|"
    r"version|build|model|ean|upc|asin|case|ticket|no\.?|nr\.?|#)[\s:#.-]{0,3}$", re.IGNORECASE)
_STREET_WORDS = {
    "EN": ("street|st|road|rd|avenue|ave|lane|ln|drive|dr|close|way|place|pl|crescent|court|ct|gardens|terrace|"
           "grove|hill|square|sq|mews|row|walk|parade|boulevard|blvd|highway|hwy|parkway|pkwy|circle|cir|trail|"
           "green|park|rise|view|vale|wharf|yard|path|alley|heights|meadows?|mountains?|ridge|springs?|"
           "station|valley|village|views?|ways|wells?|brook|bridge|cove|creek|crossing|fields?|forest|fork|"
           "garden|gateway|harbor|haven|island|junction|knolls?|lake|landing|loop|manor|mill|orchard|oval|pass|"
           "pike|pine|plains?|plaza|point|port|prairie|ranch|river|shoals?|shore|summit|tunnel|turnpike|union|"
           "vista|burg|bypass|camp|canyon|cape|causeway|center|centre|cliffs?|club|common|corners?|course|"
           "curve|dale|dam|divide|estates?|expressway|extension|falls|ferry|flats?|ford|freeway|glen|hollow|"
           "inlet|keys?|light|loaf|lock|lodge|mall|motorway|mount|neck|radial|ramp|rapids?|rest|route|run|"
           "shoal|skyway|spur|stravenue|stream|throughway|trace|track|trafficway|underpass|viaduct|ville|way"),
    "DE": "straße|strasse|str\\.|weg|allee|platz|gasse|ring|damm|ufer|chaussee|steig|pfad|markt|hof|graben|berg|"
          "brücke|kamp|stieg|wall|zeile",
    "NL": "straat|laan|weg|plein|gracht|kade|dijk|singel|boulevard|park|hof|pad|steeg|markt|dreef|burg|baan|"
          "haven|wal|erf|veld|plantsoen",
    "FR": "rue|avenue|av\\.|boulevard|bd|place|chemin|allée|allee|impasse|quai|route|cours|passage|square|"
          "voie|sentier|rond-point|esplanade|promenade|faubourg|villa|cité|cite|hameau|parvis",
    "ES": "calle|c/|avenida|avda\\.?|av\\.|plaza|pza\\.|paseo|callejón|callejon|camino|carrer|ronda|travesía|"
          "travesia|vía|via|glorieta|pasaje|urbanización|urbanizacion|cañada|canada|carretera|rambla|"
          "acceso|alameda|bajada|cuesta|plazuela|polígono|poligono|puerta|sector|vereda|partida|barrio",
    "IT": "via|viale|piazza|piazzale|corso|largo|vicolo|contrada|incrocio|borgo|rotonda|strada|canale|stretto|"
          "lungomare|lungotevere|salita|vico|calle|campo|rione|traversa",
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
_NUM = r"\d{1,5}(?:[ -]?[a-zA-Z]\b|[-/]\d{1,4}| ?(?:bis|ter)\b)?"
_UNIT = r"(?:flat|studio|apartment|apt\.?|unit|suite|room)"


def _street_regex(regions: Iterable[str]) -> re.Pattern[str]:
    langs = {lang for r in regions for lang in _LANGS.get(r, ())}
    postal = "|".join(sorted({_POSTAL[r] for r in regions if r in _POSTAL}))
    tail = rf"(?:,? (?:{postal})\b)?" if postal else ""
    alts = []
    if "EN" in langs:
        # "12 Baker Street", "82 Rachel Centers"; "Flat 17, Janet Meadows" (a unit, then the street)
        alts.append(rf"\b(?:(?i:{_UNIT}) {_NUM}[,\n ]\s?|{_NUM} )(?:{_NAME} ){{1,3}}(?i:{_STREET_WORDS['EN']})s?\b\.?")
    for lang in ("DE", "NL") if langs & {"DE", "NL"} else ():
        if lang in langs:   # one word with the type at its end, or a name and the type word apart
            alts.append(rf"\b(?:{_NAME}[ -])?[A-ZÀ-ÖØ-Þ][\w-]{{0,30}}(?i:{_STREET_WORDS[lang]})\.? {_NUM}\b")
            alts.append(rf"\b(?:[A-ZÀ-ÖØ-Þ][\w-]{{1,30}} ){{1,2}}(?i:{_STREET_WORDS[lang]})\.? {_NUM}\b")
    if "FR" in langs:
        alts.append(rf"\b{_NUM},? (?i:{_STREET_WORDS['FR']}) (?:(?:de|du|des|de la|de l'|d')\s?)?{_NAME}(?: {_NAME}){{0,3}}")
    for lang in ("ES", "IT"):
        if lang in langs:
            alts.append(rf"\b(?i:{_STREET_WORDS[lang]}) (?:(?:de|del|de la|de los|de las|della|dei|di|delle|"
                        rf"degli)\s)?(?:{_NAME} ){{0,3}}{_NAME},? (?:n[º°o.]\s?)?{_NUM}\b")
    return re.compile(rf"(?:{'|'.join(alts)}){tail}")


_DIGITS = re.compile(r"\d+")


def _windows(runs: list[tuple[int, int]], before: int, after: int, size: int) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for a, b in runs:
        a, b = max(0, a - before), min(size, b + after)
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return merged


class RegionalFinder:
    """PHONE and STREET_ADDRESS spans for the named regions (``find(text) -> [Span]``)."""

    def __init__(self, regions: Iterable[str], entities: frozenset[str]) -> None:
        self.regions = tuple(regions)
        unknown = sorted(set(self.regions) - set(REGIONS))
        if unknown:
            raise ValueError(f"unknown region {', '.join(unknown)}; known: {', '.join(REGIONS)}")
        import phonenumbers   # the regions extra: Google's libphonenumber metadata

        self._pn = phonenumbers
        self._phones = "PHONE" in entities
        self._streets = _street_regex(self.regions) if "STREET_ADDRESS" in entities else None

    def find(self, text: str) -> list[Span]:
        """Both patterns run only in windows around the text's digit runs (a phone has 7
        digits, a street a house number or postal code), so prose costs one digit scan."""
        out: list[Span] = []
        runs = [m.span() for m in _DIGITS.finditer(text)]
        if not runs:
            return out
        if self._phones:
            for a, b in _windows(runs, 3, 26, len(text)):
                for m in _PHONE.finditer(text, a, b):
                    if self._is_phone(text, m.start(), m.group()):
                        out.append((m.start(), m.end(), "PHONE"))
        if self._streets is None:
            return out
        for a, b in _windows(runs, 90, 70, len(text)):
            for m in self._streets.finditer(text, a, b):
                # a unit on its own line ("Flat 17\nJanet Meadows"): the street line is masked (a
                # span never holds a control character: pii/patterns.py)
                cut = text.rfind("\n", m.start(), m.end())
                out.append((m.start() if cut < 0 else cut + 1, m.end(), "STREET_ADDRESS"))
        return out

    def _is_phone(self, text: str, start: int, candidate: str) -> bool:
        digits = re.sub(r"\D", "", candidate)
        if not 7 <= len(digits) <= 17 or _NOT_A_PHONE.search(text, max(0, start - 16), start):
            return False
        if re.fullmatch(r"\d+(?:\.\d+){1,3}", candidate):           # a version or a dotted date
            return False
        plain = candidate.isdigit()
        if plain and (len(digits) == 15 or (len(digits) == 13 and digits[:3] in ("978", "979"))):
            return False                                             # an IMEI, an ISBN-13 / EAN
        pn = self._pn
        tries = [None] if candidate.startswith(("+", "00")) else self.regions
        for region in tries:
            try:
                number = pn.parse("+" + candidate[2:] if candidate.startswith("00") else candidate, region)
            except pn.NumberParseException:
                continue
            if pn.is_valid_number(number) and (region is None or pn.region_code_for_number(number) in self.regions):
                return True
        return False


__all__ = ["REGIONS", "RegionalFinder"]
