"""What the lease table says during a fault scenario: who holds what, since when, until when
(read over the test's own database session)."""

from __future__ import annotations

from tests.faults.workloads import Database


async def incarnations(db: Database, owner: str) -> dict[str, set[str]]:
    """Incarnation → the resources its live leases cover."""
    rows = await db.fetch(
        "SELECT incarnation, resource_id::text AS id FROM leases"
        " WHERE owner = $1 AND expires_at > now()",
        owner,
    )
    found: dict[str, set[str]] = {}
    for row in rows:
        found.setdefault(row["incarnation"], set()).add(row["id"])
    return found


async def not_taken_over(db: Database, resources: set[str], dead: str) -> int:
    """How many of `resources` are neither finished nor leased live by an incarnation other
    than `dead`."""
    rows = await db.fetch(
        "SELECT w.id::text AS id, w.state, l.incarnation, l.expires_at > now() AS live"
        " FROM workloads w LEFT JOIN leases l ON l.kind = 'workload' AND l.resource_id = w.id"
        " WHERE w.id::text = ANY($1::text[])",
        list(resources),
    )
    return sum(
        1
        for row in rows
        if row["state"] not in ("SUCCEEDED", "FAILED")
        and (not row["live"] or row["incarnation"] == dead)
    )


async def taken_over(db: Database, resources: set[str], dead: str) -> bool:
    """Every resource either finished or leased live by an incarnation other than `dead`."""
    return await not_taken_over(db, resources, dead) == 0


async def lease_expiries(db: Database, owner: str) -> dict[str, float]:
    """Resource → seconds from now (the database's clock) until `owner`'s live lease on it
    expires."""
    rows = await db.fetch(
        "SELECT resource_id::text AS id,"
        " extract(epoch FROM expires_at - clock_timestamp())::float8 AS left_s"
        " FROM leases WHERE owner = $1 AND expires_at > now()",
        owner,
    )
    return {r["id"]: float(r["left_s"]) for r in rows}


async def none_live(db: Database, owner: str) -> bool:
    return await db.held_by(owner) == 0


async def peer_holds_all_unfinished(db: Database, peer: str) -> bool:
    rows = await db.fetch(
        "SELECT count(*) AS n FROM workloads w"
        " WHERE w.state NOT IN ('SUCCEEDED', 'FAILED') AND NOT EXISTS ("
        "  SELECT 1 FROM leases l WHERE l.kind = 'workload' AND l.resource_id = w.id"
        "  AND l.owner = $1 AND l.expires_at > now())",
        peer,
    )
    return int(rows[0]["n"]) == 0
