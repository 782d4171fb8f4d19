"""Rendered manifests applied to kubesim, and classify reading what its controllers wrote.

The unit tests classify hand-built objects; these check the same sentences come out of the
objects a (simulated) Kueue, Job controller, scheduler and kubelet actually produce, and that
every rendered manifest is accepted by server-side apply as the reconciler will send it.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
from kubernetes_asyncio import client

from app.domain.classify import Classification, classify
from app.domain.classify.evidence import context_for
from app.domain.classify.pool import classify_pool, pool_snapshot
from app.domain.labels import JOB_METADATA_FIELD_MANAGER
from app.domain.render import (
    JobIdentity,
    PoolIdentity,
    render_cluster_queue,
    render_job,
    render_job_metadata_only,
    render_local_queue,
    render_namespace,
    render_priority_classes,
    render_resource_flavor,
)
from app.domain.specs import BindingPut, Quota, WorkloadSpec
from app.domain.states import ResourceState, WorkloadState
from kubesim import Cluster
from kubesim.controllers import WaitForPodsReady
from tests.support.kube_fixtures import api_client_for
from tests.support.waiting import wait_until

APPLY = {"field_manager": "aicp", "force": True, "_content_type": "application/apply-patch+yaml"}
KUEUE, V1BETA2 = "kueue.x-k8s.io", "v1beta2"
GPU = "nvidia.com/gpu"
BINDING = BindingPut(
    resource_name=GPU,
    flavor="h100-80g",
    node_labels={"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
)
POOL_UID = "5f0c6a52-3f0e-4c1b-9d7e-2b1f7c3a9e10"
POOL = PoolIdentity(
    project="research", pool="h100-pool", accelerator_class="h100-80g", uid=POOL_UID
)


@pytest.fixture
def kube_cluster_options() -> dict[str, Any]:
    return {"time_scale": 0}  # pods finish only when a test advances the clock


@dataclass
class Sim:
    api: client.ApiClient
    cluster: Cluster

    @property
    def custom(self) -> client.CustomObjectsApi:
        return client.CustomObjectsApi(self.api)

    async def setup_pool(self, gpus: int) -> None:
        """Apply everything a project with one pool needs, exactly as rendered."""
        await client.CoreV1Api(self.api).patch_namespace(
            "aicp-research", render_namespace("research", POOL_UID), **APPLY
        )
        for priority_class in render_priority_classes():
            await self.custom.patch_cluster_custom_object(
                KUEUE,
                V1BETA2,
                "workloadpriorityclasses",
                priority_class["metadata"]["name"],
                priority_class,
                **APPLY,
            )
        await self.custom.patch_cluster_custom_object(
            KUEUE, V1BETA2, "resourceflavors", "h100-80g", render_resource_flavor(BINDING), **APPLY
        )
        queue = render_cluster_queue(
            POOL, Quota(accelerators=gpus, cpu="256", memory="2Ti"), BINDING
        )
        await self.custom.patch_cluster_custom_object(
            KUEUE, V1BETA2, "clusterqueues", POOL.cluster_queue, queue, **APPLY
        )
        await self.custom.patch_namespaced_custom_object(
            KUEUE,
            V1BETA2,
            "aicp-research",
            "localqueues",
            "h100-pool",
            render_local_queue(POOL),
            **APPLY,
        )

    async def submit(self, spec: WorkloadSpec) -> JobIdentity:
        identity = JobIdentity(
            project="research", workload=spec.name, uid=f"{spec.name:0<8}-uid", generation=1
        )
        await client.BatchV1Api(self.api).patch_namespaced_job(
            identity.job_name, identity.namespace, render_job(identity, spec, GPU), **APPLY
        )
        return identity

    async def raw(self, path: str) -> Any:
        response = await self.api.call_api(
            path, "GET", auth_settings=["BearerToken"], _preload_content=False
        )
        return json.loads(await response.read())

    async def classify(self, identity: JobIdentity, spec: WorkloadSpec) -> Classification:
        """Classify from raw objects, the way the informer caches hold them."""
        ns = identity.namespace
        jobs = (await self.raw(f"/apis/batch/v1/namespaces/{ns}/jobs"))["items"]
        job = next((j for j in jobs if j["metadata"]["name"] == identity.job_name), None)
        workloads = (await self.raw(f"/apis/{KUEUE}/{V1BETA2}/namespaces/{ns}/workloads"))["items"]
        job_uid = job["metadata"]["uid"] if job else None
        workload = next(
            (
                w
                for w in workloads
                if w["metadata"]["labels"].get("kueue.x-k8s.io/job-uid") == job_uid
            ),
            None,
        )
        pods = (await self.raw(f"/api/v1/namespaces/{ns}/pods"))["items"]
        mine = [p for p in pods if p["metadata"]["labels"].get("aicp.dev/uid") == identity.uid]
        nodes = (await self.raw("/api/v1/nodes"))["items"]
        queue = await self.raw(f"/apis/{KUEUE}/{V1BETA2}/clusterqueues/{POOL.cluster_queue}")
        context = context_for(spec, accelerator_resource=GPU, pool=pool_snapshot(queue, POOL.pool))
        return classify(job, workload, mine, nodes, context=context)

    async def wait_state(
        self, identity: JobIdentity, spec: WorkloadSpec, state: WorkloadState
    ) -> Classification:
        async def probe() -> Classification | None:
            result = await self.classify(identity, spec)
            return result if result.state is state else None

        return await wait_until(probe, timeout=10, message=f"{spec.name} {state}")


@pytest.fixture
async def sim(kube_cluster_with_controllers: Cluster) -> AsyncIterator[Sim]:
    async with api_client_for(kube_cluster_with_controllers) as api:
        yield Sim(api, kube_cluster_with_controllers)


def _spec(name: str, **fields: Any) -> WorkloadSpec:
    return WorkloadSpec(
        name=name,
        compute_pool="h100-pool",
        image="ghcr.io/acme/train:1.4",
        accelerators=8,
        cpu="8",
        memory="64Gi",
        **fields,
    )


async def test_a_workload_runs_and_succeeds_with_evidence_from_the_nodes(sim: Sim) -> None:
    await sim.setup_pool(gpus=16)
    spec = _spec("train", env={"KUBESIM_RUN_SECONDS": "5"})
    identity = await sim.submit(spec)

    running = await sim.wait_state(identity, spec, WorkloadState.RUNNING)
    assert running.reason.startswith("1 of 1 pods running on node gpu-node-")
    assert running.reason.endswith("(NVIDIA-H100-80GB-HBM3).")
    admission = running.evidence.admission
    assert admission is not None
    assert (admission.cluster_queue, admission.flavor) == ("aicp-research-h100-pool", "h100-80g")
    assert running.evidence.accelerator is not None
    assert running.evidence.accelerator.memory_mib == 81920

    sim.cluster.clock.advance(5)
    done = await sim.wait_state(identity, spec, WorkloadState.SUCCEEDED)
    assert done.reason.startswith("Succeeded: 1 of 1 pods completed on node gpu-node-")
    assert done.evidence.exit_code == 0 and done.evidence.finished_at is not None


async def test_a_second_workload_waits_for_quota_with_the_pools_numbers(sim: Sim) -> None:
    await sim.setup_pool(gpus=8)
    first = _spec("first", env={"KUBESIM_RUN_SECONDS": "60"})
    await sim.wait_state(await sim.submit(first), first, WorkloadState.RUNNING)
    second = _spec("second")
    identity = await sim.submit(second)

    queued = await sim.wait_state(identity, second, WorkloadState.QUEUED)

    async def waiting() -> Classification | None:
        result = await sim.classify(identity, second)
        return result if result.reason.startswith("Waiting for quota") else None

    queued = await wait_until(waiting, timeout=10, message="a quota reason")
    assert queued.reason == (
        "Waiting for quota in pool h100-pool: asked for 8 nvidia.com/gpu, "
        "the pool has 8 with 8 in use by 1 workload."
    )
    cluster_queue = await sim.raw(f"/apis/{KUEUE}/{V1BETA2}/clusterqueues/{POOL.cluster_queue}")
    pool = classify_pool(cluster_queue)
    assert pool.state is ResourceState.READY
    assert (pool.usage.accelerators_admitted, pool.usage.workloads_admitted) == (8, 1)


async def test_an_oom_killed_workload_fails_naming_its_memory_limit(sim: Sim) -> None:
    await sim.setup_pool(gpus=16)
    spec = _spec("hungry", env={"KUBESIM_OOM": "1", "KUBESIM_RUN_SECONDS": "1"})
    identity = await sim.submit(spec)
    await sim.wait_state(identity, spec, WorkloadState.RUNNING)

    sim.cluster.clock.advance(1)
    failed = await sim.wait_state(identity, spec, WorkloadState.FAILED)

    assert (
        "OOMKilled" in failed.reason and "its memory limit is 64Gi; raise `memory`" in failed.reason
    )
    assert failed.evidence.exit_code == 137


async def test_metadata_only_apply_under_its_own_manager_leaves_a_running_job_running(
    sim: Sim,
) -> None:
    await sim.setup_pool(gpus=16)
    spec = _spec("steady", env={"KUBESIM_RUN_SECONDS": "60"})
    identity = await sim.submit(spec)
    await sim.wait_state(identity, spec, WorkloadState.RUNNING)
    batch = client.BatchV1Api(sim.api)
    await batch.patch_namespaced_job(
        identity.job_name,
        identity.namespace,
        {"metadata": {"labels": {"aicp.dev/uid": None}}},
        _content_type="application/merge-patch+json",
    )

    await batch.patch_namespaced_job(
        identity.job_name,
        identity.namespace,
        render_job_metadata_only(identity, spec),
        **{**APPLY, "field_manager": JOB_METADATA_FIELD_MANAGER},
    )

    job = await batch.read_namespaced_job(identity.job_name, identity.namespace)
    assert job.spec.suspend is False
    assert job.metadata.labels["aicp.dev/uid"] == identity.uid
    assert (await sim.classify(identity, spec)).state is WorkloadState.RUNNING


async def test_metadata_only_apply_under_the_creating_manager_would_prune_the_template(
    sim: Sim,
) -> None:
    """Why the metadata-only body needs its own field manager: SSA removes what a manager
    declared before and no longer declares, and a started Job's template is immutable."""
    await sim.setup_pool(gpus=16)
    spec = _spec("pruned", env={"KUBESIM_RUN_SECONDS": "60"})
    identity = await sim.submit(spec)
    await sim.wait_state(identity, spec, WorkloadState.RUNNING)

    with pytest.raises(client.ApiException) as refused:
        await client.BatchV1Api(sim.api).patch_namespaced_job(
            identity.job_name, identity.namespace, render_job_metadata_only(identity, spec), **APPLY
        )

    assert refused.value.status == 422
    assert "immutable" in refused.value.body


