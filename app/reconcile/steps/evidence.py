"""Observing a workload's Job: classification from the informer caches, and its evidence as
stored in the row's `observed` column (docs/DESIGN.md §6 "Evidence finalizer", §7).

`observed` is `ObservedFacts` (the API's status fields) plus one bookkeeping key,
`previous_attempts`: the attempts of the earlier Jobs of the same generation (one deleted by
hand and recreated), so `attempts` keeps counting across them. Facts recorded for
one generation are never merged into another's (invariant 6).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import msgspec

from app.domain.classify import Classification, classify
from app.domain.classify.evidence import Evidence, context_for, merge_evidence
from app.domain.classify.pool import pool_snapshot
from app.domain.conditions import DEADLINE_EXCEEDED, EvictionCause, JobCondition, PodPhase
from app.domain.events import EventType
from app.domain.kube_objects import (
    condition,
    field,
    is_terminating,
    is_true,
    job_count,
    name_of,
    phase,
    pods_of_job,
)
from app.domain.labels import GENERATION_LABEL, JOB_NAME_LABEL, KUEUE_JOB_UID_LABEL
from app.domain.naming import cluster_queue_name
from app.domain.render.inputs import JobIdentity
from app.domain.specs import WorkloadSpec
from app.domain.states import WorkloadState

if TYPE_CHECKING:
    from app.domain.kube_objects import Manifest
    from app.reconcile.steps.context import StepContext
    from app.store.reconciling import WorkloadRow

PREVIOUS_ATTEMPTS = "previous_attempts"
#: The uid of a Job deleted by hand whose facts and attempts are already recorded (and counted in
#: `PREVIOUS_ATTEMPTS`): a second look at the same terminating Job must not count it again.
RETIRED_JOB_UID = "retired_job_uid"

#: Milestones in the order a workload passes them; a state change emits one event for each
#: milestone it crosses (a Job that starts between two observations still gets `Admitted`).
_RANK = {
    WorkloadState.PENDING: 0,
    WorkloadState.QUEUED: 1,
    WorkloadState.ADMITTED: 2,
    WorkloadState.RUNNING: 3,
    WorkloadState.SUCCEEDED: 4,
    WorkloadState.FAILED: 4,
}


def spec_of(row: WorkloadRow) -> WorkloadSpec:
    return msgspec.convert(row.spec, WorkloadSpec)


def identity_of(row: WorkloadRow, generation: int | None = None) -> JobIdentity:
    """The Job identity of the row's current generation (or of `generation`)."""
    return JobIdentity(
        project=row.project,
        workload=row.name,
        uid=str(row.id),
        generation=row.generation if generation is None else generation,
    )


def job_generation(job: Manifest) -> int | None:
    """The generation a Job was created for, from its `aicp.dev/generation` label."""
    value = field(job, "metadata", "labels", GENERATION_LABEL)
    return int(value) if isinstance(value, str) and value.isdigit() else None


def job_finished(job: Manifest) -> bool:
    return is_true(job, JobCondition.COMPLETE) or is_true(job, JobCondition.FAILED)


def observe(
    ctx: StepContext, row: WorkloadRow, spec: WorkloadSpec, job: Manifest | None
) -> Classification:
    """Classify `job` from what the informers hold now: its pods, its Kueue Workload, the
    nodes, and the pool's ClusterQueue (for the numbers in a waiting-for-quota reason)."""
    informers = ctx.informers
    pods: list[Manifest] = []
    kueue_workload: Manifest | None = None
    if job is not None:
        pods = informers.pods.by_label(JOB_NAME_LABEL, name_of(job))
        uid = field(job, "metadata", "uid")
        if uid:
            found = informers.workloads.by_label(KUEUE_JOB_UID_LABEL, str(uid))
            kueue_workload = found[0] if found else None
    queue = informers.cluster_queues.get(None, cluster_queue_name(row.project, row.pool))
    snapshot = pool_snapshot(queue, row.pool) if queue is not None else None
    same = row.observed_generation == row.generation
    context = context_for(
        spec,
        accelerator_resource=row.accelerator_resource,
        pool=snapshot,
        previous_attempts=previous_attempts(row) if same else 0,
        earlier=recorded(row) if same else None,
    )
    nodes = informers.nodes.list()
    return classify(job, kueue_workload, pods, nodes, context=context, now=datetime.now(UTC))


def evidence_settled(ctx: StepContext, job: Manifest) -> bool:
    """Whether the caches hold the final facts of a finished Job.

    The informers of different kinds are not consistent with each other: the Job's `Complete`
    may arrive before its pod's terminated status (the exit code) or before the Kueue
    Workload's admission. A finished workload's evidence is recorded once, so wait until every
    pod of the Job in the cache has ended (or is going), every pod the Job counts as ended is
    in the cache, and, for a Job that started, the admission is in the cache.
    """
    ended = 0
    for pod in pods_of_job(job, ctx.informers.pods.by_label(JOB_NAME_LABEL, name_of(job))):
        if phase(pod) in (PodPhase.SUCCEEDED, PodPhase.FAILED):
            ended += 1
        elif not is_terminating(pod):
            return False
    # Every pod the Job counts as ended on its own must be in the cache (its exit code is on
    # it). Pods stopped at the deadline are deleted by the Job controller: not waited for.
    counted = job_count(job, "succeeded")
    if (condition(job, JobCondition.FAILED) or {}).get("reason") != DEADLINE_EXCEEDED:
        counted += job_count(job, "failed")
    if ended < counted:
        return False
    if field(job, "status", "startTime") is None:
        return True
    uid = field(job, "metadata", "uid")
    found = ctx.informers.workloads.by_label(KUEUE_JOB_UID_LABEL, str(uid)) if uid else []
    return any(field(w, "status", "admission") for w in found)


