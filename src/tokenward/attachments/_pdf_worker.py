"""The sandboxed child that parses untrusted PDFs, one request at a time.

tokenward.attachments.pdf starts this file as a script
(``python -I -B _pdf_worker.py LIMITS_JSON``), never imports it: it is the only place
pypdf runs, so a hostile file can exhaust, hang or crash only this process. It needs
nothing from tokenward, so the interpreter starts isolated (-I: no PYTHON* variables,
no user site, no script directory on sys.path) and writes no bytecode (-B).

Before pypdf is imported the process fences itself in:
- rlimits: address space (memory), CPU seconds, no file growth (RLIMIT_FSIZE=0), few
  descriptors, no core dumps. They bound what pypdf can take however it misbehaves.
  Address space, file size, descriptors and cores are fixed for life (soft = hard).
  The CPU soft limit is renewed per request to "used so far + cpu_s", so a long-lived
  worker is not starved by its own history; its hard limit is a lifetime budget that
  the parent's recycling stays under. Crossing the soft limit delivers SIGXCPU, which
  kills the process (Python installs no handler for it).
- the protocol pipes are moved off descriptors 0 and 1, which then point at
  /dev/null, so nothing pypdf prints can corrupt a reply;
- an audit hook refuses sockets, subprocesses, exec/fork, ctypes and any open() for
  writing, so the child neither reaches the network nor writes files.

Protocol (both directions): a 4-byte big-endian length, then that many bytes.
Requests are raw PDF bytes; replies are UTF-8 JSON objects:
  {"ok": true, "ready": true}                       once, after start-up
  {"ok": true, "text": str, "truncated": bool}
  {"ok": false, "reason": str, "healthy": bool}     healthy=false: the child exits
Reasons are built here from fixed phrases, numbers and exception class names, never
from the file's content.
"""

from __future__ import annotations

import io
import json
import logging
import math
import os
import resource
import struct
import sys
import warnings
from typing import Any, BinaryIO, NamedTuple

_FRAME = struct.Struct(">I")
_MAX_OPEN_FILES = 16
_PAGE_SEPARATOR = "\n\n"
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
_DENIED_EVENTS = (
    "socket.", "subprocess.", "os.system", "os.exec", "os.posix_spawn", "os.spawn",
    "os.fork", "os.forkpty", "pty.", "ctypes.", "urllib.", "http.", "ftplib.",
    "smtplib.", "webbrowser.", "os.kill", "os.killpg", "signal.pthread_kill",
    "os.mkdir", "os.remove", "os.rename", "os.rmdir", "os.truncate", "os.link",
    "os.symlink", "os.chmod", "os.chown", "os.utime", "shutil.",
)


class WorkerLimits(NamedTuple):
    max_pages: int
    max_text_chars: int
    cpu_s: int
    memory_bytes: int
    lifetime_requests: int


