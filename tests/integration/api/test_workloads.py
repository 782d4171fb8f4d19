"""Workloads over HTTP: submit, read, list, replace, delete, as an ML engineer would."""

from __future__ import annotations

import re

from tests.support.scenario import POOL, PROJECT, TRAIN_7B, WORKLOADS, Scenario, example_workload

UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


async def test_submitting_a_workload_answers_202_pending_with_defaults_filled(
    api: Scenario,
) -> None:
    await api.setup_pool(wait=False)
    response = await api.client.post(
        WORKLOADS, json={"name": "hello", "compute_pool": POOL, "image": "busybox:1.36"}
    )
    assert response.status_code == 202, response.text
    assert response.headers["location"] == f"{WORKLOADS}/hello"
    body = response.json()
    assert body["name"] == "hello" and body["project"] == PROJECT
    assert body["compute_pool"] == POOL and UUID.match(body["uid"])
    assert body["generation"] == 1 and body["created_by"] == "admin"
    assert body["updated_at"] == body["created_at"] == body["status"]["updated_at"]
    assert body["spec"] == {
        "name": "hello",
        "compute_pool": POOL,
        "image": "busybox:1.36",
        "command": [],
        "args": [],
        "env": {},
        "accelerators": 0,
        "cpu": "1",
        "memory": "1Gi",
        "replicas": 1,
        "nodes": 1,
        "max_runtime_seconds": 86400,
        "start_deadline_seconds": 3600,
        "retries": 0,
        "priority": "normal",
        "labels": {},
    }
    status = body["status"]
    assert status["state"] == "PENDING"
    assert status["reason"] == "Accepted; waiting for the controller to create the Job."
    assert status["observed_generation"] == 0
    assert status["job"] is None and status["admission"] is None and status["nodes"] == []
    assert status["attempts"] == 0 and status["exit_code"] is None

    fetched = await api.client.get(f"{WORKLOADS}/hello")
    assert fetched.status_code == 200 and fetched.json() == body
    assert fetched.headers["etag"] == '"1"'


async def test_the_api_example_round_trips_as_submitted(api: Scenario) -> None:
    await api.setup_pool(wait=False)
    body = await api.submit("train-7b")
    assert body["spec"] == TRAIN_7B
    events = (await api.client.get(f"{WORKLOADS}/train-7b/events")).json()
    assert [(e["type"], e["generation"], e["actor"]) for e in events["items"]] == [
        ("Accepted", 1, "admin")
    ]
    assert events["items"][0]["message"].endswith(".") and events["next_cursor"] is None


async def test_replacing_the_spec_is_a_new_generation_pending_with_an_event(api: Scenario) -> None:
    await api.setup_pool(wait=False)
    await api.submit("train-7b")
    changed = example_workload(image="ghcr.io/acme/train:1.5", replicas=2)
    stale = await api.client.put(f"{WORKLOADS}/train-7b", json=changed, headers={"If-Match": '"2"'})
    assert stale.status_code == 412 and stale.json()["current_generation"] == 1

    response = await api.client.put(
        f"{WORKLOADS}/train-7b", json=changed, headers={"If-Match": '"1"'}
    )
    assert response.status_code == 202, response.text
    body = response.json()
    assert body["generation"] == 2 and body["spec"]["image"] == "ghcr.io/acme/train:1.5"
    assert body["status"]["state"] == "PENDING"
    assert "generation 2" in body["status"]["reason"]
    assert response.headers["etag"] == '"2"'
    types = [
        e["type"] for e in (await api.client.get(f"{WORKLOADS}/train-7b/events")).json()["items"]
    ]
    assert types == ["SpecUpdated", "Accepted"]


async def test_a_replacement_must_keep_the_name_and_fit_the_pool(api: Scenario) -> None:
    await api.setup_pool(wait=False)
    await api.submit("train-7b")
    renamed = await api.client.put(f"{WORKLOADS}/train-7b", json=example_workload("other"))
    assert renamed.status_code == 422
    assert [e["field"] for e in renamed.json()["errors"]] == ["name"]
    too_big = await api.client.put(f"{WORKLOADS}/train-7b", json=example_workload(replicas=3))
    assert too_big.status_code == 422
    assert too_big.json()["type"].endswith("/exceeds-pool-capacity")
    missing = await api.client.put(f"{WORKLOADS}/nope", json=example_workload("nope"))
    assert missing.status_code == 404
    assert (await api.client.get(f"{WORKLOADS}/train-7b")).json()["generation"] == 1


async def test_deleting_marks_deleting_keeps_it_readable_and_blocks_changes_and_namesakes(
    api: Scenario,
) -> None:
    await api.setup_pool(wait=False)
    await api.submit("train-7b")
    response = await api.client.delete(f"{WORKLOADS}/train-7b", headers={"If-Match": '"1"'})
    assert response.status_code == 202, response.text
    assert response.json()["status"]["state"] == "DELETING"
    fetched = await api.client.get(f"{WORKLOADS}/train-7b")
    assert fetched.status_code == 200 and fetched.json()["status"]["state"] == "DELETING"
    assert (await api.client.delete(f"{WORKLOADS}/train-7b")).status_code == 202

    put = await api.client.put(f"{WORKLOADS}/train-7b", json=example_workload())
    assert put.status_code == 409 and put.json()["type"].endswith("/being-deleted")
    again = await api.client.post(WORKLOADS, json=example_workload())
    assert again.status_code == 409 and again.json()["type"].endswith("/being-deleted")
    types = [
        e["type"] for e in (await api.client.get(f"{WORKLOADS}/train-7b/events")).json()["items"]
    ]
    assert types == ["DeletionRequested", "Accepted"]


