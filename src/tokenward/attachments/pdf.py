"""Text from untrusted PDF attachments, parsed only in sandboxed child processes.

A PDF is a program-shaped file: page trees, object streams and compression filters
let a few kilobytes ask for gigabytes or minutes. So the gateway never parses one
itself. PdfExtractor keeps a small pool of long-lived workers (_pdf_worker.py, started
with asyncio subprocess pipes, never forked from this threaded process) that fence
themselves with rlimits and an audit hook before importing pypdf. This module never
imports pypdf; a hostile file can exhaust, hang or crash only a worker.

The parent enforces what it can without parsing (size, the %PDF- magic), the wall
clock for each request (from sending the file to the reply; waiting for a free worker
and starting one are not counted), and the shape of each reply. A worker that overruns
the clock or answers out of protocol is SIGKILLed; one that died (a limit killed it,
or it ran out of memory and said so) is reaped; either way it is dropped and the next
request starts a fresh one (workers start lazily). A worker that merely refused a file
is reused; each is retired after a fixed number of requests so no leak or
fragmentation builds up. A request cancelled mid-flight also costs its worker: a reply
left in the pipe must never be read as the answer to someone else's file.

Workers start with an empty environment, so no secret of the gateway (upstream keys)
is in reach of the parsing process. The extractor belongs to the event loop that first
uses it.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import json
import struct
import sys
from pathlib import Path
from typing import Any, NamedTuple

_FRAME = struct.Struct(">I")
_WORKER_SCRIPT = Path(__file__).with_name("_pdf_worker.py")
_STARTUP_TIMEOUT_S = 30.0
_REQUESTS_PER_WORKER = 200
_MAGIC_WINDOW = 1024  # viewers accept the header anywhere in the first 1 KiB
_MAX_REASON_CHARS = 200
_TRUNCATION_NOTE = "\n[text truncated at {limit} characters]"
_UNREADABLE = "could not be read within its limits"
_EXIT_GRACE_S = 1.0


class _Fate(enum.Enum):
    """What becomes of a worker after a request."""

    REUSE = "reuse"  # sound: back to the pool
    RETIRE = "retire"  # exiting on its own (or spent): close its stdin, reap it
    KILL = "kill"  # hung or out of protocol: SIGKILL now


class PdfLimits(NamedTuple):
    max_bytes: int = 4 * 1024 * 1024  # the PDF itself
    max_pages: int = 50
    max_text_chars: int = 200_000  # extracted text is truncated to this (and says so)
    timeout_s: float = 5.0  # wall clock for the whole extraction
    cpu_s: int = 4  # RLIMIT_CPU for the child
    memory_bytes: int = 512 * 1024 * 1024  # RLIMIT_AS for the child


class AttachmentRejected(Exception):
    """.reason: a short human message naming why (no file content in it)."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"PDF attachment rejected: {reason}")
        self.reason = reason


class PdfWorkerUnavailable(RuntimeError):
    """A worker could not be started (a deployment problem, not the file's fault)."""


class _ProtocolError(Exception):
    """A worker answered something other than a well-formed reply."""


def check_envelope(data: bytes, limits: PdfLimits) -> None:
    """What the parent can refuse without parsing: size and the %PDF- magic."""
    if len(data) > limits.max_bytes:
        raise AttachmentRejected(
            f"is {len(data)} bytes, more than the limit of {limits.max_bytes} bytes"
        )
    if b"%PDF-" not in data[:_MAGIC_WINDOW]:
        raise AttachmentRejected("is not a PDF")


def finish_text(text: str, truncated: bool, limit: int) -> str:
    """At most ``limit`` characters; a cut text ends with a note saying so."""
    if not truncated and len(text) <= limit:
        return text
    note = _TRUNCATION_NOTE.format(limit=limit)
    if len(note) >= limit:
        return text[:limit]
    return text[: limit - len(note)] + note


def _max_reply_bytes(limits: PdfLimits) -> int:
    """JSON with ensure_ascii=False spends at most 6 bytes a character (\\u00XX)."""
    return 6 * limits.max_text_chars + 4096


def _reason_of(reply: dict[str, Any]) -> str:
    reason = reply.get("reason")
    if not isinstance(reason, str) or not reason:
        raise _ProtocolError("a refusal without a reason")
    return reason[:_MAX_REASON_CHARS]