class Rejected(Exception):
    """The file is refused; ``reason`` is safe to show (no file content)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


# --- the fence -------------------------------------------------------------------


def _fix_limit(which: int, value: int) -> None:
    """Set soft and hard to ``value`` (never above an inherited hard limit)."""
    _, hard = resource.getrlimit(which)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    resource.setrlimit(which, (value, value))


def _cpu_used() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def renew_cpu_budget(cpu_s: int) -> None:
    """Allow ``cpu_s`` more CPU seconds from now (the soft limit; hard stays)."""
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    soft = math.ceil(_cpu_used()) + cpu_s
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))


def apply_rlimits(limits: WorkerLimits) -> None:
    _fix_limit(resource.RLIMIT_CORE, 0)
    _fix_limit(resource.RLIMIT_FSIZE, 0)
    _fix_limit(resource.RLIMIT_NOFILE, _MAX_OPEN_FILES)
    _fix_limit(resource.RLIMIT_AS, limits.memory_bytes)
    lifetime = math.ceil(_cpu_used()) + limits.cpu_s * (limits.lifetime_requests + 2)
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    if hard == resource.RLIM_INFINITY or lifetime < hard:
        resource.setrlimit(resource.RLIMIT_CPU, (lifetime, lifetime))
    renew_cpu_budget(limits.cpu_s)


def take_protocol_pipes() -> tuple[BinaryIO, BinaryIO]:
    """Move stdin/stdout to private descriptors; 0 and 1 become /dev/null."""
    requests = os.fdopen(os.dup(0), "rb", buffering=0)
    replies = os.fdopen(os.dup(1), "wb")
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)
    return requests, replies


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event == "open":
        flags = args[2] if len(args) > 2 else 0
        if isinstance(flags, int) and flags & _WRITE_FLAGS:
            raise PermissionError("the PDF worker may not write files")
    elif event.startswith(_DENIED_EVENTS):
        raise PermissionError(f"{event} is not allowed in the PDF worker")


def install_audit_hook() -> None:
    sys.addaudithook(_audit)


def quiet_pypdf() -> None:
    """pypdf warns a lot about broken files; nobody reads it, so skip the work."""
    warnings.simplefilter("ignore")
    logging.getLogger("pypdf").setLevel(logging.CRITICAL + 1)
    logging.getLogger().setLevel(logging.CRITICAL + 1)


# --- the protocol ----------------------------------------------------------------


def _read_exact(stream: BinaryIO, size: int) -> bytes | None:
    chunks: list[bytes] = []
    remaining = size
    while remaining:
        chunk = stream.read(remaining)
        if not chunk:
            return None
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def receive(stream: BinaryIO) -> bytes | None:
    """The next request, or None when the parent has closed the pipe."""
    header = _read_exact(stream, _FRAME.size)
    if header is None:
        return None
    (size,) = _FRAME.unpack(header)
    return _read_exact(stream, size)


def send(stream: BinaryIO, reply: dict[str, Any]) -> None:
    body = json.dumps(reply, ensure_ascii=False).encode("utf-8", "replace")
    stream.write(_FRAME.pack(len(body)) + body)
    stream.flush()


# --- reading a PDF ---------------------------------------------------------------


def _walk_page_tree(root: Any, max_pages: int) -> int:
    """Count the leaves of the page tree, giving up as soon as there are too many.

    Kids are counted by reference (the same page named twice is two pages, as every
    viewer shows it), with a budget of visited nodes so that cycles and huge trees of
    empty nodes end fast, whatever the tree's /Count claims.
    """
    budget = 4 * max_pages + 64
    stack: list[Any] = [root]
    visits = leaves = 0
    while stack:
        node = stack.pop().get_object()
        visits += 1
        if visits > budget:
            raise Rejected("has a page tree too large or too tangled to read")
        if not isinstance(node, dict):
            continue
        check_nesting(node)
        kind = node.get("/Type")
        if kind == "/Pages" or (kind is None and "/Kids" in node):
            kids = node.get("/Kids")
            kids = kids.get_object() if kids is not None else []
            if isinstance(kids, list):
                if len(kids) > budget:
                    raise Rejected(
                        f"has a page tree of {len(kids)} entries, more than the limit of "
                        f"{max_pages} pages allows"
                    )
                stack.extend(reversed(kids))
        elif kind in ("/Page", None):
            leaves += 1
            if leaves > max_pages:
                raise Rejected(f"has more than {max_pages} pages, the limit")
    return leaves


MAX_NESTING = 64          # arrays and dictionaries inside each other; real files stay under ten
_MAX_NODES = 100_000


def check_nesting(obj: Any) -> None:
    """Refuse an object whose arrays and dictionaries nest deeper than ``MAX_NESTING``
    (walked without recursion, direct objects only, a bounded number of them): a parser
    that recovers from such a file has still been handed a hostile one."""
    stack, nodes = [(obj, 0)], 0
    while stack:
        node, depth = stack.pop()
        nodes += 1
        if depth > MAX_NESTING:
            raise Rejected(f"nests objects more than {MAX_NESTING} levels deep")
        if nodes > _MAX_NODES:
            raise Rejected("has an object too large to read")
        if isinstance(node, dict):
            stack.extend((v, depth + 1) for v in node.values() if isinstance(v, (dict, list)))
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node if isinstance(v, (dict, list)))


def count_pages(reader: Any, max_pages: int) -> int:
    """Check the declared /Count first (cheap), then walk the tree (bounded)."""
    pages_root = reader.root_object.get("/Pages")
    if pages_root is None:
        raise Rejected("has no page tree")
    pages_root = pages_root.get_object()
    declared = pages_root.get("/Count") if isinstance(pages_root, dict) else None
    if isinstance(declared, int) and declared > max_pages:
        raise Rejected(f"has {declared} pages, more than the limit of {max_pages}")
    return _walk_page_tree(pages_root, max_pages)


def collect_text(reader: Any, max_pages: int, max_chars: int) -> tuple[str, bool]:
    """The pages' text joined, stopping once ``max_chars`` is passed."""
    if len(reader.pages) > max_pages:
        raise Rejected(f"has {len(reader.pages)} pages, more than the limit of {max_pages}")
    parts: list[str] = []
    total = 0
    for page in reader.pages:
        text = page.extract_text() or ""
        parts.append(text)
        total += len(text) + len(_PAGE_SEPARATOR)
        if total > max_chars:
            break
    joined = _PAGE_SEPARATOR.join(parts)
    return joined[:max_chars], len(joined) > max_chars


