"""Rebuild the outside personal-data (PII) evaluation set from pinned PyPI wheels.

    python3 bench/eval_sets/build_pii.py [--cache DIR] [--check]

No sentence with personal data and no value in it is written here:

- **sentences**: the templates of ``presidio-evaluator`` (MIT; Microsoft's evaluation
  framework for Presidio), ``presidio_evaluator/data_generator/raw_data/templates.txt``;
- **values**: Faker (MIT) locale providers, seeded per row (names in six locales, phone
  numbers in nine locales, cards of every brand Faker knows, US street addresses built
  from the USPS suffix list Faker ships, IBANs, SSNs, public IPv4s, e-mails), and the
  example numbers of ``phonenumbers`` (Apache-2.0; Google's libphonenumber metadata) for
  fixed-line, mobile and toll-free lines of 13 countries, written in national and
  international format;
- **look-alikes** (texts with no personal data that must not be masked): the frames in
  ``LOOKALIKE_FRAMES`` are written here (there is no third-party set of them); their values
  are Faker's (ISBNs, EANs, dates, dotted version numbers, order and invoice numbers).

Steps: ``pip download --no-deps`` each pinned wheel into the cache (default
``~/.cache/tokenward-eval``), check its sha256, import Faker and phonenumbers from the
wheels themselves (zipimport: the installed versions do not matter), render every usable
template ``RENDERINGS`` times with values seeded by the template and the rendering, and
split by a hash of the template (so no sentence shape is in both parts): ``dev`` (40%, tune
on) and ``test`` (60%, report on, never tune on). Phone example numbers are split by a
hash of the number and put into a phone template of their own split. Faker phone values
that are not even a possible number for their country (``phonenumbers.is_possible_number``:
length only) are drawn again. Writes ``pii_dev.jsonl``, ``pii_test.jsonl`` and
``pii_sources.json`` beside this file and the licences under ``licenses/``. Same pins, same
bytes. ``--check`` rebuilds in memory and fails if the committed files differ.

Row: ``{"id", "text", "entities": [{"type", "value", "start", "end"}], "lookalike",
"source"}``. Planted types: PERSON, PHONE, CREDIT_CARD, STREET_ADDRESS, EMAIL, IBAN,
US_SSN, IP_ADDRESS. For an ``{{address}}`` the planted STREET_ADDRESS value is the street
line (house number, street, unit); city, state and ZIP around it are not planted.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
import zipfile
from datetime import date, timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent

PINS = {
    "presidio-evaluator": ("0.3.2", "57614fe604e52b78e6de25b767c59265886b93bbcdc6c7e43ab2657d3f6302be", "MIT"),
    "faker": ("40.54.0", "2dd88ee8cb63a9149e19ef48bdd73879bc3854d8ba2d6c1535e902a762e603f7", "MIT"),
    "phonenumbers": ("9.0.43", "349bc799f15e010e35bd2c7d28149950ae74479cb1e11fb054ed9a95ecb4b437", "Apache-2.0"),
}
TEMPLATES = "presidio_evaluator/data_generator/raw_data/templates.txt"
DEV_SHARE = 40
RENDERINGS = 3
NAME_LOCALES = ("en_US", "en_US", "en_US", "en_GB", "de_DE", "fr_FR", "es_ES", "it_IT")
PHONE_LOCALES = ("en_US", "en_US", "en_CA", "en_GB", "en_GB", "de_DE", "fr_FR", "nl_NL", "en_AU", "it_IT")
CARD_TYPES = ("visa13", "visa16", "visa19", "mastercard", "amex", "discover", "diners", "jcb15", "jcb16", "maestro")
EXAMPLE_REGIONS = ("US", "CA", "GB", "DE", "FR", "NL", "AU", "IE", "CH", "AT", "BE", "SE", "JP")

PERSON_TOKENS = {"person", "name", "name_male", "name_female", "first_name", "last_name", "first_name_male",
                 "first_name_female", "first_name_nonbinary", "last_name_male", "last_name_female"}
PLANTED = {"phone_number": "PHONE", "credit_card_number": "CREDIT_CARD", "email": "EMAIL", "iban": "IBAN",
           "ssn": "US_SSN", "ip_address": "IP_ADDRESS", "address": "STREET_ADDRESS", "street": "STREET_ADDRESS"}
# filled but not planted (not personal on their own)
OTHER = {"organization": "company", "city": "city", "country": "country", "url": "url", "year": "year",
         "job": "job", "date_time": "date_time", "date_of_birth": "date_of_birth", "day_of_week": "day_of_week",
         "postcode": "postcode", "zipcode": "zipcode", "state_abbr": "state_abbr", "street_name": "street_name",
         "secondary_address": "secondary_address", "building_number": "building_number",
         "prefix_male": "prefix_male", "prefix_female": "prefix_female", "prefix": "prefix"}
TOKEN = re.compile(r"\{\{([a-z_0-9]+)\}\}")
FIXED_DAY = date(2026, 1, 1)   # dates are drawn before it, never relative to the day of the build


def day(f) -> date:
    return f.date_between_dates(date(1995, 1, 1), FIXED_DAY)

# Texts with no personal data: every span a detector returns on them is a false positive.
LOOKALIKE_FRAMES = (
    ("version", "After the upgrade to firmware {v4} the router stopped dropping packets."),
    ("version", "We pinned the agent at version {v4} until the fix ships."),
    ("version", "Release notes for v{v4}: faster start-up and two crash fixes."),
    ("version", "The build log shows the driver {v4} was loaded twice."),
    ("version", "Bumping libfoo from {v3} to {v4} broke the ABI check."),
    ("isbn", "The book's ISBN is {isbn13}; the older edition was {isbn10}."),
    ("isbn", "Please order two copies of ISBN {isbn13} for the library."),
    ("ean", "Scan barcode {ean13} at the till if the tag is missing."),
    ("order", "Your order {order} shipped on {date} and should arrive within five days."),
    ("order", "Invoice INV-{inv} is due on {date}; the PO number is {po}."),
    ("order", "Ticket {ticket} was merged into {ticket2} yesterday."),
    ("date", "The meeting moved from {date} to {date2} at {time}."),
    ("date", "Logs between {date} {time} and {date2} {time} were rotated."),
    ("number", "The batch processed {count} rows in {secs} seconds ({pct}% cache hits)."),
    ("number", "Part number {part} replaces part {part2} in the {year} model."),
    ("hash", "Commit {sha} fixed the race; see build {build} for the artefacts."),
    ("number", "The tracking number {tracking} belongs to parcel 3 of 4."),
    ("version", "Kernel {v3}-{build}-generic panicked after {v4} of the module loaded."),
)


def wheel(cache: Path, name: str) -> Path:
    version, sha, _ = PINS[name]
    stem = name.replace("-", "_")
    found = sorted(cache.glob(f"{stem}-{version}-*.whl"))
    if not found:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q",
                        "-d", str(cache), f"{name}=={version}"], check=True)
        found = sorted(cache.glob(f"{stem}-{version}-*.whl"))
    if hashlib.sha256(found[0].read_bytes()).hexdigest() != sha:
        sys.exit(f"{found[0].name}: sha256 differs from the pin")
    return found[0]


def licence_text(path: Path) -> str:
    with zipfile.ZipFile(path) as z:
        names = sorted(n for n in z.namelist() if re.search(r"\.dist-info/(?:licenses/)?LICEN[CS]E", n))
        return "\n\n".join(z.read(n).decode("utf-8") for n in names)


def h(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


def in_dev(key: str) -> bool:
    return h(key) % 100 < DEV_SHARE


class Values:
    """Faker and phonenumbers, imported from the pinned wheels, seeded per call site."""

    def __init__(self, faker_whl: Path, pn_whl: Path) -> None:
        sys.path[:0] = [str(faker_whl), str(pn_whl)]
        import faker
        import phonenumbers

        assert faker.VERSION == PINS["faker"][0], faker.VERSION
        self.faker = faker
        self.pn = phonenumbers
        self._fakers: dict[str, object] = {}

    def fake(self, locale: str, seed: int):
        f = self._fakers.get(locale)
        if f is None:
            f = self._fakers[locale] = self.faker.Faker(locale)
        f.seed_instance(seed)
        return f

    def person(self, token: str, seed: int) -> str:
        f = self.fake(NAME_LOCALES[seed % len(NAME_LOCALES)], seed)
        if token in ("person", "name", "name_male", "name_female"):
            first = {"name_male": f.first_name_male, "name_female": f.first_name_female}.get(token, f.first_name)
            return f"{first()} {f.last_name()}"
        return getattr(f, token if token != "first_name_nonbinary" else "first_name")()

    def phone(self, seed: int) -> str:
        locale = PHONE_LOCALES[seed % len(PHONE_LOCALES)]
        region = locale.split("_")[1].replace("UK", "GB")
        f = self.fake(locale, seed)
        for _ in range(20):
            value = f.phone_number()
            try:
                if self.pn.is_possible_number(self.pn.parse(value, region)):
                    return value
            except self.pn.NumberParseException:
                pass
        raise RuntimeError(f"no possible {locale} number")

    def card(self, seed: int) -> str:
        kind = CARD_TYPES[seed % len(CARD_TYPES)]
        number = self.fake("en_US", seed).credit_card_number(kind)
        if (seed >> 8) % 3 == 0:  # a third written in groups, as printed on the card
            cuts = (4, 10) if kind == "amex" else tuple(range(4, len(number), 4))
            parts = [number[a:b] for a, b in zip((0,) + cuts, cuts + (len(number),))]
            number = " ".join(parts)
        return number

    def street(self, seed: int) -> str:
        return self.fake("en_US", seed).street_address()

    def address(self, seed: int) -> tuple[str, str]:
        f = self.fake("en_US", seed)
        street = f.street_address()
        sep = "\n" if seed % 2 else ", "
        return street, f"{street}{sep}{f.city()}, {f.state_abbr()} {f.postcode()}"

    def simple(self, token: str, seed: int) -> str:
        f = self.fake("en_US", seed)
        if token == "email":
            return f.email()
        if token == "iban":
            return self.fake(("en_GB", "de_DE", "fr_FR", "nl_NL", "es_ES")[seed % 5], seed).iban()
        if token == "ssn":
            return f.ssn()
        if token == "ip_address":
            return f.ipv4_public()
        if token == "age":
            return str(f.random_int(18, 90))
        # Faker's dates, years and weekdays are drawn relative to today: fixed bounds instead
        if token == "date_of_birth":
            return f.date_between_dates(FIXED_DAY - timedelta(days=80 * 365), FIXED_DAY).strftime("%B %d, %Y")
        if token == "date":
            return f.date_between_dates(FIXED_DAY - timedelta(days=30 * 365), FIXED_DAY).isoformat()
        if token == "date_time":  # Faker's date() ends at now: the set changed with the day it was built
            return f.date_between_dates(date(1970, 1, 1), FIXED_DAY).isoformat()
        if token == "year":
            return str(f.random_int(1950, FIXED_DAY.year))
        if token == "day_of_week":
            return f.random_element(("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"))
        return str(getattr(f, OTHER[token])())


def render(template: str, values: Values, seed: int, phone: str | None = None) -> tuple[str, list[dict]]:
    """The template with every token filled, and the planted entities with offsets."""
    template = template.replace("\\n", "\n").replace("\\,", ",")
    # "{{building_number}} {{street_name}}[ {{secondary_address}}]" is one street line
    template = re.sub(r"\{\{building_number\}\} \{\{street_name\}\}(?: \{\{secondary_address\}\})?",
                      "{{street}}", template)
    out: list[str] = []
    entities: list[dict] = []
    pos = 0
    for i, m in enumerate(TOKEN.finditer(template)):
        out.append(template[pos:m.start()])
        offset = sum(map(len, out))
        token, s = m.group(1), seed * 131 + i
        kind = "PERSON" if token in PERSON_TOKENS else PLANTED.get(token)
        planted = None
        if token in PERSON_TOKENS:
            value = planted = values.person(token, s)
        elif token == "phone_number":
            value = planted = phone if phone is not None else values.phone(s)
        elif token == "credit_card_number":
            value = planted = values.card(s)
        elif token == "address":
            planted, value = values.address(s)
        elif token == "street":
            value = planted = values.street(s)
        else:
            value = values.simple(token, s)
            planted = value if kind else None
        out.append(value)
        if planted is not None:
            entities.append({"type": kind, "value": planted, "start": offset, "end": offset + len(planted)})
        pos = m.end()
    out.append(template[pos:])
    return "".join(out), entities


def usable(line: str) -> bool:
    tokens = set(TOKEN.findall(line))
    known = PERSON_TOKENS | set(PLANTED) | set(OTHER) | {"age"}
    return bool(tokens & (PERSON_TOKENS | set(PLANTED))) and tokens <= known and "{street_name}" not in line.replace(
        "{{street_name}}", "")


def example_numbers(values: Values) -> list[str]:
    pn = values.pn
    types = (pn.PhoneNumberType.FIXED_LINE, pn.PhoneNumberType.MOBILE, pn.PhoneNumberType.TOLL_FREE)
    numbers: list[str] = []
    for region in EXAMPLE_REGIONS:
        for t in types:
            n = pn.example_number_for_type(region, t)
            if n is None:
                continue
            for fmt in (pn.PhoneNumberFormat.NATIONAL, pn.PhoneNumberFormat.INTERNATIONAL):
                value = pn.format_number(n, fmt)
                if value not in numbers:
                    numbers.append(value)
    return numbers


def lookalikes(values: Values) -> list[dict]:
    rows = []
    for k, (family, frame) in enumerate(LOOKALIKE_FRAMES):
        for r in range(RENDERINGS):
            seed = h(f"lookalike:{k}:{r}") % 2**32
            f = values.fake("en_US", seed)
            v4 = ".".join(str(f.random_int(0, 30)) for _ in range(4))
            fill = {
                "v4": v4, "v3": ".".join(str(f.random_int(0, 20)) for _ in range(3)),
                "isbn13": f.isbn13(), "isbn10": f.isbn10(), "ean13": f.ean13(),
                "order": f.bothify("#########"), "inv": f.numerify("2024-#####"), "po": f.numerify("########"),
                "ticket": f.bothify("??-####").upper(), "ticket2": f.bothify("??-####").upper(),
                "date": day(f).isoformat(), "date2": day(f).strftime("%d/%m/%Y"),
                "time": f"{f.random_int(0, 23):02d}:{f.random_int(0, 59):02d}",
                "count": str(f.random_int(1000, 999999)), "secs": f"{f.pyfloat(2, 2, positive=True)}",
                "pct": str(f.random_int(1, 99)), "part": f.numerify("###-####-##"), "part2": f.numerify("###-####-##"),
                "year": str(f.random_int(1990, FIXED_DAY.year)), "sha": f.sha1()[:12], "build": f.numerify("#####"),
                "tracking": f.numerify("1Z###########"),
            }
            text = frame.format(**fill)
            rows.append({"id": f"look-{k:02d}-{r}", "text": text, "entities": [], "lookalike": True,
                         "family": family, "source": "build_pii.py LOOKALIKE_FRAMES (values: faker)",
                         "split": "dev" if in_dev(frame) else "test"})
    return rows


def build(cache: Path) -> tuple[dict[str, list[dict]], dict, dict[str, str]]:
    paths = {name: wheel(cache, name) for name in PINS}
    values = Values(paths["faker"], paths["phonenumbers"])
    with zipfile.ZipFile(paths["presidio-evaluator"]) as z:
        lines = z.read(TEMPLATES).decode("utf-8", "replace").splitlines()
    rows: list[dict] = []
    phone_templates: dict[str, list[int]] = {"dev": [], "test": []}
    for lineno, line in enumerate(lines, 1):
        line = line.strip()
        if not line or not usable(line):
            continue
        split = "dev" if in_dev(line) else "test"
        if "{{phone_number}}" in line and line.count("{{") <= 2:
            phone_templates[split].append(lineno)
        for r in range(RENDERINGS):
            text, entities = render(line, values, h(f"{lineno}:{r}") % 2**32)
            rows.append({"id": f"tpl-{lineno:03d}-{r}", "text": text, "entities": entities, "lookalike": False,
                         "source": f"presidio-evaluator {TEMPLATES}:{lineno}", "split": split})
    for k, number in enumerate(example_numbers(values)):
        split = "dev" if in_dev(number) else "test"
        choices = phone_templates[split]
        lineno = choices[h(number) % len(choices)]
        text, entities = render(lines[lineno - 1].strip(), values, h(number) % 2**32, phone=number)
        rows.append({"id": f"pn-{k:03d}", "text": text, "entities": entities, "lookalike": False,
                     "source": f"phonenumbers example number; template presidio-evaluator {TEMPLATES}:{lineno}",
                     "split": split})
    rows.extend(lookalikes(values))
    splits = {"dev": [], "test": []}
    for row in rows:
        splits[row.pop("split")].append(row)
    licences = {f"licenses/{name}.txt": licence_text(path) for name, path in paths.items()}
    return splits, sources(splits), licences


def sources(splits: dict[str, list[dict]]) -> dict:
    out: dict = {name: {"version": v, "sha256": sha, "licence": lic, "licence_file": f"licenses/{name}.txt"}
                 for name, (v, sha, lic) in PINS.items()}
    for split, rows in splits.items():
        counts: dict[str, int] = {}
        for row in rows:
            for e in row["entities"]:
                counts[e["type"]] = counts.get(e["type"], 0) + 1
        out[f"_{split}"] = {"texts": sum(not r["lookalike"] for r in rows),
                            "lookalikes": sum(r["lookalike"] for r in rows), "planted": dict(sorted(counts.items()))}
    return out


def dump(rows: list[dict]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "tokenward-eval")
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
    splits, stats, licences = build(args.cache)
    files = {"pii_dev.jsonl": dump(splits["dev"]), "pii_test.jsonl": dump(splits["test"]),
             "pii_sources.json": json.dumps(stats, indent=1, sort_keys=True) + "\n", **licences}
    if args.check:
        differ = [name for name, text in files.items() if (HERE / name).read_bytes() != text.encode("utf-8")]
        sys.exit(f"differs from a rebuild: {', '.join(differ)}" if differ else 0)
    for name, text in files.items():
        (HERE / name).write_bytes(text.encode("utf-8"))
    print(json.dumps({k: v for k, v in stats.items() if k.startswith("_")}, indent=1))


if __name__ == "__main__":
    main()
