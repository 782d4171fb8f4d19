"""Rows the API would write, written directly: the engine only cares that they exist and ring."""

from __future__ import annotations

import uuid
from datetime import timedelta

import asyncpg

from app.store.db import Database
from app.store.leases import ResourceKey


async def _notify(conn: asyncpg.Connection, key: ResourceKey) -> None:
    await conn.execute("SELECT pg_notify('aicp_work', $1)", str(key))


async def add_project(db: Database, *, notify: bool = True, name: str | None = None) -> ResourceKey:
    key = ResourceKey("project", uuid.uuid4())
    async with db.transaction() as conn:
        await conn.execute(
            "INSERT INTO projects (id, name, created_by) VALUES ($1, $2, 'admin')",
            key.id,
            name or f"p-{key.id.hex[:8]}",
        )
        if notify:
            await _notify(conn, key)
    return key


async def add_workloads(
    db: Database, count: int = 1, *, notify: bool = True, state: str = "PENDING"
) -> list[ResourceKey]:
    """`count` workloads in a new project and pool, in one transaction (one doorbell each)."""
    project = uuid.uuid4()
    pool = uuid.uuid4()
    keys = [ResourceKey("workload", uuid.uuid4()) for _ in range(count)]
    async with db.transaction() as conn:
        await conn.execute(
            "INSERT INTO accelerator_bindings (accelerator_class, resource_name, flavor)"
            " VALUES ('h100-80g', 'nvidia.com/gpu', 'h100') ON CONFLICT DO NOTHING"
        )
        await conn.execute(
            "INSERT INTO projects (id, name, created_by, observed_generation, state)"
            " VALUES ($1, $2, 'admin', 1, 'READY')",
            project,
            f"p-{project.hex[:8]}",
        )
        await conn.execute(
            "INSERT INTO compute_pools (id, project_id, name, accelerator_class, spec,"
            " created_by, observed_generation, state)"
            " VALUES ($1, $2, 'gpus', 'h100-80g', '{}', 'admin', 1, 'READY')",
            pool,
            project,
        )
        await conn.executemany(
            "INSERT INTO workloads (id, project_id, pool_id, name, spec, created_by, state)"
            " VALUES ($1, $2, $3, $4, '{}', 'admin', $5)",
            [(k.id, project, pool, f"w-{k.id.hex[:8]}", state) for k in keys],
        )
        if notify:
            for key in keys:
                await _notify(conn, key)
    return keys


async def finish_workload(db: Database, key: ResourceKey) -> None:
    """Mark a workload converged and finished: it needs no more work."""
    async with db.connection() as conn:
        await conn.execute(
            "UPDATE workloads SET state = 'SUCCEEDED', observed_generation = generation"
            " WHERE id = $1",
            key.id,
        )


async def lease_of(db: Database, key: ResourceKey) -> asyncpg.Record | None:
    async with db.connection() as conn:
        return await conn.fetchrow(
            "SELECT owner, epoch, expires_at > now() AS live FROM leases"
            " WHERE kind = $1 AND resource_id = $2",
            key.kind,
            key.id,
        )


async def lease_released(db: Database, key: ResourceKey) -> bool:
    """The resource's lease is in the table and no longer live (released or expired)."""
    lease = await lease_of(db, key)
    return lease is not None and not lease["live"]


async def leave_leases(
    db: Database, keys: list[ResourceKey], *, owner: str, epoch: int, lasting: timedelta
) -> None:
    """Leases on the workloads `keys` as a replica that died left them: held by `owner` under
    `epoch`, running out `lasting` from now."""
    async with db.connection() as conn:
        await conn.execute(
            "INSERT INTO leases (kind, resource_id, owner, epoch, expires_at)"
            " SELECT 'workload', id, $2, $3, now() + $4::interval FROM unnest($1::uuid[]) AS id",
            [key.id for key in keys],
            owner,
            epoch,
            lasting,
        )