async def test_a_job_deleted_by_hand_is_held_by_the_evidence_finalizer_until_it_is_removed(
    sim: Sim,
) -> None:
    await sim.setup_pool(gpus=16)
    spec = _spec("held", env={"KUBESIM_RUN_SECONDS": "60"})
    identity = await sim.submit(spec)
    await sim.wait_state(identity, spec, WorkloadState.RUNNING)
    batch = client.BatchV1Api(sim.api)

    await batch.delete_namespaced_job(
        identity.job_name, identity.namespace, propagation_policy="Background"
    )
    held = await sim.raw(f"/apis/batch/v1/namespaces/aicp-research/jobs/{identity.job_name}")
    assert held["metadata"]["deletionTimestamp"]
    evidence = (await sim.classify(identity, spec)).evidence
    assert evidence.job is not None and evidence.job.uid == held["metadata"]["uid"]

    index = held["metadata"]["finalizers"].index("aicp.dev/evidence")
    patch = [
        {"op": "test", "path": f"/metadata/finalizers/{index}", "value": "aicp.dev/evidence"},
        {"op": "remove", "path": f"/metadata/finalizers/{index}"},
    ]
    await batch.patch_namespaced_job(
        identity.job_name, identity.namespace, patch, _content_type="application/json-patch+json"
    )

    async def gone() -> bool:
        jobs = (await sim.raw("/apis/batch/v1/namespaces/aicp-research/jobs"))["items"]
        return all(j["metadata"]["name"] != identity.job_name for j in jobs)

    await wait_until(gone, timeout=10, message="the Job to go")
    assert (await sim.classify(identity, spec)).state is WorkloadState.PENDING


