"""Compute pools over HTTP, as a project admin would use them."""

from __future__ import annotations

import httpx

from tests.support.scenario import (
    CLASS,
    POOL,
    POOLS,
    PROJECT,
    QUOTA,
    WORKLOADS,
    Scenario,
    example_workload,
)


async def test_creating_a_pool_answers_202_with_location_queue_names_and_zero_usage(
    api: Scenario,
) -> None:
    await api.put_binding(CLASS)
    await api.create_project(PROJECT)
    response = await api.client.post(
        POOLS, json={"name": POOL, "accelerator_class": CLASS, "quota": QUOTA}
    )
    assert response.status_code == 202, response.text
    assert response.headers["location"] == f"{POOLS}/{POOL}"
    body = response.json()
    assert body["name"] == POOL and body["project"] == PROJECT
    assert body["accelerator_class"] == CLASS and body["quota"] == QUOTA
    assert body["generation"] == 1 and body["created_by"] == "admin"
    assert body["updated_at"] == body["created_at"]
    status = body["status"]
    assert status["state"] == "PENDING" and status["observed_generation"] == 0
    assert status["reason"].endswith(".")
    assert status["cluster_queue"] == "aicp-research-h100-pool"
    assert status["local_queue"] == POOL
    assert status["usage"] == {
        "accelerators_admitted": 0,
        "workloads_admitted": 0,
        "workloads_pending": 0,
        "cpu_admitted": "0",
        "memory_admitted": "0",
    }
    fetched = await api.client.get(f"{POOLS}/{POOL}")
    assert fetched.status_code == 200
    assert fetched.json() == body
    assert fetched.headers["etag"] == '"1"'


async def test_pools_list_newest_first_in_pages(api: Scenario) -> None:
    await api.put_binding(CLASS)
    await api.create_project(PROJECT)
    for name in ("alpha", "beta", "gamma"):
        await api.create_pool(name)
    first = (await api.client.get(POOLS, params={"limit": 2})).json()
    assert [p["name"] for p in first["items"]] == ["gamma", "beta"]
    second = (
        await api.client.get(POOLS, params={"limit": 2, "cursor": first["next_cursor"]})
    ).json()
    assert [p["name"] for p in second["items"]] == ["alpha"]
    assert second["next_cursor"] is None


async def test_a_pool_counts_the_workloads_waiting_in_it(api: Scenario) -> None:
    await api.setup_pool(wait=False)
    await api.submit("one")
    await api.submit("two")
    usage = (await api.client.get(f"{POOLS}/{POOL}")).json()["status"]["usage"]
    assert usage["workloads_pending"] == 2 and usage["workloads_admitted"] == 0
    listed = (await api.client.get(POOLS)).json()["items"][0]["status"]["usage"]
    assert listed == usage


async def test_changing_the_quota_is_a_new_generation_with_an_event_and_honours_if_match(
    api: Scenario,
) -> None:
    await api.setup_pool(wait=False)
    new_quota = {"accelerators": 32, "cpu": "512", "memory": "4Ti"}
    stale = await api.client.patch(
        f"{POOLS}/{POOL}", json={"quota": new_quota}, headers={"If-Match": '"7"'}
    )
    assert stale.status_code == 412
    assert stale.json()["current_generation"] == 1
    assert stale.json()["type"].endswith("/generation-mismatch")

    response = await api.client.patch(
        f"{POOLS}/{POOL}", json={"quota": new_quota}, headers={"If-Match": '"1"'}
    )
    assert response.status_code == 202, response.text
    assert response.json()["generation"] == 2
    assert response.json()["quota"] == new_quota
    assert response.json()["status"]["observed_generation"] == 0
    assert (await api.client.get(f"{POOLS}/{POOL}")).json()["quota"] == new_quota

    events = (await api.client.get(f"{POOLS}/{POOL}/events")).json()["items"]
    assert [(e["type"], e["generation"], e["actor"]) for e in events] == [
        ("SpecUpdated", 2, "admin"),
        ("Accepted", 1, "admin"),
    ]


async def test_a_pool_needs_an_existing_binding_and_a_free_name(api: Scenario) -> None:
    await api.create_project(PROJECT)
    missing = await api.client.post(
        POOLS, json={"name": POOL, "accelerator_class": "tpu-v5", "quota": QUOTA}
    )
    assert missing.status_code == 422
    assert [e["field"] for e in missing.json()["errors"]] == ["accelerator_class"]

    await api.put_binding(CLASS)
    await api.create_pool()
    again = await api.client.post(
        POOLS, json={"name": POOL, "accelerator_class": CLASS, "quota": QUOTA}
    )
    assert again.status_code == 409
    assert again.json()["type"] == "https://aicp.dev/problems/already-exists"


