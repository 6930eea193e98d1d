"""Hostile (and a few friendly) PDFs, made in code so no binary file is committed.

The PDF bytes are written by hand (objects, a cross-reference table with correct
offsets, a trailer), so each file is exactly the shape it claims to be: a page tree
whose /Kids all name the same page, a catalog nested 100,000 arrays deep, a stream
that declares a terabyte, a content stream that inflates to hundreds of megabytes,
a page whose few kilobytes of operators take pypdf seconds to read.
Only ``encrypted_pdf`` uses pypdf, and only in the test process, to write the
encryption dictionary correctly.
"""

from __future__ import annotations

import functools
import io
import zlib
from typing import Sequence

HELLO = "Hello World"
BOMB_INFLATED_BYTES = 400 * 1024 * 1024

_FONT = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"
_MEDIA_BOX = b"[0 0 612 792]"


def build_pdf(objects: Sequence[bytes], *, trailer_extra: bytes = b"") -> bytes:
    """A PDF whose object ``n`` (1-based) is ``objects[n - 1]``; object 1 is the catalog."""
    out = io.BytesIO()
    out.write(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n" % number + body + b"\nendobj\n")
    xref_at = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    for offset in offsets:
        out.write(b"%010d 00000 n \n" % offset)
    out.write(b"trailer\n<< /Size %d /Root 1 0 R " % (len(objects) + 1))
    out.write(trailer_extra + b">>\nstartxref\n%d\n%%%%EOF\n" % xref_at)
    return out.getvalue()


def stream(data: bytes, *, entries: bytes = b"", length: int | None = None) -> bytes:
    """A stream object body; ``length`` overrides the true /Length (to lie about it)."""
    declared = len(data) if length is None else length
    return b"<< /Length %d %s>>\nstream\n" % (declared, entries) + data + b"\nendstream"


def _escape(text: str) -> bytes:
    raw = text.encode("latin-1")
    return raw.replace(b"\\", b"\\\\").replace(b"(", b"\\(").replace(b")", b"\\)")


def text_content(text: str) -> bytes:
    return b"BT /F1 12 Tf 72 720 Td (" + _escape(text) + b") Tj ET"


def page(parent: int, font: int, contents: int) -> bytes:
    return (
        b"<< /Type /Page /Parent %d 0 R /MediaBox %s "
        b"/Resources << /Font << /F1 %d 0 R >> >> /Contents %d 0 R >>"
        % (parent, _MEDIA_BOX, font, contents)
    )


def text_pdf(texts: Sequence[str]) -> bytes:
    """A valid PDF with one page per string, each drawn in Helvetica.

    Objects: 1 catalog, 2 page tree, 3 font, then a (page, content) pair per page.
    """
    kids = b" ".join(b"%d 0 R" % (4 + 2 * i) for i in range(len(texts)))
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, len(texts)),
        _FONT,
    ]
    for i, text in enumerate(texts):
        objects.append(page(2, 3, 5 + 2 * i))
        objects.append(stream(text_content(text)))
    return build_pdf(objects)


def valid_pdf() -> bytes:
    """Three pages of known text; the first says Hello World."""
    return text_pdf([HELLO, "Second page says goodbye", "Third page, the last"])


def many_pages_pdf(pages: int) -> bytes:
    """An honest PDF with ``pages`` real pages (to exceed a small max_pages)."""
    return text_pdf([f"Page {n}" for n in range(1, pages + 1)])


def page_bomb(pages: int = 100_000, *, honest_count: bool = True) -> bytes:
    """A page tree whose /Kids name the same page object ``pages`` times.

    With ``honest_count=False`` the tree's /Count claims a single page, so only a
    walk of the tree can tell.
    """
    kids = b"4 0 R " * pages
    count = pages if honest_count else 1
    return build_pdf([
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, count),
        _FONT,
        page(2, 3, 5),
        stream(text_content(HELLO)),
    ])


def deep_nesting(depth: int = 100_000, *, dictionaries: bool = False) -> bytes:
    """A catalog that carries an array (or dictionary) nested ``depth`` levels deep."""
    if dictionaries:
        deep = b"<< /A " * depth + b"1" + b" >>" * depth
    else:
        deep = b"[" * depth + b"1" + b"]" * depth
    return build_pdf([
        b"<< /Type /Catalog /Pages 2 0 R /Deep " + deep + b" >>",
        b"<< /Type /Pages /Kids [4 0 R] /Count 1 >>",
        _FONT,
        page(2, 3, 5),
        stream(text_content(HELLO)),
    ])


def truncated_pdf() -> bytes:
    """A valid PDF cut in half: no cross-reference table, no trailer."""
    whole = valid_pdf()
    return whole[: len(whole) // 2]


def huge_declared_length() -> bytes:
    """A content stream that declares /Length 999999999999 and carries a few bytes."""
    return build_pdf([
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [4 0 R] /Count 1 >>",
        _FONT,
        page(2, 3, 5),
        stream(text_content(HELLO), length=999_999_999_999),
    ])


@functools.lru_cache(maxsize=None)
def _deflated_zeros(size: int) -> bytes:
    """``size`` zero bytes, deflated a megabyte at a time (never held inflated here)."""
    packer = zlib.compressobj(9)
    chunk = bytes(1024 * 1024)
    parts = [packer.compress(chunk) for _ in range(size // len(chunk))]
    parts.append(packer.flush())
    return b"".join(parts)


def decompression_bomb(inflated: int = BOMB_INFLATED_BYTES) -> bytes:
    """A page whose FlateDecode content stream inflates to ``inflated`` bytes."""
    packed = _deflated_zeros(inflated)
    return build_pdf([
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [4 0 R] /Count 1 >>",
        _FONT,
        page(2, 3, 5),
        stream(packed, entries=b"/Filter /FlateDecode "),
    ])


def slow_page(operations: int = 600_000) -> bytes:
    """A page of ``operations`` tiny text-showing operators: a few kilobytes that
    keep pypdf's text extraction busy for seconds (under its own parsing limits),
    so only the CPU or wall-clock limit stops it."""
    content = zlib.compress(b"BT /F1 12 Tf 72 720 Td " + b"(a) Tj " * operations + b"ET", 9)
    return build_pdf([
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [4 0 R] /Count 1 >>",
        _FONT,
        page(2, 3, 5),
        stream(content, entries=b"/Filter /FlateDecode "),
    ])


def not_a_pdf() -> bytes:
    """The start of a ZIP archive."""
    return b"PK\x03\x04" + bytes(200)


def garbage_after_magic() -> bytes:
    """Passes the parent's magic check, then nothing but noise."""
    return b"%PDF-1.7\n" + bytes(range(256)) * 16


def encrypted_pdf() -> bytes:
    """The valid PDF, encrypted with a user password (written by pypdf)."""
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(valid_pdf())))
    writer.encrypt(user_password="secret", owner_password="owner", algorithm="AES-256")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()
