"""Evidence of where and how a workload ran, gathered from its Kubernetes objects.

The evidence is `app.domain.workload_resources.ObservedFacts`: the `status` fields of docs/API.md's
workload resource (`job`, `admission`, `nodes`, `accelerator`, `attempts`, `started_at`,
`finished_at`, `exit_code`), so the reconciler stores it as it is in the `observed` column and
the API returns it as it is.

`gather_evidence` only reports what the objects show *now*. A Job that is deleted and
recreated, or a Workload whose admission Kueue cleared on preemption, no longer shows earlier
facts; `merge_evidence` keeps recorded facts that the current objects no longer carry.
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import TYPE_CHECKING

import msgspec

from app.domain.conditions import JobCondition, KueueCondition, PodPhase
from app.domain.kube_objects import (
    GPU_MEMORY_LABEL,
    GPU_PRODUCT_LABEL,
    KubeObject,
    completion_index,
    field,
    is_true,
    job_count,
    main_status,
    name_of,
    node_name,
    parse_time,
    phase,
    terminated,
    transition_time,
)
from app.domain.workload_resources import (
    AcceleratorFacts,
    Admission,
    JobRef,
    KueueWorkloadRef,
    ObservedFacts,
    RankFacts,
)

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from app.domain.specs import WorkloadSpec

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


#: The evidence classify reports is exactly what the reconciler stores in the workload's
#: `observed` column and the API decodes from it: one shape, defined with the API resource.
Evidence = ObservedFacts


class PoolSnapshot(msgspec.Struct, frozen=True, kw_only=True):
    """A pool's quota and usage per resource, as its ClusterQueue reports them."""

    name: str
    quota: dict[str, Decimal] = {}
    in_use: dict[str, Decimal] = {}
    workloads_admitted: int = 0
    workloads_pending: int = 0


class ClassifyContext(msgspec.Struct, frozen=True, kw_only=True):
    """What classification needs besides the Kubernetes objects: the request and its pool.

    Amounts are per replica, as in the workload spec. `pool` is None when the pool's
    ClusterQueue has not been observed yet; reasons then omit the pool's numbers.
    """

    pool_name: str
    accelerator_resource: str
    accelerators: int
    cpu: str
    memory: str
    replicas: int = 1
    #: Ranks of a multi-node workload (1: not distributed).
    nodes: int = 1
    retries: int = 0
    #: Attempts of earlier Jobs of the same generation (a multi-node workload's retries, a
    #: Job deleted by hand), so a reason can say which attempt this is.
    previous_attempts: int = 0
    image: str = ""
    max_runtime_seconds: int = 86400
    start_deadline_seconds: int | None = None
    pool: PoolSnapshot | None = None
    #: The facts recorded for this generation at earlier observations, for what the objects
    #: no longer show (Kueue's eviction removes the pods and the Job's start time).
    earlier: Evidence | None = None


def context_for(
    spec: WorkloadSpec,
    *,
    accelerator_resource: str,
    pool: PoolSnapshot | None = None,
    previous_attempts: int = 0,
    earlier: Evidence | None = None,
) -> ClassifyContext:
    """The classification context of a workload spec (its pool's binding gives the resource)."""
    return ClassifyContext(
        pool_name=spec.compute_pool,
        accelerator_resource=accelerator_resource,
        accelerators=spec.accelerators,
        cpu=spec.cpu,
        memory=spec.memory,
        replicas=spec.pods,
        nodes=spec.nodes,
        retries=spec.retries,
        image=spec.image,
        max_runtime_seconds=spec.max_runtime_seconds,
        start_deadline_seconds=spec.start_deadline_seconds,
        pool=pool,
        previous_attempts=previous_attempts,
        earlier=earlier,
    )


def _admission(workload: KubeObject | None, resource: str) -> Admission | None:
    cluster_queue = field(workload, "status", "admission", "clusterQueue")
    if not cluster_queue:
        return None
    flavor: str | None = None
    for assignment in field(workload, "status", "admission", "podSetAssignments") or ():
        flavors = field(assignment, "flavors") or {}
        chosen = flavors.get(resource) or next(iter(flavors.values()), None)
        if chosen:
            flavor = str(chosen)
            break
    admitted_at = transition_time(workload, KueueCondition.ADMITTED) or transition_time(
        workload, KueueCondition.QUOTA_RESERVED
    )
    return Admission(cluster_queue=str(cluster_queue), flavor=flavor, admitted_at=admitted_at)


