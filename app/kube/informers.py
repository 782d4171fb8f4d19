"""The informers aicp runs (docs/DESIGN.md §2, §6): Jobs, Workloads, Pods, Nodes, ClusterQueues,
Namespaces, Services and Deployments.

| kind         | what is watched                                                     |
|--------------|---------------------------------------------------------------------|
| Job          | all namespaces, `app.kubernetes.io/managed-by=aicp`                  |
| Workload     | Kueue v1beta2, all namespaces, kept only in namespaces `aicp-*`      |
|              | (Kueue creates them; they carry none of aicp's labels)               |
| Pod          | all namespaces, `app.kubernetes.io/managed-by=aicp` (the Job's       |
|              | template labels are on its pods)                                     |
| Node         | all (evidence: node labels name the accelerator; submit: a pod no   |
|              | node of its class can hold is refused, `node_capacities()`)          |
| ClusterQueue | `app.kubernetes.io/managed-by=aicp` (usage for the pools' status)    |
| Namespace    | `app.kubernetes.io/managed-by=aicp` (a project's namespace deleted   |
|              | by hand is re-created: drift)                                        |
| Service      | `app.kubernetes.io/managed-by=aicp` (a multi-node workload's headless |
|              | Service, an inference service's ClusterIP one: deleted by hand, it is |
|              | re-created: drift)                                                   |
| Deployment   | `app.kubernetes.io/managed-by=aicp` (an inference service's replicas: |
|              | their rollout and counts; deleted or scaled by hand: drift)          |

Every cache is also indexed by the `aicp.dev/uid` label; Workloads additionally by Kueue's
`kueue.x-k8s.io/job-uid` (the Job's uid), Pods by `batch.kubernetes.io/controller-uid` (the
Job's uid: unique, unlike a name), `batch.kubernetes.io/job-name` and `aicp.dev/service` (a
service's replicas), and the suspended Jobs
by namespace and LocalQueue (`queued_jobs`: a pool's waiting Jobs without walking every Job it
ever ran).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from app.backoff import Backoff
from app.domain.kube_objects import label_of, namespace_of
from app.domain.labels import (
    JOB_CONTROLLER_UID_LABEL,
    JOB_NAME_LABEL,
    KUEUE_JOB_UID_LABEL,
    MANAGED_BY_SELECTOR,
    NAME_PREFIX,
    QUEUE_NAME_LABEL,
    SERVICE_LABEL,
)
from app.domain.node_fit import NodeCapacity, node_capacity_of
from app.kube.resources import (
    CLUSTER_QUEUES,
    DEPLOYMENTS,
    JOBS,
    NAMESPACES,
    NODES,
    PODS,
    SERVICES,
    WORKLOADS,
    Resource,
)
from app.kube.watching import Accept, Handler, Informer

if TYPE_CHECKING:
    from collections.abc import Callable

    from app.domain.kube_objects import Manifest
    from app.kube.client import KubeClient


#: The list page size of the kinds that carry a workload's spec.
SPEC_PAGE_SIZE = 50


def in_managed_namespace(obj: Manifest) -> bool:
    """True for objects in a project namespace (`aicp-<project>`)."""
    return namespace_of(obj).startswith(NAME_PREFIX)


_QUEUED = "queued"


def queued_in(job: Manifest) -> str | None:
    """Where a suspended Job waits ("<namespace>/<LocalQueue>"); None for any other Job."""
    spec = job.get("spec") or {}
    queue = label_of(job, QUEUE_NAME_LABEL)
    if not spec.get("suspend") or not queue:
        return None
    return f"{namespace_of(job)}/{queue}"


#: The longest an informer waits between list/watch attempts while the API server fails: an
#: outage ends, at most this long later every cache follows the cluster again (a handful of
#: requests per interval per replica).
BACKOFF_CAP_SECONDS = 5.0


class Informers:
    """The set of informers one aicp process runs, started and stopped together.

    `start()` launches every loop; `not_synced()` is what `/readyz` asks; `wait_synced()` is
    for startup; `stop()` cancels them all and waits. `on_change(handler)` subscribes one
    handler to every kind (it receives `(event_type, obj)`; `obj["kind"]` tells them apart).
    """

    def __init__(
        self,
        kube: KubeClient,
        *,
        watch_timeout: float = 300.0,
        backoff_cap: float = BACKOFF_CAP_SECONDS,
    ) -> None:
        def informer(
            resource: Resource,
            selector: str | None = None,
            accept: Accept | None = None,
            page_size: int = 500,
        ) -> Informer:
            return Informer(
                kube,
                resource,
                label_selector=selector,
                accept=accept,
                watch_timeout=watch_timeout,
                page_size=page_size,
                backoff=Backoff(0.2, backoff_cap),
            )

        # Jobs, Workloads and Pods carry the workload's spec (up to 256 KiB each) until they
        # are slimmed: their lists are read in small pages, so a relist holds little at once.
        self.jobs = informer(JOBS, MANAGED_BY_SELECTOR, page_size=SPEC_PAGE_SIZE)
        self.workloads = informer(WORKLOADS, accept=in_managed_namespace, page_size=SPEC_PAGE_SIZE)
        self.pods = informer(PODS, MANAGED_BY_SELECTOR, page_size=SPEC_PAGE_SIZE)
        self.nodes = informer(NODES)
        self.cluster_queues = informer(CLUSTER_QUEUES, MANAGED_BY_SELECTOR)
        self.namespaces = informer(NAMESPACES, MANAGED_BY_SELECTOR)
        self.services = informer(SERVICES, MANAGED_BY_SELECTOR)
        self.deployments = informer(DEPLOYMENTS, MANAGED_BY_SELECTOR)
        self.jobs.index_by(_QUEUED, queued_in)
        self.workloads.index_by_label(KUEUE_JOB_UID_LABEL)
        self.pods.index_by_label(JOB_NAME_LABEL)
        self.pods.index_by_label(JOB_CONTROLLER_UID_LABEL)
        self.pods.index_by_label(SERVICE_LABEL)
        # Each node's labels and allocatable resources, by name, parsed once per version.
        self._capacities: dict[str, tuple[str, NodeCapacity]] = {}

    def queued_jobs(self, namespace: str, queue: str) -> list[Manifest]:
        """The suspended Jobs in `namespace` that name LocalQueue `queue` (still waiting for
        Kueue's admission, or suspended again), ordered by key."""
        return self.jobs.by_index(_QUEUED, f"{namespace}/{queue}")

    @property
    def all(self) -> tuple[Informer, ...]:
        return (
            self.jobs,
            self.workloads,
            self.pods,
            self.nodes,
            self.cluster_queues,
            self.namespaces,
            self.services,
            self.deployments,
        )

    def node_capacities(self) -> list[NodeCapacity] | None:
        """Every node's name, labels and allocatable resources, as the Node cache has them;
        None until its first list completed (nothing is known about the nodes yet)."""
        if not self.nodes.synced.is_set():
            return None
        kept: dict[str, tuple[str, NodeCapacity]] = {}
        for node in self.nodes.list():
            metadata = node.get("metadata") or {}
            name, version = str(metadata.get("name", "")), str(metadata.get("resourceVersion", ""))
            seen = self._capacities.get(name)
            if seen is None or seen[0] != version:
                seen = (version, node_capacity_of(node))
            kept[name] = seen
        self._capacities = kept
        return [capacity for _, capacity in kept.values()]

    def on_change(self, handler: Handler) -> None:
        """Call `handler` for every change of every kind (register before `start()`)."""
        for informer in self.all:
            informer.add_handler(handler)

    def on_recovered(self, callback: Callable[[], None]) -> None:
        """Call `callback` whenever one of the informers reaches the API server again after
        failing to (an outage ended): work that failed meanwhile need not wait its backoff."""
        for informer in self.all:
            informer.on_recovered(callback)

    def start(self) -> list[asyncio.Task[None]]:
        """Start every informer's loop; return the tasks (they end only when cancelled)."""
        return [informer.start() for informer in self.all]

    def not_synced(self) -> list[str]:
        """The kinds whose first list has not completed (for `/readyz`'s reason)."""
        return [i.kind for i in self.all if not i.synced.is_set()]

    async def wait_synced(self) -> None:
        """Wait for every first list (bound it with `asyncio.timeout`)."""
        await asyncio.gather(*(i.synced.wait() for i in self.all))

    async def stop(self) -> None:
        await asyncio.gather(*(informer.stop() for informer in self.all))
