"""The change feed: one reader of the change log per process, fanned out in memory to every
open stream (`app.streams.opening`), whichever kind it follows (workloads or services:
`app.streams.kinds`).

How a change reaches a stream
-----------------------------
A workload or service write commits its change row (migrations 0006 and 0025: numbered from
one sequence while the row is locked) and, if some replica has streams on that project
(`stream_interest`), a NOTIFY on `aicp_watch`. The process's LISTEN connection
(`app.store.listener`) calls `wake()`; the feed reads the rows after its position in one query
and offers each change to the subscriptions of its project, which keep those of their kind.
Nothing is read per stream or per kind: 1,000 streams cost one query.

Order and gaps. Change numbers are handed out before commit, so a read may see number N+1
while N is still in flight (a change of either kind: both share the sequence and this one log).
The feed delivers strictly in number order: at a gap it stops and reads again shortly. A gap is
closed when its row appears, or when the transaction that took the number is known to be over
without committing it: the read also returns its snapshot's `xmax` (every transaction that can
have taken a number seen missing is below it) and `xmin` (every transaction below it is over),
so a gap first seen at `xmax = X` is dead once a later read has `xmin >= X`. Hence `position`
means: every change numbered up to it has been offered, and no change numbered up to it will
ever appear. That is what a stream's event `id` is, and what `Last-Event-ID` resumes from, on
any replica.

Subscribe before reading. A stream registers first (its changes from then on are buffered),
then reads the current objects (or, resuming, the log up to the feed's position at
registration) and only then goes live: nothing committed in between is lost, and a change the
first read already shows (by the row's `change_id`) is not sent twice.

NOTIFY is a hint. The feed also reads after its LISTEN connection (re)connects, after marking a
new project watched (a change that committed just before the mark did not ring), and every
`poll_interval` while it has streams: a lost notification costs at most that much delay.

Limits. At most `max_streams` open streams per process, `max_per_project` per project (its
share, so that one project cannot take them all) and `max_per_token` per token (429), streams
of both kinds counted together. A stream whose unsent frames exceed `buffer_bytes` (its client
reads too slowly) is closed; the client resumes with `Last-Event-ID`. A revoked token's streams
close on the `aicp_tokens` notification, and every `token_check_interval` the tokens with open
streams are checked again (expiry, deletion, a lost notification), and so are their projects:
the streams of a project whose deletion was requested end (a platform admin's stream has no
token that would end it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.backoff import Backoff
from app.domain.errors import StoreUnavailable, TooManyStreams
from app.observability.metrics import STREAM_DROPS, STREAM_EVENTS, STREAMS_OPEN
from app.store import changes
from app.store.db import UNAVAILABLE_ERRORS
from app.streams.subscriptions import TIMING, Change, Subscription

if TYPE_CHECKING:
    from datetime import datetime

    from app.config import Settings
    from app.store.db import Database, Row
    from app.store.listener import Channel, Listener
    from app.store.workloads import WorkloadFilter
    from app.streams.kinds import StreamKind

log = logging.getLogger("aicp.streams")

#: A database outage, as the store reports it (`StoreUnavailable`) or as a connection fails under
#: a query: the feed waits it out and reads again; it never ends the process for it.
_OUTAGE: tuple[type[BaseException], ...] = (StoreUnavailable, *UNAVAILABLE_ERRORS)


@dataclass(frozen=True)
class FeedConfig:
    """How the feed runs: the settings' (`AICP_STREAM_*`, `AICP_STREAMS_*`), then its own."""

    replica: str
    heartbeat_seconds: float
    max_streams: int
    max_per_token: int
    max_per_project: int  # a project's share of `max_streams`
    buffer_bytes: int
    history_seconds: float
    poll_interval: float = 2.0
    interest_ttl: float = 30.0
    token_check_interval: float = 5.0
    batch: int = 500
    gap_retry: float = 0.005
    gap_limit_seconds: float = 30.0

    @classmethod
    def of(cls, settings: Settings) -> FeedConfig:
        """The feed the environment sets (app/config.py states the defaults)."""
        return cls(
            replica=settings.instance_id,
            heartbeat_seconds=settings.stream_heartbeat_seconds,
            max_streams=settings.streams_max,
            max_per_token=settings.streams_per_token,
            max_per_project=settings.streams_per_project,
            buffer_bytes=settings.stream_buffer_bytes,
            history_seconds=settings.stream_history_seconds,
        )


