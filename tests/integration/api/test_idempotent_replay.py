"""An Idempotency-Key replay answers the first response only while what it created is there:
once the resource was deleted (or its deletion requested, or the token revoked) the replay is
410 created-resource-gone, never a 202 for something that no longer exists."""

from __future__ import annotations

import asyncpg
import httpx

from tests.support.problems import assert_problem
from tests.support.scenario import PROJECT, WORKLOADS, Scenario, example_workload


def keyed(key: str) -> dict[str, str]:
    return {"Idempotency-Key": key}


def assert_gone(response: httpx.Response, noun: str, name: str) -> None:
    problem = assert_problem(response, 410, "created-resource-gone")
    assert f"{noun} {name!r}" in problem["detail"]
    assert "new Idempotency-Key" in problem["detail"]
    assert "idempotent-replayed" not in response.headers


async def test_a_replay_while_the_workload_exists_answers_the_first_response(api: Scenario) -> None:
    await api.setup_pool(wait=False)
    first = await api.client.post(WORKLOADS, json=example_workload("keyed"), headers=keyed("w-1"))
    assert first.status_code == 202, first.text
    again = await api.client.post(WORKLOADS, json=example_workload("keyed"), headers=keyed("w-1"))
    assert again.status_code == 202
    assert again.headers["idempotent-replayed"] == "true"
    assert again.json() == first.json()


async def test_a_replay_after_the_workload_was_deleted_is_410_not_a_202(
    api: Scenario, sql: asyncpg.Connection
) -> None:
    await api.setup_pool(wait=False)
    first = await api.client.post(WORKLOADS, json=example_workload("keyed"), headers=keyed("w-1"))
    assert first.status_code == 202, first.text
    deleting = await api.client.delete(f"{WORKLOADS}/keyed")
    assert deleting.status_code == 202
    assert_gone(
        await api.client.post(WORKLOADS, json=example_workload("keyed"), headers=keyed("w-1")),
        "Workload",
        "keyed",
    )
    # Once finalized (the row is gone, as the reconciler leaves it), still 410.
    await sql.execute("DELETE FROM workloads WHERE name = 'keyed'")
    gone = await api.client.post(WORKLOADS, json=example_workload("keyed"), headers=keyed("w-1"))
    assert_gone(gone, "Workload", "keyed")
    assert "has since been deleted" in gone.json()["detail"]
    assert (await api.client.get(f"{WORKLOADS}/keyed")).status_code == 404
    # A new key creates it again.
    fresh = await api.client.post(WORKLOADS, json=example_workload("keyed"), headers=keyed("w-2"))
    assert fresh.status_code == 202, fresh.text
    assert fresh.json()["uid"] != first.json()["uid"]


async def test_a_replay_after_the_pool_or_the_project_was_deleted_is_410(api: Scenario) -> None:
    await api.put_binding("h100-80g")
    body = {"name": "keyed-project"}
    assert (
        await api.client.post("/api/v1/projects", json=body, headers=keyed("p"))
    ).status_code == 202
    pool = {
        "name": "keyed-pool",
        "accelerator_class": "h100-80g",
        "quota": {"accelerators": 1, "cpu": "1", "memory": "1Gi"},
    }
    pools = "/api/v1/projects/keyed-project/compute-pools"
    assert (await api.client.post(pools, json=pool, headers=keyed("q"))).status_code == 202
    assert (await api.client.delete(f"{pools}/keyed-pool")).status_code == 202
    assert_gone(
        await api.client.post(pools, json=pool, headers=keyed("q")), "Compute pool", "keyed-pool"
    )
    assert (await api.client.delete("/api/v1/projects/keyed-project")).status_code == 409  # pool
    assert (
        await api.client.post("/api/v1/projects", json=body, headers=keyed("p"))
    ).status_code == 202


async def test_a_replay_of_a_token_create_after_its_revocation_is_410(api: Scenario) -> None:
    await api.create_project(PROJECT)
    tokens = f"/api/v1/projects/{PROJECT}/tokens"
    body = {"name": "ci", "role": "viewer", "expires_in_days": 1}
    first = await api.client.post(tokens, json=body, headers=keyed("t"))
    assert first.status_code == 201, first.text
    replay = await api.client.post(tokens, json=body, headers=keyed("t"))
    assert replay.status_code == 201 and replay.json()["token"] is None
    assert (await api.client.delete(f"{tokens}/{first.json()['id']}")).status_code == 204
    gone = await api.client.post(tokens, json=body, headers=keyed("t"))
    assert_gone(gone, "Token", "ci")
    assert "revoked" in gone.json()["detail"]


async def test_a_replay_after_the_project_was_deleted_is_410(api: Scenario) -> None:
    body = {"name": "short-lived"}
    assert (
        await api.client.post("/api/v1/projects", json=body, headers=keyed("p"))
    ).status_code == 202
    assert (await api.client.delete("/api/v1/projects/short-lived")).status_code == 202
    assert_gone(
        await api.client.post("/api/v1/projects", json=body, headers=keyed("p")),
        "Project",
        "short-lived",
    )
