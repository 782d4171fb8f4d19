"""The work queue serves groups (projects) in turn, keeping every guarantee of a single lane."""

from __future__ import annotations

import asyncio

from hypothesis import given, settings
from hypothesis import strategies as st

from app.reconcile.queue import QueueClosed, WorkQueue

Key = tuple[str, int]  # (group, n)


def _grouped() -> WorkQueue[Key]:
    return WorkQueue(group_of=lambda key: key[0])


async def test_a_thousand_keys_of_one_group_delay_another_groups_key_by_one() -> None:
    queue = _grouped()
    for n in range(1000):
        queue.add(("noisy", n))
    queue.add(("quiet", 0))
    served = [await queue.get() for _ in range(3)]
    assert ("quiet", 0) in served[:2]
    assert len(queue) == 998


async def test_without_groups_it_is_arrival_order() -> None:
    queue: WorkQueue[Key] = WorkQueue()
    keys = [("a", 0), ("a", 1), ("b", 0), ("a", 2)]
    for key in keys:
        queue.add(key)
    assert [await queue.get() for _ in keys] == keys


async def test_a_group_keeps_its_turn_order_dedup_and_per_key_serialization() -> None:
    queue = _grouped()
    queue.add(("a", 0))
    queue.add(("a", 1))
    queue.add(("a", 0))  # already queued: no second entry
    queue.add(("b", 0))
    assert await queue.get() == ("a", 0)
    queue.add(("a", 0))  # processing: dirty, not queued twice
    assert await queue.get() == ("b", 0)
    assert await queue.get() == ("a", 1)
    waiting = asyncio.ensure_future(queue.get())
    done, _ = await asyncio.wait({waiting}, timeout=0.05)
    assert not done  # ("a", 0) is still processing
    queue.done(("a", 0))
    assert await asyncio.wait_for(waiting, 1) == ("a", 0)


async def test_dropped_keys_are_skipped_and_close_wakes_every_waiter() -> None:
    queue = _grouped()
    queue.add(("a", 0))
    queue.add(("b", 0))
    queue.drop(("a", 0))
    assert await queue.get() == ("b", 0)
    waiters = [asyncio.ensure_future(queue.get()) for _ in range(3)]
    await asyncio.sleep(0)
    queue.close()
    results = await asyncio.gather(*waiters, return_exceptions=True)
    assert all(isinstance(r, QueueClosed) for r in results)


operations = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.sampled_from("abcde"), st.integers(0, 30)),
        st.tuples(st.just("get"), st.just(""), st.just(0)),
    ),
    max_size=300,
)


@settings(max_examples=200, deadline=None)
@given(ops=operations)
def test_a_key_waits_at_most_one_turn_of_each_other_busy_group(
    ops: list[tuple[str, str, int]],
) -> None:
    """Whatever the order of adds and gets: every key queued is served once, never twice at
    a time, and a key first in its group's lane is served before any other group is served
    twice."""

    async def run() -> None:
        queue = _grouped()
        queued: set[Key] = set()
        # For a key that was first in its lane when added: how often each group was served since.
        watching: dict[Key, dict[str, int]] = {}
        lanes: dict[str, int] = {}
        for op, group, n in ops:
            if op == "add":
                key = (group, n)
                if key not in queued:
                    if not lanes.get(group):
                        watching[key] = {}
                    lanes[group] = lanes.get(group, 0) + 1
                    queued.add(key)
                queue.add(key)
            elif queued:
                key = await asyncio.wait_for(queue.get(), 1)
                assert key in queued
                queued.discard(key)
                lanes[key[0]] -= 1
                queue.done(key)
                watching.pop(key, None)
                for counts in watching.values():
                    counts[key[0]] = counts.get(key[0], 0) + 1
                    assert max(counts.values()) <= 1
        while queued:
            key = await asyncio.wait_for(queue.get(), 1)
            assert key in queued
            queued.discard(key)
        assert len(queue) == 0

    asyncio.run(run())
