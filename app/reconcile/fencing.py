"""Fenced statements: writes that only land while this replica still holds the lease.

Invariant 5 (docs/DESIGN.md §3): every observation and finalization write carries the lease
predicate `owner = $me AND epoch = $epoch AND expires_at > now()` inside the statement, so a
replica whose lease moved cannot overwrite the new owner's work. Zero rows means "not yours any
more", and the engine drops the key at once (`LeaseLost`).

Convention for fenced queries in `sql/queries.sql`: **`$1` is the owner and `$2` the epoch**;
the statement's own parameters follow. The steps' status writes (`steps_*_set_status`, called
through `app.store.reconciling.set_status`) are such statements: they report whether the lease
still held and whether the row was written, and the step raises `LeaseLost` on the first.

Several statements that must commit together (finalization: tombstone, lease delete, row
delete) run in `fenced_transaction`, which first locks the lease row so no peer can take it
over before the transaction ends. `fenced_execute` runs one fenced
statement (`$1` owner, `$2` epoch, then its own) and raises `LeaseLost` on zero rows.

Kubernetes writes cannot carry the lease predicate, so each one runs under `kube_fenced(fence)`:
the lease is checked immediately before the call, and the time the lease is still trusted
bounds the call (a replica that froze — a long GC pause, a stopped VM — and resumed after its
lease moved raises `LeaseLost` instead of writing). What a pause *between* that check and the
request could still let through is caught by the cluster itself: Jobs are created, never
applied over (a stale create gets 409), and updates carry a precondition on the object's uid
or resourceVersion as it was read.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, LiteralString

from app.reconcile.errors import LeaseLost
from app.store import leases

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable
    from uuid import UUID

    from app.domain.kinds import Kind
    from app.store.db import Connection, Database
    from app.store.leases import ResourceKey


#: A side effect is not started with less lease left than this: the request needs time to land.
MIN_SIDE_EFFECT_SECONDS = 0.5


def _unbounded() -> float:
    return math.inf


@dataclass(frozen=True, slots=True)
class Fence:
    """The lease a reconcile step runs under: pass it to every fenced write.

    `remaining()` is how many more seconds this replica trusts the lease (by its own clock,
    pessimistically: see `LeaseBook`); 0 once it lapsed or moved.
    """

    key: ResourceKey
    owner: str
    epoch: int
    remaining: Callable[[], float] = field(default=_unbounded, compare=False, repr=False)

    @property
    def kind(self) -> Kind:
        return self.key.kind

    @property
    def resource_id(self) -> UUID:
        return self.key.id

    @property
    def grant(self) -> leases.Grant:
        return leases.Grant(self.key, self.epoch)

    def lost(self, detail: str = "") -> LeaseLost:
        """The exception to raise when a fenced write of this step found no row."""
        return LeaseLost(self.key, detail)


@contextlib.asynccontextmanager
async def kube_fenced(fence: Fence, what: str = "Kubernetes write") -> AsyncIterator[None]:
    """Around one Kubernetes side effect: check the lease now, and bound the call by the time
    it is still trusted. Raises `LeaseLost` when too little is left, or when the bound ran out
    (the request may or may not have landed; the next owner's reads settle which)."""
    left = fence.remaining()
    if left < MIN_SIDE_EFFECT_SECONDS:
        raise fence.lost(f"{what} not sent: {left:.2f}s of lease left")
    try:
        async with asyncio.timeout(left):
            yield
    except TimeoutError as exc:
        if fence.remaining() > 0:
            raise
        raise fence.lost(f"{what} outlived the lease") from exc


async def fenced_execute(conn: Connection, query: LiteralString, fence: Fence, *args: Any) -> int:
    """Run a fenced statement without RETURNING; return its row count, raise on 0."""
    status = await conn.execute(query, fence.owner, fence.epoch, *args)
    count = _row_count(status)
    if count == 0:
        raise fence.lost(f"fenced statement changed no row ({status})")
    return count


@contextlib.asynccontextmanager
async def fenced_transaction(db: Database, fence: Fence) -> AsyncIterator[Connection]:
    """A transaction that holds this replica's lease row locked until it commits.

    Raises `LeaseLost` (rolling back) when the lease is no longer ours at the start. Statements
    inside need not repeat the lease predicate: a peer's takeover is an upsert of that same row,
    so it waits for this transaction to end and then re-checks the row as this transaction left
    it (deleted at finalization, or still ours).
    """
    async with db.transaction() as conn:
        if not await leases.lock_fenced(conn, fence.grant, owner=fence.owner):
            raise fence.lost("lease row not found at the start of the transaction")
        yield conn


async def delete_lease(conn: Connection, fence: Fence) -> None:
    """Finalization: delete the lease inside a `fenced_transaction`."""
    if not await leases.delete_fenced(conn, fence.grant, owner=fence.owner):
        raise fence.lost("lease row vanished before finalization")


def _row_count(status: str) -> int:
    """`UPDATE 3` → 3, `INSERT 0 1` → 1; an unparsable tag counts as one row."""
    tail = status.rsplit(" ", 1)[-1]
    return int(tail) if tail.isdigit() else 1
