"""Builders of realistic Kubernetes objects for classification tests.

The objects look like what the apiserver returns after Kueue, the Job controller, the
scheduler and the kubelet did their part (docs/KUBERNETES.md §1, §5, §6): conditions with
Kueue's reasons and messages, pods named `<job>-xxxxx` with the Job controller's labels, nodes
with the GPU feature labels. Each step method moves the whole scenario forward consistently:

    make_job("train").admitted().running(node="gpu-node-1").build()
"""

from __future__ import annotations

import copy
import hashlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from app.domain.classify import Classification, classify
from app.domain.classify.evidence import ClassifyContext, PoolSnapshot, context_for
from app.domain.quantity import parse_quantity
from app.domain.render import JobIdentity, render_job
from app.domain.specs import WorkloadSpec
from tests.support.kube_objects import (
    ADMITTED,
    CREATED,
    FINISHED,
    GPU,
    H100_PRODUCT,
    STARTED,
    Obj,
    cond,
    default_nodes,
    make_node,
    make_pod,
    set_condition,
    terminated_state,
)

if TYPE_CHECKING:
    from datetime import datetime

__all__ = ["JobBuilder", "Scenario", "make_job", "make_node"]


@dataclass
class Scenario:
    """The objects classify reads, for one workload generation."""

    job: Obj | None
    workload: Obj | None
    pods: list[Obj]
    nodes: list[Obj]
    context: ClassifyContext

    def classify(self, now: datetime | None = None) -> Classification:
        return classify(
            self.job, self.workload, self.pods, self.nodes, context=self.context, now=now
        )


