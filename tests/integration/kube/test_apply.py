"""Writes against kubesim over HTTP: server-side apply on the wire, deletes, finalizers, logs."""

from __future__ import annotations

import pytest

from app.kube.apply import LogRead, apply, delete, delete_job, get, pod_logs, remove_finalizer
from app.kube.client import KubeClient
from app.kube.errors import Invalid, NotFound, TooManyRequests, Unavailable
from app.kube.resources import CLUSTER_QUEUES, JOBS, NAMESPACES, PODS, RESOURCE_FLAVORS
from tests.integration.kube.conftest import SimControl, job_manifest, list_names
from tests.integration.kube.manifests import (
    cluster_queue_manifest,
    flavor_manifest,
    local_queue_manifest,
    namespace_manifest,
    priority_class_manifest,
)
from tests.support.waiting import wait_until

EVIDENCE = "aicp.dev/evidence"


async def test_every_kind_is_written_by_server_side_apply_as_aicp(
    kube: KubeClient, sim: SimControl
) -> None:
    await sim.reset_stats()
    await apply(kube, namespace_manifest("aicp-ssa"))
    await apply(kube, job_manifest("train", "aicp-ssa"))
    await apply(kube, flavor_manifest("h100"))
    await apply(kube, cluster_queue_manifest("aicp-ssa-gpu", "h100"))
    await apply(kube, local_queue_manifest("gpu", "aicp-ssa", "aicp-ssa-gpu"))
    await apply(kube, priority_class_manifest("aicp-high", 1000))

    stats = await sim.stats()
    assert stats["by_verb"] == {"patch": 6}
    assert stats["by_content_type"].get("application/apply-patch+yaml") == 6
    assert stats["by_field_manager"] == {"aicp": 6}
    assert sorted(k for k in stats["by_verb_path"] if k.startswith("patch ")) == [
        "patch /api/v1/namespaces/{name}",
        "patch /apis/batch/v1/namespaces/{namespace}/jobs/{name}",
        "patch /apis/kueue.x-k8s.io/v1beta2/clusterqueues/{name}",
        "patch /apis/kueue.x-k8s.io/v1beta2/namespaces/{namespace}/localqueues/{name}",
        "patch /apis/kueue.x-k8s.io/v1beta2/resourceflavors/{name}",
        "patch /apis/kueue.x-k8s.io/v1beta2/workloadpriorityclasses/{name}",
    ]


async def test_a_second_apply_that_declares_fewer_fields_removes_them(kube: KubeClient) -> None:
    first = namespace_manifest("aicp-shrink", labels={"keep": "1", "drop": "1"})
    await apply(kube, first)
    stored = await apply(kube, namespace_manifest("aicp-shrink", labels={"keep": "1"}))

    labels = stored["metadata"]["labels"]
    assert labels["keep"] == "1"
    assert "drop" not in labels


async def test_apply_returns_what_the_server_stored_and_get_reads_it_back(
    kube: KubeClient,
) -> None:
    stored = await apply(kube, flavor_manifest("a100"))
    read = await get(kube, RESOURCE_FLAVORS, None, "a100")
    assert read is not None
    assert read["metadata"]["uid"] == stored["metadata"]["uid"]
    assert read["spec"]["nodeLabels"] == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    assert await get(kube, CLUSTER_QUEUES, None, "never-created") is None


async def test_an_invalid_manifest_is_refused_with_the_servers_reason(kube: KubeClient) -> None:
    bad = job_manifest("bad", "aicp-ssa")
    bad["spec"]["template"]["spec"]["containers"][0]["notAField"] = True
    await apply(kube, namespace_manifest("aicp-ssa"))
    with pytest.raises(Invalid) as refused:
        await apply(kube, bad)
    assert "notAField" in str(refused.value)


async def test_deleting_a_job_in_the_background_removes_its_pods(
    kube_with_controllers: KubeClient,
) -> None:
    kube = kube_with_controllers
    await apply(kube, namespace_manifest("aicp-del"))
    await apply(kube, job_manifest("sleepy", "aicp-del", run_seconds=600, suspend=False))
    await wait_until(
        lambda: list_names(kube, PODS, "aicp-del"), timeout=10, message="the job's pod"
    )

    assert await delete_job(kube, "aicp-del", "sleepy")

    async def no_pods() -> bool:
        return not await list_names(kube, PODS, "aicp-del")

    await wait_until(no_pods, timeout=10, message="no pods left")
    assert await get(kube, JOBS, "aicp-del", "sleepy") is None
    assert not await delete_job(kube, "aicp-del", "sleepy")


