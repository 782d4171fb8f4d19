"""Event trails: who did what to a workload or pool, and what the controller observed."""

from __future__ import annotations

import asyncpg

from tests.support.scenario import POOL, POOLS, PROJECT, WORKLOADS, Scenario, example_workload


async def test_each_write_is_recorded_with_the_token_that_made_it(api: Scenario) -> None:
    await api.setup_pool(wait=False)
    token = await api.create_token(PROJECT, role="editor", name="alice")
    tokens = (await api.client.get(f"/api/v1/projects/{PROJECT}/tokens")).json()["items"]
    actor = "token:" + next(t["id"] for t in tokens if t["name"] == "alice")
    async with api.as_token(token) as alice:
        created = await alice.post(WORKLOADS, json=example_workload())
        assert created.status_code == 202
        assert created.json()["created_by"] == actor
        assert (
            await alice.put(f"{WORKLOADS}/train-7b", json=example_workload(retries=2))
        ).status_code == 202
    assert (await api.client.delete(f"{WORKLOADS}/train-7b")).status_code == 202

    async with api.as_token(token) as alice:
        events = (await alice.get(f"{WORKLOADS}/train-7b/events")).json()["items"]
    assert [(e["type"], e["actor"], e["generation"]) for e in events] == [
        ("DeletionRequested", "admin", 2),
        ("SpecUpdated", actor, 2),
        ("Accepted", actor, 1),
    ]
    assert all(e["message"].endswith(".") and e["at"].endswith("Z") for e in events)


async def test_a_tokens_events_show_its_name_even_after_it_is_revoked(api: Scenario) -> None:
    await api.setup_pool(wait=False)
    token = await api.create_token(PROJECT, role="editor", name="alice")
    async with api.as_token(token) as alice:
        assert (await alice.post(WORKLOADS, json=example_workload())).status_code == 202
    tokens = (await api.client.get(f"/api/v1/projects/{PROJECT}/tokens")).json()["items"]
    alice_id = next(t["id"] for t in tokens if t["name"] == "alice")
    assert (
        await api.client.delete(f"/api/v1/projects/{PROJECT}/tokens/{alice_id}")
    ).status_code == 204
    assert (await api.client.delete(f"{WORKLOADS}/train-7b")).status_code == 202
    events = (await api.client.get(f"{WORKLOADS}/train-7b/events")).json()["items"]
    assert [(e["type"], e["actor"], e["actor_name"]) for e in events] == [
        ("DeletionRequested", "admin", "admin"),
        ("Accepted", f"token:{alice_id}", "token alice"),
    ]


async def test_what_the_controller_records_appears_in_the_trail(
    api: Scenario, sql: asyncpg.Connection
) -> None:
    await api.setup_pool(wait=False)
    uid = (await api.client.post(WORKLOADS, json=example_workload())).json()["uid"]
    # As the reconciler writes them: same table, its own actor.
    await sql.execute(
        "INSERT INTO events (project_id, kind, resource_id, resource_name, type, reason,"
        " message, generation, actor)"
        " SELECT project_id, 'workload', id, name, 'JobCreated', 'Created',"
        " 'Job train-7b-abc123-g1 created.', 1, 'controller:replica-a'"
        " FROM workloads WHERE id = $1",
        uid,
    )
    events = (await api.client.get(f"{WORKLOADS}/train-7b/events")).json()["items"]
    assert [(e["type"], e["actor"]) for e in events] == [
        ("JobCreated", "controller:replica-a"),
        ("Accepted", "admin"),
    ]
    assert events[0]["reason"] == "Created" and events[0]["message"].startswith("Job ")


async def test_pool_events_page_with_a_cursor(api: Scenario) -> None:
    await api.setup_pool(wait=False)
    for accelerators in (17, 18, 19, 20):
        quota = {"accelerators": accelerators, "cpu": "256", "memory": "2Ti"}
        assert (await api.client.patch(f"{POOLS}/{POOL}", json={"quota": quota})).status_code == 202
    generations: list[int] = []
    cursor = None
    while True:
        params: dict[str, object] = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        page = (await api.client.get(f"{POOLS}/{POOL}/events", params=params)).json()
        generations += [e["generation"] for e in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert generations == [5, 4, 3, 2, 1]
    assert (await api.client.get(f"{POOLS}/nope/events")).status_code == 404
