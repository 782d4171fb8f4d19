"""What concurrent callers see: one winner per name, replays, stable pages, honest in-use."""

from __future__ import annotations

import asyncio
from collections import Counter

from tests.support.scenario import POOL, POOLS, WORKLOADS, Scenario, example_workload


async def test_fifty_concurrent_creates_of_one_name_give_one_202_and_forty_nine_409s(
    api: Scenario,
) -> None:
    await api.setup_pool(wait=False)
    responses = await asyncio.gather(
        *(
            api.client.post(WORKLOADS, json=example_workload("race", accelerators=i % 3))
            for i in range(50)
        )
    )
    statuses = Counter(r.status_code for r in responses)
    assert statuses == {202: 1, 409: 49}, statuses
    assert {r.json()["type"] for r in responses if r.status_code == 409} == {
        "https://aicp.dev/problems/already-exists"
    }
    winner = next(r.json() for r in responses if r.status_code == 202)
    stored = (await api.client.get(f"{WORKLOADS}/race")).json()
    assert stored["uid"] == winner["uid"]
    events = (await api.client.get(f"{WORKLOADS}/race/events")).json()["items"]
    assert [e["type"] for e in events] == ["Accepted"]


async def test_an_idempotent_replay_answers_the_first_response(api: Scenario) -> None:
    await api.setup_pool(wait=False)
    key = {"Idempotency-Key": "submit-train-7b-once"}
    first = await api.client.post(WORKLOADS, json=example_workload(), headers=key)
    assert first.status_code == 202
    assert "idempotent-replayed" not in first.headers
    replay = await api.client.post(WORKLOADS, json=example_workload(), headers=key)
    assert replay.status_code == 202
    assert replay.headers["idempotent-replayed"] == "true"
    assert replay.headers["location"] == first.headers["location"]
    assert replay.json() == first.json()

    reused = await api.client.post(WORKLOADS, json=example_workload(image="other:1"), headers=key)
    assert reused.status_code == 422
    assert reused.json()["type"] == "https://aicp.dev/problems/idempotency-key-reused"
    # Without the key, the same body is an ordinary duplicate.
    assert (await api.client.post(WORKLOADS, json=example_workload())).status_code == 409
    assert len((await api.client.get(WORKLOADS)).json()["items"]) == 1


async def test_concurrent_retries_with_one_key_create_one_workload(api: Scenario) -> None:
    await api.setup_pool(wait=False)
    key = {"Idempotency-Key": "retry-storm"}
    responses = await asyncio.gather(
        *(api.client.post(WORKLOADS, json=example_workload(), headers=key) for _ in range(10))
    )
    assert {r.status_code for r in responses} == {202}
    assert len({r.json()["uid"] for r in responses}) == 1
    assert sum(r.headers.get("idempotent-replayed") == "true" for r in responses) == 9


async def test_idempotent_pool_creates_replay_too(api: Scenario) -> None:
    await api.put_binding("h100-80g")
    await api.create_project("research")
    body = {
        "name": "p",
        "accelerator_class": "h100-80g",
        "quota": {"accelerators": 1, "cpu": "1", "memory": "1Gi"},
    }
    key = {"Idempotency-Key": "pool-p"}
    first = await api.client.post(POOLS, json=body, headers=key)
    replay = await api.client.post(POOLS, json=body, headers=key)
    assert (first.status_code, replay.status_code) == (202, 202)
    assert replay.json() == first.json() and replay.headers["idempotent-replayed"] == "true"


async def test_paging_while_workloads_are_inserted_returns_each_existing_one_exactly_once(
    api: Scenario,
) -> None:
    await api.setup_pool(wait=False)
    existing = [f"old-{i}" for i in range(40)]
    for name in existing:
        await api.submit(name, accelerators=0)
    stop = asyncio.Event()

    async def keep_inserting() -> int:
        n = 0
        while not stop.is_set():
            await api.submit(f"new-{n}", accelerators=0)
            n += 1
        return n

    inserter = asyncio.create_task(keep_inserting())
    seen: list[str] = []
    cursor = None
    try:
        while True:
            params: dict[str, object] = {"limit": 7}
            if cursor:
                params["cursor"] = cursor
            response = await api.client.get(WORKLOADS, params=params)
            assert response.status_code == 200
            page = response.json()
            seen += [w["name"] for w in page["items"]]
            cursor = page["next_cursor"]
            if cursor is None:
                break
    finally:
        stop.set()
        inserted = await inserter
    assert inserted > 0
    assert len(seen) == len(set(seen)), "a workload was listed twice"
    assert [name for name in seen if name.startswith("old-")] == list(reversed(existing))


async def test_a_pool_deleted_while_workloads_arrive_is_never_left_in_use(api: Scenario) -> None:
    await api.setup_pool(wait=False)
    creates = [
        api.client.post(WORKLOADS, json=example_workload(f"w{i}", accelerators=0))
        for i in range(20)
    ]
    results = await asyncio.gather(
        *creates[:10], api.client.delete(f"{POOLS}/{POOL}"), *creates[10:]
    )
    deletion = results[10]
    created = [r for r in results if r.status_code == 202 and "spec" in r.json()]
    refused = [r for r in results if r.status_code == 422]
    assert len(created) + len(refused) == 20
    if deletion.status_code == 202:
        # Every create either committed before the deletion (then the deletion would have
        # been refused) or saw the pool as being deleted.
        assert created == []
    else:
        assert deletion.status_code == 409 and deletion.json()["referenced_by"]
        assert refused == []
