"""Kueue's preemption within a ClusterQueue (`preemption.withinClusterQueue`), after Kueue's
classical preemptor.

When a pending Workload does not fit, and the ClusterQueue's policy lets it preempt
(`LowerPriority`: strictly lower priority; `LowerOrNewerEqualPriority`: also equal priority
admitted later), admitted Workloads of that ClusterQueue are chosen as victims: lowest priority
first, then the most recently admitted, until the preemptor would fit. Victims get
`Evicted=True` (reason `Preempted`) and `Preempted=True` (reason `InClusterQueue`); the job
integration then stops their Jobs and, once no pod is left, clears their admission
(`QuotaReserved=False`, `Requeued=True`), which releases the quota for the preemptor.

While earlier victims are still stopping, their quota is counted as coming free, so a
preemptor does not evict more than it needs. Not simulated: preemption across a cohort
(`reclaimWithinCohort`, `borrowWithinCohort`) and fair sharing.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from kubesim.controllers import conditions
from kubesim.controllers.kueue_api import apply_status, owned_status

if TYPE_CHECKING:
    from kubesim.clock import Clock
    from kubesim.controllers.quota import FlavorResource, Pending, QuotaBook, WlKey
    from kubesim.store import ResourceType, Store

Obj = dict[str, Any]


def _may_preempt(policy: str, preemptor: Pending, victim_priority: int, newer: bool) -> bool:
    if policy == "LowerPriority":
        return victim_priority < preemptor.priority
    if policy == "LowerOrNewerEqualPriority":
        return victim_priority < preemptor.priority or (
            victim_priority == preemptor.priority and newer
        )
    return False


def choose_victims(
    book: QuotaBook, cq_name: str, cq: Obj, preemptor: Pending, used: Counter[FlavorResource]
) -> list[WlKey] | None:
    """Victims whose eviction lets `preemptor` fit, [] when the quota already being freed by
    evictions in flight is enough (wait), or None when preemption cannot help."""
    policy = ((cq.get("spec") or {}).get("preemption") or {}).get("withinClusterQueue", "Never")
    if policy == "Never":
        return None
    freed = Counter(used)
    candidates = []
    for key, usage in book.usage.items():
        if usage.cluster_queue != cq_name:
            continue
        if usage.evicted:
            freed.subtract(usage.amounts)
        elif _may_preempt(policy, preemptor, usage.priority, newer=True):
            candidates.append((usage.priority, -usage.admitted_at, key))
    if not isinstance(book.assign(cq_name, preemptor, freed), str):
        return []  # evictions already under way will make room
    victims: list[WlKey] = []
    for _, _, key in sorted(candidates):
        victims.append(key)
        freed.subtract(book.usage[key].amounts)
        if not isinstance(book.assign(cq_name, preemptor, freed), str):
            return victims
    return None


def evict(store: Store, rt: ResourceType, clock: Clock, workload: Obj, preemptor: Obj) -> None:
    """Mark one admitted Workload preempted, as Kueue's preemptor does (its admission stays
    until the Job has stopped)."""
    meta = preemptor["metadata"]
    job_uid = (meta.get("labels") or {}).get("kueue.x-k8s.io/job-uid", "")
    message = (
        f"Preempted to accommodate a workload (UID: {meta['uid']}, JobUID: {job_uid}) due to "
        "prioritization in the ClusterQueue"
    )
    now = clock.now_rfc3339()
    generation = workload["metadata"].get("generation")
    status = owned_status(workload)
    conditions.set_condition(
        status["conditions"],
        "Evicted",
        True,
        "Preempted",
        message,
        now,
        observed_generation=generation,
    )
    conditions.set_condition(
        status["conditions"],
        "Preempted",
        True,
        "InClusterQueue",
        message,
        now,
        observed_generation=generation,
    )
    apply_status(store, rt, workload, status)


def clear_admission(
    store: Store, rt: ResourceType, clock: Clock, workload: Obj, *, pod_owned: bool = False
) -> None:
    """After an evicted Workload's Job has stopped: drop the admission and requeue it.

    A Workload owned by a single pod (`pod_owned`) dies with its pod, so Kueue (0.19's
    SkipReassignmentForPodOwnedWorkloads) writes `Requeued=False` and `QuotaReserved=False`
    reason `Pending` whatever the eviction's reason: it is never queued again."""
    status = owned_status(workload)
    evicted = conditions.find(status["conditions"], "Evicted") or {}
    reason = str(evicted.get("reason") or "Preempted")
    message = str(evicted.get("message") or "")
    now = clock.now_rfc3339()
    generation = workload["metadata"].get("generation")
    status.pop("admission", None)
    conds = status["conditions"]
    # Preempted keeps its reason; a readiness timeout or deactivation leaves it Pending.
    reserved_reason = "Preempted" if reason == "Preempted" and not pod_owned else "Pending"
    conditions.set_condition(
        conds, "QuotaReserved", False, reserved_reason, message, now, observed_generation=generation
    )
    conditions.set_condition(
        conds,
        "Admitted",
        False,
        "NoReservation",
        "The workload has no reservation",
        now,
        observed_generation=generation,
    )
    # A readiness timeout requeues after its back-off (kueue_pods_ready), a deactivation never.
    requeued = reason == "Preempted" and not pod_owned
    conditions.set_condition(
        conds, "Requeued", requeued, reason, message, now, observed_generation=generation
    )
    apply_status(store, rt, workload, status)


def readmitted(conds: list[Obj], now: str, generation: int | None) -> None:
    """On a new admission, Kueue turns past Evicted/Preempted conditions False ("Previously")."""
    for type_ in ("Evicted", "Preempted"):
        current = conditions.find(conds, type_)
        if current is not None and current.get("status") == "True":
            conditions.set_condition(
                conds,
                type_,
                False,
                "QuotaReserved",
                f"Previously: {current.get('message', '')}",
                now,
                observed_generation=generation,
            )