def _accelerator(
    node_names: Iterable[str], nodes: Mapping[str, KubeObject], context: ClassifyContext
) -> AcceleratorFacts | None:
    if context.accelerators <= 0:
        return None
    product: str | None = None
    memory: int | None = None
    for name in node_names:
        labels = field(nodes.get(name), "metadata", "labels") or {}
        product = product or labels.get(GPU_PRODUCT_LABEL)
        raw_memory = labels.get(GPU_MEMORY_LABEL)
        if memory is None and isinstance(raw_memory, str) and raw_memory.isdigit():
            memory = int(raw_memory)
    if product is None and memory is None:
        return None
    return AcceleratorFacts(
        product=product, memory_mib=memory, count=context.accelerators * context.replicas
    )


def _attempts(job: KubeObject | None, pods: list[KubeObject], context: ClassifyContext) -> int:
    """Failed pods, plus one for the current attempt when a pod runs or has succeeded.

    With one replica this counts tries; with more, every failed pod is one retry of the set.
    A multi-node workload's Job is one attempt of all its ranks (it never retries a rank):
    1 once any rank ran, else 0; the workload step counts the Jobs before it.
    """
    if context.nodes > 1:
        ran = job_count(job, "failed") + job_count(job, "active") + job_count(job, "succeeded")
        ran += sum(1 for pod in pods if phase(pod) != PodPhase.PENDING)
        return 1 if ran > 0 else 0
    if field(job, "status") is not None:
        failed = job_count(job, "failed")
        current = job_count(job, "active") + job_count(job, "succeeded")
    else:
        failed = sum(1 for pod in pods if phase(pod) == PodPhase.FAILED)
        current = sum(1 for pod in pods if phase(pod) in (PodPhase.RUNNING, PodPhase.SUCCEEDED))
    return failed + (1 if current > 0 else 0)


def _started_at(job: KubeObject | None, pods: list[KubeObject]) -> datetime | None:
    started = parse_time(field(job, "status", "startTime"))
    if started is not None:
        return started
    # No Job status (yet): the earliest moment a pod's container was seen running.
    times = [parse_time(field(main_status(pod), "state", "running", "startedAt")) for pod in pods]
    known = [t for t in times if t is not None]
    return min(known) if known else None


def _finished_at(job: KubeObject | None) -> datetime | None:
    completed = parse_time(field(job, "status", "completionTime"))
    if completed is not None:
        return completed
    return transition_time(job, JobCondition.FAILED) or transition_time(job, JobCondition.COMPLETE)


def _exit_code(job: KubeObject | None, pods: list[KubeObject]) -> int | None:
    """The `main` container's exit code of the latest pod to end.

    For a failed Job the latest *non-zero* code wins: that is the one that explains it.
    """
    ended: list[tuple[datetime, int]] = []
    for pod in pods:
        state = terminated(pod)
        if state is not None and isinstance(state.get("exitCode"), int):
            at = parse_time(state.get("finishedAt")) or _EPOCH
            ended.append((at, int(state["exitCode"])))
    if is_true(job, JobCondition.FAILED) and any(code != 0 for _, code in ended):
        ended = [(at, code) for at, code in ended if code != 0]
    return max(ended)[1] if ended else None


def gather_evidence(
    job: KubeObject | None,
    workload: KubeObject | None,
    pods: list[KubeObject],
    nodes: Mapping[str, KubeObject],
    context: ClassifyContext,
) -> Evidence:
    """The evidence the given objects show now (see the module docstring for what it misses)."""
    node_names = sorted({name for pod in pods if (name := node_name(pod))})
    job_name = field(job, "metadata", "name")
    job_uid = field(job, "metadata", "uid")
    return Evidence(
        job=JobRef(name=str(job_name), uid=str(job_uid or "")) if job_name else None,
        admission=_admission(workload, context.accelerator_resource),
        nodes=node_names,
        accelerator=_accelerator(node_names, nodes, context),
        attempts=_attempts(job, pods, context),
        started_at=_started_at(job, pods),
        finished_at=_finished_at(job),
        exit_code=_exit_code(job, pods),
        ranks=_ranks(pods, nodes) if context.nodes > 1 else [],
        kueue_workload=_kueue_workload(workload),
    )