async def test_removing_the_evidence_finalizer_lets_a_deleted_job_go(kube: KubeClient) -> None:
    await apply(kube, namespace_manifest("aicp-fin"))
    await apply(kube, job_manifest("held", "aicp-fin", finalizers=[EVIDENCE, "example.com/other"]))

    await delete_job(kube, "aicp-fin", "held")
    deleting = await get(kube, JOBS, "aicp-fin", "held")
    assert deleting is not None
    assert deleting["metadata"].get("deletionTimestamp")

    assert await remove_finalizer(kube, JOBS, "aicp-fin", "held", EVIDENCE, current=deleting)
    still = await get(kube, JOBS, "aicp-fin", "held")
    assert still is not None
    assert still["metadata"]["finalizers"] == ["example.com/other"]
    assert not await remove_finalizer(kube, JOBS, "aicp-fin", "held", EVIDENCE)

    assert await remove_finalizer(kube, JOBS, "aicp-fin", "held", "example.com/other")
    assert await get(kube, JOBS, "aicp-fin", "held") is None


async def test_removing_a_finalizer_from_a_stale_copy_reads_again_and_succeeds(
    kube: KubeClient,
) -> None:
    await apply(kube, namespace_manifest("aicp-stale"))
    stale = await apply(kube, job_manifest("j", "aicp-stale", finalizers=["a.dev/x", EVIDENCE]))
    # Someone else removes the first finalizer: the index read from `stale` is now wrong.
    await remove_finalizer(kube, JOBS, "aicp-stale", "j", "a.dev/x")

    assert await remove_finalizer(kube, JOBS, "aicp-stale", "j", EVIDENCE, current=stale)
    current = await get(kube, JOBS, "aicp-stale", "j")
    assert current is not None
    assert not current["metadata"].get("finalizers")


async def test_a_throttled_write_raises_too_many_requests_with_the_servers_retry_after(
    kube: KubeClient, sim: SimControl
) -> None:
    await sim.faults(error_rate=1.0, error_code=429, error_verbs=["patch"], retry_after_seconds=3)
    with pytest.raises(TooManyRequests) as throttled:
        await apply(kube, namespace_manifest("aicp-throttled"))
    assert throttled.value.retry_after == 3
    assert throttled.value.status == 503  # as an aicp problem: retry shortly


async def test_an_unreachable_api_server_is_reported_as_unavailable(
    kube: KubeClient, sim: SimControl
) -> None:
    await sim.restart_apiserver(seconds=0.5)
    await wait_until(lambda: _down(sim), timeout=5, message="the apiserver down")
    with pytest.raises(Unavailable):
        await get(kube, NAMESPACES, None, "default")


async def _down(sim: SimControl) -> bool:
    return not await sim.is_up()


async def test_deleting_what_does_not_exist_reports_false_and_reading_logs_of_it_fails(
    kube: KubeClient,
) -> None:
    assert not await delete(kube, NAMESPACES, None, "aicp-nothing-here")
    with pytest.raises(NotFound):
        await pod_logs(kube, "aicp-nothing-here", "no-pod")


async def test_pod_logs_return_the_last_lines_the_container_printed(
    kube_with_controllers: KubeClient,
) -> None:
    kube = kube_with_controllers
    await apply(kube, namespace_manifest("aicp-logs"))
    lines = "\n".join(f"step {i}" for i in range(1, 6))
    await apply(kube, job_manifest("talk", "aicp-logs", suspend=False, log=lines))
    pods = await wait_until(
        lambda: list_names(kube, PODS, "aicp-logs"), timeout=10, message="the job's pod"
    )
    text = await wait_until(
        lambda: _logs(kube, "aicp-logs", pods[0], 2), timeout=10, message="logs"
    )
    assert text.splitlines() == ["step 4", "step 5"]


async def _logs(kube: KubeClient, namespace: str, pod: str, tail: int) -> str:
    try:
        return await pod_logs(kube, namespace, pod, LogRead(tail_lines=tail))
    except NotFound:
        return ""


async def test_a_metadata_only_apply_under_a_second_manager_keeps_the_first_managers_spec(
    kube: KubeClient,
) -> None:
    await apply(kube, namespace_manifest("aicp-meta"))
    await apply(kube, job_manifest("j", "aicp-meta"))
    stored = await apply(
        kube,
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "j", "namespace": "aicp-meta", "labels": {"stage": "2"}},
        },
        field_manager="aicp-metadata",
    )
    assert stored["metadata"]["labels"]["stage"] == "2"
    assert stored["metadata"]["labels"]["aicp.dev/uid"] == "uid-j"
    assert stored["spec"]["suspend"] is True
    assert stored["spec"]["template"]["spec"]["containers"][0]["name"] == "main"


async def test_reapplying_an_unchanged_manifest_changes_nothing_on_the_server(
    kube: KubeClient,
) -> None:
    await apply(kube, namespace_manifest("aicp-same"))
    first = await apply(kube, job_manifest("j", "aicp-same"))
    again = await apply(kube, job_manifest("j", "aicp-same"))
    assert again["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    assert again["metadata"]["generation"] == 1
