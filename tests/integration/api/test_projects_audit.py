"""Project writes leave an audit trail and ring the reconciler's doorbell when they commit."""

from __future__ import annotations

import asyncio
import uuid

import asyncpg

from tests.support.api_client import Api
from tests.support.problems import assert_problem
from tests.support.scenario import Scenario


async def test_creating_and_deleting_a_project_rings_the_doorbell_with_its_key(
    api: Api, doorbells: asyncio.Queue[str]
) -> None:
    project = await api.create_project("research")
    assert await asyncio.wait_for(doorbells.get(), 10) == f"project:{project['uid']}"
    await api.client.delete("/api/v1/projects/research")
    assert await asyncio.wait_for(doorbells.get(), 10) == f"project:{project['uid']}"


async def test_a_rejected_create_rings_nothing(api: Api, doorbells: asyncio.Queue[str]) -> None:
    first = await api.create_project("research")
    assert await asyncio.wait_for(doorbells.get(), 10) == f"project:{first['uid']}"
    rejected = await api.client.post("/api/v1/projects", json={"name": "research"})
    assert rejected.status_code == 409
    second = await api.create_project("second")
    # Notifications arrive in commit order: had the 409 rung, its payload would come first.
    assert await asyncio.wait_for(doorbells.get(), 10) == f"project:{second['uid']}"


async def test_every_project_write_is_an_event_with_its_actor(
    api: Api, sql: asyncpg.Connection
) -> None:
    project = await api.create_project("research")
    await api.client.delete("/api/v1/projects/research")
    await api.client.delete("/api/v1/projects/research")  # repeated: no second event
    rows = await sql.fetch(
        "SELECT type, actor, resource_name, generation, message FROM events "
        "WHERE kind = 'project' AND resource_id = $1 ORDER BY id",
        uuid.UUID(project["uid"]),
    )
    assert [(r["type"], r["actor"], r["resource_name"]) for r in rows] == [
        ("Accepted", "admin", "research"),
        ("DeletionRequested", "admin", "research"),
    ]
    assert all(r["message"].endswith(".") for r in rows)


async def test_a_project_with_a_pool_cannot_be_deleted_and_says_why(api: Scenario) -> None:
    await api.setup_pool(quota={"accelerators": 8, "cpu": "64", "memory": "512Gi"}, wait=False)
    response = await api.client.delete("/api/v1/projects/research")
    problem = assert_problem(response, 409, "in-use")
    assert problem["referenced_by"] == ["compute-pool/h100-pool"]
    assert (await api.client.get("/api/v1/projects/research")).json()["status"]["state"] != (
        "DELETING"
    )


async def test_no_pool_can_be_created_in_a_project_being_deleted(api: Api) -> None:
    await api.put_binding("h100-80g")
    await api.create_project("research")
    await api.client.delete("/api/v1/projects/research")
    pool = await api.client.post(
        "/api/v1/projects/research/compute-pools",
        json={
            "name": "late",
            "accelerator_class": "h100-80g",
            "quota": {"accelerators": 1, "cpu": "1", "memory": "1Gi"},
        },
    )
    assert pool.status_code == 409
    assert pool.json()["type"].endswith("/being-deleted")
