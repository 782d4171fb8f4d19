"""Job specifics: defaults, template immutability except while suspended and never started."""

from __future__ import annotations

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from tests.kubesim.builders import job

MERGE = "application/merge-patch+json"
PLACEMENT = {
    "spec": {
        "template": {
            "metadata": {"labels": {"kueue.x-k8s.io/podset": "main"}},
            "spec": {
                "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
                "tolerations": [
                    {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
                ],
            },
        }
    }
}


async def test_a_job_gets_the_apiservers_defaults(kube_api):
    created = await client.BatchV1Api(kube_api).create_namespaced_job("default", job("a"))
    assert created.spec.suspend is False
    assert (created.spec.parallelism, created.spec.completions, created.spec.backoff_limit) == (
        1,
        1,
        6,
    )
    assert created.spec.selector.match_labels == {
        "batch.kubernetes.io/controller-uid": created.metadata.uid
    }
    assert created.spec.template.metadata.labels["batch.kubernetes.io/job-name"] == "a"
    assert created.status is None or created.status.active is None


async def test_a_suspended_never_started_job_accepts_placement_and_resume_in_one_patch(kube_api):
    batch = client.BatchV1Api(kube_api)
    await batch.create_namespaced_job("default", job("a", suspend=True))
    body = {"spec": {**PLACEMENT["spec"], "suspend": False}}
    resumed = await batch.patch_namespaced_job("a", "default", body, _content_type=MERGE)
    assert resumed.spec.suspend is False
    assert resumed.spec.template.spec.node_selector == {
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"
    }


async def test_a_running_jobs_template_is_immutable(kube_api):
    batch = client.BatchV1Api(kube_api)
    await batch.create_namespaced_job("default", job("a"))
    with pytest.raises(ApiException) as err:
        await batch.patch_namespaced_job("a", "default", PLACEMENT, _content_type=MERGE)
    assert err.value.status == 422 and "spec.template" in err.value.body


async def test_a_suspended_job_that_has_started_keeps_its_template(kube_api):
    batch = client.BatchV1Api(kube_api)
    await batch.create_namespaced_job("default", job("a", suspend=True))
    await batch.patch_namespaced_job_status(
        "a", "default", {"status": {"startTime": "2026-01-01T00:00:00Z"}}, _content_type=MERGE
    )
    with pytest.raises(ApiException) as err:
        await batch.patch_namespaced_job("a", "default", PLACEMENT, _content_type=MERGE)
    assert err.value.status == 422


async def test_the_containers_of_a_suspended_job_stay_immutable(kube_api):
    batch = client.BatchV1Api(kube_api)
    await batch.create_namespaced_job("default", job("a", suspend=True))
    change = {"spec": {"template": {"spec": {"containers": [{"name": "main", "image": "other"}]}}}}
    with pytest.raises(ApiException) as err:
        await batch.patch_namespaced_job("a", "default", change, _content_type=MERGE)
    assert err.value.status == 422


async def test_an_admission_hook_mutates_jobs_created_over_http(kube_cluster, kube_api):
    store = kube_cluster.store

    def suspend_on_create(operation, new, old):
        if operation == "CREATE":
            new["spec"]["suspend"] = True

    store.add_admission_hook(store.resource("batch", "jobs"), suspend_on_create)
    created = await client.BatchV1Api(kube_api).create_namespaced_job("default", job("a"))
    assert created.spec.suspend is True


@pytest.mark.parametrize(
    "status",
    [
        pytest.param(
            {
                "conditions": [{"type": "Complete", "status": "True"}],
                "completionTime": "2026-01-01T00:00:00Z",
            },
            id="complete-without-success-criteria",
        ),
        pytest.param(
            {
                "conditions": [
                    {"type": "SuccessCriteriaMet", "status": "True"},
                    {"type": "Complete", "status": "True"},
                ]
            },
            id="complete-without-completion-time",
        ),
        pytest.param(
            {"conditions": [{"type": "Failed", "status": "True"}]},
            id="failed-without-failure-target",
        ),
    ],
)
async def test_a_job_cannot_jump_to_a_terminal_state(kube_api, status):
    batch = client.BatchV1Api(kube_api)
    await batch.create_namespaced_job("default", job("a"))
    with pytest.raises(ApiException) as err:
        await batch.patch_namespaced_job_status(
            "a", "default", {"status": status}, _content_type=MERGE
        )
    assert err.value.status == 422


async def test_terminal_conditions_and_counters_never_go_back(kube_api):
    batch = client.BatchV1Api(kube_api)
    await batch.create_namespaced_job("default", job("a"))
    done = {
        "conditions": [
            {"type": "SuccessCriteriaMet", "status": "True"},
            {"type": "Complete", "status": "True"},
        ],
        "completionTime": "2026-01-01T00:00:00Z",
        "startTime": "2026-01-01T00:00:00Z",
        "succeeded": 1,
    }
    await batch.patch_namespaced_job_status("a", "default", {"status": done}, _content_type=MERGE)
    for undo in ({"conditions": []}, {"succeeded": 0}):
        with pytest.raises(ApiException) as err:
            await batch.patch_namespaced_job_status(
                "a", "default", {"status": undo}, _content_type=MERGE
            )
        assert err.value.status == 422


async def test_start_time_can_be_cleared_only_while_suspended(kube_api):
    batch = client.BatchV1Api(kube_api)
    await batch.create_namespaced_job("default", job("a"))
    started = {"status": {"startTime": "2026-01-01T00:00:00Z"}}
    cleared = {"status": {"startTime": None}}
    await batch.patch_namespaced_job_status("a", "default", started, _content_type=MERGE)
    with pytest.raises(ApiException) as err:
        await batch.patch_namespaced_job_status("a", "default", cleared, _content_type=MERGE)
    assert err.value.status == 422
    await batch.patch_namespaced_job(
        "a", "default", {"spec": {"suspend": True}}, _content_type=MERGE
    )
    done = await batch.patch_namespaced_job_status("a", "default", cleared, _content_type=MERGE)
    assert done.status.start_time is None
