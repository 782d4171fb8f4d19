"""Many callers' statements as one: the group commit of the reconciler's reads and writes.

Each worker of a replica reads its resource's row at the start of a step and writes its status
at the end, one round trip and (for a write) one commit each. Under a burst hundreds of steps
do that at once, and the statements, their commits and the connection hand-offs are most of the
replica's database work. A `Batcher` sends the first caller's item at once, alone (from the
caller's own task), and while that statement is in flight collects everyone else's; the next
statement, sent by a task of its own, carries all of them (up to `limit`). Alone, a call costs
what it did; under load one statement serves many callers, so the statements per second fall
as the load rises instead of rising with it.

A batch's statement must treat each item as the single statement would (every fencing and
generation guard per row): batching changes how many items one round trip carries, never what
happens to each. When a batch of several fails with an error the server gave (one row's
problem, or a deadlock), its items are retried one by one so that the others are not failed
for it; any other error (the connection, a timeout) fails every caller of the batch, each of
which retries as it would after its own statement failed.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Generic, TypeVar

import asyncpg

from app.domain.errors import UnstorableText

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

K = TypeVar("K")
R = TypeVar("R")

#: What the server says of a statement's rows (one item's text it cannot store, a constraint,
#: a deadlock): worth trying each item of a failed batch alone.
_ITEM_ERRORS = (asyncpg.PostgresError, UnstorableText)

#: The most items one statement carries: its arrays stay a few hundred KB at most, and a batch
#: that fails and is retried item by item costs at most this many single statements.
DEFAULT_LIMIT = 200


class Batcher(Generic[K, R]):
    """`await batcher(item)`: `run([item, ...])`'s answer for the item, `run` taking every item
    that arrived while the previous call of `run` was in flight (`in_flight` calls at once)."""

    def __init__(
        self,
        run: Callable[[Sequence[K]], Awaitable[Sequence[R]]],
        *,
        limit: int = DEFAULT_LIMIT,
        in_flight: int = 1,
    ) -> None:
        self._run = run
        self._limit = limit
        self._slots = in_flight
        self._waiting: list[tuple[K, asyncio.Future[R]]] = []
        self._sending = 0
        self._senders: set[asyncio.Task[None]] = set()  # (kept referenced while they run)

    async def __call__(self, item: K) -> R:
        answer: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        self._waiting.append((item, answer))
        if self._sending < self._slots and len(self._waiting) == 1:
            # Alone, with a slot free: sent from this task, with no hand-off to a sender and
            # back (each a turn of the event loop, which a busy loop makes long).
            self._waiting.clear()
            self._sending += 1
            try:
                await self._answer([(item, answer)])
            finally:
                self._sending -= 1
                self._start_sender()  # for what arrived meanwhile
            return answer.result()
        self._start_sender()
        return await answer

    def _start_sender(self) -> None:
        if self._waiting and self._sending < self._slots:
            self._sending += 1
            sender = asyncio.create_task(self._send())
            self._senders.add(sender)
            sender.add_done_callback(self._senders.discard)

    async def _send(self) -> None:
        """Send what is waiting, again and again, until nothing is. The count of senders
        drops in the same step that finds nothing waiting, so an item added after it always
        starts a sender of its own."""
        try:
            while self._waiting:
                batch = self._waiting[: self._limit]
                del self._waiting[: self._limit]
                batch = [(item, answer) for item, answer in batch if not answer.done()]
                if batch:  # (a caller cancelled meanwhile is not sent)
                    await self._answer(batch)
        finally:
            self._sending -= 1

    async def _answer(self, batch: list[tuple[K, asyncio.Future[R]]]) -> None:
        try:
            results = await self._run([item for item, _ in batch])
        except _ITEM_ERRORS as exc:
            if len(batch) == 1:
                _fail(batch, exc)
                return
            for one in batch:  # the server refused the batch: each item on its own
                await self._answer([one])
            return
        except asyncio.CancelledError:
            for _, answer in batch:
                answer.cancel()
            raise
        except Exception as exc:  # handed to every caller, who raise it
            _fail(batch, exc)
            return
        for (_, answer), result in zip(batch, results, strict=True):
            if not answer.done():
                answer.set_result(result)


def _fail(batch: list[tuple[K, asyncio.Future[R]]], exc: BaseException) -> None:
    for _, answer in batch:
        if not answer.done():
            answer.set_exception(exc)
