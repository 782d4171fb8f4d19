"""Lease rows in PostgreSQL: claim, sweep, renew, release, lock (docs/DESIGN.md §5).

Each function runs exactly one named statement from `sql/queries.sql` (section "reconcile
engine"); the lease predicate lives inside the statement, so there is no read-then-write window.
A lease is `(kind, resource_id) -> (owner, incarnation, epoch, expires_at)`; `epoch` grows by
one every time the owner (or its incarnation: one process run under that owner name) changes,
and fenced writes compare it.

Times are the database's (`now()`), never this process's clock: replicas need not agree on time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from app.store.queries import QUERIES

if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import TypeAlias
    from uuid import UUID

    import asyncpg

    from app.domain.kinds import Kind
    from app.store.db import Connection, Pool

    Db: TypeAlias = Connection | Pool


class ResourceKey(NamedTuple):
    """A reconciled resource: its lease kind and id. Renders as the doorbell payload `kind:id`."""

    kind: Kind
    id: UUID

    def __str__(self) -> str:
        return f"{self.kind}:{self.id}"


class Grant(NamedTuple):
    """A lease this owner holds as of the statement that returned it."""

    key: ResourceKey
    epoch: int


def _grants(rows: Iterable[asyncpg.Record]) -> list[Grant]:
    return [Grant(ResourceKey(r["kind"], r["resource_id"]), r["epoch"]) for r in rows]


async def claim(
    db: Db,
    keys: Iterable[ResourceKey],
    *,
    owner: str,
    ttl: float,
    incarnation: str = "",
) -> list[Grant]:
    """Take (or extend) the leases of `keys`; return those won. Missing: a live peer holds it,
    or the resource no longer exists. Duplicate keys are folded before the statement."""
    unique = list(dict.fromkeys(keys))
    if not unique:
        return []
    rows = await db.fetch(
        QUERIES["lease_claim_keys"],
        [k.kind for k in unique],
        [k.id for k in unique],
        owner,
        ttl,
        incarnation,
    )
    return _grants(rows)


async def take_new(
    db: Db, key: ResourceKey, *, owner: str, ttl: float, incarnation: str = ""
) -> Grant | None:
    """In the transaction creating `key`'s resource: lease it to `owner`. None: already leased."""
    epoch = await db.fetchval(QUERIES["lease_take_new"], key.kind, key.id, owner, ttl, incarnation)
    return None if epoch is None else Grant(key, epoch)


async def claim_due(
    db: Db,
    *,
    owner: str,
    ttl: float,
    batch: int,
    incarnation: str = "",
) -> list[Grant]:
    """The sweep: claim up to `batch` resources per kind that need work and have no live lease."""
    return _grants(await db.fetch(QUERIES["lease_claim_due"], owner, ttl, batch, incarnation))


async def next_expiry(db: Db, *, owner: str, incarnation: str = "") -> float | None:
    """Seconds until the soonest live lease held by someone else on a resource that needs work
    expires (None: there is none); the sweep wakes then."""
    seconds = await db.fetchval(QUERIES["lease_next_expiry"], owner, incarnation)
    return None if seconds is None else float(seconds)


class Renewal(NamedTuple):
    """What one renewal statement found: the leases it extended, and those it skipped because a
    transaction in flight held their row (still this owner's then, not extended)."""

    renewed: list[Grant]
    busy: list[Grant]


async def renew_all(
    db: Db,
    *,
    owner: str,
    ttl: float,
    incarnation: str = "",
) -> Renewal:
    """Extend every live lease of `owner`'s `incarnation` whose row is not locked at the moment;
    together, `renewed` and `busy` are exactly the set still held."""
    rows = await db.fetch(QUERIES["lease_renew_all"], owner, ttl, incarnation)
    return Renewal(
        renewed=_grants(r for r in rows if r["renewed"]),
        busy=_grants(r for r in rows if not r["renewed"]),
    )


async def release(
    db: Db,
    grant: Grant,
    *,
    owner: str,
) -> bool:
    """Expire one held lease now. False: it was not (any longer) ours."""
    status = await db.execute(
        QUERIES["lease_release"], grant.key.kind, grant.key.id, owner, grant.epoch
    )
    return status != "UPDATE 0"


async def release_all(
    db: Db,
    *,
    owner: str,
    incarnation: str = "",
) -> int:
    """Expire every live lease of `owner`'s `incarnation` and ring the doorbell for each; return
    how many."""
    released = await db.fetchval(QUERIES["lease_release_all"], owner, incarnation)
    return int(released or 0)


async def release_predecessors(db: Db, *, owner: str, incarnation: str) -> int:
    """At start: expire (and ring for) the live leases of `owner`'s earlier, dead incarnations."""
    released = await db.fetchval(QUERIES["lease_release_predecessors"], owner, incarnation)
    return int(released or 0)


async def held_changed(db: Db, *, owner: str, incarnation: str) -> list[ResourceKey]:
    """The held resources whose spec changed or whose deletion was requested since last seen."""
    rows = await db.fetch(QUERIES["leases_held_changed"], owner, incarnation)
    return [ResourceKey(r["kind"], r["resource_id"]) for r in rows]


async def lock_fenced(conn: Connection, grant: Grant, *, owner: str) -> bool:
    """Inside a transaction: lock `owner`'s live lease row at `grant.epoch`. False: it moved."""
    epoch = await conn.fetchval(
        QUERIES["lease_lock_fenced"], grant.key.kind, grant.key.id, owner, grant.epoch
    )
    return epoch is not None


async def delete_fenced(conn: Connection, grant: Grant, *, owner: str) -> bool:
    """Delete `owner`'s live lease (finalization). False: it was not ours any more."""
    status = await conn.execute(
        QUERIES["lease_delete_fenced"], grant.key.kind, grant.key.id, owner, grant.epoch
    )
    return status != "DELETE 0"


async def held_count(db: Db, *, owner: str) -> int:
    """How many live leases `owner` holds according to the database."""
    return int(await db.fetchval(QUERIES["leases_held_count"], owner) or 0)


async def lag_seconds(db: Db) -> dict[Kind, float]:
    """Per kind, the age in seconds of the oldest unconverged resource (0 when none)."""
    return {
        row["kind"]: float(row["lag"]) for row in await db.fetch(QUERIES["reconcile_lag_seconds"])
    }
