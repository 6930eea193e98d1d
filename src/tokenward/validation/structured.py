"""Structured output policy: JSON schemas under caps, regex-style constraints off by default.

A JSON schema (``response_format.json_schema.schema``, a tool's ``parameters``,
vLLM's ``guided_json`` / ``structured_outputs.json``) is compiled into a grammar by the
backend, so it is decoded under the plan's ``max_schema_bytes`` / ``max_schema_depth``
before it is forwarded. ``json_schema`` response formats need the ``structured_output``
feature (the entitlement stage's name for it; it refuses first when it runs).

Regular expressions are admitted on any plan when the gateway can show they are cheap to
compile (validation/regex_cost.py: a small subset of the syntax, small counted
repetitions, no nested quantifier, and a DFA the gateway built itself within a small
budget); any other needs the plan's ``guided_regex`` feature: backends compile them
without a timeout (GHSA-48jh-3gj7-fg8v). That covers ``guided_regex``,
``structured_outputs.regex``, whitespace patterns, and the ``pattern`` /
``patternProperties`` keywords inside any JSON schema (found by walking the schema as a
schema, so a *property named* ``pattern`` is not mistaken for the keyword; a schema's
regex matches anywhere in the string, so it is judged with ``.*`` where it has no anchor).

Agents send the same tool schemas on every call, so each verdict is cached by the
schema's bytes (no request text is kept: schemas are the caller's code, not a prompt) and
the tenant (memos.py): another tenant's schema is never checked faster.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Final

import msgspec
from msgspec import UNSET

from .. import memos
from ..config.schema import PlanConfig
from ..errors import Reason, Refusal
from .bounded import decode_free_form
from .plan import feature_hint
from .regex_cost import cheap, why_not_cheap
from .findings import Findings
from .schemas import JsonObjectFormat, JsonSchemaFormat, NamedToolChoice

REGEX_FEATURE: Final = "guided_regex"
JSON_SCHEMA_FEATURE: Final = "structured_output"
# Keywords whose value maps names to schemas, and keywords whose value is data, not schema.
_SCHEMA_MAPS = frozenset({"properties", "$defs", "definitions", "dependentSchemas"})
_DATA = frozenset({"enum", "const", "default", "examples", "example", "required", "description", "title"})


def denied(param: str, why: str) -> Refusal:
    return Refusal(Reason.structured_output_denied, f"{param}: {why}", param=param)


def _costly_regex(schema: Any) -> tuple[str, str] | None:
    """(where, why) of the first ``pattern`` / ``patternProperties`` regex in a schema
    that is not cheap to compile, if any."""
    stack: list[tuple[Any, str]] = [(schema, "")]
    while stack:
        node, where = stack.pop()
        if isinstance(node, list):
            stack.extend((item, f"{where}[{i}]") for i, item in enumerate(node))
            continue
        if not isinstance(node, dict):
            continue
        for key, value in node.items():
            here = f"{where}.{key}" if where else key
            if key == "pattern" and isinstance(value, str):
                why = why_not_cheap(value, unanchored=True)
                if why is not None:
                    return here, why
                continue
            if key == "patternProperties":
                found = _costly_keys(value, here)
                if found is not None:
                    return found
            if key in _DATA:
                continue
            if key in _SCHEMA_MAPS | {"patternProperties"} and isinstance(value, dict):
                stack.extend((sub, f"{here}.{name}") for name, sub in value.items())
            elif isinstance(value, (dict, list)):
                stack.append((value, here))
    return None


def _costly_keys(value: Any, here: str) -> tuple[str, str] | None:
    if not isinstance(value, dict):
        return here, "patternProperties must map regular expressions to schemas"
    for name in value:
        why = why_not_cheap(name, unanchored=True)
        if why is not None:
            return f"{here}.{name}", why
    return None


def _verdict(raw: bytes, param: str, max_bytes: int, max_depth: int, allow_regex: bool) -> Refusal | None:
    try:
        value = decode_free_form(msgspec.Raw(raw), param, max_bytes, max_depth)
        if isinstance(value, str):
            # vLLM also takes a schema serialized into a JSON string.
            value = decode_free_form(msgspec.Raw(value.encode()), param, max_bytes, max_depth)
    except Refusal as refusal:
        return refusal
    if not allow_regex:
        costly = _costly_regex(value)
        if costly is not None:
            where, why = costly
            return denied(param, f"the regular expression at {where} is not one the gateway can show is cheap to "
                                 f"compile ({why}); such expressions need the guided_regex feature on your plan"
                                 + feature_hint(REGEX_FEATURE))
    return None


@lru_cache(maxsize=1024)
def _tenant_verdict(raw: bytes, param: str, max_bytes: int, max_depth: int, allow_regex: bool,
                    tenant: str) -> Refusal | None:
    return _verdict(raw, param, max_bytes, max_depth, allow_regex)   # the tenant: only in the cache's key


# Only small schemas are cached, so the cache holds at most a few megabytes.
_CACHEABLE_BYTES = 4096


def check_schema(raw: msgspec.Raw, param: str, plan: PlanConfig, features: frozenset[str]) -> None:
    tenant = memos.current() if len(raw) <= _CACHEABLE_BYTES else None
    args = (bytes(raw), param, plan.max_schema_bytes, plan.max_schema_depth, REGEX_FEATURE in features)
    refusal = _verdict(*args) if tenant is None else _tenant_verdict(*args, tenant)
    if refusal is not None:
        # A fresh exception each time: a cached one would collect every raise's traceback.
        raise Refusal(refusal.reason, refusal.message, param=refusal.param)


def check_text_constraint(value: str, param: str, plan: PlanConfig, feature: str,
                          features: frozenset[str]) -> None:
    """A regex or grammar: only with its feature (a regex that is cheap to compile on any
    plan), and no larger than a schema may be."""
    if feature not in features and not (feature == REGEX_FEATURE and cheap(value)):
        why = why_not_cheap(value) if feature == REGEX_FEATURE else None
        raise denied(param, f"{feature} constraints are not enabled on this plan{feature_hint(feature)}"
                            + (f" (and this regular expression is not cheap to compile: {why})" if why else ""))
    if len(value) > plan.max_schema_bytes:
        raise Refusal(Reason.invalid_field, f"{param} is longer than {plan.max_schema_bytes} characters",
                      param=param)


def check_standard(req: Any, plan: PlanConfig, features: frozenset[str], findings: Findings) -> None:
    """``response_format``, tool parameter schemas and forcing tool choices."""
    fmt = req.response_format
    if isinstance(fmt, JsonSchemaFormat):
        if JSON_SCHEMA_FEATURE not in features:
            raise denied("response_format", "json_schema response formats are not enabled on this plan"
                         + feature_hint(JSON_SCHEMA_FEATURE))
        if fmt.json_schema.schema is not UNSET:
            check_schema(fmt.json_schema.schema, "response_format.json_schema.schema", plan, features)
        findings.constrained = True
    elif isinstance(fmt, JsonObjectFormat):
        findings.constrained = True
    tools = getattr(req, "tools", None)
    if tools:
        for i, tool in enumerate(tools):
            params = tool.function.parameters
            if params is not UNSET:
                check_schema(params, f"tools[{i}].function.parameters", plan, features)
        choice = req.tool_choice
        if choice == "required" or isinstance(choice, NamedToolChoice):
            findings.constrained = True