@dataclass
class JobBuilder:
    spec: WorkloadSpec
    identity: JobIdentity
    job_uid: str
    flavor: str = "h100-80g"
    pool: PoolSnapshot | None = None
    job: Obj = field(default_factory=dict)
    workload: Obj | None = None
    pods: list[Obj] = field(default_factory=list)
    nodes: list[Obj] = field(default_factory=default_nodes)
    exists: bool = True

    # -- the starting point: created by aicp, suspended by Kueue's webhook ------------------

    def __post_init__(self) -> None:
        job = render_job(self.identity, self.spec, GPU)
        job["metadata"].update(
            uid=self.job_uid, resourceVersion="100", generation=1, creationTimestamp=CREATED
        )
        job["spec"]["template"]["metadata"]["labels"].update(
            {
                "batch.kubernetes.io/controller-uid": self.job_uid,
                "batch.kubernetes.io/job-name": job["metadata"]["name"],
            }
        )
        job["spec"]["selector"] = {
            "matchLabels": {"batch.kubernetes.io/controller-uid": self.job_uid}
        }
        job["status"] = {"conditions": [cond("Suspended", "True", "JobSuspended", "Job suspended")]}
        self.job = job
        name = job["metadata"]["name"]
        digest = hashlib.sha1(f"Job\nbatch\n{name}\n{self.job_uid}".encode()).hexdigest()[:5]
        self.workload = {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Workload",
            "metadata": {
                "name": f"job-{name}"[:247] + f"-{digest}",
                "namespace": job["metadata"]["namespace"],
                "uid": f"wl-{self.job_uid}",
                "creationTimestamp": CREATED,
                "finalizers": ["kueue.x-k8s.io/resource-in-use"],
                "labels": {"kueue.x-k8s.io/job-uid": self.job_uid},
            },
            "spec": {
                "queueName": self.spec.compute_pool,
                "podSets": [{"name": "main", "count": self.spec.replicas}],
            },
            "status": {},
        }

    @property
    def cluster_queue(self) -> str:
        return f"aicp-{self.identity.project}-{self.spec.compute_pool}"

    def _pod(self, index: int, node: str | None, phase: str, state: Obj) -> Obj:
        pod = make_pod(self.job, index, node, phase, state)
        if self.spec.distributed:  # the Job controller writes each rank's index
            rank = {"batch.kubernetes.io/job-completion-index": str(index)}
            pod["metadata"].setdefault("annotations", {}).update(rank)
            pod["metadata"]["labels"].update(rank)
        return pod

    def _nodes_for(self, node: str | None) -> list[str]:
        if node is not None:
            return [node] * self.spec.pods
        return [f"gpu-node-{i % 2 + 1}" for i in range(self.spec.pods)]

    # -- Kueue ----------------------------------------------------------------------------

    def admitted(self) -> JobBuilder:
        """Kueue reserved quota, admitted, then unsuspended the Job with the flavor's labels."""
        assert self.workload is not None
        usage = {"cpu": self.spec.cpu, "memory": self.spec.memory}
        flavors = {"cpu": self.flavor, "memory": self.flavor}
        if self.spec.accelerators:
            usage[GPU] = str(self.spec.accelerators * self.spec.replicas)
            flavors[GPU] = self.flavor
        self.workload["status"]["admission"] = {
            "clusterQueue": self.cluster_queue,
            "podSetAssignments": [
                {
                    "name": "main",
                    "flavors": flavors,
                    "resourceUsage": usage,
                    "count": self.spec.replicas,
                }
            ],
        }
        message = f"Quota reserved in ClusterQueue {self.cluster_queue}"
        set_condition(
            self.workload, cond("QuotaReserved", "True", "QuotaReserved", message, ADMITTED)
        )
        set_condition(
            self.workload,
            cond("Admitted", "True", "Admitted", "The workload is admitted", ADMITTED),
        )
        self.job["spec"]["suspend"] = False
        self.job["spec"]["template"]["spec"]["nodeSelector"] = {
            "nvidia.com/gpu.product": H100_PRODUCT
        }
        self.job["metadata"]["labels"]["kueue.x-k8s.io/podset"] = "main"
        set_condition(self.job, cond("Suspended", "False", "JobResumed", "Job resumed", ADMITTED))
        return self

    def waiting_for_quota(
        self,
        message: str | None = None,
        *,
        quota: int = 16,
        in_use: int = 16,
        workloads_admitted: int = 2,
    ) -> JobBuilder:
        """Kueue could not reserve quota; the pool's ClusterQueue shows the given numbers."""
        assert self.workload is not None
        needed = self.spec.accelerators * self.spec.replicas
        if message is None:
            message = (
                "couldn't assign flavors to pod set main: insufficient unused quota for "
                f"{GPU} in flavor {self.flavor}, {needed - (quota - in_use)} more needed"
            )
        set_condition(self.workload, cond("QuotaReserved", "False", "Pending", message))
        self.pool = PoolSnapshot(
            name=self.spec.compute_pool,
            quota={
                "cpu": parse_quantity("256"),
                "memory": parse_quantity("2Ti"),
                GPU: parse_quantity(str(quota)),
            },
            in_use={
                "cpu": parse_quantity("64"),
                "memory": parse_quantity("512Gi"),
                GPU: parse_quantity(str(in_use)),
            },
            workloads_admitted=workloads_admitted,
            workloads_pending=1,
        )
        return self

    def inadmissible(self, message: str) -> JobBuilder:
        assert self.workload is not None
        set_condition(self.workload, cond("QuotaReserved", "False", "Inadmissible", message))
        return self

    def preempted(self, *, reason: str = "InClusterQueue") -> JobBuilder:
        """Kueue preempted the running workload: evicted, Job re-suspended, quota released."""
        assert self.workload is not None
        self.workload["status"].pop("admission", None)
        preempting = "Preempted to accommodate a workload (UID: 0a1b, JobUID: 2c3d) due to "
        set_condition(
            self.workload,
            cond("Evicted", "True", "Preempted", preempting + "prioritization in the ClusterQueue"),
        )
        set_condition(
            self.workload,
            cond("Preempted", "True", reason, preempting + "prioritization in the ClusterQueue"),
        )
        set_condition(self.workload, cond("QuotaReserved", "False", "Preempted", "Preempted"))
        set_condition(self.workload, cond("Admitted", "False", "NoReservation", "No quota"))
        set_condition(self.workload, cond("Requeued", "True", "Preempted", "Preempted"))
        self.job["spec"]["suspend"] = True
        self.job["spec"]["template"]["spec"].pop("nodeSelector", None)
        self.job["status"].pop("startTime", None)
        self.job["status"]["active"] = 0
        set_condition(self.job, cond("Suspended", "True", "JobSuspended", "Job suspended"))
        self.pods = []
        return self

    def evicted(self, reason: str, *, requeued: bool = True) -> JobBuilder:
        assert self.workload is not None
        set_condition(self.workload, cond("Evicted", "True", reason, f"Evicted: {reason}"))
        set_condition(
            self.workload,
            cond("Requeued", "True" if requeued else "False", reason, reason),
        )
        self.pods = []
        return self

    def pods_ready_timeout(self, at: str) -> JobBuilder:
        """Kueue evicts the workload at `at` for not having all its pods ready in time (the
        pods and the Job's start time stay as they are)."""
        assert self.workload is not None
        set_condition(
            self.workload,
            cond("Evicted", "True", "PodsReadyTimeout", "Exceeded the PodsReady timeout", at),
        )
        return self

    # -- scheduler and kubelet -------------------------------------------------------------

    def running(self, node: str | None = None) -> JobBuilder:
        """All replicas' pods run (on `node`, else spread over gpu-node-1 and gpu-node-2)."""
        state = {"running": {"startedAt": STARTED}}
        self.pods = [self._pod(i, n, "Running", state) for i, n in enumerate(self._nodes_for(node))]
        self.job["status"].update(startTime=STARTED, active=len(self.pods), ready=len(self.pods))
        return self

    def retrying(
        self, exit_code: int = 3, *, failed_on: str = "gpu-node-1", node: str = "gpu-node-2"
    ) -> JobBuilder:
        """The first pod failed (or was OOMKilled with 137); its replacement runs on `node`."""
        reason = "OOMKilled" if exit_code == 137 else "Error"
        first = self._pod(0, failed_on, "Failed", terminated_state(reason, exit_code))
        second = self._pod(1, node, "Running", {"running": {"startedAt": FINISHED}})
        self.pods = [first, second]
        self.job["status"].update(startTime=STARTED, active=1, ready=1, failed=1)
        return self

    def starting(self, node: str = "gpu-node-1") -> JobBuilder:
        waiting = {"waiting": {"reason": "ContainerCreating"}}
        self.pods = [self._pod(i, node, "Pending", waiting) for i in range(self.spec.replicas)]
        self.job["status"].update(startTime=STARTED, active=len(self.pods))
        return self

    def unschedulable(self, message: str | None = None) -> JobBuilder:
        message = message or f"0/2 nodes are available: 2 Insufficient {GPU}."
        pods = [self._pod(i, None, "Pending", {}) for i in range(self.spec.replicas)]
        for pod in pods:
            pod["status"]["conditions"] = [
                cond("PodScheduled", "False", "Unschedulable", message, ADMITTED)
            ]
        self.pods = pods
        self.job["status"].update(startTime=STARTED, active=len(pods))
        return self

    def image_pull_backoff(self, node: str = "gpu-node-1") -> JobBuilder:
        image = self.spec.image
        waiting = {
            "waiting": {
                "reason": "ImagePullBackOff",
                "message": f'Back-off pulling image "{image}"',
            }
        }
        self.pods = [self._pod(i, node, "Pending", waiting) for i in range(self.spec.replicas)]
        self.job["status"].update(startTime=STARTED, active=len(self.pods))
        return self

    def _terminate(self, node: str | None, reason: str, exit_code: int) -> list[Obj]:
        phase = "Succeeded" if exit_code == 0 else "Failed"
        state = terminated_state(reason, exit_code)
        return [self._pod(i, n, phase, state) for i, n in enumerate(self._nodes_for(node))]

    def succeeded(self, node: str | None = None) -> JobBuilder:
        self.pods = self._terminate(node, "Completed", 0)
        self.job["status"].update(
            startTime=STARTED,
            completionTime=FINISHED,
            active=0,
            ready=0,
            succeeded=len(self.pods),
        )
        message = "Reached expected number of succeeded pods"
        set_condition(
            self.job, cond("SuccessCriteriaMet", "True", "CompletionsReached", message, FINISHED)
        )
        set_condition(self.job, cond("Complete", "True", "CompletionsReached", message, FINISHED))
        return self

    def _job_failed(self, reason: str, message: str, failed: int) -> None:
        self.job["status"].update(startTime=STARTED, active=0, ready=0, failed=failed)
        set_condition(self.job, cond("FailureTarget", "True", reason, message, FINISHED))
        set_condition(self.job, cond("Failed", "True", reason, message, FINISHED))

    def failed(self, exit_code: int = 1, node: str = "gpu-node-1") -> JobBuilder:
        """Every attempt (1 + retries) exited with `exit_code`; the backoff limit is reached."""
        attempts = self.spec.retries + 1
        state = terminated_state("Error", exit_code)
        self.pods = [self._pod(i, node, "Failed", state) for i in range(attempts)]
        self._job_failed(
            "BackoffLimitExceeded", "Job has reached the specified backoff limit", attempts
        )
        return self

    def oom_killed(self, node: str | None = None) -> JobBuilder:
        self.pods = self._terminate(node, "OOMKilled", 137)[:1]
        self._job_failed("BackoffLimitExceeded", "Job has reached the specified backoff limit", 1)
        return self

    def rank_failed(self, rank: int, exit_code: int = 1, *, oom: bool = False) -> JobBuilder:
        """Rank `rank` exited with `exit_code` (or was OOM-killed) first; the pod failure
        policy failed the Job and the other ranks were stopped after it (exit 143)."""
        pods = []
        for index, node in enumerate(self._nodes_for(None)):
            if index == rank:
                state = terminated_state("OOMKilled" if oom else "Error", exit_code)
            else:
                state = terminated_state("Error", 143)
                state["terminated"]["finishedAt"] = "2026-08-01T10:09:59Z"
            pods.append(self._pod(index, node, "Failed", state))
        self.pods = pods
        message = f"Container main for pod {pods[rank]['metadata']['name']} failed with exit code"
        self._job_failed("PodFailurePolicy", f"{message} {exit_code}", len(pods))
        return self

    def deadline_exceeded(self, *, keep_pods: bool = False) -> JobBuilder:
        """The Job ran past `activeDeadlineSeconds`; its active pods were deleted (or not yet)."""
        if not keep_pods:
            self.pods = []
        self._job_failed("DeadlineExceeded", "Job was active longer than specified deadline", 0)
        return self

    def deleted_by_hand(self) -> JobBuilder:
        """The Job is gone (someone deleted it); Kueue's Workload went with it."""
        self.exists = False
        self.workload = None
        return self

    def with_pool(self, pool: PoolSnapshot) -> JobBuilder:
        self.pool = pool
        return self

    def build(self) -> Scenario:
        context = context_for(self.spec, accelerator_resource=GPU, pool=self.pool)
        return Scenario(
            job=copy.deepcopy(self.job) if self.exists else None,
            workload=copy.deepcopy(self.workload),
            pods=copy.deepcopy(self.pods),
            nodes=copy.deepcopy(self.nodes),
            context=context,
        )


