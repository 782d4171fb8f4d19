"""The two things a multi-node workload's step does beyond a single-node one's (docs/API.md
"Multi-node workloads"):

- `ensure_service` — the headless Service that gives the ranks their DNS names exists, owned
  by the current Job (an owner reference: Kubernetes' garbage collector removes it with the
  Job, so deletion and immutable replacement need nothing more). It is created right after
  the Job; missing later (deleted by hand) it is created again and `DriftCorrected` recorded.
  One of an earlier Job of the same name (a restart) goes with that Job; the current one is
  created when its DELETED event comes. aicp only creates, lists and watches Services.
- `restart_group` — one rank failed, so the Job failed for all ranks (its pod failure
  policy); while `retries` remain the attempt's evidence is recorded, the Job deleted (its
  pods and Service with it) and, once it is gone, the same Job is created again as the next
  attempt, which Kueue admits whole again.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from app.domain.classify import reasons
from app.domain.events import EventType
from app.domain.kube_objects import field, name_of
from app.domain.labels import EVIDENCE_FINALIZER
from app.domain.render import render_job_labels
from app.domain.render.rendezvous import render_service, service_name
from app.domain.states import WorkloadState
from app.kube.apply import create, delete_job, remove_finalizer
from app.kube.errors import Conflict
from app.kube.resources import JOBS
from app.observability.metrics import DRIFT_CORRECTIONS
from app.reconcile.fencing import fenced_transaction, kube_fenced
from app.reconcile.steps.context import Event, evidence_recorded
from app.reconcile.steps.drift import has_evidence_finalizer, subject_of
from app.reconcile.steps.evidence import PREVIOUS_ATTEMPTS, RETIRED_JOB_UID, summary

if TYPE_CHECKING:
    from typing import Any

    from app.domain.classify import Classification
    from app.domain.kube_objects import Manifest
    from app.domain.render.inputs import JobIdentity
    from app.domain.specs import WorkloadSpec
    from app.reconcile.fencing import Fence
    from app.reconcile.steps.context import StepContext
    from app.store.reconciling import WorkloadRow

log = logging.getLogger("aicp.reconcile")

#: In a workload's `observed` facts: the uid of the Job aicp itself deleted to restart all
#: ranks, so the Job created after it is the next attempt, not drift.
RESTARTED_JOB_UID = "restarted_job_uid"


async def ensure_service(
    ctx: StepContext,
    fence: Fence,
    row: WorkloadRow,
    spec: WorkloadSpec,
    identity: JobIdentity,
    job: Manifest,
    *,
    first: bool = False,
) -> bool:
    """Make sure the Job's headless Service exists; True when it had to be (re)created.

    `first`: right after the Job's creation, so a missing Service is no drift.
    """
    namespace, name = identity.namespace, service_name(identity)
    job_uid = str(field(job, "metadata", "uid") or "")
    if not job_uid:
        return False
    if not first and ctx.informers.services.get(namespace, name) is not None:
        # Ours, or an earlier Job's that the garbage collector is removing (a restart): its
        # DELETED event brings the step back to create the current one.
        return False
    async with kube_fenced(fence, f"Service {name}"):
        try:
            labels = render_job_labels(identity, spec)
            await create(ctx.kube, render_service(identity, labels, job_uid=job_uid))
        except Conflict:
            return False  # the cache lagged a create (ours or a peer's), or the old one is going
    if first:
        return True
    DRIFT_CORRECTIONS.labels("Service").inc()
    message = (
        f"Service {name} (the ranks' DNS names) was missing; aicp created it again for Job "
        f"{identity.job_name}."
    )
    log.info("drift corrected on workload %s/%s: %s", row.project, row.name, message)
    async with fenced_transaction(ctx.db, fence) as conn:
        await ctx.record(
            conn, subject_of(row), Event(EventType.DRIFT_CORRECTED, message), row.generation
        )
    return True


def retries_left(row: WorkloadRow, spec: WorkloadSpec, facts: dict[str, Any]) -> bool:
    """Whether a failed attempt of a multi-node workload is followed by another."""
    attempts = facts.get("attempts", 0)
    return spec.distributed and isinstance(attempts, int) and attempts < spec.retries + 1


def restarted(row: WorkloadRow) -> bool:
    """Whether the row's recorded Job was deleted by aicp to restart all ranks."""
    job = row.observed.get("job") or {}
    uid = job.get("uid") if isinstance(job, dict) else None
    return uid is not None and row.observed.get(RESTARTED_JOB_UID) == uid


def restarting(row: WorkloadRow, job: Manifest) -> bool:
    """Whether `job` is the one aicp deleted to restart all ranks (on its way out)."""
    uid = field(job, "metadata", "uid")
    return uid is not None and row.observed.get(RESTARTED_JOB_UID) == uid


def next_attempt_created(identity: JobIdentity, attempt: int) -> Event:
    """The `JobCreated` event of a restart's Job."""
    return Event(
        EventType.JOB_CREATED,
        f"Created Job {identity.job_name} again for attempt {attempt}: all ranks start together.",
    )


async def restart_group(
    ctx: StepContext,
    fence: Fence,
    row: WorkloadRow,
    classification: Classification,
    facts: dict[str, Any],
    job: Manifest,
) -> None:
    """Record the failed attempt (QUEUED, `Restarting`), then delete its Job."""
    attempts = int(facts.get("attempts", 0))
    uid = str(field(job, "metadata", "uid") or "")
    reason = reasons.next_attempt(classification.reason, attempts + 1)
    facts = {**facts, PREVIOUS_ATTEMPTS: attempts, RETIRED_JOB_UID: uid, RESTARTED_JOB_UID: uid}
    written = await ctx.write_status(
        fence,
        subject_of(row),
        generation=row.generation,
        state=WorkloadState.QUEUED,
        reason=reason,
        observed=facts,
        events=[
            Event(EventType.RESTARTING, reason),
            evidence_recorded(job, summary(classification.evidence, name_of(job))),
        ],
    )
    if not written.written:
        return
    namespace, name = str(field(job, "metadata", "namespace")), name_of(job)
    async with kube_fenced(fence, f"restart of Job {name}"):
        if has_evidence_finalizer(job):
            await remove_finalizer(ctx.kube, JOBS, namespace, name, EVIDENCE_FINALIZER, current=job)
        await delete_job(ctx.kube, namespace, name, uid=uid or None)
    log.info(
        "workload %s/%s: attempt %d failed, Job %s deleted to restart all ranks",
        row.project,
        row.name,
        attempts,
        name,
    )
