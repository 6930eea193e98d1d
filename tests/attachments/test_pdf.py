"""PdfExtractor against real pypdf workers, hostile files, and rogue workers.

The hostile set proves the user-visible promise (every bad file is refused in time
and the next request is served). pypdf 7 refuses most of those files by its own
guards, so the sandbox's own limits are also exercised directly: a slow page stops at
the CPU limit, the decompression bomb at a small memory limit, and scripted rogue
workers crash, hang, or answer out of protocol.
"""

from __future__ import annotations

import asyncio
import os
import resource
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import AsyncIterator, Callable, Iterator

import pytest

from tests.attachments import hostile
from tokenward.attachments.pdf import (
    AttachmentRejected,
    PdfExtractor,
    PdfLimits,
    PdfWorkerUnavailable,
)

ROOT = Path(__file__).resolve().parents[2]
WORKER = ROOT / "src" / "tokenward" / "attachments" / "_pdf_worker.py"
LIMITS = PdfLimits(max_pages=10, timeout_s=2.0, cpu_s=2)
EXPECTED_TEXT = ["Hello World", "Second page says goodbye", "Third page, the last"]

# name: (maker, must be rejected (else may also be read), a phrase the reason has)
HOSTILE: dict[str, tuple[Callable[[], bytes], bool, str | None]] = {
    "page bomb": (hostile.page_bomb, True, "has 100000 pages, more than the limit of 10"),
    "page bomb, lying count": (
        lambda: hostile.page_bomb(honest_count=False), True, "more than the limit of 10"),
    "deep arrays": (hostile.deep_nesting, True, None),
    "deep dictionaries": (lambda: hostile.deep_nesting(dictionaries=True), True, "more than 64 levels deep"),
    "truncated": (hostile.truncated_pdf, True, "malformed"),
    "huge declared length": (hostile.huge_declared_length, True, "exceeds a safety limit"),
    "decompression bomb": (hostile.decompression_bomb, True, None),
    "slow page": (hostile.slow_page, True, "took longer than 2 s"),
    "not a pdf": (hostile.not_a_pdf, True, "is not a PDF"),
    "garbage after magic": (hostile.garbage_after_magic, True, "malformed"),
    "encrypted": (hostile.encrypted_pdf, True, "is encrypted"),
    "too many pages": (
        lambda: hostile.many_pages_pdf(11), True, "has 11 pages, more than the limit of 10"),
}

ROGUE_WORKER = textwrap.dedent('''
    import json, os, struct, sys, time
    frame = struct.Struct(">I")
    requests, replies = sys.stdin.buffer, sys.stdout.buffer
    def send(body):
        replies.write(frame.pack(len(body)) + body)
        replies.flush()
    send(b'{"ok": true, "ready": true}')
    while len(header := requests.read(4)) == 4:
        data = requests.read(frame.unpack(header)[0])
        if b"crash" in data:
            os._exit(3)
        elif b"segfault" in data:
            os.kill(os.getpid(), 11)
        elif b"garbage" in data:
            send(b"this is not json")
        elif b"oversize" in data:
            replies.write(frame.pack(2 ** 31))
            replies.flush()
        elif b"hang" in data:
            time.sleep(60)
        else:
            send(json.dumps({"ok": True, "text": "served by %d" % os.getpid()}).encode())
''')


