"""Planted evaluation set for PII detectors: realistic texts with known entities, and look-alikes.

``PLANTED`` pairs each text with the (ENTITY, exact value) entities written into it; a
detector's recall on a type is the share of those values it returns as spans of that
type. PERSON and LOCATION are planted for detectors with a model (the optional Presidio
extra): the built-in pattern detector is not expected to find them. Every
checksum-bearing value (cards, IBANs, routing numbers, Bitcoin addresses) is a valid
one -- documented test numbers or values computed for this file -- and
``tests/pii/test_patterns.py`` re-verifies each with the checksum functions.

``LOOKALIKES`` are benign texts full of things shaped like PII (order numbers, dates,
versions, hashes, numbers failing their checksum, digits without a keyword); any span a
detector returns on them is a false positive.
"""

from __future__ import annotations

PLANTED: list[tuple[str, list[tuple[str, str]]]] = [
    (
        "Hi, this is Jane Doe. I can't log in to my account. Please reset it and email me at "
        "jane.doe@example.com, or call me on (415) 555-0132 after 5pm.",
        [("PERSON", "Jane Doe"), ("EMAIL", "jane.doe@example.com"), ("PHONE", "(415) 555-0132")],
    ),
    (
        "Ticket #48213 - customer Michael Okafor reports a double charge on card 4111 1111 1111 1111. "
        "Refund confirmation should go to m.okafor+billing@fastmail.co.uk.",
        [
            ("PERSON", "Michael Okafor"),
            ("CREDIT_CARD", "4111 1111 1111 1111"),
            ("EMAIL", "m.okafor+billing@fastmail.co.uk"),
        ],
    ),
    (
        "Name: Rosa González\nSSN: 536-22-1847\nDOB: 1987-03-14\nPhone: +1 (212) 555-0199\n"
        "Address: 742 Evergreen Terrace, Springfield, IL 62704",
        [
            ("PERSON", "Rosa González"),
            ("US_SSN", "536-22-1847"),
            ("PHONE", "+1 (212) 555-0199"),
            ("STREET_ADDRESS", "742 Evergreen Terrace, Springfield, IL 62704"),
        ],
    ),
    (
        "Please wire the deposit to IBAN DE89 3704 0044 0532 0130 00 (Commerzbank, Berlin). "
        "The landlord's UK account is GB29 NWBK 6016 1331 9268 19.",
        [
            ("IBAN", "DE89 3704 0044 0532 0130 00"),
            ("LOCATION", "Berlin"),
            ("IBAN", "GB29 NWBK 6016 1331 9268 19"),
        ],
    ),
    (
        "[chat] priya: my direct deposit keeps bouncing. routing number 021000021, account number "
        "4400123398. can someone from payroll check? - Priya Sharma",
        [
            ("ROUTING_NUMBER", "021000021"),
            ("BANK_ACCOUNT", "4400123398"),
            ("PERSON", "Priya Sharma"),
        ],
    ),
    (
        "Firewall alert: repeated failed SSH logins from 203.0.113.45 and 2001:db8::8a2e:370:7334 "
        "against host 10.0.0.7 between 02:14 and 02:31 UTC.",
        [
            ("IP_ADDRESS", "203.0.113.45"),
            ("IP_ADDRESS", "2001:db8::8a2e:370:7334"),
            ("IP_ADDRESS", "10.0.0.7"),
        ],
    ),
    (
        "Send the 0.05 BTC refund to 1BvBMSEYstWetqTFn5Au4m4GFg7xJaNVN2, not to the old "
        "bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq wallet - that one was compromised.",
        [
            ("CRYPTO", "1BvBMSEYstWetqTFn5Au4m4GFg7xJaNVN2"),
            ("CRYPTO", "bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq"),
        ],
    ),
    (
        "Shipping form -- Recipient: Tom O'Neill, 350 Fifth Avenue, Suite 3300, New York, NY 10118. "
        "Contact: tom-oneill@example.org / 646-555-0143.",
        [
            ("PERSON", "Tom O'Neill"),
            ("STREET_ADDRESS", "350 Fifth Avenue, Suite 3300, New York, NY 10118"),
            ("EMAIL", "tom-oneill@example.org"),
            ("PHONE", "646-555-0143"),
        ],
    ),
    (
        "Hallo, ich bin Hans Müller aus München. Meine Kontonummer ist 0532013000, die IBAN lautet "
        "DE44500105175407324931. Erreichbar unter +49-30-123456.",
        [
            ("PERSON", "Hans Müller"),
            ("LOCATION", "München"),
            ("BANK_ACCOUNT", "0532013000"),
            ("IBAN", "DE44500105175407324931"),
            ("PHONE", "+49-30-123456"),
        ],
    ),
    (
        "Payment failed for Mastercard 5555-5555-5555-4444 and the backup Amex 378282246310005; "
        "the customer then tried Discover 6011 0009 9013 9424.",
        [
            ("CREDIT_CARD", "5555-5555-5555-4444"),
            ("CREDIT_CARD", "378282246310005"),
            ("CREDIT_CARD", "6011 0009 9013 9424"),
        ],
    ),
    (
        "Employee onboarding: Lee Chen, social security number 287-65-4321, start date 2025-02-03, "
        "home 1 Infinite Loop, Cupertino, CA 95014, personal mail LEE.CHEN@EXAMPLE.NET.",
        [
            ("PERSON", "Lee Chen"),
            ("US_SSN", "287-65-4321"),
            ("STREET_ADDRESS", "1 Infinite Loop, Cupertino, CA 95014"),
            ("EMAIL", "LEE.CHEN@EXAMPLE.NET"),
        ],
    ),
    (
        "Our Paris office (tel +33 1 42 68 53 00) will invoice you from FR14 2004 1010 0505 0001 3M02 606; "
        "the Madrid team uses ES91 2100 0418 4502 0005 1332.",
        [
            ("LOCATION", "Paris"),
            ("PHONE", "+33 1 42 68 53 00"),
            ("IBAN", "FR14 2004 1010 0505 0001 3M02 606"),
            ("LOCATION", "Madrid"),
            ("IBAN", "ES91 2100 0418 4502 0005 1332"),
        ],
    ),
    (
        "user: my card 4012888888881881 got declined at checkout, my ssn is 412 67 9031 if you need "
        "to verify, and you can text me at 6465550123",
        [
            ("CREDIT_CARD", "4012888888881881"),
            ("US_SSN", "412 67 9031"),
            ("PHONE", "6465550123"),
        ],
    ),
    (
        "Donations welcome: BTC 3J98t1WpEZ73CNmQviecrnyiWrnqRhWNLy or taproot "
        "bc1p0xlxvlhemja6c4dqv22uapctqupfhlxm9h8z3k2e72q4k9hcz7vqzk5jj0. Thanks from Aiko Tanaka in Osaka!",
        [
            ("CRYPTO", "3J98t1WpEZ73CNmQviecrnyiWrnqRhWNLy"),
            ("CRYPTO", "bc1p0xlxvlhemja6c4dqv22uapctqupfhlxm9h8z3k2e72q4k9hcz7vqzk5jj0"),
            ("PERSON", "Aiko Tanaka"),
            ("LOCATION", "Osaka"),
        ],
    ),
    (
        "Vendor bank details: ABA 026009593, acct #000123456789. Remit advice to "
        "support_team@acme-widgets.io.",
        [
            ("ROUTING_NUMBER", "026009593"),
            ("BANK_ACCOUNT", "000123456789"),
            ("EMAIL", "support_team@acme-widgets.io"),
        ],
    ),
    (
        "The VPN gives you 192.168.1.24 internally; DNS is 8.8.8.8 and the IPv6 gateway is "
        "fe80::1ff:fe23:4567:890a. Legacy clients still show ::ffff:192.0.2.128.",
        [
            ("IP_ADDRESS", "192.168.1.24"),
            ("IP_ADDRESS", "8.8.8.8"),
            ("IP_ADDRESS", "fe80::1ff:fe23:4567:890a"),
            ("IP_ADDRESS", "::ffff:192.0.2.128"),
        ],
    ),
    (
        "Return label: 1600 Pennsylvania Avenue NW, Washington, DC 20500. Questions? 1-800-555-0199 "
        "or 503.555.0147.",
        [
            ("STREET_ADDRESS", "1600 Pennsylvania Avenue NW, Washington, DC 20500"),
            ("PHONE", "1-800-555-0199"),
            ("PHONE", "503.555.0147"),
        ],
    ),
    (
        "Swiss payroll: CH93 0076 2011 6238 5295 7. Dutch supplier: NL91ABNA0417164300. "
        "Belgian office: BE68 5390 0754 7034. Polish subsidiary: PL61 1090 1014 0000 0712 1981 2874.",
        [
            ("IBAN", "CH93 0076 2011 6238 5295 7"),
            ("IBAN", "NL91ABNA0417164300"),
            ("IBAN", "BE68 5390 0754 7034"),
            ("IBAN", "PL61 1090 1014 0000 0712 1981 2874"),
        ],
    ),
    (
        "Hi team, Rosa here from Lisbon. The JCB card 3530 1113 3330 0000 and the new Mastercard "
        "2223 0031 2200 3222 both belong to the same customer; the Diners 3622 720627 1667 is closed.",
        [
            ("PERSON", "Rosa"),
            ("LOCATION", "Lisbon"),
            ("CREDIT_CARD", "3530 1113 3330 0000"),
            ("CREDIT_CARD", "2223 0031 2200 3222"),
            ("CREDIT_CARD", "3622 720627 1667"),
        ],
    ),
    (
        "W-9 correction: SSN 523-71-4402 (not 523-71-4420). Mail the form to 55 W 46th St, Apt 12B, "
        "New York, NY 10036-4103.",
        [
            ("US_SSN", "523-71-4402"),
            ("US_SSN", "523-71-4420"),
            ("STREET_ADDRESS", "55 W 46th St, Apt 12B, New York, NY 10036-4103"),
        ],
    ),
    (
        "Direct deposit form. Routing and account numbers: 121000358 and 55512340987. "
        "Employee: Aiko Tanaka, +81 3-1234-5678, aiko.tanaka@mail.example.jp.",
        [
            ("ROUTING_NUMBER", "121000358"),
            ("BANK_ACCOUNT", "55512340987"),
            ("PERSON", "Aiko Tanaka"),
            ("PHONE", "+81 3-1234-5678"),
            ("EMAIL", "aiko.tanaka@mail.example.jp"),
        ],
    ),
    (
        "From the cheque: account 011000015 / 8800456123. Please confirm with r.gonzalez@correo.example.es "
        "before Friday; she is in Toronto this week.",
        [
            ("ROUTING_NUMBER", "011000015"),
            ("BANK_ACCOUNT", "8800456123"),
            ("EMAIL", "r.gonzalez@correo.example.es"),
            ("LOCATION", "Toronto"),
        ],
    ),
    (
        "Lost wallet report: Visa 4539 1488 0343 6467, Amex 3714 496353 98431. Last seen near "
        "4059 Mt Lee Dr. Call 617 555 0123 or +44 20 7946 0958.",
        [
            ("CREDIT_CARD", "4539 1488 0343 6467"),
            ("CREDIT_CARD", "3714 496353 98431"),
            ("STREET_ADDRESS", "4059 Mt Lee Dr"),
            ("PHONE", "617 555 0123"),
            ("PHONE", "+44 20 7946 0958"),
        ],
    ),
    (
        "Admin panel export: user=first.last@sub.domain.example.com ip=2001:0db8:85a3:0000:0000:8a2e:0370:7334 "
        "last_ip=198.51.100.23 wallet=3LRW7jeCvQCRdPF8S3yUCfRAx4eqXFmdcr",
        [
            ("EMAIL", "first.last@sub.domain.example.com"),
            ("IP_ADDRESS", "2001:0db8:85a3:0000:0000:8a2e:0370:7334"),
            ("IP_ADDRESS", "198.51.100.23"),
            ("CRYPTO", "3LRW7jeCvQCRdPF8S3yUCfRAx4eqXFmdcr"),
        ],
    ),
    (
        "Refund request from Priya Sharma (Cape Town): a/c 31926819 at our UK partner, or the Italian "
        "account IT60 X054 2811 1010 0000 0123 456. Her India number is +91 98765 43210.",
        [
            ("PERSON", "Priya Sharma"),
            ("LOCATION", "Cape Town"),
            ("BANK_ACCOUNT", "31926819"),
            ("IBAN", "IT60 X054 2811 1010 0000 0123 456"),
            ("PHONE", "+91 98765 43210"),
        ],
    ),
    (
        "Tenant application: current address 8 Oak Lane #12, Portland, OR 97205; previous address "
        "221B Baker Street. SSN: 601240317. Savings account 7765432109.",
        [
            ("STREET_ADDRESS", "8 Oak Lane #12, Portland, OR 97205"),
            ("STREET_ADDRESS", "221B Baker Street"),
            ("US_SSN", "601240317"),
            ("BANK_ACCOUNT", "7765432109"),
        ],
    ),
    (
        "Payout setup: RTN 322271627, checking 000987654321. Backup wallet "
        "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4 and 1A1zP1eP5QGefi2DMPTfTL5SLmv7DivfNa.",
        [
            ("ROUTING_NUMBER", "322271627"),
            ("BANK_ACCOUNT", "000987654321"),
            ("CRYPTO", "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4"),
            ("CRYPTO", "1A1zP1eP5QGefi2DMPTfTL5SLmv7DivfNa"),
        ],
    ),
    (
        "Ship to 123 N Main St., Apt 4, Austin, TX 78701-1234 and bill card 5105 1051 0510 5100. "
        "Customer: Michael Okafor, priya.sharma@mail.example.in is cc'd.",
        [
            ("STREET_ADDRESS", "123 N Main St., Apt 4, Austin, TX 78701-1234"),
            ("CREDIT_CARD", "5105 1051 0510 5100"),
            ("PERSON", "Michael Okafor"),
            ("EMAIL", "priya.sharma@mail.example.in"),
        ],
    ),
]


