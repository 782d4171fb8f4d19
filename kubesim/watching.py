"""Watch fan-out: a bounded history of changes and per-watcher bounded queues.

Every write the store commits becomes one `Change`, encoded to JSON once and shared by every
watcher. A watcher replays the history after its resourceVersion and then receives live changes;
if its resourceVersion is older than the history (the "watch cache" window) it is `Expired` —
the HTTP layer turns that into an in-stream ERROR 410, as the real apiserver's cacher does.

Everything here runs on the event loop thread: `subscribe` replays the history and registers the
watcher in one synchronous step, so no change can fall between replay and live delivery.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from kubesim.selectors import FieldRequirement, Requirement, fields_match, object_labels

if TYPE_CHECKING:
    from kubesim.model import Obj

ChangeType = Literal["ADDED", "MODIFIED", "DELETED"]


@dataclass(eq=False)
class Change:
    """One committed write. `obj` is the new state (DELETED: the last state, delete's RV);
    `old` is the previous state of a MODIFIED, which selector transitions need. `raw` is the
    encoded `obj`, shared by every watcher (the objects are never mutated after commit)."""

    rv: int
    key: tuple[str, str]
    type: ChangeType
    namespace: str
    obj: Obj
    old: Obj | None
    raw: bytes
    _lines: dict[str, bytes] = field(default_factory=dict)

    def line(self, event_type: str) -> bytes:
        """The wire form `{"type":…,"object":…}\\n`, built once per type."""
        cached = self._lines.get(event_type)
        if cached is None:
            cached = b'{"type":"' + event_type.encode() + b'","object":' + self.raw + b"}\n"
            self._lines[event_type] = cached
        return cached


class Expired(Exception):
    """The watcher's resourceVersion is older than the history, or it fell too far behind."""

    def __init__(self, requested: int, oldest: int):
        super().__init__(f"too old resource version: {requested} ({oldest})")


class Watcher:
    """One consumer's view: namespace + selector filter, a queue of `(type, Change)`.

    `maxsize` bounds the queue; a watcher that falls further behind is cut off (`Expired`),
    which is what the real watch cache does to slow consumers. `None` = unbounded (in-process
    controllers, which must never lose events)."""

    def __init__(
        self,
        key: tuple[str, str],
        namespace: str | None,
        labels: tuple[Requirement, ...],
        fields: tuple[FieldRequirement, ...],
        maxsize: int | None,
    ) -> None:
        self.key, self.namespace = key, namespace
        self._labels, self._fields, self._maxsize = labels, fields, maxsize
        self._items: deque[tuple[str, Change]] = deque()
        self._wake = asyncio.Event()
        self.expired: Expired | None = None
        self.closed = False
        self.last_rv = 0
        self.delivered = 0
        self.last_write = 0.0  # loop time the HTTP stream last wrote (bookmark pacing)

    def matches(self, obj: Obj) -> bool:
        labels = object_labels(obj)
        return all(r.matches(labels) for r in self._labels) and fields_match(obj, self._fields)

    def offer(self, change: Change) -> None:
        """Queue `change` as this watcher sees it (selector transitions become ADDED/DELETED)."""
        if self.expired or self.closed:
            return
        if self.namespace is not None and change.namespace != self.namespace:
            return
        event_type: str | None = change.type
        if self._labels or self._fields:
            now = self.matches(change.obj)
            if change.type == "MODIFIED":
                before = change.old is not None and self.matches(change.old)
                event_type = (
                    ("MODIFIED" if before else "ADDED") if now else ("DELETED" if before else None)
                )
            elif not now:
                event_type = None
        if event_type is None:
            return
        self._items.append((event_type, change))
        if self._maxsize is not None and len(self._items) > self._maxsize:
            self._items.clear()
            self.expired = Expired(self.last_rv, change.rv)
        self._wake.set()

    def close(self) -> None:
        self.closed = True
        self._wake.set()

    async def get(self) -> tuple[str, Change]:
        """Next event; raises `Expired` when cut off, `EOFError` when closed."""
        while not self._items:
            if self.expired:
                raise self.expired
            if self.closed:
                raise EOFError
            self._wake.clear()
            await self._wake.wait()
        event_type, change = self._items.popleft()
        self.last_rv = change.rv
        self.delivered += 1
        return event_type, change

    def take(self, limit: int) -> list[tuple[str, Change]]:
        """Up to `limit` events that are already queued, without waiting."""
        out: list[tuple[str, Change]] = []
        while self._items and len(out) < limit:
            out.append(self._items.popleft())
        if out:
            self.last_rv = out[-1][1].rv
            self.delivered += len(out)
        return out

    def pending(self) -> int:
        return len(self._items)


class WatchHub:
    """The history window plus the live watchers of every resource type."""

    def __init__(self, history_size: int = 20_000) -> None:
        self._history: deque[Change] = deque(maxlen=history_size)
        # Every change with rv > _floor is still in the history.
        self._floor = 0
        self._watchers: dict[tuple[str, str], set[Watcher]] = {}

    @property
    def oldest_available(self) -> int:
        return self._floor

    def publish(self, change: Change) -> None:
        if self._history.maxlen is not None and len(self._history) == self._history.maxlen:
            self._floor = self._history[0].rv
        self._history.append(change)
        for watcher in tuple(self._watchers.get(change.key, ())):
            watcher.offer(change)
            if watcher.expired is not None:
                self._watchers[change.key].discard(watcher)

    def subscribe(self, watcher: Watcher, since: int) -> None:
        """Replay the history after `since` into `watcher`, then register it for live changes.
        Raises `Expired` when changes after `since` have already left the history."""
        if since < self._floor:
            raise Expired(since, self._floor)
        watcher.last_rv = since
        if self._history and self._history[-1].rv > since:
            for change in self._history:
                if change.rv > since and change.key == watcher.key:
                    watcher.offer(change)
        self._watchers.setdefault(watcher.key, set()).add(watcher)

    def unsubscribe(self, watcher: Watcher) -> None:
        self._watchers.get(watcher.key, set()).discard(watcher)

    def shrink(self, current_rv: int) -> None:
        """Forget the whole history: any resume from an older RV now gets 410 (fault injection)."""
        self._history.clear()
        self._floor = current_rv
