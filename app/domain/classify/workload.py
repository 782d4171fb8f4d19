"""classify: a workload's true state, the reason for it, and the evidence (docs/DESIGN.md §7).

A pure function over the raw objects the informers hold: the Job of the current generation,
its Kueue Workload, the Job's pods and the cluster's nodes. It decides in this order, each
step only when the ones before did not:

1. no Job → PENDING (accepted, nothing applied yet);
2. Job `Complete` → SUCCEEDED; Job `Failed` → FAILED, explained by OOM, deadline, exit code;
3. Workload `Evicted` → QUEUED again (preempted or evicted, requeued);
4. Job `SuccessCriteriaMet` / `FailureTarget` (decided, pods still stopping) → RUNNING;
   a pod running → RUNNING (pods are the truth even before the Workload cache catches up);
5. quota reserved / admitted, or the Job unsuspended by Kueue → ADMITTED, explained by what
   holds the pods back (image pull, unschedulable, container config); past its start deadline
   (`start_deadline.py`) with no pod ever started → FAILED, explained by the same evidence,
   with `start_deadline_passed` set: aicp ends it, the Job is still live;
6. otherwise QUEUED, explained by Kueue's `QuotaReserved=False` message and the pool numbers.

Only the final Job conditions (`Complete`, `Failed`) end a workload: `SuccessCriteriaMet` and
`FailureTarget` come first while pods still terminate, and the evidence (completion time, exit
codes) is only complete after them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from app.domain.classify import reasons
from app.domain.classify.evidence import ClassifyContext, Evidence, gather_evidence
from app.domain.classify.start_deadline import start_deadline
from app.domain.conditions import (
    DEADLINE_EXCEEDED,
    EvictionCause,
    JobCondition,
    KueueCondition,
    KueueReason,
    PodPhase,
)
from app.domain.kube_objects import (
    GPU_PRODUCT_LABEL,
    KubeObject,
    completion_index,
    condition,
    field,
    index_by_name,
    is_terminating,
    is_true,
    job_count,
    main_container,
    main_status,
    name_of,
    node_name,
    parse_time,
    phase,
    pods_of_job,
    terminated,
    transition_time,
    unschedulable_message,
    waiting_reason,
)
from app.domain.quantity import QuantityError, format_bytes, parse_quantity
from app.domain.states import WorkloadState

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence
    from datetime import datetime

__all__ = ["Classification", "ClassifyContext", "Evidence", "classify"]

_IMAGE_PULL = ("ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull")
_CONTAINER_CONFIG = ("CreateContainerConfigError", "CreateContainerError", "RunContainerError")


class Classification(NamedTuple):
    state: WorkloadState
    reason: str
    evidence: Evidence
    #: Set when Kueue took the workload back (state QUEUED after admission): preempted by
    #: another workload, or evicted for another cause. Events are chosen from it, never from
    #: the words of `reason`.
    cause: EvictionCause | None = None
    #: Set when aicp itself fails the workload because its start deadline passed: its Job is
    #: still live (not `Failed`), and the workload step deletes it to free the quota.
    start_deadline_passed: bool = False
    #: When the start deadline of an ADMITTED workload passes (None: none applies), so the
    #: step looks again then.
    start_deadline: datetime | None = None


class _Decided(NamedTuple):
    failure: str | None  # None: it succeeded


def _decided_by_pods(
    job: KubeObject, live: Sequence[KubeObject], context: ClassifyContext
) -> _Decided | None:
    """The outcome the Job's ended pods already decide while the Job has not counted them yet
    (None: undecided, e.g. a failed pod the Job will retry)."""
    succeeded = sum(1 for pod in live if phase(pod) == PodPhase.SUCCEEDED)
    failed = sum(1 for pod in live if phase(pod) == PodPhase.FAILED)
    completions = int(field(job, "spec", "completions") or context.replicas)
    backoff_limit = field(job, "spec", "backoffLimit")
    limit = 6 if backoff_limit is None else int(backoff_limit)  # the Job API's default
    if failed > limit:
        return _Decided("BackoffLimitExceeded")
    if failed == 0 and succeeded >= completions:
        return _Decided(None)
    return None


def _products(node_names: Iterable[str], nodes: Mapping[str, KubeObject]) -> list[str]:
    found = (field(nodes.get(n), "metadata", "labels", GPU_PRODUCT_LABEL) for n in node_names)
    return sorted({str(p) for p in found if p})


def _memory_limit(pod: KubeObject, context: ClassifyContext) -> str:
    raw = field(main_container(pod), "resources", "limits", "memory") or context.memory
    try:
        return format_bytes(parse_quantity(str(raw)))
    except QuantityError:
        return str(raw)


def _image_pull(pods: list[KubeObject], context: ClassifyContext) -> tuple[str, str, str] | None:
    """(image, waiting reason, its message) of the first pod that cannot pull its image."""
    for pod in pods:
        waiting = waiting_reason(pod)
        if waiting and waiting[0] in _IMAGE_PULL:
            image = field(main_container(pod), "image") or context.image
            return str(image), waiting[0], waiting[1]
    return None


def _failed(
    job: KubeObject, pods: list[KubeObject], context: ClassifyContext, evidence: Evidence
) -> str:
    cause = condition(job, JobCondition.FAILED) or {}
    why, message = str(cause.get("reason") or ""), str(cause.get("message") or "")
    if why == DEADLINE_EXCEEDED:
        pulled = _image_pull(pods, context)
        return reasons.deadline_exceeded(context, pulled[0] if pulled else None)
    ended = [(pod, state) for pod in pods if (state := terminated(pod))]
    if context.nodes > 1:
        first = _first_failed_rank(ended)
        if first is not None:
            return _rank_failed(*first, context)
    for pod, state in reversed(ended):
        if state.get("reason") == "OOMKilled":
            name = str(field(main_status(pod), "name") or "main")
            return reasons.out_of_memory(name, _memory_limit(pod, context), node_name(pod))
    if evidence.exit_code not in (None, 0):
        node = next(
            (node_name(p) for p, s in reversed(ended) if s.get("exitCode") == evidence.exit_code),
            None,
        )
        return reasons.exited(int(evidence.exit_code or 0), node, evidence.attempts)
    return reasons.failed(why, message)


def _first_failed_rank(
    ended: list[tuple[KubeObject, Mapping[str, object]]],
) -> tuple[KubeObject, Mapping[str, object]] | None:
    """The rank whose failure ended the attempt: the first to end OOM-killed or non-zero (the
    others were stopped after it)."""
    failed = [
        (pod, state)
        for pod, state in ended
        if completion_index(pod) is not None
        and (state.get("reason") == "OOMKilled" or state.get("exitCode") not in (None, 0))
    ]
    return min(failed, key=lambda pair: str(pair[1].get("finishedAt") or ""), default=None)


def _rank_failed(pod: KubeObject, state: Mapping[str, object], context: ClassifyContext) -> str:
    rank = completion_index(pod) or 0
    attempt = context.previous_attempts + 1
    if state.get("reason") == "OOMKilled":
        limit = _memory_limit(pod, context)
        return reasons.rank_out_of_memory(
            context, rank, name_of(pod), node_name(pod), limit, attempt
        )
    code = state.get("exitCode")
    return reasons.rank_exited(
        context, rank, name_of(pod), node_name(pod), code if isinstance(code, int) else 1, attempt
    )


def _previous_attempt(pods: list[KubeObject], context: ClassifyContext, evidence: Evidence) -> str:
    """What ended the latest failed pod, for a workload that is running again on a retry."""
    failed = [
        (pod, state) for pod in pods if (state := terminated(pod)) and phase(pod) == PodPhase.FAILED
    ]
    pod, state = max(
        failed, key=lambda pair: str(pair[1].get("finishedAt") or ""), default=({}, {})
    )
    code = state.get("exitCode")
    return reasons.previous_attempt(
        evidence.attempts,
        context.retries + 1,
        code if isinstance(code, int) else None,
        node_name(pod) if pod else None,
        state.get("reason") == "OOMKilled",
    )


def _evicted(
    workload: KubeObject | None, context: ClassifyContext
) -> tuple[str, EvictionCause] | None:
    """The reason sentence and its cause if Kueue has evicted (or preempted) the workload."""
    if not is_true(workload, KueueCondition.EVICTED):
        return None
    eviction = condition(workload, KueueCondition.EVICTED) or {}
    why = str(eviction.get("reason") or "")
    preempted = condition(workload, KueueCondition.PREEMPTED)
    preempted_by = str(preempted.get("reason")) if preempted else None
    requeued = (condition(workload, KueueCondition.REQUEUED) or {}).get("status") != "False"
    cause = EvictionCause.PREEMPTED if why == KueueReason.PREEMPTED else EvictionCause.EVICTED
    return reasons.evicted(context, why, preempted_by, requeued), cause


def _gang_timed_out(workload: KubeObject | None) -> bool:
    eviction = condition(workload, KueueCondition.EVICTED) or {}
    return eviction.get("reason") == KueueReason.PODS_READY_TIMEOUT


def _gang_requeued(
    job: KubeObject, workload: KubeObject | None, pods: list[KubeObject], context: ClassifyContext
) -> str:
    """Kueue's all-or-nothing start gave up: how many pods ran, and after how long."""
    running = sum(1 for pod in pods if phase(pod) == PodPhase.RUNNING)
    total = int(field(job, "spec", "parallelism") or context.replicas)
    evicted_at = transition_time(workload, KueueCondition.EVICTED)
    started = parse_time(field(job, "status", "startTime"))
    earlier = context.earlier
    if earlier is not None:
        # Kueue suspends the Job: its pods go and its start time is cleared, so what the
        # last observations before the eviction recorded stands in for them. A rank whose
        # container started was running, even when the last observation saw it stopped.
        if not running:
            running = sum(
                1
                for rank in earlier.ranks
                if rank.phase == PodPhase.RUNNING or rank.started_at is not None
            )
        if started is None:
            started = earlier.started_at
    waited = None
    if evicted_at is not None and started is not None and evicted_at >= started:
        waited = int((evicted_at - started).total_seconds())
    return reasons.gang_not_ready(running, total, waited)