# Without Kueue's waitForPodsReady: with it (the default, 300 s) the never-ready workload would
# be evicted and requeued before its maximum runtime ends it.
@pytest.mark.parametrize(
    "kube_cluster_options",
    [{"time_scale": 0, "wait_for_pods_ready": WaitForPodsReady(enable=False)}],
)
async def test_an_image_that_cannot_be_pulled_is_named_in_the_reason(sim: Sim) -> None:
    await sim.setup_pool(gpus=16)
    spec = WorkloadSpec(
        name="typo",
        compute_pool="h100-pool",
        image="ghcr.io/acme/does-not-exist:1",
        accelerators=8,
        max_runtime_seconds=600,
    )
    identity = await sim.submit(spec)

    async def pull_failed() -> Classification | None:
        result = await sim.classify(identity, spec)
        return result if "could not be pulled" in result.reason else None

    result = await wait_until(pull_failed, timeout=10, message="an image pull reason")
    assert result.state is WorkloadState.ADMITTED
    assert result.reason.startswith("The image ghcr.io/acme/does-not-exist:1 could not be pulled")

    sim.cluster.clock.advance(601)
    failed = await sim.wait_state(identity, spec, WorkloadState.FAILED)
    assert failed.reason.startswith("Stopped after exceeding the maximum runtime of 600 seconds")
