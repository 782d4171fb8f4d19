"""Pool usage, filtered workload lists and the purges read what they need, not whole tables.

A database that has run for a while holds mostly finished workloads and old events. On such
a database (20,000 finished workloads, a handful live), every statement below must be answered
from the index made for it, with no sequential scan of a growing table.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from app.store.db import Database
from app.store.paging import FIRST_PAGE_TIME
from app.store.queries import QUERIES
from tests.support.plans import nodes, scans

GROWING = {"workloads", "events", "tombstones"}
NIL = uuid.UUID(int=0)


#: The binding, one project and its two pools, a and b.
PROJECT_AND_POOLS = """
INSERT INTO accelerator_bindings (accelerator_class, resource_name, flavor)
VALUES ('h100-80g', 'nvidia.com/gpu', 'h100');
INSERT INTO projects (id, name, created_by, observed_generation, state)
VALUES (gen_random_uuid(), 'research', 'admin', 1, 'READY');
INSERT INTO compute_pools (id, project_id, name, accelerator_class, spec, created_by,
                           observed_generation, state)
SELECT gen_random_uuid(), id, pool, 'h100-80g', '{}', 'admin', 1, 'READY'
FROM projects, (VALUES ('a'), ('b')) v(pool);
"""


@pytest.fixture
async def aged(db: Database) -> AsyncIterator[dict[str, uuid.UUID]]:
    """One project with two pools: 20,000 finished workloads and a few live ones; 20,000
    events and tombstones."""
    async with db.connection() as conn:
        await conn.execute(PROJECT_AND_POOLS)
        await conn.execute(
            """
            INSERT INTO workloads (id, project_id, pool_id, name, spec, created_by,
                                   observed_generation, state)
            SELECT gen_random_uuid(), c.project_id, c.id, c.name || '-w' || g,
                   '{"accelerators": 1, "replicas": 1}', 'admin', 1,
                   CASE WHEN g % 2 = 0 THEN 'SUCCEEDED' ELSE 'FAILED' END
            FROM compute_pools c, generate_series(1, 10000) g;
            UPDATE workloads SET state = 'RUNNING' WHERE name IN ('a-w1', 'a-w3', 'b-w5');
            UPDATE workloads SET state = 'QUEUED' WHERE name IN ('a-w7', 'b-w9');
            INSERT INTO events (kind, resource_id, resource_name, at, type, actor)
            SELECT 'workload', gen_random_uuid(), 'w', now() - g * interval '1 minute',
                   'Accepted', 'admin'
            FROM generate_series(1, 20000) g;
            INSERT INTO tombstones (kind, resource_id, name, deleted_at)
            SELECT 'workload', gen_random_uuid(), 'w', now() - g * interval '1 minute'
            FROM generate_series(1, 20000) g;
            ANALYZE;
            """
        )
        ids = await conn.fetchrow(
            "SELECT p.id AS project, c.id AS pool FROM projects p"
            " JOIN compute_pools c ON c.project_id = p.id AND c.name = 'a'"
        )
    assert ids is not None
    yield {"project": ids["project"], "pool": ids["pool"]}


CUTOFF = datetime.now(UTC) - timedelta(days=90)


@pytest.mark.parametrize(
    ("query", "args", "index"),
    [
        pytest.param(
            "pool_by_name", lambda i: [i["project"], "a"], "workloads_live_by_pool", id="a pool"
        ),
        pytest.param(
            "list_pools",
            lambda i: [i["project"], FIRST_PAGE_TIME, NIL, 51],
            "workloads_live_by_pool",
            id="a page of pools",
        ),
        pytest.param(
            "list_workloads",
            lambda i: [i["project"], None, FIRST_PAGE_TIME, NIL, 51],
            "workloads_newest_first",
            id="workloads",
        ),
        pytest.param(
            "list_workloads",
            lambda i: [i["project"], "%w1%", FIRST_PAGE_TIME, NIL, 51],
            "workloads_newest_first",
            id="workloads whose name contains a text",
        ),
        pytest.param(
            "list_workloads_in_state",
            lambda i: [i["project"], "RUNNING", None, FIRST_PAGE_TIME, NIL, 51],
            "workloads_by_state_newest_first",
            id="workloads in a state",
        ),
        pytest.param(
            "list_workloads_in_pool",
            lambda i: [i["project"], i["pool"], None, FIRST_PAGE_TIME, NIL, 51],
            "workloads_by_pool_newest_first",
            id="workloads in a pool",
        ),
        pytest.param(
            "list_workloads_in_pool_in_state",
            lambda i: [i["project"], i["pool"], "QUEUED", None, FIRST_PAGE_TIME, NIL, 51],
            "workloads_by_pool_state_newest_first",
            id="workloads in a pool in a state",
        ),
        pytest.param(
            "workload_by_name_with_pool_depth",
            lambda i: [i["project"], "a-w7", 21],
            "workloads_live_by_pool",
            id="a GET of one queued workload and its pool's depth",
        ),
        pytest.param(
            "purge_events_before", lambda i: [CUTOFF, 5000], "events_pkey", id="the event purge"
        ),
        pytest.param(
            "purge_tombstones_before",
            lambda i: [CUTOFF, 5000],
            "tombstones_by_age",
            id="the tombstone purge",
        ),
    ],
)
async def test_each_read_uses_its_index_and_scans_no_growing_table(
    db: Database, aged: dict[str, uuid.UUID], query: str, args: Any, index: str
) -> None:
    async with db.connection() as conn:
        [plan] = await conn.fetchval("EXPLAIN (FORMAT JSON) " + QUERIES[query], *args(aged))

    found = scans(plan["Plan"])
    assert index in {used for _, _, used in found}, found
    full = [(node, rel) for node, rel, _ in found if node == "Seq Scan" and rel in GROWING]
    assert full == []


@pytest.fixture
async def aged_leases(aged: dict[str, uuid.UUID], db: Database) -> dict[str, uuid.UUID]:
    """The lease rows such a database holds: one per workload, released (owned by nobody) for
    the finished ones, live and held by replica-a for the live ones."""
    async with db.connection() as conn:
        await conn.execute(
            """
            INSERT INTO leases (kind, resource_id, owner, epoch, expires_at, incarnation)
            -- released over the past month, as the workloads finished
            SELECT 'workload', id, '', 2,
                   now() - (abs(hashtext(id::text)) % 43200) * interval '1 minute', 'old'
            FROM workloads WHERE state IN ('SUCCEEDED', 'FAILED');
            INSERT INTO leases (kind, resource_id, owner, epoch, expires_at, incarnation)
            SELECT 'workload', id, 'replica-a', 1, now() + interval '1 minute', 'inc-a'
            FROM workloads WHERE state NOT IN ('SUCCEEDED', 'FAILED');
            ANALYZE;
            """
        )
    return aged


@pytest.mark.parametrize(
    ("query", "args", "index"),
    [
        pytest.param(
            "leases_held_changed",
            ["replica-a", "inc-a"],
            "leases_by_owner",
            id="the resync after a LISTEN gap",
        ),
        pytest.param(
            "lease_renew_all", ["replica-a", 15.0, "inc-a"], "leases_by_owner", id="the renewal"
        ),
        pytest.param("leases_held_count", ["replica-a"], "leases_by_owner", id="the held count"),
        pytest.param(
            "steps_workload_state_counts", [], "workloads_live_by_state", id="the state gauge"
        ),
        pytest.param(
            "steps_stuck_deleting_counts",
            [],
            "workloads_being_deleted",
            id="the stuck deletions gauge",
        ),
    ],
)
async def test_each_periodic_reconciler_query_reads_live_rows_only(
    db: Database, aged_leases: dict[str, uuid.UUID], query: str, args: list[Any], index: str
) -> None:
    # What every replica runs every second or few: its cost must follow the live rows, never the
    # finished ones and their released leases (loadtest/finished_rows_plans.py measures it).
    async with db.connection() as conn:
        [plan] = await conn.fetchval("EXPLAIN (FORMAT JSON) " + QUERIES[query], *args)

    found = scans(plan["Plan"])
    assert index in {used for _, _, used in found}, found
    full = [
        (node, rel) for node, rel, _ in found if node == "Seq Scan" and rel in {*GROWING, "leases"}
    ]
    assert full == [], found


@pytest.mark.parametrize(
    ("name", "up_to", "depth"),
    [
        pytest.param("a-w7", 21, 4, id="queued: the pool's live workloads"),
        pytest.param("a-w7", 3, 3, id="queued: counted up to the bound only"),
        pytest.param("a-w1", 21, None, id="running: not counted"),
        pytest.param("a-w2", 21, None, id="finished: not counted"),
    ],
)
async def test_a_get_counts_the_pool_only_for_a_queued_workload(
    db: Database, aged: dict[str, uuid.UUID], name: str, up_to: int, depth: int | None
) -> None:
    # Pool a's live workloads: a-w1, a-w3 (RUNNING), a-w7 (QUEUED), and one more PENDING; the
    # 10,000 finished ones and pool b's live ones are not its depth.
    async with db.connection() as conn:
        await conn.execute("UPDATE workloads SET state = 'PENDING' WHERE name = 'a-w9'")
        row = await conn.fetchrow(
            QUERIES["workload_by_name_with_pool_depth"], aged["project"], name, up_to
        )

    assert row is not None
    assert row["name"] == name
    assert row["pool_live"] == depth


@pytest.fixture
async def burst(db: Database) -> None:
    """Statistics taken while the tables were empty, then 500 workloads leased by replica-a
    before the next ANALYZE (autovacuum looks once a minute): what a burst of submissions
    leaves the planner with for its first minute."""
    async with db.connection() as conn:
        await conn.execute("ANALYZE")
        await conn.execute(PROJECT_AND_POOLS)
        await conn.execute(
            """
            INSERT INTO workloads (id, project_id, pool_id, name, spec, created_by, state)
            SELECT gen_random_uuid(), c.project_id, c.id, 'w' || g, '{}', 'admin', 'QUEUED'
            FROM compute_pools c, generate_series(1, 500) g WHERE c.name = 'a';
            INSERT INTO leases (kind, resource_id, owner, epoch, expires_at, incarnation)
            SELECT 'workload', id, 'replica-a', 1, now() + interval '1 minute', 'inc-a'
            FROM workloads;
            """
        )


@pytest.mark.parametrize(
    ("query", "args"),
    [
        pytest.param("lease_renew_all", ["replica-a", 15.0, "inc-a"], id="the renewal"),
        pytest.param("lease_claim_due", ["replica-a", 15.0, 100, "inc-a"], id="the sweep"),
    ],
)
async def test_the_renewal_and_the_sweep_stay_linear_on_statistics_from_before_a_burst(
    db: Database, burst: None, query: str, args: list[Any]
) -> None:
    # With leases estimated at a row or two, an anti-join ran as a nested loop comparing every
    # lease with every other: 9,000 leases took 4.8 s a renewal and 3.2 s a sweep, and the
    # renewal runs every ttl/3. Each check of "this lease renewed?" or "a live lease?" must be
    # a hash lookup or an index probe instead.
    async with db.connection() as conn:
        [plan] = await conn.fetchval("EXPLAIN (FORMAT JSON) " + QUERIES[query], *args)

    quadratic = [
        node
        for node in nodes(plan["Plan"])
        if node["Node Type"] == "Nested Loop" and node.get("Join Type") == "Anti"
    ]
    assert quadratic == [], plan
