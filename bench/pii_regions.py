"""Phones and street addresses by country, and look-alikes, for ``pii.regions`` (pii/regional.py).

    python3 bench/pii_regions.py [--regions US,GB,DE,FR,ES,IT,NL] [--per 60]

Values come from outside generators, never written here (licences: bench/eval_sets/SOURCES.md):

- phones: ``phonenumbers``' example numbers for each region (every number type it has
  one for: fixed line, mobile, toll free, premium, shared cost, VoIP, personal, UAN...) in
  national, international and E.164 format; and Faker's ``phone_number`` for the region's
  locale, seeded (its own national formats: ``(08063) 60837``, ``+34 878 915 000``);
- streets: Faker's ``street_address`` (and ``address``'s first line) for the locale, seeded;
- look-alikes: Faker's ISBN-10 / ISBN-13 and EAN-8 / EAN-13 barcodes, IMEIs with the check
  digit python-stdnum computes (``stdnum.imei``), UPS-style tracking numbers and version
  strings from Faker's ``bothify`` / ``numerify`` over the shapes python-stdnum and semver name
  (``1Z###...``, ``#.#.#``), part numbers of Faker's ``ean``/``upc`` digits in groups.

Each value is put in a sentence (``Please call {} tomorrow.``); a value counts as found when
one PHONE (or STREET_ADDRESS) span covers its digits (a street: covers its house number and
street word). Look-alikes must get no span at all. Then the CPU per KB of the built-in
detector with and without the regions, on 2 KB of prose with everyday numbers.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

from tokenward.pii.patterns import PatternDetector  # noqa: E402

LOCALES = {"US": "en_US", "GB": "en_GB", "DE": "de_DE", "FR": "fr_FR", "ES": "es_ES", "IT": "it_IT", "NL": "nl_NL",
           "AT": "de_AT", "CH": "de_CH", "BE": "fr_BE", "IE": "en_IE", "PT": "pt_PT", "PL": "pl_PL", "SE": "sv_SE",
           "BR": "pt_BR", "CA": "en_CA", "AU": "en_AU"}
PHONE_FRAMES = ("Please call {} tomorrow.", "My number is {}.", "Reach the office on {} after 9.")
STREET_FRAMES = ("I live at {}.", "Ship it to {}, please.", "The meeting is at {} on Monday.")


def phones(region: str, per: int) -> list[str]:
    import phonenumbers
    from faker import Faker

    pn = phonenumbers
    out = []
    for kind in pn.PhoneNumberType.values() if hasattr(pn.PhoneNumberType, "values") else range(12):
        ex = pn.example_number_for_type(region, kind)
        if ex is None:
            continue
        for fmt in (pn.PhoneNumberFormat.NATIONAL, pn.PhoneNumberFormat.INTERNATIONAL, pn.PhoneNumberFormat.E164):
            out.append(pn.format_number(ex, fmt))
    fake = Faker(LOCALES[region])
    fake.seed_instance(40)
    out += [fake.phone_number() for _ in range(per)]
    return list(dict.fromkeys(out))


def streets(region: str, per: int) -> list[str]:
    from faker import Faker

    fake = Faker(LOCALES[region])
    fake.seed_instance(40)
    return list(dict.fromkeys(fake.street_address() for _ in range(per)))


def lookalikes(per: int) -> dict[str, list[str]]:
    from faker import Faker
    from stdnum import luhn

    fake = Faker("en_US")
    fake.seed_instance(40)
    out: dict[str, list[str]] = {"isbn": [], "ean": [], "imei": [], "tracking": [], "version": [], "part": []}
    for _ in range(per):
        out["isbn"] += [f"ISBN {fake.isbn13()}", f"ISBN-10 {fake.isbn10()}", fake.isbn13()]
        out["ean"] += [fake.ean13(), fake.ean8()]
        body = fake.numerify("35##########%#")
        out["imei"] += [body + luhn.calc_check_digit(body)]
        out["tracking"] += [fake.bothify("1Z###???##########").upper(), fake.numerify("9400 1#### #### #### #### ##")]
        out["version"] += [fake.numerify("v%.#.#"), fake.numerify("%.##.#"), fake.numerify("%.#.##.####")]
        ean = fake.ean13()
        out["part"] += [f"{ean[:3]}-{ean[3:5]}-{ean[5:9]}", f"{ean[:4]}-{ean[4:8]}-{ean[8:12]}"]
    return out


def covered(spans, text: str, value: str, start: int, label: str, anchors) -> bool:
    end = start + len(value)
    return any(e == label and a <= start + anchors[0] and b >= start + anchors[1] for a, b, e in spans)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--regions", default="US,GB,DE,FR,ES,IT,NL")
    parser.add_argument("--per", type=int, default=60)
    args = parser.parse_args()
    regions = args.regions.split(",")
    detector = PatternDetector(None, regions)
    plain = PatternDetector(None)
    print(f"regions {', '.join(regions)}; built-in patterns with pii.regions")
    print(f"{'region':<7} {'phones found':>16} {'streets found':>16}")
    for region in regions:
        row = []
        for label, values, frames in (("PHONE", phones(region, args.per), PHONE_FRAMES),
                                      ("STREET_ADDRESS", streets(region, args.per), STREET_FRAMES)):
            found = 0
            for i, value in enumerate(values):
                text = frames[i % len(frames)].format(value)
                start = text.index(value)
                digits = [m.span() for m in re.finditer(r"\d+", value)]
                anchors = (digits[0][0], digits[-1][1]) if label == "PHONE" and digits else (0, len(value.split()[0]))
                if label == "STREET_ADDRESS":    # the street line (a flat or studio line above it may stay)
                    line = value.rfind("\n") + 1
                    anchors = (line, line + len(value[line:].split()[0]))
                found += covered(detector.find(text), text, value, start, label, anchors)
            row.append(f"{found}/{len(values)} ({found / max(len(values), 1):.0%})")
        print(f"{region:<7} {row[0]:>16} {row[1]:>16}")
    masked = 0
    total = 0
    for family, values in lookalikes(args.per // 2).items():
        hits = [v for v in values if detector.find(f"Reference: {v} (see the attached list).")]
        kinds = {e for v in hits for _, _, e in detector.find(f"Reference: {v} (see the attached list).")}
        total += len(values)
        masked += len(hits)
        print(f"look-alikes {family:<9} {len(hits)}/{len(values)} masked {sorted(kinds) if kinds else ''}")
    print(f"look-alikes masked in all: {masked}/{total}")
    prose = (Path(ROOT / "bench" / "pii_recall.py").read_text().split("_PROSE = (")[1].split(")\n")[0])
    text = re.sub(r'"\s*"', "", prose).strip('"\n ')[:2048]
    text = (text + " Order 4417 shipped on 12 March; 3 items, 25% off, room 204, version 2.4.1. ")[:2048]
    for name, det in (("without regions", plain), ("with regions", detector)):
        det.find(text)
        started = time.process_time_ns()
        for _ in range(2000):
            det.find(text)
        us = (time.process_time_ns() - started) / 2000 / 1000
        print(f"CPU per call on 2 KB of prose with everyday numbers, {name}: {us:.1f} us ({us / 2:.1f} us per KB)")


if __name__ == "__main__":
    main()
