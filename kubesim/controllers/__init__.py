"""kubesim's controllers: what kube-controller-manager, kube-scheduler, the kubelets, Kueue and
the fake GPU operator are to a real cluster (docs/KUBESIM.md "Controllers").

`Controllers(store, clock, ...)` is started by `kubesim.Cluster`: `start()` registers the GPU
nodes and Kueue's Job and pod webhooks, then runs every controller as named, held tasks, each a
watch of the store feeding a keyed work queue and one worker; `stop()` cancels and awaits them
all.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from kubesim.controllers.deployments import DeploymentController
from kubesim.controllers.disruption import DisruptionController
from kubesim.controllers.gpu_operator import register_nodes
from kubesim.controllers.jobs import JobController
from kubesim.controllers.kubelet import Kubelet
from kubesim.controllers.kueue_admission import KueueScheduler
from kubesim.controllers.kueue_jobs import KueueJobReconciler, job_webhook
from kubesim.controllers.kueue_pod_webhook import PodWebhook
from kubesim.controllers.kueue_pods import KueuePodReconciler
from kubesim.controllers.kueue_pods_ready import PodsReadyController, WaitForPodsReady
from kubesim.controllers.kueue_status import QueueStatus
from kubesim.controllers.quota import QuotaBook
from kubesim.controllers.replicasets import ReplicaSetController
from kubesim.controllers.runtime import K, Requeue, WorkQueue, run_worker, watch_forever
from kubesim.controllers.scheduler import Scheduler
from kubesim.controllers.ttl import TtlController

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine

    from kubesim.clock import Clock
    from kubesim.store import Store, WatchEvent

__all__ = ["Controllers", "WaitForPodsReady"]
log = logging.getLogger("kubesim.controllers")


class Controllers:
    """Every simulated controller of one cluster, sharing its store and clock."""

    def __init__(
        self,
        store: Store,
        clock: Clock,
        *,
        nodes: int = 2,
        gpus_per_node: int = 8,
        gpu_profile: str = "h100",
        wait_for_pods_ready: WaitForPodsReady | None = None,
    ) -> None:
        self._store = store
        self._clock = clock
        self._nodes = nodes
        self._gpus_per_node = gpus_per_node
        self._gpu_profile = gpu_profile
        self._tasks: list[asyncio.Task[None]] = []
        self.jobs = JobController(store, clock)
        self.ttl = TtlController(store, clock)
        self.scheduler = Scheduler(store, clock)
        self.kubelet = Kubelet(store, clock)
        self.deployments = DeploymentController(store, clock)
        self.replicasets = ReplicaSetController(store, clock)
        self.disruption = DisruptionController(store, clock)
        self.quota = QuotaBook()
        self.kueue_jobs = KueueJobReconciler(store, clock)
        self.kueue_pods = KueuePodReconciler(store, clock)
        self.queue_status = QueueStatus(store, clock, self.quota, self._config_changed)
        self.kueue = KueueScheduler(store, clock, self.quota, self.queue_status.changed)
        self.pods_ready = PodsReadyController(
            store, clock, wait_for_pods_ready or WaitForPodsReady.from_env()
        )

    def _config_changed(self, event: WatchEvent) -> None:
        self.kueue.on_config_event(event)

    def _spawn(self, name: str, coro: Coroutine[Any, Any, None]) -> None:
        self._tasks.append(asyncio.create_task(coro, name=f"kubesim-{name}"))

    def _watch(self, group: str, plural: str, *handlers: Callable[[WatchEvent], None]) -> None:
        rt = self._store.resource(group, plural)

        def fan_out(event: WatchEvent) -> None:
            for handler in handlers:
                handler(event)

        self._spawn(f"watch-{plural}", watch_forever(self._store, rt, fan_out, name=plural))

    async def start(self) -> None:
        """Create the nodes, register the webhook and start every loop. Call once."""
        if self._tasks:
            raise RuntimeError("controllers already started")
        register_nodes(
            self._store,
            self._clock,
            nodes=self._nodes,
            gpus_per_node=self._gpus_per_node,
            profile=self._gpu_profile,
        )
        self._store.add_admission_hook(self._store.resource("batch", "jobs"), job_webhook)
        pods = self._store.resource("", "pods")
        self._store.add_admission_hook(pods, PodWebhook(self._store, self._clock))
        # Kueue's picture of the queues first, so that its first cycles see them.
        self._watch("kueue.x-k8s.io", "resourceflavors", self.queue_status.on_flavor)
        self._watch("kueue.x-k8s.io", "clusterqueues", self.queue_status.on_cluster_queue)
        self._watch("kueue.x-k8s.io", "localqueues", self.queue_status.on_local_queue)
        self._watch("", "namespaces", self.queue_status.on_namespace)
        self._watch(
            "kueue.x-k8s.io",
            "workloads",
            self.kueue.on_workload_event,
            self.kueue_jobs.on_workload_event,
            self.kueue_pods.on_workload_event,
            self.pods_ready.on_workload_event,
        )
        self._watch(
            "batch",
            "jobs",
            self.kueue_jobs.on_job_event,
            self.pods_ready.on_job_event,
            self.jobs.on_job_event,
            self.ttl.on_job_event,
        )
        self._watch("", "nodes", self.scheduler.on_node_event)
        self._watch(
            "apps",
            "deployments",
            self.deployments.on_deployment_event,
            self.disruption.on_namespace_object_event,
        )
        self._watch(
            "apps",
            "replicasets",
            self.replicasets.on_replicaset_event,
            self.deployments.on_replicaset_event,
            self.disruption.on_namespace_object_event,
        )
        self._watch("policy", "poddisruptionbudgets", self.disruption.on_budget_event)
        self._watch(
            "",
            "pods",
            self.scheduler.on_pod_event,
            self.kubelet.on_pod_event,
            self.jobs.on_pod_event,
            self.kueue_pods.on_pod_event,
            self.pods_ready.on_pod_event,
            self.replicasets.on_pod_event,
            self.deployments.on_pod_event,
            self.disruption.on_namespace_object_event,
        )
        self._run("kueue-scheduler", self.kueue.queue, self.kueue.reconcile)
        self._run("kueue-queue-status", self.queue_status.queue, self.queue_status.reconcile)
        self._run("kueue-job", self.kueue_jobs.queue, self.kueue_jobs.reconcile)
        self._run("kueue-pod", self.kueue_pods.queue, self.kueue_pods.reconcile)
        self._run("kueue-pods-ready", self.pods_ready.queue, self.pods_ready.reconcile)
        self._run("job-controller", self.jobs.queue, self.jobs.reconcile)
        self._run("ttl-after-finished", self.ttl.queue, self.ttl.reconcile)
        self._run("scheduler", self.scheduler.queue, self.scheduler.reconcile)
        self._run("kubelet", self.kubelet.queue, self.kubelet.reconcile)
        self._run("deployment-controller", self.deployments.queue, self.deployments.reconcile)
        self._run("replicaset-controller", self.replicasets.queue, self.replicasets.reconcile)
        self._run("disruption-controller", self.disruption.queue, self.disruption.reconcile)

    def _run(self, name: str, queue: WorkQueue[K], reconcile: Callable[[K], Requeue]) -> None:
        self._spawn(name, run_worker(queue, reconcile, name=name))
        self._spawn(f"{name}-timers", queue.run_timers())

    async def stop(self) -> None:
        """Cancel every loop and wait for them to end."""
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
