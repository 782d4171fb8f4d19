"""The in-process work queue: dedup, per-key serialization, dirty re-runs, delays and backoff."""

from __future__ import annotations

import asyncio
import random

import pytest

from app.backoff import Backoff
from app.reconcile.queue import QueueClosed, WorkQueue
from tests.support.waiting import wait_until


async def test_a_key_added_many_times_is_queued_once() -> None:
    queue: WorkQueue[str] = WorkQueue()
    for _ in range(5):
        queue.add("a")
    queue.add("b")

    assert len(queue) == 2
    assert await queue.get() == "a"
    assert await queue.get() == "b"
    assert len(queue) == 0


async def test_a_key_being_processed_is_not_handed_to_a_second_worker() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("a")
    assert await queue.get() == "a"

    queue.add("a")
    second = asyncio.ensure_future(queue.get())
    finished, _ = await asyncio.wait({second}, timeout=0.05)
    assert not finished

    queue.done("a")
    assert await asyncio.wait_for(second, 1) == "a"


async def test_events_during_processing_mark_the_key_dirty_and_it_runs_once_more() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("a")
    await queue.get()
    for _ in range(3):
        queue.add("a")
    assert queue.is_dirty("a")
    assert len(queue) == 0

    queue.done("a")
    assert len(queue) == 1
    assert await queue.get() == "a"
    queue.done("a")
    assert len(queue) == 0


async def test_requeue_after_brings_the_key_back_after_the_delay_unless_added_sooner() -> None:
    queue: WorkQueue[str] = WorkQueue()
    loop = asyncio.get_running_loop()
    queue.add("a")
    await queue.get()
    started = loop.time()
    queue.done("a", requeue_after=0.1)
    assert len(queue) == 0 and queue.delayed == 1

    assert await asyncio.wait_for(queue.get(), 1) == "a"
    assert loop.time() - started >= 0.09

    queue.done("a", requeue_after=30)
    queue.add("a")  # an event beats the timer
    assert queue.delayed == 0
    assert await asyncio.wait_for(queue.get(), 1) == "a"


async def test_failures_back_off_exponentially_and_success_resets_the_count() -> None:
    backoff = Backoff(base=0.01, cap=0.08, rng=random.Random(7))
    delays = [backoff.delay(n) for n in range(1, 8)]
    assert delays[0] < 0.02
    assert delays[2] > delays[0]
    assert max(delays) <= 0.08

    queue: WorkQueue[str] = WorkQueue(backoff)
    queue.add("a")
    for expected_failures in (1, 2, 3):
        await queue.get()
        queue.done("a", failed=True)
        assert queue.failures("a") == expected_failures
        assert queue.delayed == 1
    await asyncio.wait_for(queue.get(), 1)
    queue.done("a")
    assert queue.failures("a") == 0


async def test_a_dropped_key_is_not_handed_out_nor_rerun() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("a")
    queue.add("b")
    queue.drop("a")
    assert await queue.get() == "b"

    queue.add("b")  # dirty
    queue.drop("b")
    queue.done("b")
    queue.requeue_after("c", 0.01)
    queue.drop("c")
    assert len(queue) == 0 and queue.delayed == 0


async def test_closing_the_queue_releases_every_waiting_worker() -> None:
    queue: WorkQueue[str] = WorkQueue()
    waiters = [asyncio.ensure_future(queue.get()) for _ in range(3)]
    queue.close()

    await wait_until(lambda: all(w.done() for w in waiters), timeout=1)
    for waiter in waiters:
        with pytest.raises(QueueClosed):
            waiter.result()
    queue.add("late")
    with pytest.raises(QueueClosed):
        await queue.get()
