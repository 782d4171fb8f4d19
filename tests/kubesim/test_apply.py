"""Server-side apply with field ownership: create, conflicts, force, removal of dropped fields."""

from __future__ import annotations

import json

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from tests.kubesim.builders import APPLY, KUEUE, MERGE, V1BETA2, job, local_queue, patch_queue, raw


async def apply_job(batch: client.BatchV1Api, body: dict, manager: str, force: bool = False):
    return await batch.patch_namespaced_job(
        body["metadata"]["name"],
        "default",
        body,
        field_manager=manager,
        force=force,
        _content_type=APPLY,
    )


async def test_apply_creates_a_missing_object(kube_api, kube_cluster):
    batch = client.BatchV1Api(kube_api)
    created = await apply_job(batch, job("a", suspend=True), "aicp")
    assert created.metadata.generation == 1 and created.spec.suspend is True
    assert (await batch.read_namespaced_job("a", "default")).metadata.uid == created.metadata.uid


async def test_applying_a_field_another_manager_changed_is_a_field_manager_conflict(kube_api):
    batch = client.BatchV1Api(kube_api)
    await apply_job(batch, job("a", suspend=True), "aicp")
    await batch.patch_namespaced_job(
        "a", "default", {"spec": {"suspend": False}}, field_manager="kueue", _content_type=MERGE
    )
    with pytest.raises(ApiException) as err:
        await apply_job(batch, job("a", suspend=True), "aicp")
    status = json.loads(err.value.body)
    assert err.value.status == 409 and status["reason"] == "Conflict"
    assert status["details"]["causes"] == [
        {
            "reason": "FieldManagerConflict",
            "message": 'conflict with "kueue" using batch/v1',
            "field": ".spec.suspend",
        }
    ]
    assert status["message"].startswith("Apply failed with 1 conflict")
    assert (await batch.read_namespaced_job("a", "default")).spec.suspend is False


async def test_a_forced_apply_takes_the_field_over(kube_api):
    batch = client.BatchV1Api(kube_api)
    await apply_job(batch, job("a", suspend=True), "aicp")
    await batch.patch_namespaced_job(
        "a", "default", {"spec": {"suspend": False}}, field_manager="kueue", _content_type=MERGE
    )
    forced = await apply_job(batch, job("a", suspend=True), "aicp", force=True)
    assert forced.spec.suspend is True
    # aicp owns it again: re-applying the same value is no conflict and no write.
    again = await apply_job(batch, job("a", suspend=True), "aicp")
    assert again.metadata.resource_version == forced.metadata.resource_version


async def test_applying_the_value_another_manager_set_shares_the_field(kube_api):
    batch = client.BatchV1Api(kube_api)
    await apply_job(batch, job("a", labels={"team": "x"}), "aicp")
    same = await apply_job(batch, job("a", labels={"team": "x"}), "other")
    assert same.metadata.labels == {"team": "x"}


async def test_fields_a_manager_stops_applying_are_removed(kube_api):
    custom = client.CustomObjectsApi(kube_api)
    first = local_queue("q")
    first["metadata"]["labels"] = {"team": "x", "tier": "gpu"}
    await patch_queue(custom, first, APPLY, field_manager="aicp")
    await patch_queue(
        custom, {"metadata": {"labels": {"owner": "ops"}}}, MERGE, field_manager="ops"
    )
    second = local_queue("q")
    second["metadata"]["labels"] = {"team": "x"}
    result = await patch_queue(custom, second, APPLY, field_manager="aicp")
    assert result["metadata"]["labels"] == {"team": "x", "owner": "ops"}, (
        "the dropped label goes; another manager's label stays"
    )


async def test_apply_needs_a_field_manager_and_force_needs_apply(kube_cluster, kube_api):
    batch = client.BatchV1Api(kube_api)
    await batch.create_namespaced_job("default", job("a"))
    with pytest.raises(ApiException) as missing:
        await batch.patch_namespaced_job("a", "default", job("a"), _content_type=APPLY)
    with pytest.raises(ApiException) as forced:
        await batch.patch_namespaced_job(
            "a", "default", {"metadata": {"labels": {"a": "b"}}}, force=True, _content_type=MERGE
        )
    assert missing.value.status == 422 and "fieldManager" in missing.value.body
    assert forced.value.status == 422 and "force" in forced.value.body


async def test_apply_on_the_status_subresource_writes_only_status(kube_api):
    custom = client.CustomObjectsApi(kube_api)
    await custom.create_namespaced_custom_object(
        KUEUE, V1BETA2, "default", "localqueues", local_queue("q")
    )
    body = {
        "apiVersion": f"{KUEUE}/{V1BETA2}",
        "kind": "LocalQueue",
        "metadata": {"name": "q"},
        "spec": {"clusterQueue": "ignored"},
        "status": {"pendingWorkloads": 3},
    }
    result = await custom.patch_namespaced_custom_object_status(
        KUEUE,
        V1BETA2,
        "default",
        "localqueues",
        "q",
        body,
        field_manager="kueue",
        force=True,
        _content_type=APPLY,
    )
    assert result["status"]["pendingWorkloads"] == 3
    assert result["spec"]["clusterQueue"] == "gpu-cq"
    assert result["metadata"]["generation"] == 1


async def test_an_apply_body_may_be_yaml(kube_cluster):
    body = b"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: from-yaml\n  labels: {team: x}\n"
    status, created, _ = await raw(
        "PATCH",
        f"{kube_cluster.url}/api/v1/namespaces/from-yaml?fieldManager=kubectl",
        data=body,
        headers={"Content-Type": "application/apply-patch+yaml"},
    )
    assert status == 201 and created["metadata"]["labels"] == {"team": "x"}


async def test_re_applying_a_job_that_kueue_resumed_keeps_kueues_placement(kube_cluster, kube_api):
    batch = client.BatchV1Api(kube_api)
    manifest = job("train", labels={"team": "x"})  # suspend left to the webhook / Kueue
    await apply_job(batch, manifest, "aicp")
    store = kube_cluster.store
    store.patch(
        store.resource("batch", "jobs"),
        "default",
        "train",
        {"spec": {"suspend": True}},
        content_type=MERGE,
        manager="kueue",
    )
    store.patch(
        store.resource("batch", "jobs"),
        "default",
        "train",
        {"spec": {"suspend": False, "template": {"spec": {"nodeSelector": {"gpu": "h100"}}}}},
        content_type=MERGE,
        manager="kueue",
    )
    again = await apply_job(batch, manifest, "aicp")
    assert again.spec.suspend is False
    assert again.spec.template.spec.node_selector == {"gpu": "h100"}
    with pytest.raises(ApiException) as err:
        await apply_job(batch, job("train", suspend=True, labels={"team": "x"}), "aicp")
    assert [c["field"] for c in json.loads(err.value.body)["details"]["causes"]] == [
        ".spec.suspend"
    ]
