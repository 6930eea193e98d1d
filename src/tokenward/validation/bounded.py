"""Bounded JSON: one strict decode of the body, and capped decodes of free-form values.

The body is decoded once by msgspec straight into the route's Struct. That single pass
is linear and already refuses what must never get further: invalid UTF-8, lone or
mismatched UTF-16 surrogate escapes, ``NaN``/``Infinity`` literals, numbers that
overflow to infinity, trailing garbage. A typed field cannot nest deeper than its
schema, so only free-form values (``msgspec.Raw``: tool parameters, ``json_schema``,
some vLLM fields) can be deep; msgspec bounds its own recursion (a ``RecursionError``,
mapped to ``json_too_deep``), and each free-form value is then decoded on its own under
the plan's byte and depth caps before anything reads it.

msgspec's error messages are mapped to reason codes here, once, with ``param`` naming
the offending field in the request's own terms (``messages[0].content[1].text``).
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

from ..errors import Reason, Refusal
from ..wire.request_body import RequestBody

_AT = re.compile(r" - at `\$(.*)`$")
_KEY_AT = re.compile(r" - at `key` in `\$(.*)`$")
_any_decoder = msgspec.json.Decoder()


def _param(path: str) -> str | None:
    """``.messages[0].content`` (msgspec's path after ``$``) -> ``messages[0].content``."""
    path = path.replace("[...]", "")  # a dict value: the dict names the field
    if not path:
        return None
    return path[1:] if path.startswith(".") else path


def is_null(raw: msgspec.Raw) -> bool:
    return len(raw) == 4 and bytes(raw) == b"null"


def _join(parent: str | None, name: str) -> str:
    return f"{parent}.{name}" if parent else name


def _split(message: str) -> tuple[str, str | None]:
    """msgspec's message without its location, and the location as a param."""
    match = _KEY_AT.search(message)
    if match:
        return message[: match.start()], _param(match.group(1))
    match = _AT.search(message)
    if match:
        return message[: match.start()], _param(match.group(1))
    return message, None


def validation_refusal(exc: msgspec.ValidationError) -> Refusal:
    detail, param = _split(str(exc))
    if detail.startswith("Object contains unknown field `"):
        name = detail.split("`")[1]
        field = _join(param, name)
        return Refusal(Reason.unknown_field, f"Unrecognized request argument supplied: {field}", param=field)
    if detail.startswith("Object missing required field `"):
        field = _join(param, detail.split("`")[1])
        return Refusal(Reason.invalid_field, f"Missing required parameter: {field}", param=field)
    if detail.startswith("Number out of range"):
        return Refusal(Reason.invalid_json, "a number in the request is out of range (not finite)", param=param)
    if param is None and detail.startswith("Expected `object`"):
        return Refusal(Reason.invalid_json, "the request body must be a JSON object")
    where = f" at {param}" if param else ""
    return Refusal(Reason.invalid_field, f"Invalid value{where}: {detail}", param=param)


def decode_refusal(exc: msgspec.DecodeError) -> Refusal:
    return Refusal(Reason.invalid_json, f"We could not parse the JSON body of your request: {exc}")


def too_deep(param: str | None, limit: int | None = None) -> Refusal:
    where = f" at {param}" if param else ""
    bound = f" (more than {limit} levels)" if limit is not None else ""
    return Refusal(Reason.json_too_deep, f"JSON nested too deeply{where}{bound}", param=param)


def decode_request(body: RequestBody | bytes, decoder: msgspec.json.Decoder[Any]) -> Any:
    """The body as the route's Struct (a request body's typed view, wire/request_body.py),
    or a ``Refusal`` raised with the right reason."""
    try:
        return body.typed(decoder) if isinstance(body, RequestBody) else decoder.decode(body)
    except msgspec.ValidationError as exc:
        raise validation_refusal(exc) from None
    except msgspec.DecodeError as exc:
        raise decode_refusal(exc) from None
    except RecursionError:
        raise too_deep(None) from None


def decode_free_form(raw: msgspec.Raw, param: str, max_bytes: int, max_depth: int) -> Any:
    """A free-form JSON value under a byte cap and a depth cap (checked before use)."""
    if len(raw) > max_bytes:
        raise Refusal(Reason.invalid_field, f"{param} is larger than {max_bytes} bytes", param=param)
    try:
        value = _any_decoder.decode(raw)
    except RecursionError:
        raise too_deep(param, max_depth) from None
    except msgspec.ValidationError:
        raise Refusal(Reason.invalid_json, f"a number in {param} is out of range (not finite)",
                      param=param) from None
    except msgspec.DecodeError as exc:  # pragma: no cover - the body decode validated it
        raise decode_refusal(exc) from None
    if json_depth(value, max_depth) > max_depth:
        raise too_deep(param, max_depth)
    return value


def json_depth(value: Any, limit: int) -> int:
    """Nesting depth of decoded JSON (a scalar is 0), stopping once past ``limit``.

    Iterative, each container visited once: linear in the size of the value.
    """
    if not isinstance(value, (dict, list)):
        return 0
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    pop, push = stack.pop, stack.append
    while stack:
        node, depth = pop()
        if depth > deepest:
            deepest = depth
            if deepest > limit:
                return deepest
        children = node.values() if isinstance(node, dict) else node
        for child in children:
            if isinstance(child, (dict, list)):
                push((child, depth + 1))
    return deepest