def extract(data: bytes, limits: WorkerLimits) -> tuple[str, bool]:
    from pypdf import PdfReader

    reader = PdfReader(io.BytesIO(data), strict=False)
    if reader.is_encrypted:
        raise Rejected("is encrypted")
    check_nesting(reader.root_object)
    count_pages(reader, limits.max_pages)
    return collect_text(reader, limits.max_pages, limits.max_text_chars)


def _failure_reason(exc: Exception) -> str:
    name = type(exc).__name__
    if name == "LimitReachedError":
        return "exceeds a safety limit of the PDF parser"
    if name == "FileNotDecryptedError":
        return "is encrypted"
    return f"is malformed ({name})"


def handle(data: bytes, limits: WorkerLimits) -> dict[str, Any]:
    try:
        text, truncated = extract(data, limits)
    except Rejected as rejected:
        return {"ok": False, "reason": rejected.reason, "healthy": True}
    except MemoryError:
        return {"ok": False, "reason": "needs more memory than its limit", "healthy": False}
    except RecursionError:
        return {"ok": False, "reason": "is nested too deeply to read", "healthy": True}
    except Exception as exc:  # any parser failure is the file's fault
        return {"ok": False, "reason": _failure_reason(exc), "healthy": True}
    clean = text.encode("utf-8", "replace").decode("utf-8")
    return {"ok": True, "text": clean, "truncated": truncated}


def serve(requests: BinaryIO, replies: BinaryIO, limits: WorkerLimits) -> None:
    send(replies, {"ok": True, "ready": True})
    while (data := receive(requests)) is not None:
        renew_cpu_budget(limits.cpu_s)
        reply = handle(data, limits)
        del data
        send(replies, reply)
        if reply.get("healthy") is False:
            return


def main(argv: list[str]) -> int:
    limits = WorkerLimits(**json.loads(argv[1]))
    apply_rlimits(limits)
    requests, replies = take_protocol_pipes()
    install_audit_hook()
    quiet_pypdf()
    try:
        import pypdf  # noqa: F401  (imported inside the fence, once)
    except ImportError:
        send(replies, {"ok": False, "reason": "pypdf is not installed", "healthy": False})
        return 1
    serve(requests, replies, limits)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
