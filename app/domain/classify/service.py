"""classify_service: an inference service's state, the reason for it, and what it observed.

A pure function over the raw objects the informers hold: the service's Deployment, its pods
and, for each pod Kueue still holds back, that pod's Kueue Workload. Pods being deleted are
left out of everything. It decides in this order, each step only when the ones before did not:

1. no Deployment → PENDING;
2. no replica asked for (`desired` 0) → READY once no pod is left, else PROGRESSING;
3. a replica failing → DEGRADED: OOM-killed, crash looping, its image not pulled, its
   container not created; else the Deployment failing to create pods (`ReplicaFailure`) or its
   rollout past the progress deadline (`Progressing=False`, `ProgressDeadlineExceeded`);
4. a rollout under way → PROGRESSING, with how many replicas run the new pod template;
5. fewer replicas ready than asked for → PROGRESSING, with what holds the others back
   (starting, not scheduled, not created yet, waiting for quota);
6. otherwise READY, naming the nodes.

`desired` is the Deployment's `spec.replicas` (the autoscaler's count under autoscaling), else
the spec's. A replica waits for quota while it carries Kueue's scheduling gate
(`kueue.x-k8s.io/admission`); Kueue's words come from its Workload's `QuotaReserved=False`
condition, phrased as a workload's are (`reasons.waiting_for_quota`). A replica OOM-killed
earlier that is ready again counts as failing until `RECOVERY_WINDOW` after it was killed
(`ServiceVerdict.recheck_at` says when to look again, since no event marks that moment).

Which pods run the current pod template is taken from the Deployment's status
(`updatedReplicas`, and `replicas` above it while old pods remain), not worked out from the
pods: that needs their ReplicaSets, which are not watched.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Final, NamedTuple

import msgspec

from app.domain.classify import reasons
from app.domain.classify.evidence import ClassifyContext
from app.domain.conditions import KueueCondition, KueueReason, PodPhase
from app.domain.kube_objects import (
    condition,
    field,
    is_terminating,
    is_true,
    main_container,
    main_status,
    name_of,
    node_name,
    parse_time,
    phase,
    terminated,
    unschedulable_message,
    waiting_reason,
)
from app.domain.service_resources import DeploymentRef, ReplicaCounts, ReplicaFacts, Termination
from app.domain.states import ServiceState

if TYPE_CHECKING:
    from collections.abc import Sequence

    from app.domain.classify.evidence import PoolSnapshot
    from app.domain.kube_objects import KubeObject
    from app.domain.service_specs import ServiceSpec

#: The scheduling gate Kueue's pod integration holds a pod with until it is admitted.
ADMISSION_GATE: Final = "kueue.x-k8s.io/admission"
#: How long a replica that was OOM-killed and is ready again still counts as failing.
RECOVERY_WINDOW: Final = timedelta(seconds=30)
#: The Deployment's rollout timeout when its spec names none (the API's default).
_DEFAULT_PROGRESS_DEADLINE = 600

_IMAGE_PULL = ("ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull")
_CONTAINER_CONFIG = ("CreateContainerConfigError", "CreateContainerError", "RunContainerError")


class ServiceVerdict(msgspec.Struct, frozen=True, kw_only=True):
    """A service's state, the sentence that explains it, and the `observed` facts (the shape of
    `app.domain.service_resources`, without `endpoint`)."""

    state: ServiceState
    reason: str
    observed: dict[str, Any]
    #: When the verdict changes by time alone (a recovered replica leaves `RECOVERY_WINDOW`),
    #: so the caller looks again then; None when only a change of the objects can change it.
    recheck_at: datetime | None = None


class _Failure(NamedTuple):
    rank: int  # which failure the reason names first: the lowest
    pod: str
    text: str
    recheck_at: datetime | None = None


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _ready(pod: KubeObject) -> bool:
    return is_true(pod, "Ready")


def waits_for_quota(pod: KubeObject) -> bool:
    """Whether Kueue still holds the pod back with its admission gate."""
    gates = field(pod, "spec", "schedulingGates") or ()
    return any(isinstance(gate, Mapping) and gate.get("name") == ADMISSION_GATE for gate in gates)


def held_for_quota(pod: KubeObject, kueue_workloads: Mapping[str, KubeObject]) -> bool:
    """Whether the pod waits for quota: gated, and its Kueue Workload (when known) has no quota
    reserved yet. Kueue reserves the quota first and lifts the gate in a later write: a pod in
    between is starting, not waiting."""
    if not waits_for_quota(pod):
        return False
    reserved = condition(kueue_workloads.get(name_of(pod)), KueueCondition.QUOTA_RESERVED)
    return reserved is None or reserved.get("status") != "True"


def desired_replicas(spec: ServiceSpec, deployment: KubeObject | None) -> int:
    """The Deployment's `spec.replicas`; before there is one, the spec's (the autoscaler's
    minimum under autoscaling)."""
    replicas = field(deployment, "spec", "replicas")
    if isinstance(replicas, int):
        return replicas
    return spec.autoscaling.min_replicas if spec.autoscaling else spec.replicas


def _count(deployment: KubeObject | None, key: str) -> int:
    value = field(deployment, "status", key)
    return value if isinstance(value, int) else 0


def _termination(pod: KubeObject) -> Termination | None:
    ended = terminated(pod)
    if ended is None:
        return None
    code = ended.get("exitCode")
    return Termination(
        reason=str(ended["reason"]) if ended.get("reason") else None,
        exit_code=code if isinstance(code, int) else None,
        finished_at=parse_time(ended.get("finishedAt")),
    )


def _restarts(pod: KubeObject) -> int:
    count = field(main_status(pod), "restartCount")
    return count if isinstance(count, int) else 0


def _facts(pod: KubeObject, kueue_workloads: Mapping[str, KubeObject]) -> ReplicaFacts:
    return ReplicaFacts(
        name=name_of(pod),
        node=node_name(pod),
        phase=phase(pod),
        ready=_ready(pod),
        restarts=_restarts(pod),
        waiting_for_quota=held_for_quota(pod, kueue_workloads),
        last_termination=_termination(pod),
    )


def _memory_limit(pod: KubeObject, spec: ServiceSpec) -> str:
    return str(field(main_container(pod), "resources", "limits", "memory") or spec.memory)


def _oom(pod: KubeObject, spec: ServiceSpec, now: datetime) -> _Failure | None:
    """An OOM kill that still counts: the replica is not ready again, or was killed less than
    `RECOVERY_WINDOW` ago."""
    ended = terminated(pod)
    if ended is None or ended.get("reason") != "OOMKilled":
        return None
    recheck = None
    if _ready(pod):
        finished = parse_time(ended.get("finishedAt"))
        if finished is None or finished + RECOVERY_WINDOW <= now:
            return None
        recheck = finished + RECOVERY_WINDOW
    node = node_name(pod)
    where = f" on {node}" if node else ""
    text = (
        f"replica {name_of(pod)} was OOMKilled{where}: its memory limit is "
        f"{_memory_limit(pod, spec)}; raise `memory`"
    )
    return _Failure(0, name_of(pod), text, recheck)


def _ended(pod: KubeObject) -> bool:
    """A pod that will never run again (evicted, or stopped with its node): the ReplicaSet
    replaces it, and it stays listed until it is garbage-collected."""
    return phase(pod) in (PodPhase.SUCCEEDED, PodPhase.FAILED)


def _pod_failure(pod: KubeObject, spec: ServiceSpec, now: datetime) -> _Failure | None:
    """Why the pod's replica fails, if it does (an ended pod is replaced, it does not fail)."""
    if _ended(pod):
        return None
    oom = _oom(pod, spec, now)
    if oom is not None:
        return oom
    name = name_of(pod)
    waiting = waiting_reason(pod)
    crashed = field(main_status(pod), "state", "terminated")
    if crashed or (waiting and waiting[0] == "CrashLoopBackOff"):
        code = (terminated(pod) or {}).get("exitCode")
        how = f"exiting with code {code}" if isinstance(code, int) else "its container exited"
        restarted = _plural(_restarts(pod), "time")
        return _Failure(
            1, name, f"replica {name} is restarting after {how} (restarted {restarted})"
        )
    if waiting and waiting[0] in _IMAGE_PULL:
        image = field(main_container(pod), "image") or spec.image
        said = waiting[1].rstrip(".") or waiting[0]
        return _Failure(2, name, f"replica {name} cannot pull image {image}: {said}")
    if waiting and waiting[0] in _CONTAINER_CONFIG:
        said = waiting[1].rstrip(".") or "no details"
        return _Failure(
            3, name, f"replica {name} cannot create its container ({waiting[0]}): {said}"
        )
    return None


