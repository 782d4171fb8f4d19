"""Which resource each informer event wakes (app.reconcile.steps.routing), without a cluster:
the handler sees objects as the informers deliver them and only enqueues keys."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kubernetes_asyncio import client

from app.kube.client import KubeClient, TokenBucket
from app.kube.informers import Informers
from app.reconcile.steps.routing import FANOUT_SECONDS, EventRouter, PoolRoutes

WORKLOAD = uuid.UUID("5b4f3c1e-0000-4000-8000-00000000a11c")
POOL = uuid.UUID("5b4f3c1e-0000-4000-8000-0000000000b1")


class RecordingEngine:
    """Stands in for the engine's two intake methods and records what they were asked."""

    def __init__(self) -> None:
        self.local: list[tuple[str, uuid.UUID]] = []
        self.woken: list[tuple[str, uuid.UUID]] = []

    def enqueue_local(self, kind: str, resource_id: uuid.UUID) -> bool:
        self.local.append((kind, resource_id))
        return True

    def wake(self, kind: str, resource_id: uuid.UUID) -> None:
        self.woken.append((kind, resource_id))


def job(labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "kind": "Job",
        "apiVersion": "batch/v1",
        "metadata": {
            "name": "train-5b4f3c-g1",
            "namespace": "aicp-research",
            "uid": "job-uid-1",
            "labels": {"app.kubernetes.io/managed-by": "aicp", "aicp.dev/uid": str(WORKLOAD)}
            if labels is None
            else labels,
        },
    }


@pytest.fixture
async def informers() -> AsyncIterator[Informers]:
    """Informers that are never started: their caches are filled by hand."""
    api = client.ApiClient(client.Configuration(host="http://127.0.0.1:9"))
    yield Informers(KubeClient(api, TokenBucket(1.0, 1)))
    await api.close()


@pytest.fixture
def engine() -> RecordingEngine:
    return RecordingEngine()


@pytest.fixture
def router(engine: RecordingEngine, informers: Informers) -> EventRouter:
    routes = PoolRoutes()
    routes.learn("research", "h100-pool", POOL)
    return EventRouter(engine, informers, routes)  # type: ignore[arg-type]


def test_a_job_event_queues_its_workload_by_the_uid_label(
    router: EventRouter, engine: RecordingEngine
) -> None:
    router("MODIFIED", job())
    assert engine.local == [("workload", WORKLOAD)]


def test_a_job_whose_uid_label_was_removed_still_reaches_its_workload(
    router: EventRouter, engine: RecordingEngine
) -> None:
    router("ADDED", job())
    router("MODIFIED", job(labels={"app.kubernetes.io/managed-by": "aicp"}))
    assert engine.local == [("workload", WORKLOAD), ("workload", WORKLOAD)]


def test_a_pod_event_queues_the_workload_its_labels_name(
    router: EventRouter, engine: RecordingEngine
) -> None:
    pod = {"kind": "Pod", "metadata": {"name": "p", "labels": {"aicp.dev/uid": str(WORKLOAD)}}}
    router("MODIFIED", pod)
    assert engine.local == [("workload", WORKLOAD)]


def test_a_kueue_workload_reaches_the_workload_of_its_owner_job(
    router: EventRouter, engine: RecordingEngine, informers: Informers
) -> None:
    informers.jobs.cache.put(job())
    kueue = {
        "kind": "Workload",
        "metadata": {
            "name": "job-train-5b4f3c-g1-ab12c",
            "namespace": "aicp-research",
            "ownerReferences": [{"kind": "Job", "name": "train-5b4f3c-g1", "uid": "job-uid-1"}],
        },
    }
    router("MODIFIED", kueue)
    assert engine.local == [("workload", WORKLOAD)]


def test_a_cluster_queue_wakes_its_pool_and_unknown_ones_nothing(
    router: EventRouter, engine: RecordingEngine
) -> None:
    router("MODIFIED", {"kind": "ClusterQueue", "metadata": {"name": "aicp-research-h100-pool"}})
    router("MODIFIED", {"kind": "ClusterQueue", "metadata": {"name": "someone-elses"}})
    router("MODIFIED", {"kind": "Node", "metadata": {"name": "gpu-node-1"}})
    assert engine.woken == [("pool", POOL)]
    assert engine.local == []


def test_a_job_being_deleted_under_the_evidence_finalizer_wakes_its_workload(
    router: EventRouter, engine: RecordingEngine
) -> None:
    deleting = job()
    deleting["metadata"]["deletionTimestamp"] = "2026-11-30T06:00:00Z"
    deleting["metadata"]["finalizers"] = ["aicp.dev/evidence"]
    router("MODIFIED", deleting)
    assert engine.woken == [("workload", WORKLOAD)]


def waiting_job(index: int) -> dict[str, Any]:
    """A suspended Job of the pool's LocalQueue: a workload waiting for Kueue's admission."""
    found = job()
    found["metadata"]["name"] = f"wait-{index}"
    found["metadata"]["labels"] = {
        **found["metadata"]["labels"],
        "aicp.dev/uid": str(uuid.UUID(int=index + 1)),
        "kueue.x-k8s.io/queue-name": "h100-pool",
    }
    found["spec"] = {"suspend": True}
    return found


async def test_a_burst_of_cluster_queue_changes_wakes_the_waiting_workloads_once_per_interval(
    router: EventRouter, engine: RecordingEngine, informers: Informers
) -> None:
    """During a burst Kueue changes a pool's ClusterQueue at every admission: its waiting
    workloads are woken at the first change, then once for all the changes of an interval."""
    for index in range(3):
        informers.jobs.cache.put(waiting_job(index))
    queue = {
        "kind": "ClusterQueue",
        "metadata": {
            "name": "aicp-research-h100-pool",
            "labels": {"aicp.dev/project": "research", "aicp.dev/pool": "h100-pool"},
        },
    }
    waiting = sorted(uuid.UUID(int=index + 1) for index in range(3))
    router("MODIFIED", queue)
    assert sorted(resource for _, resource in engine.local) == waiting
    engine.local.clear()
    for _ in range(50):
        router("MODIFIED", queue)
    assert engine.local == []  # folded into the one wake due at the end of the interval
    loop = asyncio.get_running_loop()
    deadline = loop.time() + FANOUT_SECONDS + 2.0
    while not engine.local and loop.time() < deadline:
        await asyncio.sleep(0.05)
    assert sorted(resource for _, resource in engine.local) == waiting
    assert engine.woken == [("pool", POOL)] * 51
