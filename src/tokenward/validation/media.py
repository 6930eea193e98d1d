"""Attachments: never fetched, decoded under a cap, typed by their bytes, not their label.

- A remote URL (``http(s)://``, ``file:``, anything but a ``data:`` URL) is refused with
  ``remote_media_denied``: the gateway does no network I/O at ingress, and a backend
  fetching a caller's URL is a server-side request forgery waiting to happen. A
  ``file_id`` (a file stored elsewhere) is refused the same way: it cannot be checked.
- A ``data:`` payload's encoded length is checked against the plan's
  ``max_attachment_bytes`` before a byte is decoded; strict base64 only (a lenient
  decoder and the backend's could disagree on what the bytes are).
- The real type comes from magic bytes; the declared type is ignored. It must be one of
  the plan's ``allow_files`` (``files_not_entitled``; ``image/*`` style wildcards work)
  and fit the part it came in (an image part must hold an image). Unrecognized or
  undecodable payloads, and images whose header does not give a sane size, are
  ``attachment_rejected``.

Each attachment adds work: the plan's ``attachment_surcharge`` plus an upper bound of
the tokens it can become (28x28-pixel patches for images, one per byte for text).
"""

from __future__ import annotations

import binascii
import re
import struct

from ..config.schema import PlanConfig
from ..errors import Reason, Refusal

# A decompression bomb guard: no legitimate prompt image is larger than this.
MAX_IMAGE_PIXELS = 64_000_000
_PATCH = 28
_BINARY = re.compile(rb"[\x00-\x08\x0b\x0e-\x1f\x7f]")


class Attachment:
    """One checked attachment. A file whose text can be read keeps it: ``text`` for plain
    text at once, ``data`` for a PDF until the validation stage has it read in a sandbox
    (attachments/pdf.py). ``path`` is the part's place in the request, for masking."""

    __slots__ = ("kind", "size", "tokens", "path", "text", "data")

    def __init__(self, kind: str, size: int, tokens: int, data: bytes | None = None) -> None:
        self.kind = kind
        self.size = size
        self.tokens = tokens
        self.path: tuple[str | int, ...] | None = None   # ("messages", i, "content", j)
        self.text: str | None = None
        self.data: bytes | None = None
        if kind == "text/plain" and data is not None:
            self.text = data.decode("utf-8", "replace")
        elif kind == "application/pdf":
            self.data = data

    def __repr__(self) -> str:
        return f"Attachment({self.kind}, {self.size} bytes, {self.tokens} tokens)"


def _rejected(param: str, why: str) -> Refusal:
    return Refusal(Reason.attachment_rejected, f"{param}: {why}", param=param)


def remote_denied(param: str) -> Refusal:
    return Refusal(Reason.remote_media_denied,
                   f"{param}: only inline data: URLs are accepted; the gateway does not fetch remote media",
                   param=param)


def sniff(data: bytes) -> str | None:
    """The media type the bytes really are, from their magic numbers."""
    head = data[:16]
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if head.startswith(b"RIFF") and head[8:12] == b"WEBP":
        return "image/webp"
    if head.startswith(b"RIFF") and head[8:12] == b"WAVE":
        return "audio/wav"
    if head.startswith(b"ID3") or (len(head) > 1 and head[0] == 0xFF and head[1] & 0xE0 == 0xE0):
        return "audio/mpeg"
    if head.startswith(b"%PDF-"):
        return "application/pdf"
    return "text/plain" if _is_text(data) else None


