"""The sweep's statements (its claim, and its alarm for the next expiry of a peer's lease) read
partial indexes, not whole tables."""

from __future__ import annotations

from typing import Any

import pytest

from app.store.db import Database
from app.store.queries import QUERIES
from tests.support.plans import scans

RECONCILED = {"projects", "compute_pools", "workloads", "leases"}


@pytest.mark.parametrize(
    ("query", "args"),
    [
        ("lease_claim_due", ("me", 15.0, 100, "")),
        ("lease_next_expiry", ("me", "")),
    ],
)
async def test_the_sweep_reads_the_needing_work_indexes_not_whole_tables(
    db: Database, query: str, args: tuple[Any, ...]
) -> None:
    async with db.connection() as conn:
        # Thousands of converged, finished rows holding old leases, and a few that need work:
        # the shape of a database that has been running for a while.
        await conn.execute(
            """
            INSERT INTO accelerator_bindings (accelerator_class, resource_name, flavor)
            VALUES ('h100-80g', 'nvidia.com/gpu', 'h100');
            INSERT INTO projects (id, name, created_by, observed_generation, state)
            SELECT gen_random_uuid(), 'p' || g, 'admin', 1, 'READY'
            FROM generate_series(1, 3000) g;
            INSERT INTO compute_pools (id, project_id, name, accelerator_class, spec, created_by,
                                       observed_generation, state)
            SELECT gen_random_uuid(), id, 'gpus', 'h100-80g', '{}', 'admin', 1, 'READY'
            FROM projects;
            INSERT INTO workloads (id, project_id, pool_id, name, spec, created_by,
                                   observed_generation, state)
            SELECT gen_random_uuid(), c.project_id, c.id, 'w' || g, '{}', 'admin', 1, 'SUCCEEDED'
            FROM compute_pools c, generate_series(1, 5) g;
            INSERT INTO leases (kind, resource_id, owner, epoch, expires_at)
            SELECT 'workload', id, 'gone-replica', 3, now() - interval '1 hour' FROM workloads;
            -- settled projects and pools stay leased by live replicas (drift is watched)
            INSERT INTO leases (kind, resource_id, owner, epoch, expires_at)
            SELECT 'project', id, 'replica-1', 1, now() + interval '1 hour' FROM projects;
            INSERT INTO leases (kind, resource_id, owner, epoch, expires_at)
            SELECT 'pool', id, 'replica-2', 1, now() + interval '1 hour' FROM compute_pools;
            UPDATE workloads SET state = 'RUNNING'
            WHERE name = 'w1' AND project_id IN (SELECT id FROM projects LIMIT 10);
            UPDATE leases SET owner = 'replica-1', expires_at = now() + interval '1 hour'
            WHERE resource_id IN (SELECT id FROM workloads WHERE state = 'RUNNING' LIMIT 5);
            UPDATE projects SET generation = 2 WHERE name IN ('p1', 'p2');
            UPDATE compute_pools SET deletion_requested_at = now()
            WHERE project_id = (SELECT id FROM projects WHERE name = 'p3');
            ANALYZE;
            """
        )
        [plan] = await conn.fetchval("EXPLAIN (FORMAT JSON) " + QUERIES[query], *args)

    found = scans(plan["Plan"])
    used = {index for _, _, index in found}
    assert {"projects_needing_work", "compute_pools_needing_work", "workloads_needing_work"} <= used
    full_scans = [(node, rel) for node, rel, _ in found if node == "Seq Scan" and rel in RECONCILED]
    assert not full_scans, f"full table scans in the sweep: {full_scans}"