def _kueue_workload(workload: KubeObject | None) -> KueueWorkloadRef | None:
    created = parse_time(field(workload, "metadata", "creationTimestamp"))
    uid = field(workload, "metadata", "uid")
    if created is None or not uid:
        return None
    return KueueWorkloadRef(created_at=created, uid=str(uid))


def _ranks(pods: list[KubeObject], nodes: Mapping[str, KubeObject]) -> list[RankFacts]:
    """One entry per rank that has a pod: the newest pod of each index."""
    newest: dict[int, KubeObject] = {}
    for pod in pods:
        rank = completion_index(pod)
        if rank is None:
            continue
        created = str(field(pod, "metadata", "creationTimestamp") or "")
        seen = newest.get(rank)
        if seen is None or created >= str(field(seen, "metadata", "creationTimestamp") or ""):
            newest[rank] = pod
    return [_rank(rank, newest[rank], nodes) for rank in sorted(newest)]


def _rank(rank: int, pod: KubeObject, nodes: Mapping[str, KubeObject]) -> RankFacts:
    node = node_name(pod)
    product = field(nodes.get(node or ""), "metadata", "labels", GPU_PRODUCT_LABEL)
    ended = terminated(pod) or {}
    code = ended.get("exitCode")
    started = parse_time(field(main_status(pod), "state", "running", "startedAt"))
    return RankFacts(
        rank=rank,
        pod=name_of(pod),
        node=node,
        accelerator_product=str(product) if product else None,
        phase=phase(pod),
        exit_code=code if isinstance(code, int) else None,
        oom_killed=ended.get("reason") == "OOMKilled",
        started_at=started or parse_time(ended.get("startedAt")),
        finished_at=parse_time(ended.get("finishedAt")),
    )


def _merge_ranks(recorded: list[RankFacts], current: list[RankFacts]) -> list[RankFacts]:
    """Each rank as the objects show it now, else as it was recorded."""
    by_rank = {facts.rank: facts for facts in recorded}
    by_rank.update({facts.rank: facts for facts in current})
    return [by_rank[rank] for rank in sorted(by_rank)]


def merge_evidence(recorded: Evidence, current: Evidence) -> Evidence:
    """`current`, with every fact it lacks taken from `recorded`.

    Use it when the objects may have lost facts (a Job deleted by hand, an admission cleared
    by preemption). Nodes accumulate; attempts never go down. When `current` is another Job
    than the recorded one (aicp restarted a multi-node workload's ranks, or replaced a Job
    deleted by hand), how the earlier Job ran and ended is no fact of the new attempt: its
    start, end, exit code and ranks are the new Job's alone.
    """
    if _another_job(recorded, current):
        recorded = msgspec.structs.replace(
            recorded,
            started_at=None,
            finished_at=None,
            exit_code=None,
            ranks=[],
            kueue_workload=None,
        )
    return Evidence(
        job=current.job or recorded.job,
        admission=current.admission or recorded.admission,
        nodes=sorted(set(recorded.nodes) | set(current.nodes)),
        accelerator=current.accelerator or recorded.accelerator,
        attempts=max(recorded.attempts, current.attempts),
        started_at=current.started_at or recorded.started_at,
        finished_at=current.finished_at or recorded.finished_at,
        exit_code=current.exit_code if current.exit_code is not None else recorded.exit_code,
        ranks=_merge_ranks(recorded.ranks, current.ranks),
        kueue_workload=current.kueue_workload or recorded.kueue_workload,
    )


def _another_job(recorded: Evidence, current: Evidence) -> bool:
    before, now = recorded.job, current.job
    if before is None or now is None or not before.uid or not now.uid:
        return False
    return before.uid != now.uid
