"""Drift of a workload's Job (docs/DESIGN.md §8): labels changed by hand, the Job deleted by hand.

- Metadata: the labels and finalizer aicp declares are compared with the live Job
  (`declared_drift`) and restored by applying `render_job_metadata_only` under its own field
  manager (`aicp-metadata`). The full body is never re-applied to an existing Job: that would
  declare `suspend: true` again and re-suspend a Job Kueue has started.
- Deletion: a Job deleted by hand keeps `deletionTimestamp` plus the `aicp.dev/evidence`
  finalizer. Its facts are recorded first (a fenced write, the workload back to PENDING: its
  Job is going), then the finalizer is removed; once the Job is gone the workload step
  recreates it as a new attempt and records `DriftCorrected`. A finished workload's Job may be
  removed: that is not drift.
- Loss: a Job that vanished without passing through that (its namespace deleted while
  nobody held the workload, a cluster replaced under a database that remembers it) is a lost
  attempt (`job_lost`): PENDING with a sentence saying so, and recreated as the next attempt
  once its namespace exists again.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from app.domain.events import EventReason, EventType
from app.domain.kube_objects import field, is_terminating, name_of
from app.domain.labels import EVIDENCE_FINALIZER, JOB_METADATA_FIELD_MANAGER
from app.domain.naming import namespace_for
from app.domain.render import declared_drift, render_job_metadata_only
from app.domain.states import WorkloadState
from app.kube.apply import apply, remove_finalizer
from app.kube.resources import JOBS
from app.observability.metrics import DRIFT_CORRECTIONS
from app.reconcile.fencing import fenced_transaction, kube_fenced
from app.reconcile.steps.context import Event, Subject, evidence_recorded
from app.reconcile.steps.evidence import (
    PREVIOUS_ATTEMPTS,
    RETIRED_JOB_UID,
    current_facts,
    milestones,
    observe,
    summary,
)
from app.reconcile.workers import Result

if TYPE_CHECKING:
    from app.domain.classify import Classification
    from app.domain.kube_objects import Manifest
    from app.domain.render.inputs import JobIdentity
    from app.domain.specs import WorkloadSpec
    from app.reconcile.fencing import Fence
    from app.reconcile.steps.context import StepContext
    from app.store.reconciling import WorkloadRow

log = logging.getLogger("aicp.reconcile")


def subject_of(row: WorkloadRow) -> Subject:
    return Subject(kind="workload", id=row.id, project_id=row.project_id, name=row.name)


def has_evidence_finalizer(job: Manifest) -> bool:
    return EVIDENCE_FINALIZER in (field(job, "metadata", "finalizers") or ())


async def restore_job_metadata(
    ctx: StepContext,
    fence: Fence,
    row: WorkloadRow,
    spec: WorkloadSpec,
    identity: JobIdentity,
    job: Manifest,
) -> bool:
    """Re-apply the Job's labels and finalizer if someone changed them; True if it did."""
    desired = render_job_metadata_only(identity, spec)
    found = declared_drift({"metadata": desired["metadata"]}, {"metadata": job.get("metadata")})
    if not found:
        return False
    # Conditional on the Job as it was read: a writer acting on a stale view (a paused replica
    # whose successor finished the Job and removed its finalizer) gets 409 instead of putting
    # the finalizer back.
    desired["metadata"]["resourceVersion"] = field(job, "metadata", "resourceVersion")
    async with kube_fenced(fence, f"metadata of Job {identity.job_name}"):
        await apply(ctx.kube, desired, field_manager=JOB_METADATA_FIELD_MANAGER)
    DRIFT_CORRECTIONS.labels("Job").inc()
    message = f"Restored Job {identity.job_name}: {'; '.join(found)}."
    log.info("drift corrected on workload %s/%s: %s", row.project, row.name, message)
    async with fenced_transaction(ctx.db, fence) as conn:
        await ctx.record(
            conn,
            subject_of(row),
            Event(EventType.DRIFT_CORRECTED, message, EventReason.LABELS_RESTORED),
            row.generation,
        )
    return True


