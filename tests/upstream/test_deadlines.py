"""The pool's one-timer deadlines: exact, re-armed for sooner waits, nothing after discard."""

from __future__ import annotations

import asyncio

from tokenward.upstream._conn import TIMED_OUT, expire
from tokenward.upstream.deadlines import Deadlines


async def test_a_wait_expires_at_its_deadline_not_before():
    loop = asyncio.get_running_loop()
    deadlines = Deadlines(loop, expire)
    fut = loop.create_future()
    start = loop.time()
    deadlines.add(fut, 0.05)
    assert await fut is TIMED_OUT
    assert 0.045 <= loop.time() - start < 0.2
    assert len(deadlines) == 0


async def test_a_sooner_wait_moves_the_timer_earlier():
    loop = asyncio.get_running_loop()
    deadlines = Deadlines(loop, expire)
    late, soon = loop.create_future(), loop.create_future()
    deadlines.add(late, 30.0)
    start = loop.time()
    deadlines.add(soon, 0.05)
    assert await soon is TIMED_OUT
    assert loop.time() - start < 0.2
    assert not late.done() and len(deadlines) == 1  # and the timer is re-armed for it
    deadlines.close()


async def test_a_discarded_wait_never_expires():
    loop = asyncio.get_running_loop()
    deadlines = Deadlines(loop, expire)
    kept, dropped = loop.create_future(), loop.create_future()
    deadlines.add(dropped, 0.02)
    deadlines.add(kept, 0.06)
    deadlines.discard(dropped)
    assert await kept is TIMED_OUT
    assert not dropped.done()


async def test_many_waits_due_together_all_expire():
    loop = asyncio.get_running_loop()
    deadlines = Deadlines(loop, expire)
    futs = [loop.create_future() for _ in range(50)]
    for fut in futs:
        deadlines.add(fut, 0.03)
    results = await asyncio.gather(*futs)
    assert all(r is TIMED_OUT for r in results) and len(deadlines) == 0
