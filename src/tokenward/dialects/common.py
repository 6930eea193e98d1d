"""What the dialects share: refusal codes, strict sub-decodes, ids, SSE framing."""

from __future__ import annotations

import secrets
from typing import Annotated, Any

import msgspec
from msgspec import Meta

from ..errors import Reason, Refusal
from ..validation.bounded import decode_refusal, too_deep, validation_refusal

# State the API issued and a client sends back as it got it (a thinking block's
# ``signature``, ``redacted_thinking.data``, ``encrypted_content``): base64 (standard or
# URL-safe), at most 1 MiB. Never masked; counted as one token per byte. Anything else in
# such a field (a sentence, an e-mail) is ``invalid_field``.
OPAQUE_MAX = 1 << 20
Opaque = Annotated[str, Meta(pattern=r"^[A-Za-z0-9+/_=-]*$", max_length=OPAQUE_MAX)]
# Ids of items, calls and stored objects (``toolu_01...``, ``call_...``, ``fc_...``): no
# space, no ``@``: structure, not text.
StateId = Annotated[str, Meta(pattern=r"^[A-Za-z0-9_.:+/=|-]{1,256}$")]


class Unsupported(msgspec.Struct, frozen=True):
    """A request feature that only an upstream serving the dialect natively can honour."""

    param: str
    message: str
    # a native upstream can do it (state, server tools); False: the gateway could neither
    # count nor screen it, so it is refused whatever the upstream (a file kept at the provider)
    native: bool = True

    def refusal(self) -> Refusal:
        return Refusal(Reason.invalid_field, self.message, param=self.param)


def decode_sub(raw: bytes, decoder: msgspec.json.Decoder[Any], prefix: str) -> Any:
    """One free-form element decoded strictly, errors naming it by its place in the body."""
    try:
        return decoder.decode(raw)
    except msgspec.ValidationError as exc:
        inner = validation_refusal(exc)
        param = prefix if not inner.param else f"{prefix}.{inner.param}"
        message = inner.message.replace(inner.param, param) if inner.param else f"{inner.message} at {prefix}"
        raise Refusal(inner.reason, message, param=param) from None
    except msgspec.DecodeError as exc:  # pragma: no cover - the body decode validated it
        raise decode_refusal(exc) from None
    except RecursionError:
        raise too_deep(prefix) from None


class _TypePeek(msgspec.Struct):
    type: object = None


_peek = msgspec.json.Decoder(_TypePeek).decode


def type_of(raw: bytes, default: str | None = None) -> object:
    """The ``type`` field of an already valid JSON object (``default`` when absent)."""
    try:
        value = _peek(raw).type
    except (msgspec.ValidationError, msgspec.DecodeError):
        return None
    return default if value is None else value


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(12)}"


_encode = msgspec.json.Encoder().encode


def encode(value: Any) -> bytes:
    return _encode(value)


def sse(event: str, payload: Any) -> bytes:
    """One named server-sent event (both dialects name their events)."""
    return b"event: " + event.encode() + b"\ndata: " + _encode(payload) + b"\n\n"
