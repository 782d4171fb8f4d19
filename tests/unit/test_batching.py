"""The group commit of the reconciler's statements (`app.store.batching.Batcher`): every caller
gets its own answer, however the calls interleave; alone, a call goes alone; one item the server
refuses fails only its own caller."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import asyncpg
from hypothesis import given, settings
from hypothesis import strategies as st

from app.store.batching import Batcher


class Recorder:
    """A `run` that answers each item doubled after yielding `pause` times, recording batches."""

    def __init__(self, pause: int = 1, refuse: frozenset[int] = frozenset()) -> None:
        self.batches: list[list[int]] = []
        self.pause = pause
        self.refuse = refuse

    async def __call__(self, items: Sequence[int]) -> list[int]:
        self.batches.append(list(items))
        for _ in range(self.pause):
            await asyncio.sleep(0)
        if self.refuse.intersection(items):
            raise asyncpg.UniqueViolationError("refused")
        return [item * 2 for item in items]


async def test_a_call_alone_is_sent_alone_at_once() -> None:
    run = Recorder()
    batcher = Batcher(run)
    assert await batcher(3) == 6
    assert await batcher(4) == 8
    assert run.batches == [[3], [4]]


async def test_calls_made_while_one_is_in_flight_share_the_next_statement() -> None:
    run = Recorder(pause=3)
    batcher = Batcher(run, limit=4)
    answers = await asyncio.gather(*(batcher(i) for i in range(10)))
    assert answers == [i * 2 for i in range(10)]
    assert run.batches == [[0], [1, 2, 3, 4], [5, 6, 7, 8], [9]]  # the first alone, at once


async def test_an_item_the_server_refuses_fails_only_its_caller() -> None:
    run = Recorder(refuse=frozenset({5}))
    batcher = Batcher(run)
    results = await asyncio.gather(*(batcher(i) for i in range(8)), return_exceptions=True)
    assert isinstance(results[5], asyncpg.UniqueViolationError)
    assert [r for i, r in enumerate(results) if i != 5] == [i * 2 for i in range(8) if i != 5]


async def test_any_other_failure_reaches_every_caller_of_the_batch() -> None:
    async def down(items: Sequence[int]) -> list[int]:
        await asyncio.sleep(0)
        raise ConnectionResetError("gone")

    batcher = Batcher(down)
    results = await asyncio.gather(*(batcher(i) for i in range(4)), return_exceptions=True)
    assert all(isinstance(r, ConnectionResetError) for r in results)


async def test_an_item_added_as_the_sender_finishes_is_sent() -> None:
    """The sender that found nothing waiting is not counted any more: a call right after it
    starts a sender of its own instead of waiting for a call that may never come."""
    run = Recorder(pause=0)
    batcher = Batcher(run)
    first = asyncio.ensure_future(batcher(1))
    await asyncio.sleep(0)  # the sender sends 1 and finds nothing more
    second = asyncio.ensure_future(batcher(2))
    assert list(await asyncio.wait_for(asyncio.gather(first, second), 1.0)) == [2, 4]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 3), st.booleans()), min_size=1, max_size=40),
    st.integers(1, 5),
    st.integers(1, 3),
)
def test_every_caller_gets_its_own_answer_however_calls_interleave(
    schedule: list[tuple[int, bool]], limit: int, in_flight: int
) -> None:
    async def scenario() -> None:
        run = Recorder(pause=2, refuse=frozenset({7}))
        batcher = Batcher(run, limit=limit, in_flight=in_flight)
        calls = []
        for item, (gap, _) in enumerate(schedule):
            calls.append(asyncio.ensure_future(batcher(item)))
            for _ in range(gap):
                await asyncio.sleep(0)
        results = await asyncio.wait_for(asyncio.gather(*calls, return_exceptions=True), 5.0)
        for item, result in enumerate(results):
            if item == 7:
                assert isinstance(result, asyncpg.UniqueViolationError)
            else:
                assert result == item * 2
        assert all(len(batch) <= limit for batch in run.batches)
        sent = [item for batch in run.batches for item in batch if 7 not in batch]
        assert sorted(sent) == [i for i in range(len(schedule)) if i != 7]

    asyncio.run(scenario())
