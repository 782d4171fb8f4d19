"""One open stream's side of the change feed (`app.streams.changefeed`): what it shows, what it
has shown, its unsent frames, and the SSE frames themselves.

A subscription knows its feed only through `Feed` (the feed's position, and a count of the
events queued); its limits are its own fields, set by the feed that registers it.

A `Subscription` follows one kind (`app.streams.kinds`: workloads or services); the feed
offers it every change of its project, and it ignores those of the other kind. It is
registered before its first objects are read; until `go_live` the changes offered to it are
kept aside, then considered in order. Considering a change: skip it if the first read already
showed it (`shown[resource] >= number`); otherwise ADDED, MODIFIED or DELETED by whether the
resource was in the stream's view and matches its filters now. A frame carries `id` only once
everything numbered before it is out (`ids_from`); numbers are shared by both kinds, so a
stream's ids skip the other kind's changes.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import msgspec

from app.observability.metrics import STREAM_DROPS
from app.streams.kinds import of_change

if TYPE_CHECKING:
    import uuid
    from datetime import datetime

    from app.store.db import Row
    from app.store.workloads import WorkloadFilter
    from app.streams.kinds import StreamKind

log = logging.getLogger("aicp.streams")
#: Per change, when the feed read it and when each stream wrote it out (wall clock, DEBUG;
#: off unless this logger is set to DEBUG: `loadtest/dashboard_bench.py` measures with it).
TIMING = logging.getLogger("aicp.streams.timing")

HEARTBEAT = b": heartbeat\n\n"


class Feed(Protocol):
    """What a subscription reads of the feed that offers it changes."""

    @property
    def position(self) -> int:
        """Every change numbered up to it has been offered (and none will appear below it)."""
        ...

    def queued(self) -> None:
        """One event was queued to a stream (the feed counts them)."""
        ...


class Change:
    """One change row, rendered and encoded at most once per event type for all streams."""

    __slots__ = ("_frames", "_resource", "deleted", "id", "kind", "name", "number", "row")

    def __init__(self, row: Row, project: str) -> None:
        self.row = row
        self.kind = of_change(row)
        self.number: int = row["change_id"]
        self.id: uuid.UUID = row["id"]
        self.name: str = row["name"]
        self.deleted: bool = row["deleted"]
        self._resource = (row, project)
        self._frames: dict[tuple[str, bool], bytes] = {}

    @property
    def created(self) -> bool:
        """This is the resource's insert (one clock reading sets both times only then)."""
        return bool(self.row["created_at"] == self.row["updated_at"])

    def frame(self, kind: str, *, with_id: bool) -> bytes:
        key = (kind, with_id)
        found = self._frames.get(key)
        if found is None:
            row, project = self._resource
            found = self._frames[key] = event_frame(
                kind, self.kind.render(row, project), self.number if with_id else None
            )
        return found


def event_frame(kind: str, resource: Any, number: int | None) -> bytes:
    """One SSE event: `id` (when given), `event` (ADDED, MODIFIED, DELETED), `data` (JSON
    `{"type", "object"}` on one line)."""
    data = msgspec.json.encode({"type": kind, "object": resource})
    head = b"" if number is None else b"id: %d\n" % number
    return head + b"event: " + kind.encode() + b"\ndata: " + data + b"\n\n"


def position_frame(number: int) -> bytes:
    """A heartbeat that moves the client's Last-Event-ID forward (no event is dispatched)."""
    return b": heartbeat\nid: %d\n\n" % number


