"""Winning leases: the doorbell claimer and the sweep (docs/DESIGN.md §5).

Two paths lead to a lease, and both end in `on_granted(grants, sent)`, which books the leases
and queues their keys:

- `Claimer`: keys rung by NOTIFY (or woken by an informer) wait in an inbox; one task claims
  everything that accumulated in one statement, so a burst of doorbells costs a few round
  trips instead of one each. A key a live peer holds is silently not granted.
- `Sweeper`: every `interval` seconds (or at once when kicked, e.g. after the listener
  reconnected), claim a bounded batch of resources that need work and have no live lease. It
  catches lost doorbells, takes over from dead replicas, and keeps draining while batches come
  back full (each one twice the size of the last, up to 16 times the configured batch). When
  a peer's lease on a resource that needs work expires before the next tick, it sweeps just
  after that expiry instead, in the largest batch: a dead replica's leases are taken over as
  they expire, not up to an interval later, in one statement rather than many. After the
  doorbell reconnects it also replays the resources this replica holds whose spec or deletion
  changed during the gap: their doorbells were lost, and the sweep does not look at resources
  with a live lease.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from app.store import leases

if TYPE_CHECKING:
    from collections.abc import Callable

    from app.domain.kinds import Kind
    from app.reconcile.leasing import LeaseBook
    from app.store.db import ReservedPool
    from app.store.leases import Grant, ResourceKey

    OnGranted = Callable[[list[Grant], float], None]

log = logging.getLogger(__name__)

#: A sweep waiting for a peer's lease to expire wakes this long after the expiry the database
#: reported (the time the answer took to arrive is on top), and never sooner than MIN_PAUSE
#: after the previous sweep.
EXPIRY_MARGIN = 0.02
MIN_PAUSE = 0.01
#: While sweeps come back full the batch doubles, up to this many times the configured one: a
#: dead replica's thousand leases are claimed in a few statements, not ten.
MAX_BATCH_GROWTH = 16


class Claimer:
    """Claims rung keys in batches: one statement in flight at a time, carrying all waiting keys."""

    def __init__(self, db: ReservedPool, book: LeaseBook, on_granted: OnGranted) -> None:
        self._db = db
        self._book = book
        self._on_granted = on_granted
        self._inbox: dict[ResourceKey, None] = {}  # insertion-ordered set
        self._wake = asyncio.Event()
        self.failures = 0  # consecutive failed claims

    def ring(self, key: ResourceKey) -> None:
        """Ask for `key`'s lease soon. Never blocks; duplicates fold."""
        self._inbox[key] = None
        self._wake.set()

    async def run(self) -> None:
        """Claim whatever is in the inbox, forever; a failed claim is logged and dropped (the
        sweep finds those resources again)."""
        while True:
            await self._wake.wait()
            self._wake.clear()
            keys = list(self._inbox)
            self._inbox.clear()
            if not keys:
                continue
            sent = self._book.now()
            try:
                grants = await leases.claim(
                    (await self._db.get()).pool,
                    keys,
                    owner=self._book.owner,
                    ttl=self._book.ttl,
                    incarnation=self._book.incarnation,
                )
            except Exception as exc:
                self.failures += 1
                log.warning(
                    "claiming %d rung keys failed (%s: %s; %d in a row); the sweep will find them",
                    len(keys),
                    type(exc).__name__,
                    exc,
                    self.failures,
                )
                continue
            self.failures = 0
            self._on_granted(grants, sent)