class _Worker:
    """One child process and its pipes; speaks the length-prefixed protocol."""

    def __init__(self, process: asyncio.subprocess.Process, max_reply: int) -> None:
        self.process = process
        self.served = 0
        self._max_reply = max_reply

    async def read_reply(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        header = await self.process.stdout.readexactly(_FRAME.size)
        (size,) = _FRAME.unpack(header)
        if size > self._max_reply:
            raise _ProtocolError(f"a reply of {size} bytes")
        body = await self.process.stdout.readexactly(size)
        try:
            reply = json.loads(body)
        except ValueError as exc:
            raise _ProtocolError("a reply that is not JSON") from exc
        if not isinstance(reply, dict) or not isinstance(reply.get("ok"), bool):
            raise _ProtocolError("a reply without a verdict")
        return reply

    async def call(self, data: bytes) -> dict[str, Any]:
        assert self.process.stdin is not None
        self.served += 1
        self.process.stdin.write(_FRAME.pack(len(data)))
        self.process.stdin.write(data)
        await self.process.stdin.drain()
        return await self.read_reply()

    def kill(self) -> None:
        if self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.kill()

    async def reap(self) -> int:
        """Close stdin, give the process a moment to exit, then SIGKILL; its status."""
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            async with asyncio.timeout(_EXIT_GRACE_S):
                return await self.process.wait()
        except TimeoutError:
            self.kill()
            return await self.process.wait()


def interpret(reply: dict[str, Any], limits: PdfLimits) -> str:
    """The text of a worker's reply, or AttachmentRejected with its reason."""
    if not reply["ok"]:
        raise AttachmentRejected(_reason_of(reply))
    text = reply.get("text")
    if not isinstance(text, str):
        raise _ProtocolError("a success without text")
    truncated = reply.get("truncated") is True
    return finish_text(text, truncated, limits.max_text_chars)


class PdfExtractor:
    """Extracts PDF text through a pool of at most ``workers`` sandboxed children."""

    def __init__(self, limits: PdfLimits = PdfLimits(), workers: int = 2) -> None:
        if workers < 1:
            raise ValueError("workers must be at least 1")
        self._limits = limits
        self._slots = asyncio.Semaphore(workers)
        self._idle: list[_Worker] = []
        self._live: set[_Worker] = set()
        self._reaping: set[asyncio.Task[int]] = set()
        self._closed = False
        self._script = _WORKER_SCRIPT

    async def extract(self, data: bytes) -> str:
        """The text of the PDF's pages (at most max_pages, truncated to max_text_chars).
        Raises AttachmentRejected for anything that cannot be read within the limits:
        not a PDF, encrypted, malformed, too many pages, too large, too slow, child crashed
        or killed by a limit. Never raises anything else for a bad file."""
        check_envelope(data, self._limits)
        self._ensure_open()
        async with self._slots:
            self._ensure_open()
            return await self._run(await self._checkout(), data)

    async def aclose(self) -> None:
        """Kill every worker (busy ones too) and wait until they are reaped."""
        self._closed = True
        self._idle.clear()
        for worker in list(self._live):
            self._discard(worker)
        if self._reaping:
            await asyncio.gather(*self._reaping, return_exceptions=True)

    async def _checkout(self) -> _Worker:
        """An idle worker that is still running, else a new one."""
        while self._idle:
            worker = self._idle.pop()
            if worker.process.returncode is None:
                return worker
            self._discard(worker, kill=False)
        return await self._spawn()

    def _ensure_open(self) -> None:
        if self._closed:
            raise RuntimeError("the PDF extractor is closed")

    def _worker_limits(self) -> str:
        limits = self._limits
        return json.dumps({
            "max_pages": limits.max_pages,
            "max_text_chars": limits.max_text_chars,
            "cpu_s": max(1, int(limits.cpu_s)),
            "memory_bytes": limits.memory_bytes,
            "lifetime_requests": _REQUESTS_PER_WORKER,
        })

    async def _spawn(self) -> _Worker:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-I", "-B", str(self._script), self._worker_limits(),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            env={},
            start_new_session=True,
        )
        worker = _Worker(process, _max_reply_bytes(self._limits))
        self._live.add(worker)
        try:
            async with asyncio.timeout(_STARTUP_TIMEOUT_S):
                ready = await worker.read_reply()
        except TimeoutError as exc:
            self._discard(worker)
            raise PdfWorkerUnavailable("the PDF worker did not start in time") from exc
        except (OSError, asyncio.IncompleteReadError, _ProtocolError) as exc:
            self._discard(worker, kill=isinstance(exc, _ProtocolError))
            raise PdfWorkerUnavailable("the PDF worker did not start") from exc
        except BaseException:  # cancelled while it started
            self._discard(worker)
            raise
        if not ready["ok"]:
            self._discard(worker, kill=False)
            raise PdfWorkerUnavailable(f"the PDF worker did not start: {_reason_of(ready)}")
        return worker

    async def _run(self, worker: _Worker, data: bytes) -> str:
        """One request on one worker; the worker goes back to the pool only if sound."""
        fate = _Fate.KILL
        try:
            async with asyncio.timeout(self._limits.timeout_s):
                reply = await worker.call(data)
            fate = _Fate.REUSE if reply.get("healthy") is not False else _Fate.RETIRE
            return interpret(reply, self._limits)
        except _ProtocolError:
            fate = _Fate.KILL
            raise AttachmentRejected(_UNREADABLE) from None
        except TimeoutError:
            raise AttachmentRejected(
                f"took longer than {self._limits.timeout_s:g} s to read"
            ) from None
        except (OSError, asyncio.IncompleteReadError):
            fate = _Fate.RETIRE  # its pipe closed: it is dying or dead already
            self._ensure_open()
            raise AttachmentRejected(_UNREADABLE) from None
        finally:
            self._release(worker, fate)

    def _release(self, worker: _Worker, fate: _Fate) -> None:
        if fate is _Fate.REUSE:
            spent = self._closed or worker.served >= _REQUESTS_PER_WORKER
            if not spent and worker.process.returncode is None:
                self._idle.append(worker)
                return
            fate = _Fate.RETIRE
        self._discard(worker, kill=fate is _Fate.KILL)

    def _discard(self, worker: _Worker, *, kill: bool = True) -> None:
        """Drop a worker and reap it in the background (aclose awaits that).

        ``kill`` sends SIGKILL now; otherwise the worker's stdin is closed and it gets a
        moment to exit on its own (it has usually exited already: signalling it then
        would race the event loop's reaping of it), and is killed after that.
        """
        if worker not in self._live:
            return
        self._live.discard(worker)
        if kill:
            worker.kill()
        task = asyncio.get_running_loop().create_task(worker.reap())
        self._reaping.add(task)
        task.add_done_callback(self._reaping.discard)
