"""Every failure is a one-line JSON Status: unknown paths, 404, 409, 422, 415."""

from __future__ import annotations

import json

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from tests.kubesim.builders import KUEUE, V1BETA2, job, local_queue, patch_queue, raw


def status_of(err: ApiException) -> dict:
    assert "\n" not in err.body.strip(), "a Status is one line"
    return json.loads(err.body)


@pytest.mark.parametrize(
    "path",
    [
        pytest.param("/nope", id="unknown-root"),
        pytest.param("/apis/batch/v9/jobs", id="unknown-version"),
        pytest.param("/apis/storage.k8s.io/v1/storageclasses", id="unserved-group"),
        pytest.param("/api/v1/namespaces/default/pods/a/exec", id="unknown-subresource"),
    ],
)
async def test_unknown_paths_answer_a_not_found_status(kube_cluster, path):
    status, body, headers = await raw("GET", kube_cluster.url + path)
    assert status == 404
    assert headers["Content-Type"].startswith("application/json")
    assert body["kind"] == "Status" and body["reason"] == "NotFound" and body["code"] == 404
    assert body["message"] == "the server could not find the requested resource"


async def test_a_missing_object_is_a_not_found_status_naming_it(kube_api):
    with pytest.raises(ApiException) as err:
        await client.BatchV1Api(kube_api).read_namespaced_job("ghost", "default")
    body = status_of(err.value)
    assert err.value.status == 404
    assert body["message"] == 'jobs.batch "ghost" not found'
    assert body["details"] == {"name": "ghost", "group": "batch", "kind": "jobs"}


async def test_creating_an_existing_name_is_already_exists(kube_api):
    batch = client.BatchV1Api(kube_api)
    await batch.create_namespaced_job("default", job("a"))
    with pytest.raises(ApiException) as err:
        await batch.create_namespaced_job("default", job("a"))
    assert err.value.status == 409 and status_of(err.value)["reason"] == "AlreadyExists"


async def test_creating_in_a_missing_namespace_is_not_found(kube_api):
    with pytest.raises(ApiException) as err:
        await client.BatchV1Api(kube_api).create_namespaced_job("nowhere", job("a"))
    assert err.value.status == 404
    assert status_of(err.value)["message"] == 'namespaces "nowhere" not found'


async def test_a_put_with_a_stale_resource_version_is_a_conflict(kube_api):
    batch = client.BatchV1Api(kube_api)
    stale = await batch.create_namespaced_job("default", job("a"))
    await batch.patch_namespaced_job("a", "default", {"metadata": {"labels": {"x": "1"}}})
    stale.metadata.labels = {"x": "2"}
    with pytest.raises(ApiException) as err:
        await batch.replace_namespaced_job("a", "default", stale)
    body = status_of(err.value)
    assert err.value.status == 409 and body["reason"] == "Conflict"
    assert "the object has been modified" in body["message"]


async def test_a_patch_carrying_a_stale_resource_version_is_a_conflict(kube_api):
    custom = client.CustomObjectsApi(kube_api)
    created = await custom.create_namespaced_custom_object(
        KUEUE, V1BETA2, "default", "localqueues", local_queue("q")
    )
    old_rv = created["metadata"]["resourceVersion"]
    await patch_queue(custom, {"metadata": {"labels": {"a": "1"}}})
    with pytest.raises(ApiException) as err:
        await patch_queue(custom, {"metadata": {"resourceVersion": old_rv, "labels": {"a": "2"}}})
    assert err.value.status == 409


async def test_a_custom_resource_put_without_resource_version_is_invalid(kube_api):
    custom = client.CustomObjectsApi(kube_api)
    await custom.create_namespaced_custom_object(
        KUEUE, V1BETA2, "default", "localqueues", local_queue("q")
    )
    with pytest.raises(ApiException) as err:
        await custom.replace_namespaced_custom_object(
            KUEUE, V1BETA2, "default", "localqueues", "q", local_queue("q", "other-cq")
        )
    assert err.value.status == 422
    assert "must be specified for an update" in status_of(err.value)["message"]


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        pytest.param(lambda j: j["spec"].update(bogus=1), "spec.bogus", id="unknown-field"),
        pytest.param(
            lambda j: j["spec"].update(parallelism="two"), "spec.parallelism", id="wrong-type"
        ),
        pytest.param(
            lambda j: j["spec"]["template"]["spec"].update(restartPolicy="Always"),
            "spec.template.spec.restartPolicy",
            id="job-restart-always",
        ),
        pytest.param(
            lambda j: j["metadata"].update(name="Bad_Name"), "metadata.name", id="bad-name"
        ),
    ],
)
async def test_invalid_built_in_objects_are_422_with_causes(kube_api, mutate, field):
    body = job("a")
    mutate(body)
    with pytest.raises(ApiException) as err:
        await client.BatchV1Api(kube_api).create_namespaced_job("default", body)
    status = status_of(err.value)
    assert err.value.status == 422 and status["reason"] == "Invalid"
    assert field in [c["field"] for c in status["details"]["causes"]]


async def test_invalid_kueue_objects_are_422_too(kube_api):
    body = local_queue("q")
    body["spec"]["clusterQueueName"] = "typo"
    with pytest.raises(ApiException) as err:
        await client.CustomObjectsApi(kube_api).create_namespaced_custom_object(
            KUEUE, V1BETA2, "default", "localqueues", body
        )
    assert err.value.status == 422
    assert status_of(err.value)["details"]["causes"][0]["field"] == "spec.clusterQueueName"


async def test_strategic_merge_on_a_custom_resource_is_415(kube_api):
    custom = client.CustomObjectsApi(kube_api)
    await custom.create_namespaced_custom_object(
        KUEUE, V1BETA2, "default", "localqueues", local_queue("q")
    )
    with pytest.raises(ApiException) as err:
        await patch_queue(
            custom, {"metadata": {"labels": {"a": "1"}}}, "application/strategic-merge-patch+json"
        )
    assert err.value.status == 415
    assert status_of(err.value)["reason"] == "UnsupportedMediaType"


async def test_creating_through_the_all_namespaces_path_is_not_allowed(kube_cluster):
    status, body, _ = await raw(
        "POST", f"{kube_cluster.url}/apis/batch/v1/jobs", json_body=job("a")
    )
    assert status == 405 and body["reason"] == "MethodNotAllowed"