def worker_pids() -> set[int]:
    """Live (not zombie) children of this process running a *_pdf_worker.py script."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == os.getpid() and b"_pdf_worker.py" in cmdline:
            found.add(int(entry.name))
    return found


async def wait_gone(pids: set[int], within_s: float = 3.0) -> bool:
    """True once none of ``pids`` exists any more (killed and reaped)."""
    deadline = time.monotonic() + within_s
    while any(Path(f"/proc/{pid}").exists() for pid in pids):
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.02)
    return True


def assert_valid_text(text: str) -> None:
    for phrase in EXPECTED_TEXT:
        assert phrase in text
    assert text.index("Hello World") < text.index("Second page") < text.index("Third page")


@pytest.fixture(autouse=True)
def no_reaping_race(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """Signalling a child that already exited lets subprocess reap it behind asyncio's
    back, which asyncio then logs; the pool must wait for such a child instead."""
    yield
    records = caplog.get_records("setup") + caplog.get_records("call") + caplog.records
    assert not [r for r in records if "Unknown child process" in r.getMessage()]


@pytest.fixture
async def extractor() -> AsyncIterator[PdfExtractor]:
    pool = PdfExtractor(LIMITS, workers=2)
    yield pool
    await pool.aclose()


@pytest.fixture
def rogue_script(tmp_path: Path) -> Path:
    script = tmp_path / "rogue_pdf_worker.py"
    script.write_text(ROGUE_WORKER)
    return script


@pytest.fixture
async def rogue(rogue_script: Path) -> AsyncIterator[PdfExtractor]:
    pool = PdfExtractor(LIMITS, workers=1)
    pool._script = rogue_script
    yield pool
    await pool.aclose()


async def timed_refusal(pool: PdfExtractor, data: bytes) -> tuple[str | None, float]:
    """(reason, elapsed); reason is None when the file was read instead."""
    started = time.perf_counter()
    try:
        await pool.extract(data)
    except AttachmentRejected as rejected:
        return rejected.reason, time.perf_counter() - started
    return None, time.perf_counter() - started


# --- the valid file --------------------------------------------------------------


async def test_valid_pdf_text_is_extracted(extractor: PdfExtractor) -> None:
    assert_valid_text(await extractor.extract(hostile.valid_pdf()))


async def test_long_text_is_truncated_and_says_so() -> None:
    limits = LIMITS._replace(max_text_chars=300)
    pool = PdfExtractor(limits, workers=1)
    try:
        text = await pool.extract(hostile.text_pdf(["A" * 250, "B" * 250, "C" * 250]))
    finally:
        await pool.aclose()
    assert len(text) <= 300
    assert text.startswith("A" * 250)
    assert text.endswith("[text truncated at 300 characters]")
    assert "C" not in text


# --- the hostile set -------------------------------------------------------------


@pytest.mark.parametrize("name", list(HOSTILE))
async def test_hostile_file_is_refused_in_time_and_the_next_is_served(
    extractor: PdfExtractor, name: str
) -> None:
    make, must_reject, phrase = HOSTILE[name]
    reason, elapsed = await timed_refusal(extractor, make())
    assert elapsed < LIMITS.timeout_s + 1, f"{name} took {elapsed:.2f} s"
    if must_reject or reason is not None:
        assert isinstance(reason, str) and reason, name
        assert "Hello" not in reason and "\n" not in reason
    if phrase is not None:
        assert reason is not None and phrase in reason
    assert_valid_text(await extractor.extract(hostile.valid_pdf()))


async def test_parent_memory_does_not_grow_over_the_hostile_set() -> None:
    files = [make() for make, _, _ in HOSTILE.values()]
    pool = PdfExtractor(LIMITS, workers=1)
    before_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    try:
        for data in files:
            await timed_refusal(pool, data)
        assert_valid_text(await pool.extract(hostile.valid_pdf()))
    finally:
        await pool.aclose()
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before_kb) / 1024
    # Parsed here, the bomb alone raises the peak by ~140 MB (pypdf inflates 75 MB of
    # its 400 MB before its own guard trips; without that guard, all of it).
    assert grown_mb < 50
    assert hostile.BOMB_INFLATED_BYTES >= 400 * 1024 * 1024


async def test_parent_never_imports_pypdf() -> None:
    probe = "import sys, tokenward.attachments.pdf; print('pypdf' in sys.modules)"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         env=env, check=True, timeout=30)
    assert out.stdout.strip() == "False"


async def test_parent_refuses_before_any_worker_starts(extractor: PdfExtractor) -> None:
    with pytest.raises(AttachmentRejected, match="more than the limit of"):
        await extractor.extract(b"%PDF-1.7\n" + bytes(LIMITS.max_bytes))
    with pytest.raises(AttachmentRejected) as rejected:
        await extractor.extract(hostile.not_a_pdf())
    assert rejected.value.reason == "is not a PDF"
    assert worker_pids() == set()


# --- the sandbox's own limits ----------------------------------------------------


async def test_cpu_limit_kills_a_slow_page_before_the_clock_does() -> None:
    pool = PdfExtractor(LIMITS._replace(cpu_s=1, timeout_s=6.0), workers=1)
    try:
        await pool.extract(hostile.valid_pdf())
        first = worker_pids()
        reason, elapsed = await timed_refusal(pool, hostile.slow_page())
        assert reason == "could not be read within its limits"
        assert elapsed < 4.0
        assert await wait_gone(first)
        assert_valid_text(await pool.extract(hostile.valid_pdf()))
    finally:
        await pool.aclose()


async def test_memory_limit_stops_a_decompression_bomb() -> None:
    pool = PdfExtractor(LIMITS._replace(memory_bytes=128 * 1024 * 1024), workers=1)
    try:
        reason, elapsed = await timed_refusal(pool, hostile.decompression_bomb())
        assert reason == "needs more memory than its limit"
        assert elapsed < LIMITS.timeout_s
        assert_valid_text(await pool.extract(hostile.valid_pdf()))
    finally:
        await pool.aclose()


async def test_worker_cannot_open_sockets_or_write_files(tmp_path: Path) -> None:
    target = tmp_path / "written.txt"
    probe = textwrap.dedent(f'''
        import os, runpy, socket
        worker = runpy.run_path({str(WORKER)!r})
        worker["apply_rlimits"](worker["WorkerLimits"](10, 1000, 2, 512 << 20, 10))
        worker["install_audit_hook"]()
        attempts = (
            lambda: socket.socket(),
            lambda: open({str(target)!r}, "w"),
            lambda: os.mkdir({str(target)!r}),
        )
        for attempt in attempts:
            try:
                attempt()
            except PermissionError:
                print("refused")
    ''')
    out = subprocess.run([sys.executable, "-I", "-c", probe], capture_output=True,
                         text=True, timeout=30)
    assert out.stdout.split() == ["refused"] * 3, out.stderr
    assert not target.exists()


async def test_a_healthy_worker_is_reused_after_refusing_a_file() -> None:
    pool = PdfExtractor(LIMITS, workers=1)
    try:
        await pool.extract(hostile.valid_pdf())
        first = worker_pids()
        with pytest.raises(AttachmentRejected):
            await pool.extract(hostile.garbage_after_magic())
        assert_valid_text(await pool.extract(hostile.valid_pdf()))
        assert worker_pids() == first and len(first) == 1
    finally:
        await pool.aclose()


async def test_a_worker_killed_while_idle_is_replaced_not_blamed() -> None:
    pool = PdfExtractor(LIMITS, workers=1)
    try:
        await pool.extract(hostile.valid_pdf())
        (idle,) = worker_pids()
        os.kill(idle, signal.SIGKILL)
        assert await wait_gone({idle})
        await asyncio.sleep(0.05)  # the loop learns of the exit
        assert_valid_text(await pool.extract(hostile.valid_pdf()))
    finally:
        await pool.aclose()


# --- rogue workers: crash, hang, out of protocol ---------------------------------


@pytest.mark.parametrize("trigger", [b"crash", b"segfault", b"garbage", b"oversize"])
async def test_a_broken_worker_is_killed_and_replaced(rogue: PdfExtractor, trigger: bytes) -> None:
    first_text = await rogue.extract(b"%PDF-1.7 hello")
    first = worker_pids()
    with pytest.raises(AttachmentRejected) as rejected:
        await rogue.extract(b"%PDF-1.7 " + trigger)
    assert rejected.value.reason == "could not be read within its limits"
    assert await wait_gone(first)
    assert (await rogue.extract(b"%PDF-1.7 hello")) != first_text  # a new process


async def test_a_hung_worker_is_killed_at_the_timeout(rogue: PdfExtractor) -> None:
    await rogue.extract(b"%PDF-1.7 hello")
    first = worker_pids()
    reason, elapsed = await timed_refusal(rogue, b"%PDF-1.7 hang")
    assert reason == "took longer than 2 s to read"
    assert LIMITS.timeout_s <= elapsed < LIMITS.timeout_s + 1
    assert await wait_gone(first)


async def test_a_cancelled_request_costs_its_worker(rogue: PdfExtractor) -> None:
    first_text = await rogue.extract(b"%PDF-1.7 hello")
    first = worker_pids()
    request = asyncio.ensure_future(rogue.extract(b"%PDF-1.7 hang"))
    await asyncio.sleep(0.2)
    request.cancel()
    with pytest.raises(asyncio.CancelledError):
        await request
    assert await wait_gone(first)
    assert (await rogue.extract(b"%PDF-1.7 hello")) != first_text


async def test_a_worker_that_cannot_start_is_not_blamed_on_the_file(tmp_path: Path) -> None:
    pool = PdfExtractor(LIMITS, workers=1)
    pool._script = tmp_path / "missing_pdf_worker.py"
    try:
        with pytest.raises(PdfWorkerUnavailable):
            await pool.extract(hostile.valid_pdf())
    finally:
        await pool.aclose()


# --- the pool --------------------------------------------------------------------


async def test_six_concurrent_extractions_share_two_workers() -> None:
    pool = PdfExtractor(LIMITS, workers=2)
    texts = [[f"Document {n} page {p}" for p in range(1, 4)] for n in range(6)]
    try:
        results = await asyncio.gather(*(pool.extract(hostile.text_pdf(t)) for t in texts))
        assert len(worker_pids()) == 2
    finally:
        await pool.aclose()
    for expected, got in zip(texts, results):
        assert all(phrase in got for phrase in expected)
        assert sum(f"Document {n} " in got for n in range(6)) == 1


async def test_aclose_kills_the_workers() -> None:
    pool = PdfExtractor(LIMITS, workers=2)
    await asyncio.gather(pool.extract(hostile.valid_pdf()), pool.extract(hostile.valid_pdf()))
    started = worker_pids()
    assert len(started) == 2
    await pool.aclose()
    assert not any(Path(f"/proc/{pid}").exists() for pid in started)
    assert worker_pids() == set()
    with pytest.raises(RuntimeError):
        await pool.extract(hostile.valid_pdf())


async def test_aclose_kills_a_busy_worker(rogue: PdfExtractor) -> None:
    request = asyncio.ensure_future(rogue.extract(b"%PDF-1.7 hang"))
    await asyncio.sleep(0.3)
    busy = worker_pids()
    assert len(busy) == 1
    await rogue.aclose()
    assert not any(Path(f"/proc/{pid}").exists() for pid in busy)
    with pytest.raises((AttachmentRejected, RuntimeError)):
        await request
