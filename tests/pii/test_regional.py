"""Phones and streets by country (pii/regional.py, ``pii.regions``): national formats are
found, look-alikes are not. Examples written here; the measured recall per region is
docs/pii-recall.md's (bench/pii_regions.py, on Faker and phonenumbers values)."""

from __future__ import annotations

import pytest

from tokenward.pii.patterns import PatternDetector

pytest.importorskip("phonenumbers")
REGIONS = ["US", "GB", "DE", "FR", "ES", "IT", "NL"]


@pytest.mark.parametrize("text, value, label", [
    ("Llámame al 612 345 678 mañana", "612 345 678", "PHONE"),
    ("Ruf an: (030) 1234567", "(030) 1234567", "PHONE"),
    ("Tel +33 2 41 50 00 80 merci", "+33 2 41 50 00 80", "PHONE"),
    ("Er wohnt in der Hauptstraße 12, 10115 Berlin.", "Hauptstraße 12, 10115", "STREET_ADDRESS"),
    ("Envoyez-le au 8, avenue Lesage.", "8, avenue Lesage", "STREET_ADDRESS"),
    ("Vivo en Calle Mayor 5.", "Calle Mayor 5", "STREET_ADDRESS"),
    ("Abito in Via Roma, 12.", "Via Roma, 12", "STREET_ADDRESS"),
    ("Mijn adres is Lindenlaan 7.", "Lindenlaan 7", "STREET_ADDRESS"),
    ("Schick es an Berliner Str. 5, danke.", "Berliner Str. 5", "STREET_ADDRESS"),
    ("Vive en C. de Olegario Robledo 24 Puerta 9.", "C. de Olegario Robledo 24", "STREET_ADDRESS"),
    ("Abito in Via Roma, nº 12.", "Via Roma, nº 12", "STREET_ADDRESS"),
    ("Livrez au rue de Cohen, merci.", "rue de Cohen", "STREET_ADDRESS"),
    ("Studio 12\nO'Neill Isle", "O'Neill Isle", "STREET_ADDRESS"),
    ("Send it to Flat 17, Janet Meadows please", "Flat 17, Janet Meadows", "STREET_ADDRESS"),
    ("Sein Pager: 16412345", "16412345", "PHONE"),   # German pagers are written without the trunk 0
])
def test_national_formats_are_found(text, value, label):
    start = text.index(value)
    assert any(a <= start and b >= start + len(value) and e == label
               for a, b, e in PatternDetector(None, REGIONS).find(text))


@pytest.mark.parametrize("text", [
    "ISBN 978-3-16-148410-0", "IMEI 356938035643809", "version 10.2.3.4", "Tracking: 1Z999AA10123456784",
    "Order no. 4417 shipped on 12 March 2025.",
    "Part 483-06-0224 fits the 2019 model.",                 # an SSN's shape and a valid area
    "SKU 0483-9116-2616 is back in stock.",                  # a national phone's shape
    "Order spare part no. 4830-6022-4045 from the supplier.",
    "Your parcel 9400 11162 0079 7058 3499 30 left the depot.",
    "It rang up as 68129392 twice.",                         # German 0681 29392 without its trunk 0
    "Replace it with 4830-6022-4045 before May.",            # groups of four in hyphens: a code
    # read in the evaluation sets' benign tool outputs (agentdojo, botocore, protectrag)
    '{"read": true, "timestamp": "2024-05-12 19:00:00"}',    # a timestamp, not a number to call
    "Open Monday through Friday, 9 AM to 5 PM EST.",          # "EST" is a time zone, not an Estate
    "Route 53 Global Resolver is a global service.",          # "is" is a verb, not USPS's "Is"land
])
def test_look_alikes_are_left_alone(text):
    assert PatternDetector(None, REGIONS).find(text) == []
    assert PatternDetector(None).find(text) == []


def test_a_bare_ssn_shape_is_still_an_ssn():
    """No word says what it is: area rules are all there is, and the number is masked."""
    text = "Replace it with 483-06-0224 before May."
    assert PatternDetector(None).find(text) == [(16, 27, "US_SSN")]


def test_an_unknown_region_is_refused_by_name():
    with pytest.raises(ValueError, match="unknown region XX"):
        PatternDetector(None, ["XX"])
