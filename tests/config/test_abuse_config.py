"""config/abuse.py's structs keep the schema's rules: every number has a decided range,
every default is inside it (tests/config/test_ranges.py does this for schema.py's own)."""

from __future__ import annotations

import typing

import msgspec

from tokenward.config import abuse, parse_config, schema

from .test_ranges import _numeric

STRUCTS = [obj for obj in vars(abuse).values()
           if isinstance(obj, type) and issubclass(obj, msgspec.Struct) and obj.__module__ == abuse.__name__
           and obj is not abuse._Strict]


def test_every_numeric_field_has_a_range_and_its_default_is_in_it():
    for struct in STRUCTS:
        hints = typing.get_type_hints(struct)
        ranges = schema.RANGES.get(struct, {})
        for field in msgspec.structs.fields(struct):
            if _numeric(hints[field.name]):
                assert field.name in ranges, f"{struct.__name__}.{field.name}"
                if field.default is not msgspec.NODEFAULT and field.default is not None:
                    assert ranges[field.name].holds(field.default), f"{struct.__name__}.{field.name}"


def test_defaults_load_and_rules_are_optional():
    cfg = parse_config("abuse: {}\n", environ={})
    assert cfg.abuse.shadow is True and [r.name for r in cfg.abuse.rules][:2] == ["stolen-key-reduce",
                                                                                  "stolen-key-suspend"]
    assert parse_config("", environ={}).abuse is None
