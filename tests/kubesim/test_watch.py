"""Watch through kubernetes_asyncio's `watch.Watch`: initial ADDED, exact replay, 410, bookmarks,
timeouts, selector transitions, DELETED with the delete's resourceVersion."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio import client, watch
from kubernetes_asyncio.client.exceptions import ApiException

from tests.kubesim.builders import KUEUE, V1BETA2, job, local_queue, pod, watch_lines


async def take(stream: Any, n: int, timeout: float = 5.0) -> list[dict[str, Any]]:
    """The next `n` events of a watch stream."""
    events = []

    async def collect() -> None:
        async for event in stream:
            events.append(event)
            if len(events) == n:
                return

    await asyncio.wait_for(collect(), timeout)
    return events


def summary(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(e["type"], e["raw_object"]["metadata"].get("name", "")) for e in events]


async def test_a_watch_without_resource_version_starts_with_every_object_as_added(kube_api):
    batch = client.BatchV1Api(kube_api)
    await batch.create_namespaced_job("default", job("a"))
    await batch.create_namespaced_job("default", job("b"))
    async with watch.Watch() as w:
        stream = w.stream(batch.list_namespaced_job, "default", timeout_seconds=30)
        first = await take(stream, 2)
        await batch.delete_namespaced_job("a", "default")
        later = await take(stream, 1)
    assert summary(first) == [("ADDED", "a"), ("ADDED", "b")]
    assert first[0]["object"].metadata.name == "a", "typed APIs deserialise events to models"
    assert summary(later) == [("DELETED", "a")]


async def test_a_watch_from_a_resource_version_replays_exactly_what_came_after(kube_api):
    batch = client.BatchV1Api(kube_api)
    a = await batch.create_namespaced_job("default", job("a"))
    await batch.patch_namespaced_job("a", "default", {"metadata": {"labels": {"x": "1"}}})
    await batch.create_namespaced_job("default", job("b"))
    await batch.delete_namespaced_job("a", "default")
    async with watch.Watch() as w:
        stream = w.stream(
            batch.list_namespaced_job,
            "default",
            resource_version=a.metadata.resource_version,
            timeout_seconds=30,
        )
        events = await take(stream, 3)
    assert summary(events) == [("MODIFIED", "a"), ("ADDED", "b"), ("DELETED", "a")]
    rvs = [int(e["raw_object"]["metadata"]["resourceVersion"]) for e in events]
    assert rvs == sorted(rvs) and rvs[0] == int(a.metadata.resource_version) + 1


async def test_a_deleted_event_carries_the_last_state_with_the_deletes_resource_version(kube_api):
    batch = client.BatchV1Api(kube_api)
    a = await batch.create_namespaced_job("default", job("a", labels={"keep": "me"}))
    async with watch.Watch() as w:
        stream = w.stream(
            batch.list_namespaced_job,
            "default",
            resource_version=a.metadata.resource_version,
            timeout_seconds=30,
        )
        await batch.delete_namespaced_job("a", "default")
        (deleted,) = await take(stream, 1)
        after = await batch.list_namespaced_job("default")
    assert deleted["type"] == "DELETED"
    assert deleted["raw_object"]["metadata"]["labels"] == {"keep": "me"}
    assert deleted["raw_object"]["metadata"]["resourceVersion"] == after.metadata.resource_version


async def test_a_watch_from_a_resource_version_older_than_the_history_fails_with_410(
    kube_api, kube_cluster
):
    batch = client.BatchV1Api(kube_api)
    a = await batch.create_namespaced_job("default", job("a"))
    await batch.create_namespaced_job("default", job("b"))
    kube_cluster.store.hub.shrink(kube_cluster.store.resource_version)
    lines = await watch_lines(
        f"{kube_cluster.url}/apis/batch/v1/namespaces/default/jobs?watch=true"
        f"&resourceVersion={a.metadata.resource_version}&timeoutSeconds=5"
    )
    assert len(lines) == 1, "the ERROR event is the last thing in the stream"
    assert lines[0]["type"] == "ERROR"
    assert lines[0]["object"]["code"] == 410 and lines[0]["object"]["reason"] == "Expired"
    async with watch.Watch() as w:
        stream = w.stream(
            batch.list_namespaced_job,
            "default",
            resource_version=a.metadata.resource_version,
            timeout_seconds=5,
        )
        with pytest.raises(ApiException) as err:
            await take(stream, 1)
    assert err.value.status == 410


async def test_bookmarks_reach_the_caller_with_the_current_resource_version(kube_api, kube_cluster):
    custom = client.CustomObjectsApi(kube_api)
    await custom.create_namespaced_custom_object(
        KUEUE, V1BETA2, "default", "localqueues", local_queue("q")
    )
    async with watch.Watch() as w:
        stream = w.stream(
            custom.list_namespaced_custom_object,
            KUEUE,
            V1BETA2,
            "default",
            "localqueues",
            allow_watch_bookmarks=True,
            timeout_seconds=30,
        )
        added, bookmark = await take(stream, 2)
    assert added["type"] == "ADDED"
    assert bookmark["type"] == "BOOKMARK"
    assert bookmark["raw_object"]["kind"] == "LocalQueue"
    assert bookmark["raw_object"]["metadata"]["resourceVersion"] == str(
        kube_cluster.store.resource_version
    )


async def test_timeout_seconds_ends_the_stream_cleanly(kube_cluster):
    lines = await watch_lines(
        f"{kube_cluster.url}/api/v1/namespaces/default/pods?watch=1&timeoutSeconds=1"
    )
    assert lines == []


async def test_objects_entering_and_leaving_a_selector_are_added_and_deleted(kube_api):
    core = client.CoreV1Api(kube_api)
    created = await core.create_namespaced_pod("default", pod("a", labels={"tier": "cpu"}))
    async with watch.Watch() as w:
        stream = w.stream(
            core.list_namespaced_pod,
            "default",
            label_selector="tier=gpu",
            resource_version=created.metadata.resource_version,
            timeout_seconds=30,
        )
        await core.patch_namespaced_pod("a", "default", {"metadata": {"labels": {"tier": "gpu"}}})
        await core.patch_namespaced_pod("a", "default", {"metadata": {"labels": {"x": "1"}}})
        await core.patch_namespaced_pod("a", "default", {"metadata": {"labels": {"tier": "cpu"}}})
        events = await take(stream, 3)
    assert summary(events) == [("ADDED", "a"), ("MODIFIED", "a"), ("DELETED", "a")]
    assert events[2]["raw_object"]["metadata"]["labels"]["tier"] == "cpu"


async def test_query_booleans_in_any_spelling_start_a_watch(kube_cluster):
    for spelling in ("true", "1", "True"):
        lines = await watch_lines(
            f"{kube_cluster.url}/api/v1/namespaces?watch={spelling}&timeoutSeconds=0.1"
        )
        assert {line["object"]["metadata"]["name"] for line in lines} >= {"default"}


async def test_the_in_process_watch_sees_the_same_events(kube_cluster, kube_api):
    store = kube_cluster.store
    jobs = store.resource("batch", "jobs")
    stream = store.watch(jobs, "default")
    batch = client.BatchV1Api(kube_api)
    await batch.create_namespaced_job("default", job("a"))
    first = await asyncio.wait_for(anext(stream), 2)
    await stream.aclose()
    assert (first.type, first.object["metadata"]["name"]) == ("ADDED", "a")


@pytest.mark.parametrize("kube_cluster_options", [{"watch_queue_size": 3}])
async def test_a_watcher_that_falls_too_far_behind_is_cut_off_with_410(kube_cluster):
    store = kube_cluster.store
    pods = store.resource("", "pods")
    url = (
        f"{kube_cluster.url}/api/v1/namespaces/default/pods?watch=1"
        f"&resourceVersion={store.resource_version}&timeoutSeconds=10"
    )
    async with aiohttp.ClientSession() as session, session.get(url) as resp:
        # The watcher is registered before the headers are sent; these writes all land in its
        # queue before the stream gets a chance to run, overflowing it.
        for i in range(10):
            store.create(pods, pod(f"p{i}"), manager="test")
        lines = [json.loads(line) async for line in resp.content if line.strip()]
    assert [line["type"] for line in lines] == ["ERROR"]
    assert lines[0]["object"]["code"] == 410


async def test_send_initial_events_ends_the_initial_state_with_an_annotated_bookmark(
    kube_cluster, kube_api
):
    await client.CoreV1Api(kube_api).create_namespaced_pod("default", pod("a"))
    lines = await watch_lines(
        f"{kube_cluster.url}/api/v1/namespaces/default/pods?watch=1&sendInitialEvents=true"
        "&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=0.1"
    )
    assert [line["type"] for line in lines[:2]] == ["ADDED", "BOOKMARK"]
    assert lines[1]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


async def test_pod_logs_come_from_what_the_kubelet_recorded(kube_cluster, kube_api):
    core = client.CoreV1Api(kube_api)
    await core.create_namespaced_pod("default", pod("a"))
    kube_cluster.store.set_pod_log("default", "a", "epoch 1\nepoch 2\n")
    assert await core.read_namespaced_pod_log("a", "default") == "epoch 1\nepoch 2\n"
    assert await core.read_namespaced_pod_log("a", "default", tail_lines=1) == "epoch 2\n"
    assert await core.read_namespaced_pod_log("a", "default", limit_bytes=5) == "epoch"