def _admitted(pods: list[KubeObject], context: ClassifyContext, evidence: Evidence) -> str:
    """Why an admitted workload has no running pod yet."""
    pulled = _image_pull(pods, context)
    if pulled:
        return reasons.image_not_pulled(pulled[0], pulled[1], context)
    for pod in pods:
        waiting = waiting_reason(pod)
        if waiting and waiting[0] in _CONTAINER_CONFIG:
            return reasons.container_not_created(*waiting)
    for pod in pods:
        message = unschedulable_message(pod)
        if message:
            return reasons.unschedulable(context, message)
    admission = evidence.admission
    starting = sum(1 for pod in pods if phase(pod) == PodPhase.PENDING)
    return reasons.admitted(
        admission.cluster_queue if admission else None,
        admission.flavor if admission else None,
        starting,
    )


def _never_started(pods: list[KubeObject], context: ClassifyContext) -> str:
    """Why a workload failed at its start deadline: what held its pods back, as `_admitted`
    reads it, in the words of the kubelet or the scheduler."""
    pulled = _image_pull(pods, context)
    if pulled:
        return reasons.start_deadline_image(context, *pulled)
    for pod in pods:
        waiting = waiting_reason(pod)
        if waiting and waiting[0] in _CONTAINER_CONFIG:
            return reasons.start_deadline_container(context, *waiting)
    for pod in pods:
        message = unschedulable_message(pod)
        if message:
            return reasons.start_deadline_unschedulable(context, message)
    starting = sum(1 for pod in pods if phase(pod) == PodPhase.PENDING)
    return reasons.start_deadline_waiting(context, starting)


