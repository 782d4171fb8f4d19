"""Removing Jobs with their evidence, deleting workloads, and finalization (docs/DESIGN.md §3, §6).

Workload deletion, one step per call, each triggered by the previous one's watch event:

    DELETING → delete every Job of the workload (Background: its pods go too)
             → each Job now terminating: record its evidence (fenced), remove the finalizer
             → no Job left, in the cache nor on the server → finalize

Finalization (invariant 8) is one transaction under the locked lease row: the `Finalized`
event, the tombstone with the final status, the row (observations live in it) and the lease.
Desired state stays until provider cleanup is observed complete (invariant 7): the row is
deleted only once the server confirms the Jobs are gone, not just the informer cache.

`remove_jobs` is shared with immutable replacement, which retires an older generation's Job
the same way before the new generation's Job is created.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from app.domain.events import EventType
from app.domain.kube_objects import field, is_terminating, name_of
from app.domain.labels import EVIDENCE_FINALIZER, UID_LABEL
from app.domain.ownership import foreign_owner
from app.kube.apply import delete_job, get, remove_finalizer
from app.kube.resources import JOBS
from app.reconcile.fencing import delete_lease, fenced_transaction, kube_fenced
from app.reconcile.steps.context import Event, Subject, evidence_recorded
from app.reconcile.steps.drift import has_evidence_finalizer, subject_of
from app.reconcile.steps.evidence import facts_for, identity_of, job_generation, observe, summary
from app.reconcile.workers import Result
from app.store import reconciling

if TYPE_CHECKING:
    from app.domain.kube_objects import Manifest
    from app.domain.specs import WorkloadSpec
    from app.reconcile.fencing import Fence
    from app.reconcile.steps.context import StepContext
    from app.store.reconciling import WorkloadRow

log = logging.getLogger("aicp.reconcile")

#: While Jobs are going away, look again after this long even if no watch event came.
RECHECK_SECONDS = 2.0


def jobs_of(ctx: StepContext, row: WorkloadRow) -> dict[str, Manifest]:
    """Every Job of the workload in the cache, by name: any generation, plus the current
    generation's and the recorded one's by name (a Job whose uid label was removed by hand)."""
    namespace = identity_of(row).namespace
    found = {name_of(job): job for job in ctx.informers.jobs.by_label(UID_LABEL, str(row.id))}
    for name in _known_names(row):
        job = ctx.informers.jobs.get(namespace, name)
        if job is not None:
            found[name] = job
    return found


def _known_names(row: WorkloadRow) -> list[str]:
    names = [identity_of(row).job_name]
    recorded = (row.observed.get("job") or {}).get("name")
    if isinstance(recorded, str) and recorded not in names:
        names.append(recorded)
    return names


async def remove_jobs(
    ctx: StepContext, fence: Fence, row: WorkloadRow, spec: WorkloadSpec, jobs: list[Manifest]
) -> None:
    """Delete each Job; for each already terminating, record its evidence and let it go."""
    for job in jobs:
        namespace, name = str(field(job, "metadata", "namespace")), name_of(job)
        if not is_terminating(job):
            async with kube_fenced(fence, f"delete of Job {name}"):
                await delete_job(ctx.kube, namespace, name, uid=field(job, "metadata", "uid"))
            log.info("workload %s/%s: deleting Job %s", row.project, row.name, name)
        elif has_evidence_finalizer(job):
            await _record_leaving(ctx, fence, row, spec, job)
            # Only after the evidence is recorded may the Job disappear.
            async with kube_fenced(fence, "finalizer removal"):
                await remove_finalizer(
                    ctx.kube, JOBS, namespace, name, EVIDENCE_FINALIZER, current=job
                )


async def _record_leaving(
    ctx: StepContext, fence: Fence, row: WorkloadRow, spec: WorkloadSpec, job: Manifest
) -> None:
    """Record the facts of a Job that is going away: in the row when the row's evidence
    describes that Job's generation, and as an `EvidenceRecorded` event in any case."""
    generation = job_generation(job) or row.observed_generation
    evidence = observe(ctx, row, spec, job).evidence
    async with fenced_transaction(ctx.db, fence) as conn:
        if row.observed_generation == generation and row.observed_generation > 0:
            facts = facts_for(row, evidence, generation)
            await reconciling.set_workload_observed(
                conn, owner=fence.owner, epoch=fence.epoch, workload_id=row.id, observed=facts
            )
        await ctx.record(
            conn,
            subject_of(row),
            evidence_recorded(job, summary(evidence, name_of(job))),
            generation,
        )


async def delete_workload(
    ctx: StepContext, fence: Fence, row: WorkloadRow, spec: WorkloadSpec
) -> Result:
    """One step of a workload's deletion (see the module docstring)."""
    jobs = jobs_of(ctx, row)
    if not jobs:
        # The cache may not have seen a Job created moments ago: ask the server.
        namespace = identity_of(row).namespace
        for name in _known_names(row):
            live = await get(ctx.kube, JOBS, namespace, name)
            # A Job of that name someone else made is not this workload's to delete.
            if live is not None and foreign_owner(live, {UID_LABEL: str(row.id)}) is None:
                jobs[name] = live
    if jobs:
        await remove_jobs(ctx, fence, row, spec, list(jobs.values()))
        return Result.requeue(RECHECK_SECONDS)
    final = {
        "generation": row.generation,
        "observed_generation": row.observed_generation,
        "spec": row.spec,
        "state": "DELETED",
        "reason": f"Workload {row.name} was deleted; its Jobs are gone.",
        "observed": row.observed,
    }
    return await finalize(ctx, fence, subject_of(row), row.generation, final)


async def finalize(
    ctx: StepContext, fence: Fence, subject: Subject, generation: int, final: dict[str, Any]
) -> Result:
    """The one-transaction finalization of invariant 8; the resource is gone afterwards."""
    async with fenced_transaction(ctx.db, fence) as conn:
        await ctx.record(
            conn,
            subject,
            Event(EventType.FINALIZED, f"{subject.kind.capitalize()} {subject.name} is gone."),
            generation,
        )
        await reconciling.insert_tombstone(
            conn,
            kind=subject.kind,
            resource_id=subject.id,
            project_id=subject.project_id,
            name=subject.name,
            final=final,
        )
        await reconciling.delete_row(conn, subject.kind, subject.id)
        await delete_lease(conn, fence)
    log.info("finalized %s %s (%s)", subject.kind, subject.name, subject.id)
    return Result.release()
