"""What this replica holds: the lease book, and the keeper that renews it (docs/DESIGN.md §5).

The book is the in-memory view of this replica's leases. It is deliberately pessimistic: a hold
is trusted only until `sent + ttl`, where `sent` is this process's clock when the statement that
granted or last renewed it was *sent*. The database computed the expiry as its `now() + ttl` at
some moment after that send, so the local deadline is never later than the real one — a replica
whose renewals stall stops acting on its resources before a peer can take them over.

The keeper renews every live lease of this owner in one statement every `ttl / 3`. A key the
statement did not return has expired or moved, and is dropped locally (`on_drop`) — unless its
grant was applied after the renewal was sent: that claim may have committed after the renewal's
snapshot, so its absence proves nothing.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.domain.kinds import KINDS
from app.reconcile.fencing import Fence
from app.store import leases

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from app.domain.kinds import Kind
    from app.store.db import ReservedPool
    from app.store.leases import Grant, ResourceKey

log = logging.getLogger(__name__)


@dataclass(slots=True)
class _Hold:
    epoch: int
    valid_until: float  # loop time after which the hold is not trusted
    seq: int  # order in which grants/renewals were applied


class LeaseBook:
    """The leases this replica believes it holds, each trusted until a local deadline."""

    def __init__(
        self,
        owner: str,
        ttl: float,
        on_drop: Callable[[ResourceKey], None],
        *,
        incarnation: str = "",
    ) -> None:
        self.owner = owner
        self.incarnation = incarnation  # this process's run under `owner` (see leases.py)
        self.ttl = ttl
        self._on_drop = on_drop
        self._holds: dict[ResourceKey, _Hold] = {}
        self._counts: dict[Kind, int] = dict.fromkeys(KINDS, 0)  # holds per kind, kept in step
        self._seq = 0

    def now(self) -> float:
        return asyncio.get_running_loop().time()

    def next_seq(self) -> int:
        """A marker taken just before a statement is sent (see `renewed`)."""
        self._seq += 1
        return self._seq

    def granted(self, grants: Iterable[Grant], sent: float) -> list[ResourceKey]:
        """Record leases won by a claim sent at `sent`; return their keys."""
        seq = self.next_seq()
        keys = []
        for grant in grants:
            if grant.key not in self._holds:
                self._counts[grant.key.kind] += 1
            self._holds[grant.key] = _Hold(grant.epoch, sent + self.ttl, seq)
            keys.append(grant.key)
        return keys

    def renewed(
        self, grants: Iterable[Grant], sent: float, seq: int, busy: Iterable[Grant] = ()
    ) -> list[Grant]:
        """Apply a renewal sent at `sent` with marker `seq`: extend what the book holds, drop
        what the statement did not return. `busy` leases were returned but not extended (their
        row was locked by a transaction in flight): kept at their current deadline. Returns the
        leases the database holds for this owner but the book does not (see
        `LeaseKeeper.renew_once`); they are not booked."""
        returned: set[ResourceKey] = {grant.key for grant in busy}
        unknown: list[Grant] = []
        for grant in grants:
            returned.add(grant.key)
            hold = self._holds.get(grant.key)
            if hold is None:
                unknown.append(grant)
            else:
                hold.epoch = grant.epoch
                hold.valid_until = max(hold.valid_until, sent + self.ttl)
        # A hold applied after the renewal was sent may be missing legitimately; skip those.
        lost = [k for k, h in self._holds.items() if k not in returned and h.seq < seq]
        for key in lost:
            self.drop(key)
        return unknown

    def expire_stale(self) -> list[ResourceKey]:
        """Drop every hold past its local deadline (renewals failed or stalled)."""
        now = self.now()
        stale = [k for k, h in self._holds.items() if h.valid_until <= now]
        for key in stale:
            self.drop(key)
        return stale

    def drop(self, key: ResourceKey) -> None:
        """Forget `key` (lost, released or finalized) and tell the engine."""
        if self._holds.pop(key, None) is not None:
            self._counts[key.kind] -= 1
            self._on_drop(key)

    def knows(self, key: ResourceKey) -> bool:
        """True while `key` is in the book, trusted or not (see `holds`): not yet dropped."""
        return key in self._holds

    def holds(self, key: ResourceKey) -> bool:
        """True while this replica may act on `key`."""
        hold = self._holds.get(key)
        return hold is not None and hold.valid_until > self.now()

    def remaining(self, key: ResourceKey, epoch: int) -> float:
        """Seconds this replica may still act on `key` at `epoch` (0 when not held, or held at
        another epoch): what bounds a side effect taken under that lease."""
        hold = self._holds.get(key)
        if hold is None or hold.epoch != epoch:
            return 0.0
        return max(0.0, hold.valid_until - self.now())

    def fence(self, key: ResourceKey) -> Fence | None:
        """The fence to run `key`'s step under, or None when not (or no longer) held."""
        hold = self._holds.get(key)
        if hold is None or hold.valid_until <= self.now():
            return None
        epoch = hold.epoch
        return Fence(key, self.owner, epoch, lambda: self.remaining(key, epoch))

    def counts(self) -> dict[Kind, int]:
        """Holds per kind, every kind present (kept as holds come and go: the metric is set on
        every change, and a count over the holds made booking n leases O(n²))."""
        return dict(self._counts)

    def held_keys(self) -> list[ResourceKey]:
        return list(self._holds)

    def __len__(self) -> int:
        return len(self._holds)