def recorded(row: WorkloadRow) -> Evidence:
    """The evidence stored in the row (whatever generation it describes)."""
    return msgspec.convert(row.observed, Evidence, strict=False)


def previous_attempts(row: WorkloadRow) -> int:
    value = row.observed.get(PREVIOUS_ATTEMPTS, 0)
    return value if isinstance(value, int) else 0


def stored(evidence: Evidence, *, previous: int) -> dict[str, Any]:
    """The `observed` column value for `evidence`."""
    facts: dict[str, Any] = msgspec.to_builtins(evidence)
    if not facts.get("ranks"):
        facts.pop("ranks", None)  # a single-node workload's facts keep their shape
    facts[PREVIOUS_ATTEMPTS] = previous
    return facts


def facts_for(row: WorkloadRow, current: Evidence, generation: int) -> dict[str, Any]:
    """The row's evidence for `generation` after observing `current` (that generation's Job).

    Facts the row already records for that generation are kept where the objects no longer
    show them (merge_evidence); facts of another generation are dropped, never shown as
    current. Attempts of the earlier Jobs of the generation are added to the Job's own.
    """
    same = row.observed_generation == generation
    previous = previous_attempts(row) if same else 0
    counted = msgspec.structs.replace(current, attempts=previous + current.attempts)
    if same:
        counted = merge_evidence(recorded(row), counted)
    return stored(counted, previous=previous)


def current_facts(row: WorkloadRow, current: Evidence) -> dict[str, Any]:
    """`facts_for` the row's current generation."""
    return facts_for(row, current, row.generation)


def hold_progress(
    old_state: WorkloadState,
    old_reason: str | None,
    old_attempts: int,
    new: Classification,
    new_attempts: int,
) -> Classification:
    """`new`, unless it would move a running workload back without a cause.

    Caches fill at different speeds: a pod that just finished can be seen before its Job
    counts it, or a Job's pods can be missing from the pod cache for an instant. Classified
    alone, such a moment reads "admitted, waiting for its pods" for a workload that is
    running or done. Going back from RUNNING to ADMITTED is real only when another attempt
    started (a failed pod being retried: the attempt count grew); otherwise the recorded state
    and reason stand, and the next observation moves on from there. Going back to QUEUED is
    Kueue's own verdict (an eviction or a preemption) and is kept. Call it only when the row's
    facts describe the same generation as `new`.
    """
    restarted = new_attempts > old_attempts
    if old_state == WorkloadState.RUNNING and new.state == WorkloadState.ADMITTED and not restarted:
        return new._replace(state=WorkloadState.RUNNING, reason=old_reason or new.reason)
    return new


def milestones(old: WorkloadState, new: Classification) -> list[tuple[EventType, str]]:
    """(event type, message) for every milestone crossed from state `old` to `new.state`."""
    state = new.state
    if old == state:
        return []
    before = _RANK.get(old, 0)
    after = _RANK[state]
    if after < before:
        if state == WorkloadState.QUEUED:
            # Back to the queue: Kueue evicted or preempted the workload.
            preempted = new.cause is EvictionCause.PREEMPTED
            return [(EventType.PREEMPTED if preempted else EventType.REQUEUED, new.reason)]
        # Still admitted, but no pod runs any more: a failed pod is being retried.
        return [(EventType.RESTARTING, new.reason)]
    events: list[tuple[EventType, str]] = []
    if before < _RANK[WorkloadState.ADMITTED] <= after:
        admission = new.evidence.admission
        where = f" in cluster queue {admission.cluster_queue}" if admission else ""
        flavor = f" on flavor {admission.flavor}" if admission and admission.flavor else ""
        events.append((EventType.ADMITTED, f"Kueue admitted the workload{where}{flavor}."))
    # `started_at` is the Job's start (Kueue unsuspended it); a workload failed at its start
    # deadline has one, but no pod of it ever ran.
    ran = state == WorkloadState.RUNNING or (
        new.evidence.started_at is not None and not new.start_deadline_passed
    )
    if before < _RANK[WorkloadState.RUNNING] <= after and ran:
        started = new.reason if state == WorkloadState.RUNNING else "The workload's pods started."
        events.append((EventType.STARTED, started))
    if state == WorkloadState.SUCCEEDED:
        # The reason opens with "Succeeded: "; an event line shows its type already.
        events.append((EventType.SUCCEEDED, new.reason.removeprefix("Succeeded: ")))
    elif state == WorkloadState.FAILED:
        events.append((EventType.FAILED, new.reason))
    return events


def summary(evidence: Evidence, job_name: str) -> str:
    """A one-sentence account of the evidence recorded for a Job (EvidenceRecorded events)."""
    parts = [f"attempts {evidence.attempts}"]
    if evidence.nodes:
        parts.append(f"nodes {', '.join(evidence.nodes)}")
    if evidence.accelerator and evidence.accelerator.product:
        parts.append(f"accelerator {evidence.accelerator.product}")
    if evidence.exit_code is not None:
        parts.append(f"exit code {evidence.exit_code}")
    return f"Recorded the evidence of Job {job_name}: {'; '.join(parts)}."