def make_job(
    workload: str = "train",
    *,
    project: str = "research",
    pool: str = "h100-pool",
    image: str = "ghcr.io/acme/train:1.4",
    accelerators: int = 8,
    cpu: str = "32",
    memory: str = "256Gi",
    replicas: int = 1,
    nodes: int = 1,
    retries: int = 0,
    max_runtime_seconds: int = 86400,
    start_deadline_seconds: int | None = None,
    generation: int = 1,
) -> JobBuilder:
    """A JobBuilder for workload `workload`, as created by aicp (suspended, not admitted)."""
    spec = WorkloadSpec(
        name=workload,
        compute_pool=pool,
        image=image,
        accelerators=accelerators,
        cpu=cpu,
        memory=memory,
        replicas=replicas,
        nodes=nodes,
        retries=retries,
        max_runtime_seconds=max_runtime_seconds,
        start_deadline_seconds=start_deadline_seconds,
    )
    uid = hashlib.sha1(f"{project}/{workload}".encode()).hexdigest()
    uid = f"{uid[:8]}-{uid[8:12]}-{uid[12:16]}-{uid[16:20]}-{uid[20:32]}"
    identity = JobIdentity(project=project, workload=workload, uid=uid, generation=generation)
    job_uid = hashlib.sha1(f"job/{uid}/{generation}".encode()).hexdigest()[:32]
    return JobBuilder(spec=spec, identity=identity, job_uid=job_uid)