def _deployment_failure(deployment: KubeObject, generation: int) -> str | None:
    """The Deployment's own failure: pods it cannot create, or a rollout past its deadline."""
    failure = condition(deployment, "ReplicaFailure")
    if failure is not None and failure.get("status") == "True":
        said = str(failure.get("message") or failure.get("reason") or "no details").rstrip(".")
        return f"replicas cannot be created: {said}"
    progressing = condition(deployment, "Progressing")
    if (
        progressing is not None
        and progressing.get("status") == "False"
        and progressing.get("reason") == "ProgressDeadlineExceeded"
    ):
        deadline = field(deployment, "spec", "progressDeadlineSeconds")
        seconds = deadline if isinstance(deadline, int) else _DEFAULT_PROGRESS_DEADLINE
        return f"the rollout of generation {generation} has not progressed for {seconds} s"
    return None


class _Quota(NamedTuple):
    """What the quota part of a reason needs besides the pods."""

    spec: ServiceSpec
    pool: str
    accelerator_resource: str
    pool_snapshot: PoolSnapshot | None
    kueue_workloads: Mapping[str, KubeObject]


def _quota_part(gated: Sequence[KubeObject], quota: _Quota) -> str:
    """`N waiting for quota in pool P: …`, in Kueue's words for the first gated pod that has
    them, phrased as a queued workload's reason is."""
    count, them = len(gated), "it" if len(gated) == 1 else "them"
    for pod in gated:
        reserved = condition(quota.kueue_workloads.get(name_of(pod)), KueueCondition.QUOTA_RESERVED)
        if reserved is None or reserved.get("status") != "False":
            continue
        message = str(reserved.get("message") or "")
        if "quota" in message.lower() or reserved.get("reason") == KueueReason.PENDING:
            context = ClassifyContext(
                pool_name=quota.pool,
                accelerator_resource=quota.accelerator_resource,
                accelerators=quota.spec.accelerators,
                cpu=quota.spec.cpu,
                memory=quota.spec.memory,
                image=quota.spec.image,
                pool=quota.pool_snapshot,
            )
            head = f"Waiting for quota in pool {quota.pool}: "
            said = reasons.waiting_for_quota(context, message).removeprefix(head).rstrip(".")
            return f"{count} waiting for quota in pool {quota.pool}: {said}"
        said = message.rstrip(".") or "no reason given"
        return f"{count} waiting in pool {quota.pool}, but Kueue cannot admit {them} yet: {said}"
    return f"{count} waiting for Kueue to admit {them} in pool {quota.pool}"


