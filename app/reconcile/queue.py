"""The in-process work queue: deduplicated, per-key serialized, with delayed and backed-off retries.

Contract (docs/DESIGN.md §5, the shape of client-go's workqueue):

- a key is *queued* at most once: adding a key that is already waiting is a no-op;
- `get()` hands a key to exactly one worker, which must call `done(key, ...)` when its step ends;
  until then the key is *processing* and no other worker can get it (per-key serialization);
- adding a key while it is processing marks it *dirty*: it is queued again as soon as `done()`
  is called, so an event that arrived mid-step is never lost;
- `requeue_after(key, s)` queues the key after `s` seconds unless it is queued sooner;
- `done(key, failed=True)` queues the key after an exponential, jittered and capped backoff that
  grows with consecutive failures (`app.backoff.Backoff`); `done(key)` without failure resets
  the count;
- `drop(key)` forgets a key entirely (its lease moved to a peer): it leaves the ready set, its
  timer is cancelled, and a processing key is not re-run when it finishes;
- `close()` stops handing out keys: waiting and later `get()` calls raise `QueueClosed`;
- keys are served fairly between *groups* (`group_of(key)`: the engine's is the resource's
  project): each group has its own first-in-first-out lane, and `get()` takes from the lanes in
  turn, one key each. A group that queued a thousand keys therefore delays another group's one
  key by at most one key per busy group, not by the thousand. Without `group_of` there is one
  lane: plain arrival order.

Everything runs on one event loop, so the bookkeeping needs no locks; the only awaits are in
`get()`.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from app.backoff import Backoff

K = TypeVar("K", bound=Hashable)


class QueueClosed(Exception):
    """The queue was closed: no more keys will be handed out."""


class WorkQueue(Generic[K]):
    """A deduplicating, per-key serialized queue of keys (see the module docstring)."""

    def __init__(
        self,
        backoff: Backoff | None = None,
        *,
        group_of: Callable[[K], Hashable] | None = None,
    ) -> None:
        self._backoff = self.backoff = backoff or Backoff(0.05, 60.0)
        self._group_of = group_of
        # `_ready` is the authority on what is queued; the lanes may hold stale duplicates of
        # keys that were dropped or already handed out, which `get()` skips.
        self._ready: set[K] = set()
        self._lanes: dict[Hashable, deque[K]] = {}  # group → its keys in arrival order
        self._turns: deque[Hashable] = deque()  # the groups with a non-empty lane, next first
        self._entries = asyncio.Semaphore(0)  # one count per key in a lane (and one at close)
        self._processing: set[K] = set()
        self._dirty: set[K] = set()
        # After-processing delays requested for a key that is processing (min wins).
        self._deferred: dict[K, float] = {}
        self._timers: dict[K, tuple[float, asyncio.TimerHandle]] = {}
        self._failures: dict[K, int] = {}
        self._closed = False

    # -- producers -------------------------------------------------------------------------

    def add(self, key: K) -> None:
        """Queue `key` now (no-op if already queued; marks it dirty if it is processing)."""
        if self._closed:
            return
        if key in self._processing:
            self._dirty.add(key)
            return
        self._cancel_timer(key)
        if key not in self._ready:
            self._ready.add(key)
            self._push(key)

    def requeue_after(self, key: K, seconds: float) -> None:
        """Queue `key` in `seconds` unless it is (or becomes) queued sooner."""
        if self._closed:
            return
        if seconds <= 0:
            self.add(key)
            return
        if key in self._processing:
            self._deferred[key] = min(seconds, self._deferred.get(key, seconds))
            return
        if key in self._ready:
            return
        loop = asyncio.get_running_loop()
        due = loop.time() + seconds
        current = self._timers.get(key)
        if current is not None and current[0] <= due:
            return
        self._cancel_timer(key)
        self._timers[key] = (due, loop.call_at(due, self._fire, key))

    def drop(self, key: K) -> None:
        """Forget `key`: unqueue it, cancel its timer, and do not re-run it when it finishes."""
        self._ready.discard(key)
        self._dirty.discard(key)
        self._deferred.pop(key, None)
        self._failures.pop(key, None)
        self._cancel_timer(key)

    def retry_failed_now(self) -> int:
        """Queue now every key waiting out a failure backoff (what failed it is fixed, e.g. the
        Kubernetes API answers again); the failure counts stay. Returns how many."""
        due = [key for key in self._timers if self._failures.get(key)]
        for key in due:
            self.add(key)
        return len(due)

    def close(self) -> None:
        """Stop handing out keys; every waiting `get()` raises `QueueClosed`."""
        self._closed = True
        for _, handle in self._timers.values():
            handle.cancel()
        self._timers.clear()
        self._entries.release()

    # -- consumers -------------------------------------------------------------------------

    async def get(self) -> K:
        """Wait for the next queued key and mark it processing. Raises `QueueClosed`."""
        while True:
            await self._entries.acquire()
            if self._closed:
                self._entries.release()  # wake the next waiter too
                raise QueueClosed
            key = self._pop()
            if key in self._ready:
                self._ready.remove(key)
                self._processing.add(key)
                return key

    def done(self, key: K, *, failed: bool = False, requeue_after: float | None = None) -> None:
        """End processing of `key`; re-queue it if it went dirty, failed, or asked to come back.

        A dirty key runs again at once (new information beats a timer). A failure schedules a
        backoff retry; success resets the failure count.
        """
        self._processing.discard(key)
        deferred = self._deferred.pop(key, None)
        if failed:
            self._failures[key] = self._failures.get(key, 0) + 1
        else:
            self._failures.pop(key, None)
        if key in self._dirty:
            self._dirty.discard(key)
            self.add(key)
            return
        delays = [d for d in (deferred, requeue_after) if d is not None]
        if failed:
            delays.append(self._backoff.delay(self._failures[key]))
        if delays:
            self.requeue_after(key, min(delays))

    # -- introspection ---------------------------------------------------------------------

    def failures(self, key: K) -> int:
        """Consecutive failures of `key` so far."""
        return self._failures.get(key, 0)

    def is_processing(self, key: K) -> bool:
        return key in self._processing

    def is_dirty(self, key: K) -> bool:
        """True when `key` is processing and something asked for it again meanwhile."""
        return key in self._dirty

    def __len__(self) -> int:
        """Keys queued and ready to be handed out (not counting delayed ones)."""
        return len(self._ready)

    @property
    def delayed(self) -> int:
        """Keys waiting on a timer (requeue-after or backoff)."""
        return len(self._timers)

    @property
    def groups(self) -> int:
        """Groups with keys in their lane (stale entries included)."""
        return len(self._lanes)

    # -- internals -------------------------------------------------------------------------

    def _push(self, key: K) -> None:
        group = None if self._group_of is None else self._group_of(key)
        lane = self._lanes.get(group)
        if lane is None:
            lane = self._lanes[group] = deque()
            self._turns.append(group)
        lane.append(key)
        self._entries.release()

    def _pop(self) -> K:
        """The next key in turn: the first of the next group's lane (there is one: the
        semaphore counts the entries)."""
        group = self._turns.popleft()
        lane = self._lanes[group]
        key = lane.popleft()
        if lane:
            self._turns.append(group)  # its next key waits for every other group's turn
        else:
            del self._lanes[group]
        return key

    def _fire(self, key: K) -> None:
        self._timers.pop(key, None)
        self.add(key)

    def _cancel_timer(self, key: K) -> None:
        entry = self._timers.pop(key, None)
        if entry is not None:
            entry[1].cancel()