LOOKALIKES: list[str] = [
    "Order #100234 shipped on 2024-01-15 at 14:32 and should arrive within 3-5 business days.",
    "Please upgrade to Python 3.11.7 before installing tokenward 0.1.0; 3.10.12 is no longer supported.",
    "Your UPS tracking number is 1Z999AA10123456784 and the FedEx one is 7489 2345 1234.",
    "Invoice INV-2024-000123 for $1,299.99 is due on 03/15/2025.",
    "Request 550e8400-e29b-41d4-a716-446655440000 failed with status 503 after 30.5 s.",
    "Fixed in commit 9fceb02d0ae598e95dc970b74767f19372d61af8, see also e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855.",
    "The front desk extension is 555-0132; dial 9 first for an outside line.",
    "Test data only: (123) 456-7890 and 012-345-6789 are not dialable numbers.",
    "Card number 4111 1111 1111 1112 failed validation, as did 5555 5555 5555 4445.",
    "Invalid SSNs from the form: 000-12-3456, 666-45-6789, 912-34-5678, 123-00-4567 and 123-45-0000.",
    "The IBAN DE89 3704 0044 0532 0130 01 has a bad check digit; GB00 NWBK 6016 1331 9268 19 too.",
    "We processed 4400123398 tokens last quarter, up from 3912004471.",
    "ISBN 978-0-306-40615-7 (ISBN-13: 9780306406157) is the reference edition.",
    "Prices: EUR 4.500,00 for the pro plan, USD 1,299.99 for enterprise, 19.99 for starter.",
    "The box measures 35.5 x 20.2 x 10.1 cm and weighs 12.5 kg.",
    "Meeting moved from 10:30:45 to 11:15; timezone UTC+02:00.",
    "Dates in the export: 15.01.2024, 2024/01/15, 01-15-2024 and 20240115.",
    "Version string 1.2.3.4.5 comes from the build, build 10.0.19041.1 from Windows.",
    "Room 101, Building 4, Floor 2 - take the elevator to the right.",
    "Bitcoin address 1A1zP1eP5QGefi2DMPTfTL5SLmv7DivfNb looks right but its checksum is wrong.",
    "Segwit address bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdz fails the bech32 checksum.",
    "Colour #ff0000 for errors and 0x7fffffff as the max int.",
    "Serial number SN 4829-1738-2291 is printed under the battery.",
    "Flight UA 1549 departs from gate 22 at 15:24.",
    "AAPL rose 2.35% to 189.43 while the index gained 0.8 points.",
    "The device MAC is 00:1A:2B:3C:4D:5E on VLAN 12.",
    "Bank routing numbers are nine digits long and account numbers vary by bank.",
    "The routing code 123456789 from the sample cheque is a placeholder.",
    "Account created on 2024-01-15; order 10023456 processed the next day.",
    "Population of the metro area is roughly 8336817 according to the census.",
    "Please reach us at support at example dot com or @tokenward on social media.",
    "Ticket TCK-884213 was escalated to tier 2 at 09:12.",
    "Gift card code 9999 8888 7777 6666 can be redeemed online.",
    "Addresses like 999.168.1.1 and 256.1.1.1 are invalid and rejected by the parser.",
    "The ratio was 1:2:3:4:5:6:7 across the seven cohorts.",
    "Unix timestamp 1700000000 corresponds to mid November 2023.",
    "Coordinates 37.7749, -122.4194 mark the office; elevation 16 m.",
    "Case 00123456 is closed; reopen it with case 00123457 if needed.",
    "Download 3.2 GB of logs, then run step 4 of 12 and wait about 45 minutes.",
    "The user foo@bar has no domain and admin@localhost is internal only.",
    "Product SKU 84-2231-09 costs 49.95 and ships in 2 boxes of 6.",
    "Call volume hit 1,234,567 calls in 2023, about 3,382 per day.",
    "The spec says we need 2 Factor Authentication and 10 Main Points in the summary.",
    "Our Q3 numbers: revenue 12.4M, churn 2.1%, NPS 41, and 987-65-4321 style test SSNs are rejected.",
    "std::vector<int> and a::b are C++, not addresses; neither is dead::beef in a log.",
    "Reference codes: PO-7781-2290, RMA 55123, and batch 2024-11-30-07.",
]
