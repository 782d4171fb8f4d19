"""The database refuses what the code's vocabulary does not contain, and knows the same sets.

The states, kinds, event types and reasons are spelled twice: as enums and literals in
`app/domain/` and as CHECK constraints in `sql/migrations/0003_vocabulary.sql`. These tests read
the constraints back from PostgreSQL and compare, and show that a row outside the vocabulary,
a status ahead of its spec, or a workload in another project's pool is refused.
"""

from __future__ import annotations

import re
import uuid

import asyncpg
import pytest

from app.domain.events import EventReason, EventType
from app.domain.kinds import KINDS, SUBJECT_KINDS
from app.domain.states import ResourceState, ServiceState, WorkloadState


@pytest.fixture
def conn(sql: asyncpg.Connection) -> asyncpg.Connection:
    return sql


async def allowed(conn: asyncpg.Connection, constraint: str) -> set[str]:
    """The quoted values a CHECK constraint lists."""
    definition = await conn.fetchval(
        "SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conname = $1", constraint
    )
    assert definition is not None, f"no constraint {constraint}"
    return set(re.findall(r"'([^']*)'", definition))


@pytest.mark.parametrize(
    ("constraint", "expected"),
    [
        pytest.param("projects_state_known", {s.value for s in ResourceState}, id="project"),
        pytest.param("compute_pools_state_known", {s.value for s in ResourceState}, id="pool"),
        pytest.param("workloads_state_known", {s.value for s in WorkloadState}, id="workload"),
        pytest.param("services_state_known", {s.value for s in ServiceState}, id="service"),
        pytest.param("leases_kind_check", set(KINDS), id="lease kinds"),
        pytest.param("tombstones_kind_known", set(KINDS), id="tombstone kinds"),
        pytest.param("events_kind_known", set(SUBJECT_KINDS), id="event kinds"),
        pytest.param("events_type_known", {t.value for t in EventType}, id="event types"),
        pytest.param("events_reason_known", {r.value for r in EventReason}, id="event reasons"),
    ],
)
async def test_the_database_and_the_code_name_the_same_set(
    conn: asyncpg.Connection, constraint: str, expected: set[str]
) -> None:
    assert await allowed(conn, constraint) == expected


async def _project(conn: asyncpg.Connection, name: str) -> uuid.UUID:
    project_id = uuid.uuid4()
    await conn.execute(
        "INSERT INTO projects (id, name, created_by) VALUES ($1, $2, 'admin')", project_id, name
    )
    return project_id


async def _pool(conn: asyncpg.Connection, project_id: uuid.UUID) -> uuid.UUID:
    await conn.execute(
        "INSERT INTO accelerator_bindings (accelerator_class, resource_name, flavor)"
        " VALUES ('h100', 'nvidia.com/gpu', 'h100') ON CONFLICT DO NOTHING"
    )
    pool_id = uuid.uuid4()
    await conn.execute(
        "INSERT INTO compute_pools (id, project_id, name, accelerator_class, spec, created_by)"
        " VALUES ($1, $2, 'pool', 'h100', '{}', 'admin')",
        pool_id,
        project_id,
    )
    return pool_id


async def _workload(
    conn: asyncpg.Connection, project_id: uuid.UUID, pool_id: uuid.UUID, **columns: object
) -> None:
    values = {"state": "PENDING", "generation": 1, "observed_generation": 0, **columns}
    await conn.execute(
        "INSERT INTO workloads (id, project_id, pool_id, name, spec, created_by, state,"
        " generation, observed_generation) VALUES ($1, $2, $3, $4, '{}', 'admin', $5, $6, $7)",
        uuid.uuid4(),
        project_id,
        pool_id,
        f"w-{uuid.uuid4().hex[:6]}",
        values["state"],
        values["generation"],
        values["observed_generation"],
    )


async def test_a_workload_in_its_own_projects_pool_is_stored(conn: asyncpg.Connection) -> None:
    project = await _project(conn, "research")
    pool = await _pool(conn, project)

    await _workload(conn, project, pool, state="RUNNING", generation=2, observed_generation=2)

    assert await conn.fetchval("SELECT count(*) FROM workloads") == 1


async def test_a_workload_cannot_point_at_another_projects_pool(conn: asyncpg.Connection) -> None:
    research = await _project(conn, "research")
    other = await _project(conn, "other")
    others_pool = await _pool(conn, other)

    with pytest.raises(asyncpg.ForeignKeyViolationError, match="workloads_pool_in_project"):
        await _workload(conn, research, others_pool)


@pytest.mark.parametrize(
    ("columns", "constraint"),
    [
        pytest.param({"state": "WAITING"}, "workloads_state_known", id="an unknown state"),
        pytest.param({"state": "running"}, "workloads_state_known", id="a state in lower case"),
        pytest.param(
            {"generation": 1, "observed_generation": 2},
            "workloads_observed_not_ahead",
            id="a status ahead of its spec",
        ),
    ],
)
async def test_a_row_outside_the_vocabulary_is_refused(
    conn: asyncpg.Connection, columns: dict[str, object], constraint: str
) -> None:
    project = await _project(conn, "research")
    pool = await _pool(conn, project)

    with pytest.raises(asyncpg.CheckViolationError, match=constraint):
        await _workload(conn, project, pool, **columns)


async def test_an_event_of_an_unknown_type_is_refused(conn: asyncpg.Connection) -> None:
    with pytest.raises(asyncpg.CheckViolationError, match="events_type_known"):
        await conn.execute(
            "INSERT INTO events (kind, resource_id, resource_name, type, actor)"
            " VALUES ('workload', $1, 'w', 'QuotaReserved', 'admin')",
            uuid.uuid4(),
        )