async def test_a_pool_in_use_cannot_be_deleted_until_its_workloads_are(api: Scenario) -> None:
    await api.setup_pool(wait=False)
    await api.submit("train-7b")
    refused = await api.client.delete(f"{POOLS}/{POOL}")
    assert refused.status_code == 409
    assert refused.json()["type"].endswith("/in-use")
    assert refused.json()["referenced_by"] == ["workload/train-7b"]

    assert (await api.client.delete(f"{WORKLOADS}/train-7b")).status_code == 202
    stale = await api.client.delete(f"{POOLS}/{POOL}", headers={"If-Match": '"2"'})
    assert stale.status_code == 412 and stale.json()["current_generation"] == 1
    deleted = await api.client.delete(f"{POOLS}/{POOL}", headers={"If-Match": '"1"'})
    assert deleted.status_code == 202, deleted.text
    assert deleted.json()["status"]["state"] == "DELETING"
    assert deleted.json()["status"]["reason"].endswith(".")
    # Readable until the reconciler removes it; a repeated DELETE changes nothing.
    assert (await api.client.get(f"{POOLS}/{POOL}")).json()["status"]["state"] == "DELETING"
    assert (await api.client.delete(f"{POOLS}/{POOL}")).status_code == 202


async def test_a_pool_being_deleted_takes_no_new_work_changes_or_namesakes(api: Scenario) -> None:
    await api.setup_pool(wait=False)
    assert (await api.client.delete(f"{POOLS}/{POOL}")).status_code == 202

    new_workload = await api.client.post(WORKLOADS, json=example_workload())
    assert new_workload.status_code == 422
    assert [e["field"] for e in new_workload.json()["errors"]] == ["compute_pool"]
    assert "being deleted" in new_workload.json()["errors"][0]["message"]

    patch = await api.client.patch(f"{POOLS}/{POOL}", json={"quota": QUOTA})
    assert patch.status_code == 409
    assert patch.json()["type"].endswith("/being-deleted")

    namesake = await api.client.post(
        POOLS, json={"name": POOL, "accelerator_class": CLASS, "quota": QUOTA}
    )
    assert namesake.status_code == 409
    assert namesake.json()["type"].endswith("/being-deleted")


async def test_invalid_pools_are_refused_with_every_bad_field_named(api: Scenario) -> None:
    await api.put_binding(CLASS)
    await api.create_project(PROJECT)
    cases = [
        ({"name": "kube-pool", "accelerator_class": CLASS, "quota": QUOTA}, ["name"]),
        ({"name": "p" * 31, "accelerator_class": CLASS, "quota": QUOTA}, ["name"]),
        ({"name": "Pool", "accelerator_class": CLASS, "quota": QUOTA}, ["name"]),
        (
            {
                "name": "p",
                "accelerator_class": CLASS,
                "quota": {**QUOTA, "cpu": "lots", "memory": "2TB"},
            },
            ["quota.cpu", "quota.memory"],
        ),
        ({"name": "p", "accelerator_class": CLASS, "quotas": QUOTA}, ["quotas", "quota"]),
        (
            {"name": "p", "accelerator_class": CLASS, "quota": {**QUOTA, "accelerators": -1}},
            ["quota.accelerators"],
        ),
    ]
    for body, fields in cases:
        response = await api.client.post(POOLS, json=body)
        assert response.status_code == 422, (body, response.text)
        assert response.json()["type"].endswith("/validation-error")
        assert sorted(e["field"] for e in response.json()["errors"]) == sorted(fields), body
    assert (await api.client.get(POOLS)).json()["items"] == []


async def test_long_project_and_pool_names_give_a_hash_shortened_cluster_queue(
    api: Scenario,
) -> None:
    project, pool = "p" * 30, "q" * 30
    await api.put_binding(CLASS)
    await api.create_project(project)
    body = await api.for_project(project).create_pool(pool)
    queue = body["status"]["cluster_queue"]
    assert len(queue) <= 63 and queue.startswith("aicp-" + "p" * 30 + "-q")
    assert body["status"]["local_queue"] == pool


async def test_an_unknown_pool_is_404(app_client: httpx.AsyncClient, api: Scenario) -> None:
    await api.create_project(PROJECT)
    for method in ("GET", "DELETE"):
        response = await app_client.request(method, f"{POOLS}/nope")
        assert response.status_code == 404
        assert response.json()["type"].endswith("/not-found")
    assert (await app_client.patch(f"{POOLS}/nope", json={"quota": QUOTA})).status_code == 404