async def job_deleted(
    ctx: StepContext, fence: Fence, row: WorkloadRow, spec: WorkloadSpec, job: Manifest
) -> Result:
    """The current generation's Job is being deleted by someone else: record its evidence,
    then let it go. The next step, finding no Job, recreates it (`recreated_event`)."""
    if not has_evidence_finalizer(job):
        return Result.done()  # nothing holds it any more; its DELETED event comes next
    name = name_of(job)
    settled = row.observed_generation == row.generation and row.state.is_terminal
    # The caches may still show the Job with our finalizer after we removed it (its update is
    # on its way), and another event runs the step again: its deletion is recorded once, and
    # its attempts counted once.
    uid = field(job, "metadata", "uid")
    recorded_already = uid is not None and row.observed.get(RETIRED_JOB_UID) == uid
    if not settled and not recorded_already:
        classification = observe(ctx, row, spec, job)
        facts = current_facts(row, classification.evidence)
        state, reason = classification.state, classification.reason
        events = [Event(kind, message) for kind, message in milestones(row.state, classification)]
        if not classification.state.is_terminal:
            # The next Job is a new attempt; attempts so far carry over to it. The Job is on
            # its way out: the workload is no longer queued, admitted or running.
            facts[PREVIOUS_ATTEMPTS] = facts.get("attempts", 0)
            facts[RETIRED_JOB_UID] = uid
            state = WorkloadState.PENDING
            reason = (
                f"Job {name} was deleted outside aicp; its evidence is recorded and a new "
                "Job will replace it."
            )
            if row.state != WorkloadState.PENDING:
                events.append(Event(EventType.PENDING, reason))
        events.append(evidence_recorded(job, summary(classification.evidence, name)))
        written = await ctx.write_status(
            fence,
            subject_of(row),
            generation=row.generation,
            state=state,
            reason=reason,
            observed=facts,
            events=events,
        )
        if not written.written:
            return Result.done()  # the row moved on; the step runs again for what it is now
        log.info("workload %s/%s: Job %s deleted outside aicp", row.project, row.name, name)
    # Only now, after the fenced write landed, may the Job go.
    async with kube_fenced(fence, "finalizer removal"):
        await remove_finalizer(
            ctx.kube,
            JOBS,
            field(job, "metadata", "namespace"),
            name,
            EVIDENCE_FINALIZER,
            current=job,
        )
    return Result.release() if settled else Result.done()


#: In a workload's `observed` facts: the uid of a Job that vanished before `job_deleted` could
#: record it (its attempt is lost, not evidenced).
LOST_JOB_UID = "lost_job_uid"


def _recorded_job_uid(row: WorkloadRow) -> str | None:
    job = row.observed.get("job") or {}
    uid = job.get("uid") if isinstance(job, dict) else None
    return str(uid) if uid else None


def was_lost(row: WorkloadRow) -> bool:
    """True when the row's recorded Job vanished before `job_deleted` recorded its evidence."""
    uid = _recorded_job_uid(row)
    if uid is None:
        return False
    return row.observed.get(RETIRED_JOB_UID) != uid or row.observed.get(LOST_JOB_UID) == uid


def job_lost(row: WorkloadRow) -> dict[str, Any]:
    """The row's facts once its recorded Job is known to be gone: a Job `job_deleted` did not
    see go is marked lost, and its attempts carry over to the next one, counted once."""
    facts = dict(row.observed)
    uid = _recorded_job_uid(row)
    if uid is not None and facts.get(RETIRED_JOB_UID) != uid:
        facts[PREVIOUS_ATTEMPTS] = facts.get("attempts", 0)
        facts[RETIRED_JOB_UID] = uid
        facts[LOST_JOB_UID] = uid
    return facts


def attempts_before(row: WorkloadRow) -> int:
    """The attempts the row's Jobs made so far once its recorded Job is gone."""
    value = job_lost(row).get(PREVIOUS_ATTEMPTS, 0)
    return value if isinstance(value, int) else 0


def failed_with_namespace(
    ctx: StepContext, row: WorkloadRow, classification: Classification
) -> Classification:
    """A Job that failed while its namespace is being deleted outside aicp failed because of
    that (a real namespace controller deletes the pods first, and a Job without retries
    counts a deleted pod as failed): its reason says so."""
    namespace = namespace_for(row.project)
    live = ctx.informers.namespaces.get(None, namespace)
    if live is not None and not is_terminating(live):
        return classification
    note = (
        f"Namespace {namespace} was being deleted outside aicp, which deleted the workload's pods."
    )
    return classification._replace(reason=f"{classification.reason.rstrip()} {note}")


def recreated_event(row: WorkloadRow, job_name: str, attempts: int, *, lost: bool) -> Event:
    """The `DriftCorrected` event of a Job recreated after someone deleted it (`lost`: it
    vanished before its evidence could be recorded)."""
    DRIFT_CORRECTIONS.labels("Job").inc()
    log.info("drift corrected on workload %s/%s: Job %s recreated", row.project, row.name, job_name)
    if lost:
        message = (
            f"Job {job_name} was gone from the cluster (its namespace deleted, or the cluster "
            "replaced) before its evidence could be recorded; that attempt was lost, and the "
            f"Job was recreated (attempt {attempts + 1})."
        )
    else:
        message = (
            f"Job {job_name} was deleted outside aicp; its evidence was recorded and the Job "
            f"was recreated (attempt {attempts + 1})."
        )
    return Event(EventType.DRIFT_CORRECTED, message, EventReason.JOB_RECREATED)
