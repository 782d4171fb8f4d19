"""Finalizers, deletionTimestamp, propagation policies and ownerReference garbage collection."""

from __future__ import annotations

import pytest
from kubernetes_asyncio import client, watch
from kubernetes_asyncio.client.exceptions import ApiException

from tests.kubesim.builders import job, pod, raw
from tests.kubesim.test_watch import summary, take
from tests.support.waiting import wait_until

MERGE = "application/merge-patch+json"


async def pods_of(core: client.CoreV1Api) -> dict[str, list[str]]:
    pods = (await core.list_namespaced_pod("default")).items
    return {p.metadata.name: [r.name for r in p.metadata.owner_references or []] for p in pods}


async def test_a_delete_with_finalizers_marks_then_removes_when_they_are_gone(kube_api):
    core = client.CoreV1Api(kube_api)
    body = pod("p")
    body["metadata"]["finalizers"] = ["example.com/hold"]
    created = await core.create_namespaced_pod("default", body)
    async with watch.Watch() as w:
        stream = w.stream(
            core.list_namespaced_pod,
            "default",
            resource_version=created.metadata.resource_version,
            timeout_seconds=30,
        )
        marked = await core.delete_namespaced_pod("p", "default")
        still = await core.read_namespaced_pod("p", "default")
        await core.patch_namespaced_pod(
            "p", "default", {"metadata": {"finalizers": None}}, _content_type=MERGE
        )
        events = await take(stream, 2)
    assert marked.metadata.deletion_timestamp is not None
    assert still.metadata.deletion_timestamp is not None
    assert summary(events) == [("MODIFIED", "p"), ("DELETED", "p")]
    with pytest.raises(ApiException) as gone:
        await core.read_namespaced_pod("p", "default")
    assert gone.value.status == 404


async def test_no_new_finalizer_may_be_added_to_a_deleting_object(kube_api):
    core = client.CoreV1Api(kube_api)
    body = pod("p")
    body["metadata"]["finalizers"] = ["example.com/hold"]
    await core.create_namespaced_pod("default", body)
    await core.delete_namespaced_pod("p", "default")
    with pytest.raises(ApiException) as err:
        await core.patch_namespaced_pod(
            "p",
            "default",
            {"metadata": {"finalizers": ["example.com/hold", "example.com/more"]}},
            _content_type=MERGE,
        )
    assert err.value.status == 422 and "no new finalizers" in err.value.body


async def test_an_immediate_delete_answers_a_success_status(kube_cluster, kube_api):
    await client.CoreV1Api(kube_api).create_namespaced_pod("default", pod("p"))
    status, body, _ = await raw("DELETE", f"{kube_cluster.url}/api/v1/namespaces/default/pods/p")
    assert status == 200 and body["kind"] == "Status" and body["status"] == "Success"
    assert body["details"]["name"] == "p"


async def make_job_with_pods(kube_api, *, block: bool = True):
    batch, core = client.BatchV1Api(kube_api), client.CoreV1Api(kube_api)
    owner = (await batch.create_namespaced_job("default", job("a"))).to_dict()
    owner_ref = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "a", "uid": owner["metadata"]["uid"]},
    }
    for name in ("a-1", "a-2"):
        await core.create_namespaced_pod("default", pod(name, owner=owner_ref, block=block))
    return batch, core


async def test_deleting_a_job_without_a_policy_orphans_its_pods(kube_cluster, kube_api):
    await make_job_with_pods(kube_api)
    status, _, headers = await raw(
        "DELETE", f"{kube_cluster.url}/apis/batch/v1/namespaces/default/jobs/a"
    )
    assert status == 200
    assert "child pods are preserved" in headers.get("Warning", "")
    assert await pods_of(client.CoreV1Api(kube_api)) == {"a-1": [], "a-2": []}


async def test_background_deletion_removes_the_job_then_its_pods(kube_api):
    batch, core = await make_job_with_pods(kube_api)
    await batch.delete_namespaced_job("a", "default", propagation_policy="Background")
    assert await pods_of(core) == {}


async def test_orphan_deletion_keeps_pods_without_the_owner_reference(kube_api):
    batch, core = await make_job_with_pods(kube_api)
    await batch.delete_namespaced_job("a", "default", propagation_policy="Orphan")
    assert await pods_of(core) == {"a-1": [], "a-2": []}


async def test_foreground_deletion_waits_for_blocking_dependents(kube_api):
    batch, core = await make_job_with_pods(kube_api)
    await core.patch_namespaced_pod(
        "a-1", "default", {"metadata": {"finalizers": ["example.com/hold"]}}, _content_type=MERGE
    )
    await batch.delete_namespaced_job("a", "default", propagation_policy="Foreground")
    deleting = await batch.read_namespaced_job("a", "default")
    assert deleting.metadata.deletion_timestamp is not None
    assert "foregroundDeletion" in deleting.metadata.finalizers
    assert list(await pods_of(core)) == ["a-1"], "the pod without finalizers went first"
    await core.patch_namespaced_pod(
        "a-1", "default", {"metadata": {"finalizers": None}}, _content_type=MERGE
    )

    async def job_gone() -> bool:
        try:
            await batch.read_namespaced_job("a", "default")
        except ApiException as err:
            return err.status == 404
        return False

    await wait_until(job_gone, timeout=2, message="the job to go once its pods are gone")
    assert await pods_of(core) == {}


async def test_deleting_a_namespace_deletes_what_is_in_it(kube_api):
    core = client.CoreV1Api(kube_api)
    await core.create_namespace({"metadata": {"name": "team-a"}})
    await core.create_namespaced_pod("team-a", pod("p"))
    await core.delete_namespace("team-a")
    assert (await core.list_pod_for_all_namespaces()).items == []