class ChangeFeed:
    """The process's reader of the change log and its subscriptions (see the module docstring)."""

    def __init__(self, db: Database, config: FeedConfig, listener: Listener) -> None:
        self.db = db
        self.config = config
        self.listener = listener
        self._interests: list[Channel] = []
        self.position = 0
        self.delivered = 0  # events queued to streams, ever
        self._by_project: dict[uuid.UUID, set[Subscription]] = {}
        self._per_token: dict[str, int] = {}
        self._count = 0
        self._gaps: dict[int, tuple[int, float]] = {}  # number → (xmax first seen, when)
        self._wake = asyncio.Event()
        self._marked: set[uuid.UUID] = set()
        self._mark_lock = asyncio.Lock()
        self._reading = asyncio.Lock()
        self._tasks: list[asyncio.Task[None]] = []
        self._started = False

    @property
    def open_streams(self) -> int:
        return self._count

    def queued(self) -> None:
        """One event was queued to a stream (`Subscription`'s view of the feed)."""
        self.delivered += 1

    @property
    def tasks(self) -> list[asyncio.Task[None]]:
        """The reader and upkeep loops (the process supervisor watches them)."""
        return list(self._tasks)

    # -- lifecycle --------------------------------------------------------------------------

    async def start(self) -> None:
        """Start from the newest numbers: a window back, so that changes still in flight at
        start are waited for like any gap (their numbers were taken before)."""
        async with self.db.connection() as conn:
            newest, _ = await changes.newest_and_oldest(conn)
        self.position = max(0, newest - self.config.batch)
        await self._read()
        self._interests = [
            await self.listener.listen(changes.CHANNEL, self.wake, on_connected=self.wake),
            await self.listener.listen(changes.TOKENS_CHANNEL, self.token_revoked),
        ]
        self._tasks = [
            asyncio.create_task(self._read_loop(), name="changefeed-reader"),
            asyncio.create_task(self._upkeep_loop(), name="changefeed-upkeep"),
            asyncio.create_task(self._heartbeat_loop(), name="changefeed-heartbeats"),
        ]
        self._started = True

    async def stop(self) -> None:
        for interest in self._interests:
            interest.close()
        self._interests = []
        self.close_all("the server is shutting down")
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []
        with contextlib.suppress(*_OUTAGE):
            async with self.db.connection() as conn:
                await changes.unmark_all(conn, self.config.replica)

    def close_all(self, reason: str) -> None:
        for subs in list(self._by_project.values()):
            for sub in list(subs):
                sub.close(reason)

    # -- the LISTEN connection's callbacks ------------------------------------------------------

    def wake(self, _payload: str = "") -> None:
        """A change committed somewhere (or the LISTEN connection is back): read."""
        self._wake.set()

    def token_revoked(self, payload: str) -> None:
        try:
            token_id = uuid.UUID(payload)
        except ValueError:
            return
        self._close_tokens({token_id})

    def _close_tokens(self, token_ids: set[uuid.UUID]) -> None:
        for subs in self._by_project.values():
            for sub in subs:
                if sub.token_id in token_ids:
                    STREAM_DROPS.labels("revoked").inc()
                    sub.close("the token is no longer valid", dropped=True)

    # -- subscriptions ----------------------------------------------------------------------

    async def subscribe(
        self,
        project_id: uuid.UUID,
        project: str,
        kind: StreamKind,
        filters: WorkloadFilter,
        *,
        token: str,
        token_id: uuid.UUID | None,
        expires_at: datetime | None,
    ) -> Subscription:
        """Register a stream (429 `TooManyStreams` over a limit); its changes are buffered until
        `go_live`. Returns once the project is marked watched (so its changes ring)."""
        if self._count >= self.config.max_streams:
            STREAM_DROPS.labels("limit").inc()
            raise TooManyStreams(
                self.config.max_streams,
                f"This server has {self._count} streams open, its limit.",
            )
        if len(self._by_project.get(project_id, ())) >= self.config.max_per_project:
            STREAM_DROPS.labels("limit").inc()
            raise TooManyStreams(
                self.config.max_per_project,
                f"This project has {self.config.max_per_project} streams open, its share.",
            )
        if self._per_token.get(token, 0) >= self.config.max_per_token:
            STREAM_DROPS.labels("limit").inc()
            raise TooManyStreams(
                self.config.max_per_token,
                f"This token has {self.config.max_per_token} streams open, its limit.",
            )
        if not self._count:
            await self._catch_up()
        sub = Subscription(
            self,
            project_id,
            project,
            kind,
            filters,
            token,
            token_id,
            expires_at,
            registered_at=self.position,
            buffer_bytes=self.config.buffer_bytes,
            early_limit=self.config.batch * 20,
        )
        self._by_project.setdefault(project_id, set()).add(sub)
        self._per_token[token] = self._per_token.get(token, 0) + 1
        self._count += 1
        STREAMS_OPEN.set(self._count)
        try:
            if project_id not in self._marked:
                await self._mark()
        except BaseException:
            self.unsubscribe(sub)
            raise
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        subs = self._by_project.get(sub.project_id)
        if subs is None or sub not in subs:
            return
        subs.discard(sub)
        if not subs:
            del self._by_project[sub.project_id]
        self._per_token[sub.token] -= 1
        if not self._per_token[sub.token]:
            del self._per_token[sub.token]
        self._count -= 1
        STREAMS_OPEN.set(self._count)
        sub.close("closed")

    async def _catch_up(self) -> None:
        """Without streams the feed reads nothing (no change rings for it): before the first
        one registers, move to the newest changes (a window back, as at start) and read."""
        async with self.db.connection() as conn:
            newest, _ = await changes.newest_and_oldest(conn)
        self.position = max(self.position, newest - self.config.batch)
        self._gaps = {n: seen for n, seen in self._gaps.items() if n > self.position}
        await self._read()

    async def _mark(self) -> None:
        """Mark this replica's watched projects (the new one included), then read: a change
        that committed before the mark did not ring."""
        async with self._mark_lock:
            projects = list(self._by_project)
            async with self.db.connection() as conn:
                await changes.mark_watched(
                    conn, self.config.replica, projects, self.config.interest_ttl
                )
            self._marked = set(projects)
        self.wake()

    # -- reading ------------------------------------------------------------------------------

    async def _read_loop(self) -> None:
        failures = 0
        backoff = Backoff(0.2, 5.0)
        while True:
            timeout = self._next_read_in()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout)
            self._wake.clear()
            try:
                await self._read()
                failures = 0
            except _OUTAGE as exc:
                failures += 1
                log.warning(
                    "change feed cannot read the database (%s; %d in a row); retrying",
                    exc,
                    failures,
                )
                await asyncio.sleep(backoff.delay(failures))

    def _next_read_in(self) -> float | None:
        if self._gaps:
            return self.config.gap_retry
        return self.config.poll_interval if self._count else None

    async def _read(self) -> None:
        """Read and offer changes in number order until the log is exhausted or a gap holds.
        One read at a time (the loop's, a catch-up's): a change is offered once."""
        async with self._reading:
            while True:
                async with self.db.connection() as conn:
                    batch = await changes.read_after(conn, self.position, self.config.batch)
                held = self._deliver(batch)
                if held or len(batch.rows) < self.config.batch:
                    return

    def _deliver(self, batch: changes.Batch) -> bool:
        """Offer the batch's changes up to the first gap still open; True when one holds."""
        now = time.monotonic()
        for row in batch.rows:
            number = row["change_id"]
            if number <= self.position:
                continue  # a catch-up moved past it
            while self.position + 1 < number:
                missing = self.position + 1
                seen_xmax, since = self._gaps.setdefault(missing, (batch.xmax, now))
                if batch.xmin < seen_xmax and now - since < self.config.gap_limit_seconds:
                    return True  # its transaction may still commit: wait for it
                if batch.xmin < seen_xmax:
                    log.warning("change %d stayed missing for %.0fs; skipped", missing, now - since)
                self._gaps.pop(missing, None)
                self.position = missing
            self._offer(row)
            self.position = number
            self._gaps.pop(number, None)
        return False

    def _offer(self, row: Row) -> None:
        subs = self._by_project.get(row["project_id"])
        if not subs:
            return
        change = Change(row, next(iter(subs)).project)
        if TIMING.isEnabledFor(logging.DEBUG):
            TIMING.debug("change %d read %.6f", change.number, time.time())
        before = self.delivered
        for sub in list(subs):
            sub.offer(change)
        # One metric update per change, not per stream (each takes a lock).
        STREAM_EVENTS.inc(self.delivered - before)

    # -- upkeep ---------------------------------------------------------------------------------

    async def _upkeep_loop(self) -> None:
        """Renew the watched marks, recheck tokens, forget old history; poll as a safety net."""
        last_purge = 0.0
        interval = min(self.config.interest_ttl / 3, self.config.token_check_interval)
        while True:
            await asyncio.sleep(interval)
            try:
                if self._by_project or self._marked:
                    await self._mark()
                await self._check_tokens()
                await self._check_projects()
                if time.monotonic() - last_purge > 60:
                    last_purge = time.monotonic()
                    async with self.db.connection() as conn:
                        await changes.purge(conn, self.config.history_seconds)
            except _OUTAGE as exc:
                log.warning("change feed upkeep failed: %s", exc)

    async def _heartbeat_loop(self) -> None:
        """Heartbeats for streams silent for `heartbeat_seconds`; streams whose token expired
        are closed (both within a second, one pass over the streams)."""
        tick = min(1.0, self.config.heartbeat_seconds / 2)
        while True:
            await asyncio.sleep(tick)
            now, wall = time.monotonic(), time.time()
            for subs in list(self._by_project.values()):
                for sub in list(subs):
                    if sub.expires_at is not None and sub.expires_at.timestamp() <= wall:
                        STREAM_DROPS.labels("revoked").inc()
                        sub.close("the token expired", dropped=True)
                    elif now - sub.sent_at >= self.config.heartbeat_seconds:
                        sub.heartbeat()

    async def _check_projects(self) -> None:
        """End the streams of projects whose deletion was requested (or that are gone): a
        platform admin's stream has no token to lose, and the project will show nothing more."""
        watched = list(self._by_project)
        if not watched:
            return
        async with self.db.connection() as conn:
            live = await changes.live_projects(conn, watched)
        for project_id in set(watched) - live:
            for sub in list(self._by_project.get(project_id, ())):
                STREAM_DROPS.labels("project_deleted").inc()
                sub.close("the project is being deleted")

    async def _check_tokens(self) -> None:
        now = time.time()
        expired: set[uuid.UUID] = set()
        ids: set[uuid.UUID] = set()
        for subs in self._by_project.values():
            for sub in subs:
                if sub.token_id is None:
                    continue
                ids.add(sub.token_id)
                if sub.expires_at is not None and sub.expires_at.timestamp() <= now:
                    expired.add(sub.token_id)
        if not ids:
            return
        async with self.db.connection() as conn:
            valid = await changes.valid_tokens(conn, list(ids))
        self._close_tokens((ids - valid) | expired)