def _holding_back(
    live: Sequence[KubeObject], desired: int, quota: _Quota, *, with_others: bool
) -> list[str]:
    """What keeps the replicas that are not ready from serving, one phrase per cause; only the
    quota part unless `with_others`."""
    active = [pod for pod in live if not _ended(pod)]
    gated = [pod for pod in active if held_for_quota(pod, quota.kueue_workloads)]
    parts: list[str] = []
    if with_others:
        waiting = [pod for pod in active if not _ready(pod) and pod not in gated]
        stuck = [(pod, said) for pod in waiting if (said := unschedulable_message(pod))]
        starting = len(waiting) - len(stuck)
        if starting:
            parts.append(f"{starting} starting")
        if stuck:
            said = stuck[0][1].split(" preemption:")[0].rstrip(".")
            parts.append(f"{len(stuck)} not scheduled yet (the scheduler says: {said})")
        missing = desired - len(active)
        if missing > 0:
            parts.append(f"{missing} not created yet")
    if gated:
        parts.append(_quota_part(gated, quota))
    return parts


def _observed(
    deployment: KubeObject | None,
    live: Sequence[KubeObject],
    desired: int,
    kueue_workloads: Mapping[str, KubeObject],
) -> dict[str, Any]:
    facts = [_facts(pod, kueue_workloads) for pod in live]
    counts = ReplicaCounts(
        desired=desired,
        ready=sum(1 for fact in facts if fact.ready),
        updated=_count(deployment, "updatedReplicas"),
        waiting_for_quota=sum(1 for fact in facts if fact.waiting_for_quota),
    )
    observed: dict[str, Any] = {}
    name = field(deployment, "metadata", "name")
    if name:
        uid = field(deployment, "metadata", "uid")
        ref = DeploymentRef(name=str(name), uid=str(uid) if uid else None)
        observed["deployment"] = msgspec.to_builtins(ref)
    observed["replicas"] = msgspec.to_builtins(counts)
    observed["nodes"] = sorted({fact.node for fact in facts if fact.ready and fact.node})
    observed["pods"] = msgspec.to_builtins(facts)
    return observed


