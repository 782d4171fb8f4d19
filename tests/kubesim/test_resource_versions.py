"""One global resourceVersion: every real write bumps it, no-op writes do not."""

from __future__ import annotations

from kubernetes_asyncio import client

from tests.kubesim.builders import KUEUE, V1BETA2, job, local_queue


async def test_every_write_of_any_kind_takes_the_next_resource_version(kube_api):
    batch, core = client.BatchV1Api(kube_api), client.CoreV1Api(kube_api)
    custom = client.CustomObjectsApi(kube_api)
    created = await batch.create_namespaced_job("default", job("a"))
    queue = await custom.create_namespaced_custom_object(
        KUEUE, V1BETA2, "default", "localqueues", local_queue("q")
    )
    ns = await core.create_namespace({"metadata": {"name": "team-a"}})
    rvs = [
        int(created.metadata.resource_version),
        int(queue["metadata"]["resourceVersion"]),
        int(ns.metadata.resource_version),
    ]
    assert rvs == [rvs[0], rvs[0] + 1, rvs[0] + 2]
    await batch.delete_namespaced_job("a", "default")
    jobs = await batch.list_namespaced_job("default")
    assert int(jobs.metadata.resource_version) == rvs[2] + 1, "a delete consumes a resourceVersion"


async def test_a_write_that_changes_nothing_keeps_the_resource_version(kube_api):
    batch = client.BatchV1Api(kube_api)
    created = await batch.create_namespaced_job("default", job("a", labels={"team": "x"}))
    same = await batch.patch_namespaced_job(
        "a",
        "default",
        {"metadata": {"labels": {"team": "x"}}},
        _content_type="application/merge-patch+json",
    )
    assert same.metadata.resource_version == created.metadata.resource_version
    replaced = await batch.replace_namespaced_job("a", "default", same)
    assert replaced.metadata.resource_version == created.metadata.resource_version
    listed = await batch.list_namespaced_job("default")
    assert listed.metadata.resource_version == created.metadata.resource_version


async def test_metadata_is_filled_in_on_create(kube_api):
    batch = client.BatchV1Api(kube_api)
    a = await batch.create_namespaced_job("default", job("a"))
    b = await batch.create_namespaced_job(
        "default", {**job("x"), "metadata": {"generateName": "train-"}}
    )
    assert a.metadata.uid != b.metadata.uid
    assert a.metadata.generation == 1
    assert a.metadata.creation_timestamp is not None
    assert b.metadata.name.startswith("train-") and len(b.metadata.name) == len("train-") + 5