@dataclass(eq=False)
class Subscription:
    """One open stream: what it shows, what it has shown, and its unsent frames."""

    feed: Feed
    project_id: uuid.UUID
    project: str
    kind: StreamKind  # what it follows; the feed offers it its project's changes of every kind
    filters: WorkloadFilter
    token: str  # the caller's identity (`admin`, `token:<id>`): the per-token limit counts it
    token_id: uuid.UUID | None
    expires_at: datetime | None
    registered_at: int  # the feed's position at registration: later changes are offered
    buffer_bytes: int  # unsent live frames beyond this close the stream (its client is slow)
    early_limit: int  # changes kept aside before `go_live`, at most (then the stream closes)
    resumed_from: int | None = None
    shown: dict[uuid.UUID, int] = field(default_factory=dict)  # resource → newest number shown
    ids_from: int = 0  # frames carry `id` from this number on (everything before is shown)
    closed: str | None = None  # why, once closed
    _live: bool = False
    _early: list[Change] = field(default_factory=list)
    _frames: list[bytes] = field(default_factory=list)
    _queued: int = 0
    _waiter: asyncio.Future[None] | None = None
    sent_at: float = field(default_factory=time.monotonic)  # when a chunk last went out
    newest: int = 0  # the number of the newest change queued (what `TIMING` reports)

    @property
    def single(self) -> bool:
        """A watch of one resource by name: it ends with the resource's DELETED."""
        return self.filters.name is not None

    def go_live(self) -> None:
        """The first events are out: offer what was buffered meanwhile, then live changes."""
        self._live = True
        early, self._early = self._early, []
        for change in early:
            self.offer(change)
        # Every change up to the feed's position is now out or shown: tell the client.
        if self.closed is None and self.feed.position >= self.ids_from:
            self.push_initial(position_frame(self.feed.position))

    def offer(self, change: Change) -> None:
        if self.closed is not None or change.kind is not self.kind:
            return
        if not self._live:
            self._early.append(change)
            if len(self._early) > self.early_limit:
                self.close("slow")
            return
        if change.number <= self.registered_at or (
            self.resumed_from is not None and change.number <= self.resumed_from
        ):
            return
        self._consider(change)

    def replay(self, change: Change) -> None:
        """A change read from the log while resuming (numbered up to `registered_at`)."""
        self._consider(change)

    def _consider(self, change: Change) -> None:
        if self.single and change.name != self.filters.name:
            return
        shown = self.shown.get(change.id)
        if shown is not None and change.number <= shown:
            return  # the first read already showed it
        with_id = change.number >= self.ids_from
        self.newest = change.number
        if not change.deleted and self.filters.match(change.row):
            if shown is None and (self.resumed_from is None or change.created):
                kind = "ADDED"
            else:
                kind = "MODIFIED"
            self.shown[change.id] = change.number
            self._push(change.frame(kind, with_id=with_id))
        elif shown is not None or (self.resumed_from is not None and not self.single):
            # It leaves this stream's view: deleted, or no longer matching the filters (on a
            # resumed list stream the view before the resume point is not known here).
            self.shown.pop(change.id, None)
            self._push(change.frame("DELETED", with_id=with_id))
            if self.single and change.deleted:
                self.close("deleted")
        elif self.single and change.deleted and self.resumed_from is not None:
            self._push(change.frame("DELETED", with_id=with_id))
            self.close("deleted")

    def _push(self, frame: bytes) -> None:
        # Only live frames count against the buffer: what a resume replays (at most
        # MAX_REPLAY changes, app.streams.opening) is read and sent a PAGE_BYTES page at a time,
        # each page sent before the next is read.
        if self._live and self._queued + len(frame) > self.buffer_bytes:
            STREAM_DROPS.labels("slow").inc()
            log.info("dropping a slow stream of project %s (%s)", self.project, self.token)
            self.close("slow", dropped=True)
            return
        self.feed.queued()
        self.push_initial(frame)

    def push_initial(self, frame: bytes) -> None:
        """A first event (the current object): sent before anything offered."""
        self._frames.append(frame)
        self._queued += len(frame)
        self._wake()

    def heartbeat(self) -> None:
        """A comment that keeps the connection alive and moves Last-Event-ID to the feed's
        position once everything up to it is out (the upkeep loop calls it on idle streams)."""
        if self.closed is None and self._live and not self._frames:
            position = self.feed.position
            self.push_initial(position_frame(position) if position >= self.ids_from else HEARTBEAT)

    def close(self, reason: str, *, dropped: bool = False) -> None:
        if self.closed is None:
            self.closed = reason
            if dropped:
                self._frames.clear()
                self._queued = 0
            self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def take_queued(self) -> bytes:
        """Every frame queued so far, as one chunk (empty when none), without waiting."""
        chunk = b"".join(self._frames)
        self._frames = []
        self._queued = 0
        return chunk

    async def next_chunk(self) -> bytes | None:
        """Every frame queued so far, as one chunk; None once closed (after what was queued).
        No timer per stream: heartbeats and expiry come from the feed's upkeep loop."""
        while not self._frames and self.closed is None:
            self._waiter = asyncio.get_running_loop().create_future()
            await self._waiter
        self._waiter = None
        if not self._frames:
            return None
        chunk = self._frames[0] if len(self._frames) == 1 else b"".join(self._frames)
        self._frames = []
        self._queued = 0
        self.sent_at = time.monotonic()
        return chunk