def _is_text(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    # Control characters other than tab, newline, form feed and carriage return mean binary.
    return _BINARY.search(data) is None


def image_size(data: bytes, kind: str) -> tuple[int, int] | None:
    """(width, height) from the image header, or None if the header is unreadable."""
    try:
        if kind == "image/png":
            return struct.unpack(">II", data[16:24]) if data[12:16] == b"IHDR" else None
        if kind == "image/gif":
            return struct.unpack("<HH", data[6:10])
        if kind == "image/webp":
            return _webp_size(data)
        if kind == "image/jpeg":
            return _jpeg_size(data)
    except struct.error:
        return None
    return None


def _webp_size(data: bytes) -> tuple[int, int] | None:
    chunk = data[12:16]
    if chunk == b"VP8 " and data[23:26] == b"\x9d\x01\x2a":
        w, h = struct.unpack("<HH", data[26:30])
        return w & 0x3FFF, h & 0x3FFF
    if chunk == b"VP8L" and data[20:21] == b"\x2f":
        bits = int.from_bytes(data[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if chunk == b"VP8X":
        return int.from_bytes(data[24:27], "little") + 1, int.from_bytes(data[27:30], "little") + 1
    return None


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    # Walk the segment chain to the first start-of-frame; each step jumps a whole segment.
    pos, end = 2, len(data)
    while pos + 9 < end:
        if data[pos] != 0xFF:
            return None
        marker = data[pos + 1]
        if marker in (0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF):
            h, w = struct.unpack(">HH", data[pos + 5:pos + 9])
            return w, h
        if marker == 0xFF:
            pos += 1
            continue
        pos += 2 + struct.unpack(">H", data[pos + 2:pos + 4])[0]
    return None


def allowed(kind: str, allow_files: tuple[str, ...]) -> bool:
    if kind in allow_files:
        return True
    family = kind.split("/", 1)[0]
    return f"{family}/*" in allow_files or "*/*" in allow_files


def decode_base64(payload: str, param: str, cap: int) -> bytes:
    # Checked on the encoded length, so an oversized payload is refused undecoded.
    if (len(payload) // 4) * 3 > cap + 2:
        raise _rejected(param, f"attachment is larger than {cap} bytes")
    try:
        data = binascii.a2b_base64(payload, strict_mode=True)
    except (binascii.Error, ValueError):
        raise _rejected(param, "attachment is not valid base64") from None
    if len(data) > cap:
        raise _rejected(param, f"attachment is larger than {cap} bytes")
    if not data:
        raise _rejected(param, "attachment is empty")
    return data


def data_url_payload(url: str, param: str) -> str:
    """The base64 part of a ``data:...;base64,`` URL; anything else is refused."""
    if not url[:5].lower() == "data:":
        raise remote_denied(param)
    comma = url.find(",")
    if comma < 0 or not url[5:comma].lower().endswith(";base64"):
        raise _rejected(param, "only base64 data: URLs are accepted")
    return url[comma + 1:]


def check_payload(data: bytes, param: str, family: str | None, plan: PlanConfig) -> Attachment:
    """Sniff, check against the plan and the part's family, and bound the tokens it adds."""
    kind = sniff(data)
    if kind is None:
        raise _rejected(param, "unrecognized attachment content")
    if family is not None and not kind.startswith(family):
        raise _rejected(param, f"content is {kind}, not {family.rstrip('/')}")
    if not allowed(kind, plan.allow_files):
        raise Refusal(Reason.files_not_entitled, f"{param}: {kind} attachments are not allowed on this plan",
                      param=param)
    tokens = plan.attachment_surcharge
    if kind.startswith("image/"):
        size = image_size(data, kind)
        if size is None or size[0] < 1 or size[1] < 1 or size[0] * size[1] > MAX_IMAGE_PIXELS:
            raise _rejected(param, "image header is unreadable or the image is too large")
        tokens += -(-size[0] // _PATCH) * -(-size[1] // _PATCH)
    elif kind == "text/plain":
        tokens += len(data)
    return Attachment(kind, len(data), tokens, data)


def image_part(url: str, param: str, plan: PlanConfig) -> Attachment:
    payload = data_url_payload(url, param)
    return check_payload(decode_base64(payload, param, plan.max_attachment_bytes), param, "image/", plan)


def audio_part(data: str, param: str, plan: PlanConfig) -> Attachment:
    return check_payload(decode_base64(data, param, plan.max_attachment_bytes), param, "audio/", plan)


def file_part(file_data: str, param: str, plan: PlanConfig) -> Attachment:
    # OpenAI's examples send a data: URL; some clients send bare base64.
    if "://" in file_data[:16]:
        raise remote_denied(param)
    payload = data_url_payload(file_data, param) if file_data[:5].lower() == "data:" else file_data
    return check_payload(decode_base64(payload, param, plan.max_attachment_bytes), param, None, plan)
