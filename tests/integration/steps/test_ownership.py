"""Objects aicp did not make are never taken over nor deleted, and queues rendered by an
earlier version under the old ClusterQueue name are retired on upgrade."""

from __future__ import annotations

from typing import Any

from app.kube.apply import apply, create
from app.kube.resources import CLUSTER_QUEUES, JOBS, LOCAL_QUEUES
from tests.integration.steps.stack import Stack
from tests.support.scenario import CLASS, POOL, POOLS, QUOTA, WORKLOADS
from tests.support.waiting import wait_until

QUEUE = "aicp-research-h100-pool"
KUEUE = "kueue.x-k8s.io/v1beta2"
MANAGED_BY = "app.kubernetes.io/managed-by"


def _queue(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": KUEUE,
        "kind": "ClusterQueue",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [{"name": CLASS, "resources": [{"name": "cpu", "nominalQuota": 1}]}],
                }
            ],
        },
    }


async def test_a_queue_relabelled_by_someone_else_degrades_the_pool_and_survives_its_deletion(
    stack: Stack,
) -> None:
    await stack.setup_pool()
    # Another team takes the queue over: its labels now say it is theirs, and no aicp id.
    patch = [
        {"op": "replace", "path": "/metadata/labels", "value": {MANAGED_BY: "batch-team"}},
        {"op": "replace", "path": "/spec/resourceGroups/0/coveredResources", "value": ["cpu"]},
        {
            "op": "replace",
            "path": "/spec/resourceGroups/0/flavors/0/resources",
            "value": [{"name": "cpu", "nominalQuota": 1}],
        },
    ]
    await stack.kube.custom.patch_cluster_custom_object(
        "kueue.x-k8s.io",
        "v1beta2",
        "clusterqueues",
        QUEUE,
        patch,
        _content_type="application/json-patch+json",
        _preload_content=False,
    )

    degraded = await stack.wait_pool_state("DEGRADED", timeout=20)
    assert degraded["status"]["reason"] == (
        f"ClusterQueue {QUEUE} exists and is managed by batch-team; aicp will not take it over."
    )
    live = await stack.read(CLUSTER_QUEUES, None, QUEUE)
    assert live["spec"]["resourceGroups"][0]["coveredResources"] == ["cpu"]  # not applied over
    assert live["metadata"]["labels"] == {MANAGED_BY: "batch-team"}

    response = await stack.http.delete(f"{POOLS}/{POOL}")
    assert response.status_code == 202, response.text

    async def pool_gone() -> bool:
        return (await stack.http.get(f"{POOLS}/{POOL}")).status_code == 404

    await wait_until(pool_gone, timeout=15, message="pool finalized")
    assert await stack.read(CLUSTER_QUEUES, None, QUEUE) is not None


async def test_a_local_queue_made_by_someone_else_is_a_409_at_pool_create(stack: Stack) -> None:
    await stack.setup_pool()
    await create(
        stack.kube,
        {
            "apiVersion": KUEUE,
            "kind": "LocalQueue",
            "metadata": {"name": "theirs", "namespace": "aicp-research"},
            "spec": {"clusterQueue": QUEUE},
        },
        field_manager="kubectl-create",
    )
    response = await stack.http.post(
        POOLS, json={"name": "theirs", "accelerator_class": CLASS, "quota": QUOTA}
    )
    assert response.status_code == 409, response.text
    assert response.json()["object"] == "LocalQueue/theirs"
    assert (await stack.http.get(f"{POOLS}/theirs")).status_code == 404


async def test_queues_of_an_earlier_version_are_retired_on_upgrade(stack: Stack) -> None:
    """Before injective names, project `up-a` pool `b-c` had ClusterQueue `aicp-up-a-b-c` (no
    id label) and a LocalQueue pointing at it: the pool step replaces both."""
    await stack.put_binding(CLASS, flavor=CLASS)
    await stack.create_project("up-a")
    legacy = "aicp-up-a-b-c"
    names = {
        "app.kubernetes.io/managed-by": "aicp",
        "aicp.dev/project": "up-a",
        "aicp.dev/pool": "b-c",
    }

    async def namespace_ready() -> bool:
        project = (await stack.http.get("/api/v1/projects/up-a")).json()
        return bool(project["status"]["state"] == "READY")

    await wait_until(namespace_ready, timeout=10, message="project READY")
    await apply(stack.kube, _queue(legacy, names))
    await apply(
        stack.kube,
        {
            "apiVersion": KUEUE,
            "kind": "LocalQueue",
            "metadata": {"name": "b-c", "namespace": "aicp-up-a", "labels": names},
            "spec": {"clusterQueue": legacy},
        },
    )
    response = await stack.http.post(
        "/api/v1/projects/up-a/compute-pools",
        json={"name": "b-c", "accelerator_class": CLASS, "quota": QUOTA},
    )
    assert response.status_code == 202, response.text
    queue = response.json()["status"]["cluster_queue"]
    assert queue == "aicp-up--a-b-c"

    async def retired() -> bool:
        local = await stack.read(LOCAL_QUEUES, "aicp-up-a", "b-c")
        return (
            await stack.read(CLUSTER_QUEUES, None, legacy) is None
            and local is not None
            and local["spec"]["clusterQueue"] == queue
        )

    await wait_until(retired, timeout=15, message="legacy queue retired, LocalQueue repointed")
    assert await stack.read(CLUSTER_QUEUES, None, queue) is not None


async def test_a_job_of_the_next_generation_made_by_someone_else_is_not_adopted(
    stack: Stack,
) -> None:
    await stack.setup_pool()
    first = await stack.start_running("tune")
    taken = f"tune-{first['uid'][:6]}-g2"
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": taken, "namespace": "aicp-research"},
        "spec": {
            "suspend": True,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "busybox"}],
                }
            },
        },
    }
    await create(stack.kube, job, field_manager="kubectl-create")
    spec = dict(first["spec"], env={"KUBESIM_RUN_SECONDS": "1"})
    response = await stack.http.put(f"{WORKLOADS}/tune", json=spec)
    assert response.status_code == 202, response.text

    failed = await stack.wait_state("tune", "FAILED")
    assert failed["status"]["reason"].startswith(f"Job aicp-research/{taken} exists and is managed")
    assert failed["status"]["reason"].endswith("aicp will not take it over.")
    await stack.http.delete(f"{WORKLOADS}/tune")
    await stack.wait_gone("tune")
    live = await stack.read(JOBS, "aicp-research", taken)
    assert live is not None and "aicp.dev/uid" not in (live["metadata"].get("labels") or {})
