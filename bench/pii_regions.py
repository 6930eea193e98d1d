"""Phones and street addresses by country, and look-alikes, for ``pii.regions`` (pii/regional.py).

    python3 bench/pii_regions.py [--regions US,GB,DE,FR,ES,IT,NL] [--per 60] [--seed 40]

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
street word). Look-alikes must get no span at all; each is put in every frame of its family
(``LOOKALIKE_FRAMES``): frames where a word says what the number is (``Part {}``, ``IMEI
{}``, ``Reference: {}``), and one **bare** frame with no such word, reported apart (a bare
``483-06-0224`` is an SSN as far as any reader can tell).

The seed: 40 is the reported run; the rules were written against seed 1's misses (dev).

Then the CPU of the built-in detectors with and without the regions: the personal-data
patterns alone on 2 KB of prose with one numbered sentence and on 2 KB of number-heavy prose
(bench/pii_recall.py's, a number every few words), and the detectors of the ``standard``
policy together (injection heuristic + patterns) on the same texts.
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


def phones(region: str, per: int, seed: int) -> list[str]:
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
    fake.seed_instance(seed)
    out += [fake.phone_number() for _ in range(per)]
    return list(dict.fromkeys(out))


def streets(region: str, per: int, seed: int) -> list[str]:
    from faker import Faker

    fake = Faker(LOCALES[region])
    fake.seed_instance(seed)
    return list(dict.fromkeys(fake.street_address() for _ in range(per)))


# Frames per family: the first ones name what the number is; the last (None key) is bare.
LOOKALIKE_FRAMES = {
    "isbn": ("Reference: {} (see the attached list).", "The book's ISBN is {}.", "Please order two copies of {}."),
    "ean": ("Reference: {} (see the attached list).", "Scan barcode {} at the till.", "It rang up as {} twice."),
    "imei": ("Reference: {} (see the attached list).", "The handset's IMEI is {}.", "Unlock {} for the new owner."),
    "tracking": ("Reference: {} (see the attached list).", "Your parcel {} left the depot.",
                 "Use {} on the carrier's site."),
    "version": ("Reference: {} (see the attached list).", "We pinned the agent at version {}.",
                "Upgrade to {} tonight."),
    "part": ("Reference: {} (see the attached list).", "Part {} fits the 2019 model.", "SKU {} is back in stock.",
             "Order spare part no. {} from the supplier.", "Replace the filter with {} before May."),
}


def lookalikes(per: int, seed: int) -> dict[str, list[str]]:
    from faker import Faker
    from stdnum import luhn

    fake = Faker("en_US")
    fake.seed_instance(seed)
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


def recall_table(detector: PatternDetector, regions: list[str], per: int, seed: int) -> None:
    print(f"{'region':<7} {'phones found':>16} {'streets found':>16}")
    for region in regions:
        row = []
        for label, values, frames in (("PHONE", phones(region, per, seed), PHONE_FRAMES),
                                      ("STREET_ADDRESS", streets(region, per, seed), STREET_FRAMES)):
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


def lookalike_table(detector: PatternDetector, per: int, seed: int) -> None:
    named = [0, 0]
    bare = [0, 0]
    for family, values in lookalikes(per, seed).items():
        frames = LOOKALIKE_FRAMES[family]
        for k, frame in enumerate(frames):
            texts = [frame.format(v) for v in values]
            hits = [(t, detector.find(t)) for t in texts]
            hits = [(t, spans) for t, spans in hits if spans]
            kinds = sorted({e for _, spans in hits for _, _, e in spans})
            tally = bare if k == len(frames) - 1 else named
            tally[0] += len(hits)
            tally[1] += len(texts)
            print(f"look-alikes {family:<9} {'bare ' if tally is bare else 'named'} {len(hits):>3}/{len(texts)} masked "
                  f"{kinds if kinds else ''}  frame: {frame!r}")
            for text, spans in hits[:2]:
                print(f"    e.g. {text!r}: {[(text[a:b], e) for a, b, e in spans]}")
    print(f"look-alikes masked, frames naming what the number is: {named[0]}/{named[1]}; bare frames: "
          f"{bare[0]}/{bare[1]}")


def cpu_table(regions: list[str]) -> None:
    from bench.pii_recall import prose_2kb
    from tokenward.screening.injection import HeuristicInjection

    prose = (Path(ROOT / "bench" / "pii_recall.py").read_text().split("_PROSE = (")[1].split(")\n")[0])
    text = re.sub(r'"\s*"', "", prose).strip('"\n ')[:2048]
    light = (text + " Order 4417 shipped on 12 March; 3 items, 25% off, room 204, version 2.4.1. ")[:2048]
    heavy = (prose_2kb(True)[:1900] + " Order 4417 shipped on 12 March; 3 items, 25% off, room 204, version 2.4.1. ")
    heavy = heavy[:2048]
    plain, regional, injection = PatternDetector(None), PatternDetector(None, regions), HeuristicInjection()

    def per_call(fn, n: int = 2000) -> float:   # the least of 5 rounds: other load only adds
        fn()
        best = float("inf")
        for _ in range(5):
            started = time.process_time_ns()
            for _ in range(n):
                fn()
            best = min(best, (time.process_time_ns() - started) / n / 1000)
        return best

    for name, sample in (("2 KB prose, one numbered sentence", light), ("2 KB number-heavy prose", heavy)):
        digits = len(re.findall(r"\d+", sample))
        print(f"CPU per call, {name} ({len(sample)} chars, {digits} digit runs):")
        for label, fn in (("patterns", lambda: plain.find(sample)),
                          ("patterns + regions", lambda: regional.find(sample)),
                          ("injection + patterns", lambda: (injection.score([sample]), plain.find(sample))),
                          ("injection + patterns + regions", lambda: (injection.score([sample]), regional.find(sample)))):
            us = per_call(fn)
            print(f"  {label:<32} {us:7.1f} us ({us * 1024 / len(sample):.1f} us per KB)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--regions", default="US,GB,DE,FR,ES,IT,NL")
    parser.add_argument("--per", type=int, default=60)
    parser.add_argument("--seed", type=int, default=40, help="Faker's seed (40: the reported run; 1: dev)")
    parser.add_argument("--no-cpu", action="store_true")
    args = parser.parse_args()
    regions = args.regions.split(",")
    detector = PatternDetector(None, regions)
    print(f"regions {', '.join(regions)}; built-in patterns with pii.regions; seed {args.seed}")
    recall_table(detector, regions, args.per, args.seed)
    lookalike_table(detector, args.per // 2, args.seed)
    if not args.no_cpu:
        cpu_table(regions)


if __name__ == "__main__":
    main()