def _queued(workload: KubeObject | None, context: ClassifyContext) -> str:
    reserved = condition(workload, KueueCondition.QUOTA_RESERVED)
    if reserved is None or reserved.get("status") != "False":
        return reasons.queued(context)
    message = str(reserved.get("message") or "")
    if "quota" in message.lower() or reserved.get("reason") == KueueReason.PENDING:
        return reasons.waiting_for_quota(context, message)
    return reasons.not_admissible(context, message)


def classify(
    job: KubeObject | None,
    kueue_workload: KubeObject | None,
    pods: Iterable[KubeObject],
    nodes: Iterable[KubeObject],
    *,
    context: ClassifyContext,
    now: datetime | None = None,
) -> Classification:
    """The state, reason and evidence of one workload generation (see the module docstring).

    `job` is the Job of the current generation (None when there is none), `kueue_workload`
    Kueue's Workload for it, `pods` the pods labelled for this workload (pods of any other
    Job uid are ignored), `nodes` all nodes (only those running our pods are read). `now` is
    the time the start deadline is compared with (None: it is not checked).
    """
    mine = pods_of_job(job, pods)
    node_index = index_by_name(nodes)
    evidence = gather_evidence(job, kueue_workload, mine, node_index, context)
    if job is None:
        return Classification(WorkloadState.PENDING, reasons.pending(), evidence)

    if is_true(job, JobCondition.COMPLETE):
        took = None
        if evidence.started_at and evidence.finished_at:
            took = int((evidence.finished_at - evidence.started_at).total_seconds())
        total = field(job, "spec", "completions") or context.replicas
        products = _products(evidence.nodes, node_index)
        reason = reasons.succeeded(int(total), evidence.nodes, products, took)
        return Classification(WorkloadState.SUCCEEDED, reason, evidence)
    if is_true(job, JobCondition.FAILED):
        reason = _failed(job, mine, context, evidence)
        return Classification(WorkloadState.FAILED, reason, evidence)

    # The Job has decided but its pods are still terminating: not final yet (module docstring).
    if is_true(job, JobCondition.SUCCESS_CRITERIA_MET):
        return Classification(WorkloadState.RUNNING, reasons.finishing(None), evidence)
    if is_true(job, JobCondition.FAILURE_TARGET):
        why = str((condition(job, JobCondition.FAILURE_TARGET) or {}).get("reason") or "")
        return Classification(WorkloadState.RUNNING, reasons.finishing(why), evidence)

    evicted = _evicted(kueue_workload, context)
    if evicted is not None and _gang_timed_out(kueue_workload):
        sentence = _gang_requeued(job, kueue_workload, mine, context)
        return Classification(WorkloadState.QUEUED, sentence, evidence, EvictionCause.EVICTED)
    if evicted is not None:
        sentence, cause = evicted
        return Classification(WorkloadState.QUEUED, sentence, evidence, cause)

    live = [pod for pod in mine if not is_terminating(pod)]
    running = [pod for pod in live if phase(pod) == PodPhase.RUNNING]
    if running:
        on = sorted({name for pod in running if (name := node_name(pod))})
        total = field(job, "spec", "parallelism") or context.replicas
        reason = reasons.running(len(running), int(total), on, _products(on, node_index))
        if job_count(job, "failed") > 0:
            reason += " " + _previous_attempt(mine, context, evidence)
        return Classification(WorkloadState.RUNNING, reason, evidence)

    # Pods that ended before the Job controller counted them: the outcome is decided, the Job
    # is catching up (a real cluster shows this for a few milliseconds; it is no restart).
    decided = _decided_by_pods(job, live, context)
    if decided is not None:
        return Classification(WorkloadState.RUNNING, reasons.finishing(decided.failure), evidence)

    admitted = (
        is_true(kueue_workload, KueueCondition.QUOTA_RESERVED)
        or is_true(kueue_workload, KueueCondition.ADMITTED)
        or field(job, "spec", "suspend") is False
    )
    if admitted:
        deadline = start_deadline(job, mine, evidence, context)
        if deadline is not None and now is not None and now >= deadline:
            reason = _never_started(live, context)
            return Classification(
                WorkloadState.FAILED, reason, evidence, start_deadline_passed=True
            )
        reason = _admitted(live, context, evidence)
        return Classification(WorkloadState.ADMITTED, reason, evidence, start_deadline=deadline)
    return Classification(WorkloadState.QUEUED, _queued(kueue_workload, context), evidence)
