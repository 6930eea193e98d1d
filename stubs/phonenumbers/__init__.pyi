# Local stubs: only what tokenward calls of phonenumbers (the regions extra), so that mypy
# gives one answer whether the extra is installed or not; the signatures are those of the
# package's own stubs. Checked against the installed package by tests/unit/test_stubs.py.
class PhoneNumber:
    country_code: int | None
    national_number: int | None

class PhoneMetadata:
    national_prefix: str | None
    @classmethod
    def metadata_for_region(cls, region_code: str, default: PhoneMetadata | None = ...) -> PhoneMetadata | None: ...

class PhoneNumberFormat:
    E164: int
    INTERNATIONAL: int
    NATIONAL: int
    RFC3966: int

class NumberParseException(Exception): ...

def parse(number: str, region: str | None = ..., keep_raw_input: bool = ..., numobj: PhoneNumber | None = ...,
          _check_region: bool = ...) -> PhoneNumber: ...
def is_valid_number(numobj: PhoneNumber) -> bool: ...
def format_number(numobj: PhoneNumber, num_format: int) -> str: ...
def country_code_for_region(region_code: str) -> int: ...
