"""List shape, label and field selectors, limit/continue paging."""

from __future__ import annotations

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from tests.kubesim.builders import KUEUE, V1BETA2, job, local_queue, pod, raw


async def test_an_empty_list_has_items_and_the_current_resource_version(kube_cluster):
    status, body, _ = await raw("GET", f"{kube_cluster.url}/apis/batch/v1/namespaces/default/jobs")
    assert status == 200
    assert body["kind"] == "JobList" and body["apiVersion"] == "batch/v1"
    assert body["items"] == []
    assert body["metadata"]["resourceVersion"] == str(kube_cluster.store.resource_version)


async def test_built_in_list_items_carry_no_kind_but_custom_ones_do(kube_cluster, kube_api):
    await client.BatchV1Api(kube_api).create_namespaced_job("default", job("a"))
    await client.CustomObjectsApi(kube_api).create_namespaced_custom_object(
        KUEUE, V1BETA2, "default", "localqueues", local_queue("q")
    )
    _, jobs, _ = await raw("GET", f"{kube_cluster.url}/apis/batch/v1/jobs")
    _, queues, _ = await raw("GET", f"{kube_cluster.url}/apis/{KUEUE}/{V1BETA2}/localqueues")
    assert "kind" not in jobs["items"][0] and jobs["items"][0]["metadata"]["name"] == "a"
    assert queues["items"][0]["kind"] == "LocalQueue"


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        pytest.param("tier=gpu", ["a", "b"], id="equals"),
        pytest.param("tier==gpu", ["a", "b"], id="double-equals"),
        pytest.param("tier!=gpu", ["c", "d"], id="not-equals-includes-unlabelled"),
        pytest.param("tier in (gpu,cpu)", ["a", "b", "c"], id="in"),
        pytest.param("tier notin (gpu)", ["c", "d"], id="notin"),
        pytest.param("team", ["a", "c"], id="exists"),
        pytest.param("!team", ["b", "d"], id="not-exists"),
        pytest.param("tier=gpu,team=x", ["a"], id="comma-is-and"),
    ],
)
async def test_label_selectors_filter_lists(kube_api, selector, expected):
    core = client.CoreV1Api(kube_api)
    for name, labels in {
        "a": {"tier": "gpu", "team": "x"},
        "b": {"tier": "gpu"},
        "c": {"tier": "cpu", "team": "y"},
        "d": {},
    }.items():
        await core.create_namespaced_pod("default", pod(name, labels=labels))
    found = await core.list_namespaced_pod("default", label_selector=selector)
    assert [p.metadata.name for p in found.items] == expected


async def test_field_selectors_filter_by_name_namespace_and_pod_fields(kube_api, kube_cluster):
    core = client.CoreV1Api(kube_api)
    await core.create_namespace({"metadata": {"name": "other"}})
    await core.create_namespaced_pod("default", pod("a"))
    await core.create_namespaced_pod("other", pod("b"))
    by_name = await core.list_pod_for_all_namespaces(field_selector="metadata.name=b")
    by_ns = await core.list_pod_for_all_namespaces(field_selector="metadata.namespace!=other")
    pending = await core.list_pod_for_all_namespaces(field_selector="status.phase=Pending")
    unbound = await core.list_pod_for_all_namespaces(field_selector="spec.nodeName=")
    assert [p.metadata.name for p in by_name.items] == ["b"]
    assert [p.metadata.name for p in by_ns.items] == ["a"]
    assert len(pending.items) == 2 and len(unbound.items) == 2
    with pytest.raises(ApiException) as err:
        await core.list_pod_for_all_namespaces(field_selector="spec.schedulerName=x")
    assert err.value.status == 400


async def test_limit_and_continue_page_through_a_list(kube_api):
    core = client.CoreV1Api(kube_api)
    for i in range(5):
        await core.create_namespaced_pod("default", pod(f"p{i}"))
    first = await core.list_namespaced_pod("default", limit=2)
    assert [p.metadata.name for p in first.items] == ["p0", "p1"]
    assert first.metadata.remaining_item_count == 3
    second = await core.list_namespaced_pod("default", limit=2, _continue=first.metadata._continue)
    third = await core.list_namespaced_pod("default", limit=2, _continue=second.metadata._continue)
    assert [p.metadata.name for p in second.items] == ["p2", "p3"]
    assert [p.metadata.name for p in third.items] == ["p4"]
    assert third.metadata._continue is None
    assert first.metadata.resource_version == third.metadata.resource_version


async def test_an_expired_continue_token_is_410(kube_api, kube_cluster):
    core = client.CoreV1Api(kube_api)
    for i in range(3):
        await core.create_namespaced_pod("default", pod(f"p{i}"))
    first = await core.list_namespaced_pod("default", limit=1)
    await core.create_namespaced_pod("default", pod("later"))
    kube_cluster.store.hub.shrink(kube_cluster.store.resource_version)
    with pytest.raises(ApiException) as err:
        await core.list_namespaced_pod("default", limit=1, _continue=first.metadata._continue)
    assert err.value.status == 410


async def test_a_list_at_a_future_resource_version_times_out(kube_cluster, kube_api):
    future = str(kube_cluster.store.resource_version + 100)
    with pytest.raises(ApiException) as err:
        await client.CoreV1Api(kube_api).list_namespaced_pod("default", resource_version=future)
    assert err.value.status == 504 and "Too large resource version" in err.value.body
