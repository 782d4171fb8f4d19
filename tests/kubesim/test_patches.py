"""Merge, JSON and strategic-merge patches; status subresources; generation."""

from __future__ import annotations

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from tests.kubesim.builders import KUEUE, MERGE, V1BETA2, job, local_queue, patch_queue, pod

JSON_PATCH = "application/json-patch+json"


async def test_a_merge_patch_sets_and_deletes_keys(kube_api):
    custom = client.CustomObjectsApi(kube_api)
    queue = local_queue("q")
    queue["metadata"]["labels"] = {"a": "1", "b": "2"}
    await custom.create_namespaced_custom_object(KUEUE, V1BETA2, "default", "localqueues", queue)
    result = await patch_queue(custom, {"metadata": {"labels": {"a": None, "c": "3"}}})
    assert result["metadata"]["labels"] == {"b": "2", "c": "3"}


async def test_a_json_patch_applies_operations_and_test_is_a_precondition(kube_api):
    core = client.CoreV1Api(kube_api)
    await core.create_namespaced_pod("default", pod("p", labels={"a": "1"}))
    patched = await core.patch_namespaced_pod(
        "p",
        "default",
        [
            {"op": "test", "path": "/metadata/labels/a", "value": "1"},
            {"op": "add", "path": "/metadata/labels/b", "value": "2"},
            {"op": "remove", "path": "/metadata/labels/a"},
        ],
    )
    assert patched.metadata.labels == {"b": "2"}
    with pytest.raises(ApiException) as err:
        await core.patch_namespaced_pod(
            "p", "default", [{"op": "test", "path": "/metadata/labels/b", "value": "9"}]
        )
    assert err.value.status == 422


async def test_a_strategic_merge_patch_merges_containers_by_name(kube_api):
    core = client.CoreV1Api(kube_api)
    body = pod("p")
    body["spec"]["containers"].append({"name": "side", "image": "busybox"})
    await core.create_namespaced_pod("default", body)
    patched = await core.patch_namespaced_pod(
        "p",
        "default",
        {"spec": {"containers": [{"name": "side", "image": "alpine"}]}},
        _content_type="application/strategic-merge-patch+json",
    )
    assert [(c.name, c.image) for c in patched.spec.containers] == [
        ("main", "busybox"),
        ("side", "alpine"),
    ]


async def test_generation_follows_spec_changes_only(kube_api):
    batch = client.BatchV1Api(kube_api)
    await batch.create_namespaced_job("default", job("a", suspend=True))
    labelled = await batch.patch_namespaced_job(
        "a", "default", {"metadata": {"labels": {"x": "1"}}}, _content_type=MERGE
    )
    status = await batch.patch_namespaced_job_status(
        "a", "default", {"status": {"active": 1}}, _content_type=MERGE
    )
    resumed = await batch.patch_namespaced_job(
        "a", "default", {"spec": {"suspend": False}}, _content_type=MERGE
    )
    assert (labelled.metadata.generation, status.metadata.generation) == (1, 1)
    assert resumed.metadata.generation == 2


async def test_status_writes_touch_only_status_and_main_writes_ignore_status(kube_api):
    batch = client.BatchV1Api(kube_api)
    await batch.create_namespaced_job("default", job("a", suspend=True))
    via_status = await batch.patch_namespaced_job_status(
        "a", "default", {"spec": {"parallelism": 5}, "status": {"active": 2}}, _content_type=MERGE
    )
    via_main = await batch.patch_namespaced_job(
        "a",
        "default",
        {"status": {"active": 9}, "metadata": {"labels": {"x": "1"}}},
        _content_type=MERGE,
    )
    assert via_status.spec.parallelism == 1 and via_status.status.active == 2
    assert via_main.status.active == 2 and via_main.metadata.labels == {"x": "1"}


async def test_a_resource_without_status_subresource_has_no_status_path(kube_api):
    custom = client.CustomObjectsApi(kube_api)
    with pytest.raises(ApiException) as err:
        await custom.get_cluster_custom_object_status(KUEUE, V1BETA2, "resourceflavors", "x")
    assert err.value.status == 404


async def test_custom_resources_get_their_crd_defaults(kube_api):
    custom = client.CustomObjectsApi(kube_api)
    body = {
        "apiVersion": f"{KUEUE}/{V1BETA2}",
        "kind": "ClusterQueue",
        "metadata": {"name": "cq"},
        "spec": {"namespaceSelector": {}},
    }
    created = await custom.create_cluster_custom_object(KUEUE, V1BETA2, "clusterqueues", body)
    assert created["spec"]["queueingStrategy"] == "BestEffortFIFO"
    assert created["spec"]["preemption"] == {
        "borrowWithinCohort": {"policy": "Never"},
        "reclaimWithinCohort": "Never",
        "withinClusterQueue": "Never",
    }
    assert created["spec"]["stopPolicy"] == "None"
