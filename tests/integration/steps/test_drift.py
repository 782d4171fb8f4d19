"""Drift (docs/DESIGN.md §8) and the server-side apply contract with Kueue (§6)."""

from __future__ import annotations

from typing import Any

import pytest

from app.kube.resources import CLUSTER_QUEUES, LOCAL_QUEUES, NAMESPACES, RESOURCE_FLAVORS
from tests.integration.steps.stack import Stack
from tests.support.scenario import CLASS, NAMESPACE, POOL, POOLS, PROJECT
from tests.support.waiting import wait_until

JOBS_PATH = "/apis/batch/v1/namespaces/{namespace}/jobs"
JOB_PATH = JOBS_PATH + "/{name}"
QUEUE = "aicp-research-h100-pool"


async def _patch_job(stack: Stack, name: str, patch: list[dict[str, Any]]) -> None:
    await stack.kube.batch.patch_namespaced_job(
        name, NAMESPACE, patch, _content_type="application/json-patch+json", _preload_content=False
    )


async def test_a_job_deleted_by_hand_while_running_is_recreated_with_its_evidence_kept(
    stack: Stack,
) -> None:
    await stack.setup_pool()
    running = await stack.start_running("victim")
    job_name = running["status"]["job"]["name"]
    first_uid = running["status"]["job"]["uid"]
    first_nodes = running["status"]["nodes"]

    await stack.kube.batch.delete_namespaced_job(
        job_name, NAMESPACE, propagation_policy="Background", _preload_content=False
    )

    async def recreated() -> dict[str, Any] | None:
        job = await stack.job(job_name)
        return job if job and job["metadata"]["uid"] != first_uid else None

    job = await wait_until(recreated, timeout=15, message="Job recreated")
    assert job["metadata"]["finalizers"] == ["aicp.dev/evidence"]

    async def running_again() -> dict[str, Any] | None:
        found = await stack.workload("victim")
        status = found["status"] if found else {}
        again = status.get("state") == "RUNNING" and status["job"]["uid"] == job["metadata"]["uid"]
        return found if again else None

    again = await wait_until(running_again, timeout=15, message="new attempt running")
    assert again["status"]["attempts"] == 2
    assert set(first_nodes) <= set(again["status"]["nodes"])
    types = await stack.event_types("victim")
    assert "EvidenceRecorded" in types and "DriftCorrected" in types
    assert types.index("EvidenceRecorded") < types.index("DriftCorrected")
    drift = next(e for e in await stack.events("victim") if e["type"] == "DriftCorrected")
    assert job_name in drift["message"] and "attempt 2" in drift["message"]
    metrics = (await stack.http.get("/metrics")).text
    assert 'aicp_drift_corrections_total{kind="Job"}' in metrics


@pytest.mark.parametrize(
    "label",
    [
        pytest.param("team", id="a-user-label"),
        pytest.param("aicp.dev/uid", id="the-uid-label-events-are-routed-by"),
        pytest.param("app.kubernetes.io/managed-by", id="the-label-the-informer-selects-on"),
    ],
)
async def test_a_label_removed_by_hand_is_restored_without_suspending_the_job(
    stack: Stack, label: str
) -> None:
    await stack.setup_pool()
    running = await stack.start_running("labelled")
    job_name = running["status"]["job"]["name"]
    before = await stack.job(job_name)
    assert before is not None
    value = before["metadata"]["labels"][label]
    await stack.sim("POST", "/_sim/stats/reset")

    pointer = "/metadata/labels/" + label.replace("~", "~0").replace("/", "~1")
    await _patch_job(stack, job_name, [{"op": "remove", "path": pointer}])

    async def restored() -> dict[str, Any] | None:
        job = await stack.job(job_name)
        return job if job and job["metadata"]["labels"].get(label) == value else None

    job = await wait_until(restored, timeout=10, message="label restored")
    assert job["spec"]["suspend"] is False
    assert job["metadata"]["uid"] == running["status"]["job"]["uid"]
    # Restored with a metadata-only body under its own manager, never the full Job as `aicp`.
    managers = (await stack.sim("GET", "/_sim/stats"))["by_field_manager"]
    assert managers.get("aicp-metadata") == 1 and "aicp" not in managers

    async def drift_recorded() -> list[dict[str, Any]]:
        return [e for e in await stack.events("labelled") if e["type"] == "DriftCorrected"]

    drift = await wait_until(drift_recorded, timeout=10, message="DriftCorrected")
    assert len(drift) == 1 and label in drift[0]["message"]
    still = await stack.workload("labelled")
    assert still is not None and still["status"]["state"] == "RUNNING"