async def test_a_taken_name_is_409_already_exists(api: Scenario) -> None:
    await api.setup_pool(wait=False)
    await api.submit("train-7b")
    response = await api.client.post(WORKLOADS, json=example_workload())
    assert response.status_code == 409
    assert response.json()["type"] == "https://aicp.dev/problems/already-exists"


async def test_listing_filters_by_state_and_pool_newest_first(api: Scenario) -> None:
    await api.setup_pool(wait=False)
    await api.create_pool("cpu-pool")
    await api.submit("a")
    await api.submit("b", compute_pool="cpu-pool", accelerators=0)
    await api.submit("c")
    await api.client.delete(f"{WORKLOADS}/c")

    def names(response: object) -> list[str]:
        return [w["name"] for w in response.json()["items"]]  # type: ignore[attr-defined]

    assert names(await api.client.get(WORKLOADS)) == ["c", "b", "a"]
    assert names(await api.client.get(WORKLOADS, params={"state": "PENDING"})) == ["b", "a"]
    assert names(await api.client.get(WORKLOADS, params={"state": "DELETING"})) == ["c"]
    assert names(await api.client.get(WORKLOADS, params={"compute_pool": "cpu-pool"})) == ["b"]
    both = await api.client.get(WORKLOADS, params={"compute_pool": POOL, "state": "PENDING"})
    assert names(both) == ["a"]
    bad = await api.client.get(WORKLOADS, params={"state": "SLEEPING"})
    assert bad.status_code == 422
    assert [e["field"] for e in bad.json()["errors"]] == ["state"]


async def test_listing_in_pages_returns_every_workload_once(api: Scenario) -> None:
    await api.setup_pool(wait=False)
    for i in range(7):
        await api.submit(f"w{i}", accelerators=0)
    seen: list[str] = []
    cursor = None
    while True:
        params = {"limit": 3, **({"cursor": cursor} if cursor else {})}
        page = (await api.client.get(WORKLOADS, params=params)).json()
        seen += [w["name"] for w in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == [f"w{i}" for i in reversed(range(7))]
    bad = await api.client.get(WORKLOADS, params={"cursor": "not-a-cursor"})
    assert bad.status_code == 422 and bad.json()["errors"][0]["field"] == "cursor"
    for limit in (0, 501):
        assert (await api.client.get(WORKLOADS, params={"limit": limit})).status_code == 422


def max_size_env(seed: int) -> dict[str, str]:
    """Environment variables that take a workload's body near its 256 KiB limit."""
    return {f"BLOB_{i}": f"{seed}" * 32000 for i in range(7)}


async def test_a_page_of_large_workloads_ends_early_and_its_cursor_continues(api: Scenario) -> None:
    await api.setup_pool(wait=False)
    for i in range(12):
        await api.submit(f"big{i}", accelerators=0, env=max_size_env(i % 10))
    pages: list[list[str]] = []
    cursor = None
    while True:
        params = {"limit": 500, **({"cursor": cursor} if cursor else {})}
        response = await api.client.get(WORKLOADS, params=params)
        assert response.status_code == 200, response.text
        assert len(response.content) < (2 << 20) + (256 << 10)  # the bound plus one row at most
        pages.append([w["name"] for w in response.json()["items"]])
        cursor = response.json()["next_cursor"]
        if cursor is None:
            break
    assert len(pages) > 1 and all(pages)
    assert [name for page in pages for name in page] == [f"big{i}" for i in reversed(range(12))]


async def test_events_page_newest_first(api: Scenario) -> None:
    await api.setup_pool(wait=False)
    await api.submit("train-7b")
    for image in ("a:1", "a:2", "a:3"):
        response = await api.client.put(f"{WORKLOADS}/train-7b", json=example_workload(image=image))
        assert response.status_code == 202
    first = (await api.client.get(f"{WORKLOADS}/train-7b/events", params={"limit": 3})).json()
    assert [e["generation"] for e in first["items"]] == [4, 3, 2]
    rest = (
        await api.client.get(
            f"{WORKLOADS}/train-7b/events", params={"limit": 3, "cursor": first["next_cursor"]}
        )
    ).json()
    assert [(e["type"], e["generation"]) for e in rest["items"]] == [("Accepted", 1)]
    assert rest["next_cursor"] is None
    assert (await api.client.get(f"{WORKLOADS}/nope/events")).status_code == 404


async def test_an_unknown_workload_is_404(api: Scenario) -> None:
    await api.setup_pool(wait=False)
    for method in ("GET", "DELETE"):
        for name in ("nope", "no%00pe", "NOPE"):
            response = await api.client.request(method, f"{WORKLOADS}/{name}")
            assert response.status_code == 404, (method, name, response.text)
            assert response.json()["type"].endswith("/not-found")
    odd_filter = await api.client.get(WORKLOADS, params={"compute_pool": "h100\x00"})
    assert odd_filter.status_code == 422
    assert [e["field"] for e in odd_filter.json()["errors"]] == ["compute_pool"]