def _rolling_out(deployment: KubeObject, desired: int) -> bool:
    observed_generation = field(deployment, "status", "observedGeneration")
    generation = field(deployment, "metadata", "generation")
    behind = (
        isinstance(generation, int)
        and isinstance(observed_generation, int)
        and observed_generation < generation
    )
    updated = _count(deployment, "updatedReplicas")
    return behind or updated < desired or _count(deployment, "replicas") > updated


def classify_service(
    spec: ServiceSpec,
    generation: int,
    *,
    deployment: KubeObject | None,
    pods: Sequence[KubeObject],
    kueue_workloads: Mapping[str, KubeObject],
    pool: str,
    accelerator_resource: str,
    now: datetime,
    pool_snapshot: PoolSnapshot | None = None,
) -> ServiceVerdict:
    """The state, reason and observed facts of a service at `generation` (module docstring).

    `pods` are the service's pods (selected by its labels), `kueue_workloads` the Kueue
    Workload of each pod Kueue holds back, by pod name; `pool` names the compute pool in
    sentences, `accelerator_resource` is its binding's resource name and `pool_snapshot`, when
    known, its ClusterQueue's numbers. `now` is what `RECOVERY_WINDOW` is measured against.
    """
    live = sorted((pod for pod in pods if not is_terminating(pod)), key=name_of)
    desired = desired_replicas(spec, deployment)
    observed = _observed(deployment, live, desired, kueue_workloads)
    ready = observed["replicas"]["ready"]

    def verdict(
        state: ServiceState, text: str, recheck_at: datetime | None = None
    ) -> ServiceVerdict:
        return ServiceVerdict(
            state=state, reason=reasons.sentence(text), observed=observed, recheck_at=recheck_at
        )

    if deployment is None:
        return verdict(ServiceState.PENDING, "Waiting for the Deployment to be created")
    if desired == 0:
        if not live:
            return verdict(ServiceState.READY, "Scaled to zero: no replicas asked for")
        left = _plural(len(live), "replica")
        return verdict(ServiceState.PROGRESSING, f"Scaling to zero: {left} left to stop")

    quota = _Quota(spec, pool, accelerator_resource, pool_snapshot, kueue_workloads)
    progress = f"{ready} of {desired} replicas ready"
    failures = sorted(f for pod in live if (f := _pod_failure(pod, spec, now)) is not None)
    if failures:
        first = failures[0]
        text = f"{progress}; {first.text}."
        if len(failures) > 1:
            others = len(failures) - 1
            text += f" {_plural(others, 'more replica')} {'is' if others == 1 else 'are'} failing"
        recheck = min((f.recheck_at for f in failures if f.recheck_at), default=None)
        return verdict(ServiceState.DEGRADED, text, recheck)
    stalled = _deployment_failure(deployment, generation)
    if stalled is not None:
        parts = [stalled, *_holding_back(live, desired, quota, with_others=False)]
        return verdict(ServiceState.DEGRADED, "; ".join([progress, *parts]))

    if _rolling_out(deployment, desired):
        updated = observed["replicas"]["updated"]
        head = f"Rolling out generation {generation}: {updated} of {desired} replicas updated"
        parts = _holding_back(live, desired, quota, with_others=False)
        return verdict(ServiceState.PROGRESSING, "; ".join([head, *parts]))
    if ready < desired:
        parts = _holding_back(live, desired, quota, with_others=True)
        return verdict(ServiceState.PROGRESSING, "; ".join([progress, *parts]))
    if ready > desired:
        return verdict(
            ServiceState.PROGRESSING,
            f"Scaling down to {_plural(desired, 'replica')}: {ready} ready",
        )
    nodes = observed["nodes"]
    where = f" on {', '.join(nodes)}" if nodes else ""
    return verdict(ServiceState.READY, f"{desired} of {desired} replicas ready{where}")