class Sweeper:
    """Claims resources that need work and have no live lease, every `interval` seconds."""

    def __init__(
        self,
        db: ReservedPool,
        book: LeaseBook,
        on_granted: OnGranted,
        *,
        interval: float,
        batch: int,
        on_lag: Callable[[dict[Kind, float]], None] | None = None,
        on_replay: Callable[[list[ResourceKey]], None] | None = None,
    ) -> None:
        self._db = db
        self._book = book
        self._on_granted = on_granted
        self._on_lag = on_lag
        self._on_replay = on_replay or (lambda _keys: None)
        self.interval = interval
        self.batch = batch
        self._kick = asyncio.Event()
        self._replay_due = False
        self.sweeps = 0
        self.failures = 0  # consecutive failed sweeps
        # Seconds (as of the last sweep) until a peer's lease on a resource needing work
        # expires; None when none does.
        self.next_expiry: float | None = None
        self.claiming = batch  # this sweep's batch: grows while batches come back full
        self.woke_late = 0.0  # seconds the last timed wake-up came after its pause

    def kick(self) -> None:
        """Sweep now rather than at the next tick (e.g. doorbells may have been missed)."""
        self._kick.set()

    def reconnected(self) -> None:
        """The doorbell listens again after a gap: sweep now, and replay the held resources
        that changed meanwhile (their doorbells rang while nobody listened; the sweep skips
        them because this replica's lease on them is live)."""
        self._replay_due = True
        self._kick.set()

    async def run(self) -> None:
        """Sweep forever. A full batch means more may be waiting: sweep again at once. A failed
        sweep (or replay) is a warning with the count of consecutive ones, retried next tick."""
        while True:
            self._kick.clear()
            try:
                if self._replay_due:
                    self._replay_due = False
                    await self.replay_held()
                grants = await self.sweep_once()
                self.failures = 0
            except Exception as exc:
                self.failures += 1
                log.warning(
                    "sweep failed (%s: %s; %d in a row); retrying at the next tick",
                    type(exc).__name__,
                    exc,
                    self.failures,
                )
                grants = []
            if len(grants) >= self.claiming:
                # More may be waiting (a dead peer's leases): sweep again at once, in a
                # larger batch, up to MAX_BATCH_GROWTH times the configured one.
                self.claiming = min(self.claiming * 2, self.batch * MAX_BATCH_GROWTH)
                continue
            pause = self.pause()
            # Woken by the alarm, the sweep is there for a peer's expiring leases: a dead
            # replica's, all at once, so it claims in the largest batch from the start.
            alarm = pause < self.interval
            self.claiming = self.batch
            began = self._book.now()
            try:
                await asyncio.wait_for(self._kick.wait(), pause)
            except TimeoutError:
                # How much later than planned this task ran again: the event loop's lag.
                self.woke_late = max(0.0, self._book.now() - began - pause)
                if alarm:
                    self.claiming = self.batch * MAX_BATCH_GROWTH
            else:
                self.woke_late = 0.0

    def pause(self) -> float:
        """How long to wait before the next sweep: the interval, or less when a peer's lease on
        a resource that needs work expires sooner (a little after it, as the database's clock
        decides expiry)."""
        if self.next_expiry is None:
            return self.interval
        return min(self.interval, max(MIN_PAUSE, self.next_expiry + EXPIRY_MARGIN))

    async def sweep_once(self) -> list[Grant]:
        """One sweep statement (and the lag probe); return the leases won."""
        sent = self._book.now()
        book = self._book
        grants = await leases.claim_due(
            (await self._db.get()).pool,
            owner=book.owner,
            ttl=book.ttl,
            batch=self.claiming,
            incarnation=book.incarnation,
        )
        self.sweeps += 1
        if grants:
            self._on_granted(grants, sent)
            log.info(
                "sweep claimed %d leases (batch %d) in %.0f ms; it ran %.0f ms late",
                len(grants),
                self.claiming,
                (self._book.now() - sent) * 1000,
                self.woke_late * 1000,
            )
        self.next_expiry = None
        if len(grants) >= self.claiming:
            return grants  # more may be waiting: the next sweep comes at once
        if self._on_lag is not None:
            self._on_lag(await leases.lag_seconds((await self._db.get()).pool))
        self.next_expiry = await leases.next_expiry(
            (await self._db.get()).pool, owner=book.owner, incarnation=book.incarnation
        )
        return grants

    async def replay_held(self) -> list[ResourceKey]:
        """Queue the held resources whose spec or deletion is unobserved; return them. On
        failure it is tried again at the next reconnection's or tick's sweep."""
        book = self._book
        try:
            keys = await leases.held_changed(
                (await self._db.get()).pool, owner=book.owner, incarnation=book.incarnation
            )
        except BaseException:
            self._replay_due = True
            raise
        held = [key for key in keys if book.holds(key)]
        if held:
            log.info("replaying %d held resources that changed while nobody listened", len(held))
            self._on_replay(held)
        return held