async def test_the_job_is_created_once_as_aicp_and_never_re_suspended(stack: Stack) -> None:
    await stack.setup_pool()
    await stack.sim("POST", "/_sim/stats/reset")

    await stack.submit("wire")
    await stack.wait_state("wire", "SUCCEEDED")

    async def finalizer_dropped() -> bool:
        job = await stack.job((await stack.workload("wire") or {})["status"]["job"]["name"])
        return job is not None and not job["metadata"].get("finalizers")

    await wait_until(finalizer_dropped, timeout=10, message="evidence finalizer removed")
    stats = await stack.sim("GET", "/_sim/stats")
    # One create for the Job's whole life — never an apply or a second body declaring
    # `suspend: true` over Kueue's `false` — and one JSON patch dropping the finalizer.
    assert stats["by_verb_path"][f"create {JOBS_PATH}"] == 1
    assert "application/apply-patch+yaml" not in stats["by_content_type"]
    assert stats["by_field_manager"]["aicp"] == 1
    assert "aicp-metadata" not in stats["by_field_manager"]  # no drift, no metadata apply
    assert stats["by_verb_path"][f"patch {JOB_PATH}"] == 1
    assert stats["by_content_type"]["application/json-patch+json"] == 1


async def _pool_events(stack: Stack) -> list[dict[str, Any]]:
    response = await stack.http.get(f"{POOLS}/{POOL}/events", params={"limit": 500})
    assert response.status_code == 200, response.text
    return list(reversed(response.json()["items"]))


async def _drift_events(stack: Stack) -> list[dict[str, Any]]:
    return [e for e in await _pool_events(stack) if e["type"] == "DriftCorrected"]


async def test_a_cluster_queue_deleted_by_hand_is_recreated(stack: Stack) -> None:
    await stack.setup_pool()
    assert not [e for e in await _pool_events(stack) if e["type"] == "DriftCorrected"]

    await stack.kube.custom.delete_cluster_custom_object(
        "kueue.x-k8s.io", "v1beta2", "clusterqueues", QUEUE, _preload_content=False
    )

    async def recreated() -> bool:
        return await stack.read(CLUSTER_QUEUES, None, QUEUE) is not None

    await wait_until(recreated, timeout=10, message="ClusterQueue recreated")
    drift = await wait_until(lambda: _drift_events(stack), timeout=10, message="DriftCorrected")
    assert len(drift) == 1 and f"ClusterQueue {QUEUE} is missing" in drift[0]["message"]
    await stack.wait_pool_state("READY")
    await stack.submit("after")
    await stack.wait_state("after", "SUCCEEDED")


async def test_a_flavor_deleted_by_hand_is_restored_and_the_pool_recovers(stack: Stack) -> None:
    await stack.setup_pool()

    await stack.kube.custom.delete_cluster_custom_object(
        "kueue.x-k8s.io", "v1beta2", "resourceflavors", CLASS, _preload_content=False
    )

    async def restored() -> bool:
        return await stack.read(RESOURCE_FLAVORS, None, CLASS) is not None

    await wait_until(restored, timeout=10, message="ResourceFlavor restored")
    await stack.wait_pool_state("READY")
    drift = await wait_until(lambda: _drift_events(stack), timeout=10, message="DriftCorrected")
    assert f"ResourceFlavor {CLASS} is missing" in drift[0]["message"]


async def test_a_namespace_deleted_by_hand_comes_back_with_its_queue_and_a_new_attempt(
    stack: Stack,
) -> None:
    await stack.setup_pool()
    running = await stack.start_running("inside")
    first_uid = running["status"]["job"]["uid"]
    namespace_uid = (await stack.read(NAMESPACES, None, NAMESPACE))["metadata"]["uid"]

    await stack.kube.core.delete_namespace(NAMESPACE, _preload_content=False)

    async def recreated() -> bool:
        namespace = await stack.read(NAMESPACES, None, NAMESPACE)
        return namespace is not None and namespace["metadata"]["uid"] != namespace_uid

    await wait_until(recreated, timeout=10, message="namespace re-created")
    await wait_until(
        lambda: stack.read(LOCAL_QUEUES, NAMESPACE, POOL), timeout=10, message="LocalQueue back"
    )
    drift = await wait_until(lambda: _drift_events(stack), timeout=10, message="DriftCorrected")
    assert f"LocalQueue {POOL} is missing" in drift[0]["message"]

    async def running_again() -> dict[str, Any] | None:
        found = await stack.workload("inside")
        status = found["status"] if found else {}
        again = status.get("state") == "RUNNING" and status["job"]["uid"] != first_uid
        return found if again else None

    again = await wait_until(running_again, timeout=20, message="a new attempt running")
    assert again["status"]["attempts"] == 2
    recreation = [e for e in await stack.events("inside") if e["type"] == "DriftCorrected"]
    assert len(recreation) == 1 and "attempt 2" in recreation[0]["message"]
    metrics = (await stack.http.get("/metrics")).text
    assert 'aicp_drift_corrections_total{kind="Namespace"}' in metrics  # process-wide count
    project = await stack.http.get(f"/api/v1/projects/{PROJECT}")
    assert project.json()["status"]["state"] == "READY"