class LeaseKeeper:
    """Renews every lease in the book each `ttl / 3`, and releases them on request.

    Its statements run on the engine's reserved connections (`ReservedPool`), never queued
    behind the workers and API requests on the shared pool, and the renewal does not wait for
    row locks either (see `leases.renew_all`): a renewal that arrives after the leases' local
    deadlines stops this replica working on everything it holds.

    A lease the database holds for this owner but the book does not is usually a statement in
    flight: a claim whose result is not booked yet, or a release not yet executed. Both settle
    within one interval. A lease still unknown at the next renewal has no such excuse (the
    claim's answer was lost with its connection, the book gave up on it after a stalled
    renewal): it is released, so the sweep can
    hand it to someone who will work on it. Booking it instead could act on a lease whose
    release is in flight.
    """

    def __init__(self, db: ReservedPool, book: LeaseBook) -> None:
        self._db = db
        self._book = book
        self.interval = book.ttl / 3
        self._unknown: set[ResourceKey] = set()
        self.strays_released = 0
        self.failures = 0  # consecutive failed renewals
        self.busy_skipped = 0  # leases whose row was locked at a renewal, over the process

    async def run(self) -> None:
        """Renew forever, one renewal sent every `interval` (not `interval` after the last one
        ended); a failed renewal is a warning (with the count of consecutive ones) and is
        retried at the next tick. Holds lapse at their local deadline meanwhile; when that
        happens it is an error: this replica has stopped working on them."""
        loop = asyncio.get_running_loop()
        due = loop.time() + self.interval
        while True:
            await asyncio.sleep(max(0.0, due - loop.time()))
            due = loop.time() + self.interval
            try:
                await self.renew_once()
                self.failures = 0
            except Exception as exc:
                self.failures += 1
                log.warning(
                    "lease renewal failed (%s: %s; %d in a row); retrying in %.1fs",
                    type(exc).__name__,
                    exc,
                    self.failures,
                    max(0.0, due - loop.time()),
                )
            lapsed = self._book.expire_stale()
            if lapsed:
                log.error(
                    "%d leases lapsed after %d failed renewals; peers take them over",
                    len(lapsed),
                    self.failures,
                )

    async def renew_once(self) -> None:
        """One renewal statement; drop what is missing, release what stays unknown."""
        book = self._book
        db = await self._db.get()
        async with db.connection() as conn:
            seq = book.next_seq()
            sent = book.now()  # taken with the connection in hand, just before the statement
            renewal = await leases.renew_all(
                conn, owner=book.owner, ttl=book.ttl, incarnation=book.incarnation
            )
        elapsed = book.now() - sent
        if elapsed > self.interval:
            log.warning(
                "lease renewal took %.2fs (more than its %.2fs interval) for %d leases",
                elapsed,
                self.interval,
                len(renewal.renewed) + len(renewal.busy),
            )
        self.busy_skipped += len(renewal.busy)
        unknown = book.renewed(renewal.renewed, sent, seq, busy=renewal.busy)
        strays = [g for g in unknown if g.key in self._unknown]
        self._unknown = {g.key for g in unknown} - {g.key for g in strays}
        for grant in strays:
            log.warning("releasing %s: held in the database but not by this replica", grant.key)
            await leases.release((await self._db.get()).pool, grant, owner=self._book.owner)
            self.strays_released += 1

    async def release(self, key: ResourceKey) -> None:
        """Let one lease go now; the key is forgotten locally whatever the database says."""
        fence = self._book.fence(key)
        self._book.drop(key)
        if fence is not None:  # called by the workers: on the shared pool, like their steps
            await leases.release(self._db.shared.pool, fence.grant, owner=self._book.owner)

    async def release_all(self) -> int:
        """Shutdown: expire every lease of this owner and ring for each; forget them locally."""
        book = self._book
        released = await leases.release_all(
            (await self._db.get()).pool, owner=book.owner, incarnation=book.incarnation
        )
        for key in self._book.held_keys():
            self._book.drop(key)
        return released
