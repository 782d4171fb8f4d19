"""The controller runtime: keyed work queues fed by the store's own watch, like client-go's.

A controller here is three parts, as in controller-runtime:

- an *informer* task (`watch_forever`) that turns watch events into keys,
- a `WorkQueue` that de-duplicates keys (a key queued twice before it is processed runs once)
  and holds delayed re-queues ("look again in N simulated seconds"),
- a *worker* task (`run_worker`) that calls `reconcile(key)` for one key at a time.

Reconcilers read the current state from the store (level-triggered), never from the event that
woke them. The store's methods are synchronous, so one reconcile is atomic with respect to every
other controller and to HTTP clients: nothing else runs until it returns or awaits.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
from collections.abc import Awaitable, Callable, Hashable, Iterable
from typing import TYPE_CHECKING, Generic, TypeVar

from kubesim.store import StoreError

if TYPE_CHECKING:
    from kubesim.clock import Clock
    from kubesim.store import ResourceType, Store, WatchEvent

log = logging.getLogger("kubesim.controllers")

K = TypeVar("K", bound=Hashable)

#: What a reconcile returns: None when done, else simulated seconds after which to look again.
Requeue = float | None


class WorkQueue(Generic[K]):
    """A FIFO of distinct keys plus a timer heap of delayed keys, driven by simulated time.

    One timer task serves every delayed key (10,000 pods waiting to finish cost one task, not
    10,000). Re-adding a key that is already waiting is a no-op, so a burst of events for one
    object costs one reconcile.
    """

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._pending: dict[K, None] = {}  # insertion-ordered set
        self._ready = asyncio.Event()
        self._timers: list[tuple[float, int, K]] = []
        self._seq = itertools.count()
        self._timers_changed = asyncio.Event()

    def __len__(self) -> int:
        return len(self._pending)

    def add(self, key: K) -> None:
        if key not in self._pending:
            self._pending[key] = None
            self._ready.set()

    def add_all(self, keys: Iterable[K]) -> None:
        for key in keys:
            self.add(key)

    def add_after(self, key: K, seconds: float) -> None:
        """Queue `key` once `seconds` of simulated time have passed (at once when <= 0)."""
        if seconds <= 0:
            self.add(key)
            return
        heapq.heappush(self._timers, (self._clock.now() + seconds, next(self._seq), key))
        self._timers_changed.set()

    async def get(self) -> K:
        while not self._pending:
            self._ready.clear()
            await self._ready.wait()
        key = next(iter(self._pending))
        del self._pending[key]
        return key

    async def run_timers(self) -> None:
        """Move due delayed keys into the queue; sleeps on the simulated clock in between.

        The sleep races against `_timers_changed` because a new timer may be due earlier than
        the one being slept on.
        """
        while True:
            now = self._clock.now()
            while self._timers and self._timers[0][0] <= now:
                self.add(heapq.heappop(self._timers)[2])
            self._timers_changed.clear()
            if not self._timers:
                await self._timers_changed.wait()
                continue
            # The sleep is measured against the absolute deadline when the task first runs: a
            # duration computed here would be stretched by a clock advance landing in between.
            sleeper = asyncio.ensure_future(_sleep_until(self._clock, self._timers[0][0]))
            changed = asyncio.ensure_future(self._timers_changed.wait())
            try:
                await asyncio.wait({sleeper, changed}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                sleeper.cancel()
                changed.cancel()


async def _sleep_until(clock: Clock, deadline: float) -> None:
    await clock.sleep(deadline - clock.now())


async def watch_forever(
    store: Store,
    rt: ResourceType,
    on_event: Callable[[WatchEvent], None],
    *,
    name: str,
) -> None:
    """Feed every event of `rt` (all namespaces, existing objects first) to `on_event`.

    `on_event` must be cheap and synchronous (it only computes and queues keys). Should the
    store's watch ever end or fail, it is restarted from scratch (a fresh ADDED replay), which a
    level-triggered reconciler absorbs.
    """
    while True:
        try:
            async for event in store.watch(rt):
                try:
                    on_event(event)
                except Exception:
                    log.exception("%s: event handler failed", name)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("%s: watch of %s failed; restarting", name, rt.plural)
        await asyncio.sleep(0.05)


async def run_worker(
    queue: WorkQueue[K],
    reconcile: Callable[[K], Requeue | Awaitable[Requeue]],
    *,
    name: str,
    retry_after: float = 1.0,
) -> None:
    """Process keys one at a time; an exception is logged and the key retried later."""
    while True:
        key = await queue.get()
        try:
            result = reconcile(key)
            if asyncio.iscoroutine(result) or isinstance(result, Awaitable):
                result = await result
        except asyncio.CancelledError:
            raise
        except StoreError as exc:
            if exc.code == 404:
                # The object went away under the reconcile: its DELETED event brings the key
                # back if anything is left to do.
                log.debug("%s: %r vanished during reconcile: %s", name, key, exc.message)
                continue
            log.exception("%s: reconcile of %r failed; retrying", name, key)
            queue.add_after(key, retry_after)
            continue
        except Exception:
            log.exception("%s: reconcile of %r failed; retrying", name, key)
            queue.add_after(key, retry_after)
            continue
        if result is not None:
            queue.add_after(key, result)
        # Yield so that a long queue does not starve the HTTP server and watchers.
        await asyncio.sleep(0)
