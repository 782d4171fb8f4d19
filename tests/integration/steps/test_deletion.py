"""Deleting workloads in every state, pools and projects: DELETING → provider cleanup observed
→ one-transaction finalization with a tombstone → 404 (docs/DESIGN.md §3 invariants 7, 8, 9)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from app.kube.resources import CLUSTER_QUEUES, LOCAL_QUEUES, NAMESPACES, RESOURCE_FLAVORS
from tests.integration.steps.stack import Stack
from tests.support.scenario import CLASS, NAMESPACE, POOL, POOLS, WORKLOADS
from tests.support.waiting import wait_until


async def _leftovers(stack: Stack, kind: str, resource_id: str) -> dict[str, Any]:
    """What the database still holds about a resource after finalization."""
    assert stack.service.db is not None
    async with stack.service.db.connection() as conn:
        rid = uuid.UUID(resource_id)
        table = {"workload": "workloads", "pool": "compute_pools", "project": "projects"}[kind]
        return {
            "row": await conn.fetchval(f"SELECT count(*) FROM {table} WHERE id = $1", rid),
            "lease": await conn.fetchval(
                "SELECT count(*) FROM leases WHERE kind = $1 AND resource_id = $2", kind, rid
            ),
            "tombstone": await conn.fetchrow(
                "SELECT name, final FROM tombstones WHERE kind = $1 AND resource_id = $2",
                kind,
                rid,
            ),
            "events": [
                r["type"]
                for r in await conn.fetch(
                    "SELECT type FROM events WHERE kind = $1 AND resource_id = $2 ORDER BY id",
                    kind,
                    rid,
                )
            ],
        }


async def _delete(stack: Stack, name: str) -> None:
    response = await stack.http.delete(f"{WORKLOADS}/{name}")
    assert response.status_code == 202, response.text
    assert response.json()["status"]["state"] == "DELETING"


async def _reach(stack: Stack, name: str, state: str) -> None:
    """Bring workload `name` into `state` (the pool's other workloads make room for it)."""
    if state == "QUEUED":
        await stack.start_running("hog", replicas=2)
        await stack.submit(name)
    elif state == "ADMITTED":
        await stack.submit(name, image="ghcr.io/acme/does-not-exist:1")
    elif state == "RUNNING":
        await stack.submit(name, env={"KUBESIM_RUN_SECONDS": "600"})
    elif state == "FAILED":
        await stack.submit(name, env={"KUBESIM_RUN_SECONDS": "0.2", "KUBESIM_EXIT_CODE": "1"})
    else:
        await stack.submit(name)
    if state != "PENDING":
        await stack.wait_state(name, state)


@pytest.mark.parametrize(
    "state", ["PENDING", "QUEUED", "ADMITTED", "RUNNING", "SUCCEEDED", "FAILED"]
)
async def test_a_workload_deleted_in_any_state_leaves_only_a_tombstone(
    stack: Stack, state: str
) -> None:
    await stack.setup_pool()
    await _reach(stack, "doomed", state)
    found = await stack.workload("doomed")
    assert found is not None
    uid = found["uid"]

    await _delete(stack, "doomed")
    await stack.wait_gone("doomed")

    assert await stack.jobs_of(uid) == []

    async def no_lease_left() -> dict[str, Any] | None:
        # A claim racing the finalization can still take a lease on the row being deleted; its
        # holder's next step finds the row gone and releases it.
        found = await _leftovers(stack, "workload", uid)
        return found if found["lease"] == 0 else None

    left = await wait_until(no_lease_left, timeout=10, message="the lease released")
    assert left["row"] == 0
    assert left["tombstone"] is not None and left["tombstone"]["name"] == "doomed"
    assert left["tombstone"]["final"]["state"] == "DELETED"
    assert left["events"][-1] == "Finalized"
    assert "DeletionRequested" in left["events"]
    # The name is free again, for a new workload with a new Job.
    again = await stack.submit("doomed")
    assert again["uid"] != uid
    await stack.wait_state("doomed", "QUEUED", "ADMITTED", "RUNNING", "SUCCEEDED")


async def test_a_running_workload_deleted_keeps_its_evidence_in_the_tombstone(stack: Stack) -> None:
    await stack.setup_pool()
    running = await stack.start_running("midrun")

    await _delete(stack, "midrun")
    await stack.wait_gone("midrun")

    left = await _leftovers(stack, "workload", running["uid"])
    final = left["tombstone"]["final"]
    assert final["observed"]["nodes"] == running["status"]["nodes"]
    assert final["observed"]["job"]["name"] == running["status"]["job"]["name"]
    assert left["events"].index("EvidenceRecorded") < left["events"].index("Finalized")
    # Background propagation: no pod of the Job keeps holding its GPUs.
    pods = await stack.kube.core.list_namespaced_pod(
        NAMESPACE, label_selector=f"aicp.dev/uid={running['uid']}", _preload_content=False
    )
    assert (await pods.json())["items"] == []  # type: ignore[attr-defined]  # a raw (_preload_content=False) response


async def test_deletion_waits_until_the_job_is_really_gone(stack: Stack) -> None:
    await stack.setup_pool()
    running = await stack.start_running("held")
    job_name = running["status"]["job"]["name"]
    # Someone else's finalizer keeps the Job around after aicp has let it go.
    await stack.kube.batch.patch_namespaced_job(
        job_name,
        NAMESPACE,
        [{"op": "add", "path": "/metadata/finalizers/-", "value": "example.com/hold"}],
        _content_type="application/json-patch+json",
        _preload_content=False,
    )

    await _delete(stack, "held")

    async def aicp_let_go() -> bool:
        job = await stack.job(job_name)
        return job is not None and job["metadata"]["finalizers"] == ["example.com/hold"]

    await wait_until(aicp_let_go, timeout=10, message="evidence finalizer removed")
    still = await stack.workload("held")
    assert still is not None and still["status"]["state"] == "DELETING"

    await stack.kube.batch.patch_namespaced_job(
        job_name,
        NAMESPACE,
        [{"op": "remove", "path": "/metadata/finalizers/0"}],
        _content_type="application/json-patch+json",
        _preload_content=False,
    )
    await stack.wait_gone("held")


async def test_a_pool_and_its_project_are_deleted_down_to_the_namespace(stack: Stack) -> None:
    await stack.setup_pool()
    pool = await stack.pool()
    response = await stack.http.delete(f"{POOLS}/{POOL}")
    assert response.status_code == 202, response.text

    async def pool_gone() -> bool:
        return (await stack.http.get(f"{POOLS}/{POOL}")).status_code == 404

    await wait_until(pool_gone, timeout=10, message="pool finalized")
    assert await stack.read(CLUSTER_QUEUES, None, "aicp-research-h100-pool") is None
    assert await stack.read(LOCAL_QUEUES, NAMESPACE, POOL) is None
    assert await stack.read(RESOURCE_FLAVORS, None, CLASS) is None  # no other pool uses it
    left = await _leftovers(stack, "pool", pool["uid"])
    assert left["row"] == 0 and left["lease"] == 0 and left["tombstone"] is not None

    response = await stack.http.delete("/api/v1/projects/research")
    assert response.status_code == 202, response.text

    async def project_gone() -> bool:
        return (await stack.http.get("/api/v1/projects/research")).status_code == 404

    await wait_until(project_gone, timeout=10, message="project finalized")
    assert await stack.read(NAMESPACES, None, NAMESPACE) is None


async def test_a_pools_finished_workloads_go_with_it_as_tombstones_its_running_ones_block(
    stack: Stack,
) -> None:
    await stack.setup_pool()
    await _reach(stack, "done", "SUCCEEDED")
    await _reach(stack, "broken", "FAILED")
    await _reach(stack, "busy", "RUNNING")
    refused = await stack.http.delete(f"{POOLS}/{POOL}")
    assert refused.status_code == 409
    assert refused.json()["referenced_by"] == ["workload/busy"]
    # All or nothing: the refused request deleted none of the finished ones.
    assert (await stack.http.get(f"{WORKLOADS}/done")).json()["status"]["state"] == "SUCCEEDED"

    await _delete(stack, "busy")
    done = (await stack.http.get(f"{WORKLOADS}/done")).json()
    response = await stack.http.delete(f"{POOLS}/{POOL}")
    assert response.status_code == 202, response.text

    async def pool_gone() -> bool:
        return (await stack.http.get(f"{POOLS}/{POOL}")).status_code == 404

    await wait_until(pool_gone, timeout=20, message="pool finalized with its workloads")
    for name in ("done", "broken", "busy"):
        assert (await stack.http.get(f"{WORKLOADS}/{name}")).status_code == 404
    left = await _leftovers(stack, "workload", done["uid"])
    assert left["row"] == 0 and left["tombstone"]["name"] == "done"
    trail = left["events"]
    assert trail.index("Succeeded") < trail.index("DeletionRequested") < trail.index("Finalized")


async def test_a_flavor_shared_by_two_pools_outlives_the_first_deletion(stack: Stack) -> None:
    await stack.setup_pool()
    await stack.create_project("vision")
    other = "/api/v1/projects/vision/compute-pools"
    quota = {"accelerators": 8, "cpu": "64", "memory": "512Gi"}
    response = await stack.http.post(
        other, json={"name": "gpus", "accelerator_class": CLASS, "quota": quota}
    )
    assert response.status_code == 202, response.text

    async def second_pool_ready() -> bool:
        found = await stack.http.get(f"{other}/gpus")
        return found.json()["status"]["state"] == "READY"

    await wait_until(second_pool_ready, timeout=10, message="second pool READY")

    assert (await stack.http.delete(f"{POOLS}/{POOL}")).status_code == 202

    async def first_pool_gone() -> bool:
        return (await stack.http.get(f"{POOLS}/{POOL}")).status_code == 404

    await wait_until(first_pool_gone, timeout=10, message="first pool finalized")
    assert await stack.read(RESOURCE_FLAVORS, None, CLASS) is not None
    assert (await stack.http.get(f"{other}/gpus")).json()["status"]["state"] == "READY"

    assert (await stack.http.delete(f"{other}/gpus")).status_code == 202

    async def flavor_gone() -> bool:
        return await stack.read(RESOURCE_FLAVORS, None, CLASS) is None

    await wait_until(flavor_gone, timeout=10, message="flavor deleted with its last pool")
