"""The workload step: from an accepted spec to a finished, evidenced Job (docs/DESIGN.md §3 to §8).

One call reads the row and the informer caches and takes the first corrective action that
applies, in this order:

1. row gone → release the lease; deletion requested → `deletion.delete_workload`;
2. a Job of an older generation exists → retire it (delete, record evidence, drop the
   finalizer) before anything is created for the new generation (immutable replacement);
3. no Job for the current generation → a finished workload stays finished (its Job's
   removal is not drift); while the project's namespace is absent from the Namespace
   informer (deleted outside aicp; the project step re-creates it) → PENDING saying so, look
   again shortly (a Job it had is a lost attempt, `drift.job_lost`); otherwise read the server
   (the cache may lag our own create) and adopt what exists, or create the Job with the full
   body (`render_job`, suspended, as field manager `aicp`) — a recreation after a deletion by
   hand, or of a Job that vanished, is recorded as `DriftCorrected`;
4. the Job is being deleted by someone else → `drift.job_deleted`;
5. labels or finalizer changed by hand → restore them (metadata only, `aicp-metadata`);
6. observe → classify → fenced write of state, reason, evidence and `observed_generation`
   with an event for each milestone; once finished — and once the caches hold the final facts
   (`evidence_settled`: the informers of different kinds lag each other) — remove the evidence
   finalizer (only after that write landed) and release the lease. A workload failed by aicp
   at its start deadline (`app.domain.classify.start_deadline`) still has a live Job: once the
   failure is written, the finalizer comes off and the Job is deleted, which frees its quota
   (Kueue's Workload goes with the Job it belongs to).

The full Job body is written only by step 3, as a create that never overwrites: an existing
Job is never re-declared `suspend: true`, so aicp never fights Kueue over a running Job, and a
replica that resumes from a pause after its lease moved cannot clobber the Job its successor
created (the create answers 409, and the Job is adopted). Every Kubernetes write runs under
`kube_fenced`: the lease is checked right before it, and bounds it.

Audit: a generation's `JobCreated` is recorded with the status write that first observes its
Job — by the creating step, or by whichever owner adopts a Job whose creator died before
recording it. Each is recorded at most once (see `context.job_created`).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from app.domain.events import EventReason, EventType
from app.domain.kube_objects import field, is_terminating, name_of
from app.domain.labels import EVIDENCE_FINALIZER, UID_LABEL
from app.domain.ownership import foreign_owner, not_taken_over
from app.domain.render import render_job
from app.domain.states import WorkloadState
from app.kube.apply import create, delete_job, get, remove_finalizer
from app.kube.errors import Conflict, Forbidden, Invalid, NotFound
from app.kube.resources import JOBS
from app.observability.metrics import TIME_TO_ADMITTED, TIME_TO_JOB_CREATED, TIME_TO_RUNNING
from app.reconcile.fencing import kube_fenced
from app.reconcile.steps import deletion, drift
from app.reconcile.steps.context import Event, evidence_recorded, job_created
from app.reconcile.steps.drift import has_evidence_finalizer, subject_of
from app.reconcile.steps.evidence import (
    current_facts,
    evidence_settled,
    hold_progress,
    identity_of,
    job_finished,
    job_generation,
    milestones,
    observe,
    previous_attempts,
    recorded,
    spec_of,
    summary,
)
from app.reconcile.steps.planning import NewEstimate, Planner
from app.reconcile.steps.rendezvous import (
    ensure_service,
    next_attempt_created,
    restart_group,
    restarted,
    restarting,
    retries_left,
)
from app.reconcile.workers import Result

if TYPE_CHECKING:
    import uuid

    from app.domain.classify import Classification
    from app.domain.classify.evidence import Evidence
    from app.domain.kube_objects import Manifest
    from app.domain.render.inputs import JobIdentity
    from app.domain.specs import WorkloadSpec
    from app.reconcile.fencing import Fence
    from app.reconcile.steps.context import StepContext
    from app.store.reconciling import WorkloadRow

log = logging.getLogger("aicp.reconcile")

#: What the apiserver says when a create targets a namespace that is being deleted (403).
TERMINATING_NAMESPACE = "because it is being terminated"
#: A workload whose namespace or queues are not applied yet looks again after this long.
WAIT_FOR_QUEUES_SECONDS = 0.5
#: A live workload is looked at again after this long even without events: a level-based
#: safety net (informer events, relists included, normally come first), long enough that
#: 10,000 running workloads cost ~30 cheap steps a second.
RESYNC_SECONDS = 300.0

#: A finished Job whose final facts are not all in the caches yet is looked at again this
#: soon, and recorded with what there is after `SETTLE_LIMIT_SECONDS`.
SETTLE_RECHECK_SECONDS = 0.2
SETTLE_LIMIT_SECONDS = 10.0

#: An admitted workload is looked at again this long after its start deadline passes.
DEADLINE_MARGIN_SECONDS = 0.1

_FINISHED = (WorkloadState.SUCCEEDED.value, WorkloadState.FAILED.value)


def _settled(row: WorkloadRow) -> bool:
    """Finished at its current generation: nothing more to do but keep the record."""
    return row.state in _FINISHED and row.observed_generation == row.generation


class WorkloadStep:
    """The `ReconcileFn` of kind `workload`."""

    def __init__(self, ctx: StepContext) -> None:
        self.ctx = ctx
        self.planner = Planner(ctx.db)
        # Workload id → when its Job was first seen finished with facts still missing.
        self._finishing: dict[uuid.UUID, float] = {}

    def _final_facts_in(self, row: WorkloadRow, job: Manifest) -> bool:
        """True once the caches hold a finished Job's final facts, or after waiting
        `SETTLE_LIMIT_SECONDS` for them (a pod stuck in a state that never ends must not keep
        the workload from finishing)."""
        if evidence_settled(self.ctx, job):
            self._finishing.pop(row.id, None)
            return True
        since = self._finishing.setdefault(row.id, time.monotonic())
        if time.monotonic() - since < SETTLE_LIMIT_SECONDS:
            return False
        self._finishing.pop(row.id, None)
        return True

    async def __call__(self, workload_id: uuid.UUID, fence: Fence, /) -> Result:
        ctx = self.ctx
        row = await ctx.read_workload(workload_id)
        if row is None:
            return Result.release()
        spec = spec_of(row)
        if row.deleting:
            return await deletion.delete_workload(ctx, fence, row, spec)
        identity = identity_of(row)

        stale = [
            job
            for job in ctx.informers.jobs.by_label(UID_LABEL, str(row.id))
            if name_of(job) != identity.job_name
        ]
        if stale:
            await deletion.remove_jobs(ctx, fence, row, spec, stale)
            return Result.requeue(deletion.RECHECK_SECONDS)

        job = ctx.informers.jobs.get(identity.namespace, identity.job_name)
        if job is None:
            if _settled(row):
                return Result.release()
            if not row.queues_ready:
                return Result.requeue(WAIT_FOR_QUEUES_SECONDS)
            namespace = ctx.informers.namespaces.get(None, identity.namespace)
            if namespace is None or is_terminating(namespace):
                return await self._without_namespace(fence, row, identity)
            if _had_job(row, identity):
                # recorded, yet not in the cache: gone, or the cache has not seen it yet
                job = await get(ctx.kube, JOBS, identity.namespace, identity.job_name)
            if job is None:
                # never recorded: created straight away (one request, not a read first); one
                # that exists after all (its creator died before recording it) conflicts and
                # is adopted
                return await self._create(fence, row, spec, identity)
        if (manager := foreign_owner(job, {UID_LABEL: str(row.id)})) is not None:
            return await self._refused(fence, row, identity, manager)
        if restarting(row, job):
            return Result.requeue(deletion.RECHECK_SECONDS)  # going; its DELETED wakes us
        if is_terminating(job):
            return await drift.job_deleted(ctx, fence, row, spec, job)
        if not _settled(row) and not job_finished(job):
            await drift.restore_job_metadata(ctx, fence, row, spec, identity, job)
            if spec.distributed:
                await ensure_service(ctx, fence, row, spec, identity, job)
        return await self._observe(fence, row, spec, job)

    async def _create(
        self, fence: Fence, row: WorkloadRow, spec: WorkloadSpec, identity: JobIdentity
    ) -> Result:
        """Create the current generation's Job and record it (QUEUED)."""
        ctx = self.ctx
        recreated = _had_job(row, identity)
        lost = recreated and drift.was_lost(row)
        if lost:
            row = dataclasses.replace(row, observed=drift.job_lost(row))
        try:
            async with kube_fenced(fence, f"create of Job {identity.job_name}"):
                created = await create(
                    ctx.kube, render_job(identity, spec, row.accelerator_resource)
                )
        except Invalid as exc:
            return await self._rejected(fence, row, identity, exc)
        except (NotFound, Forbidden) as exc:
            if isinstance(exc, Forbidden) and TERMINATING_NAMESPACE not in exc.message:
                raise  # RBAC, not the namespace
            return _namespace_gone_at_create(row, identity, exc)
        except Conflict:
            # It exists after all (created by a predecessor whose answer was lost, or by a
            # peer): adopt it, never overwrite it.
            existing = await get(ctx.kube, JOBS, identity.namespace, identity.job_name)
            if existing is None:
                raise
            return await self._adopt(fence, row, spec, identity, existing)
        if spec.distributed:
            await ensure_service(ctx, fence, row, spec, identity, created, first=True)
        return await self._record_created(fence, row, spec, identity, created, recreated, lost)

    async def _adopt(
        self,
        fence: Fence,
        row: WorkloadRow,
        spec: WorkloadSpec,
        identity: JobIdentity,
        existing: Manifest,
    ) -> Result:
        """A Job of this name that already exists: observed as ours, unless another manager
        owns it (then refused)."""
        if (manager := foreign_owner(existing, {UID_LABEL: str(row.id)})) is not None:
            return await self._refused(fence, row, identity, manager)
        log.info("workload %s/%s: adopting Job %s", row.project, row.name, identity.job_name)
        return await self._observe(fence, row, spec, existing)

    async def _record_created(
        self,
        fence: Fence,
        row: WorkloadRow,
        spec: WorkloadSpec,
        identity: JobIdentity,
        created: Manifest,
        recreated: bool,
        lost: bool,
    ) -> Result:
        """The new Job's state written with the event that says why it was created (first,
        next attempt, or re-created after drift), and its time to creation measured."""
        ctx = self.ctx
        classification = observe(ctx, row, spec, created)
        written = await ctx.write_status(
            fence,
            subject_of(row),
            generation=row.generation,
            state=classification.state,
            reason=classification.reason,
            observed=current_facts(row, classification.evidence),
            events=[_created_event(row, identity, recreated, lost)],
        )
        if written.written and not recreated and written.age_seconds is not None:
            TIME_TO_JOB_CREATED.observe(written.age_seconds)
        log.info(
            "workload %s/%s generation %d: Job %s created, %s",
            row.project,
            row.name,
            row.generation,
            identity.job_name,
            classification.state.value,
        )
        return Result.done()

    async def _without_namespace(
        self, fence: Fence, row: WorkloadRow, identity: JobIdentity
    ) -> Result:
        """The project's namespace is gone (deleted outside aicp) and with it any Job: PENDING
        with a sentence, until the project step has re-created it. A Job the workload had is a
        lost attempt; the next one is created once the namespace is back."""
        namespace = identity.namespace
        if _had_job(row, identity):
            lost = "That attempt is lost" if drift.was_lost(row) else "Its evidence is recorded"
            reason = (
                f"Job {identity.job_name} is gone: namespace {namespace} was deleted outside "
                f"aicp. {lost}; aicp re-creates the namespace, then a new Job (attempt "
                f"{drift.attempts_before(row) + 1})."
            )
        else:
            reason = (
                f"Waiting for namespace {namespace}, deleted outside aicp: aicp re-creates it, "
                "then creates the Job."
            )
        if (row.state, row.state_reason) != (WorkloadState.PENDING, reason):
            log.warning("workload %s/%s: %s", row.project, row.name, reason)
            await self.ctx.write_status(
                fence,
                subject_of(row),
                generation=row.generation,
                state=WorkloadState.PENDING,
                reason=reason,
                observed=drift.job_lost(row),
                events=[Event(EventType.PENDING, reason)]
                if row.state != WorkloadState.PENDING
                else [],
            )
        return Result.requeue(WAIT_FOR_QUEUES_SECONDS)

    async def _rejected(
        self, fence: Fence, row: WorkloadRow, identity: JobIdentity, exc: Invalid
    ) -> Result:
        """The cluster refuses the Job as invalid: retrying cannot help, so say why and stop."""
        reason = f"The cluster rejected Job {identity.job_name} as invalid: {exc}".rstrip(".") + "."
        return await self._failed(fence, row, reason)

    async def _refused(
        self, fence: Fence, row: WorkloadRow, identity: JobIdentity, manager: str
    ) -> Result:
        """A Job of this generation's name exists and is not this workload's (`aicp.dev/uid`):
        it is neither adopted nor touched, and the workload fails saying whose it is."""
        if row.state == WorkloadState.FAILED:
            return Result.release()
        job = f"{identity.namespace}/{identity.job_name}"
        return await self._failed(fence, row, not_taken_over("Job", job, manager))

    async def _failed(self, fence: Fence, row: WorkloadRow, reason: str) -> Result:
        await self.ctx.write_status(
            fence,
            subject_of(row),
            generation=row.generation,
            state=WorkloadState.FAILED,
            reason=reason,
            observed={},
            events=[Event(EventType.FAILED, reason, EventReason.JOB_REJECTED)],
        )
        log.warning("workload %s/%s: %s", row.project, row.name, reason)
        return Result.release()

    async def _observe(
        self, fence: Fence, row: WorkloadRow, spec: WorkloadSpec, job: Manifest
    ) -> Result:
        """Classify the Job and record what changed; finish a finished workload."""
        ctx = self.ctx
        classification = observe(ctx, row, spec, job)
        facts = current_facts(row, classification.evidence)
        before = recorded(row) if row.observed_generation == row.generation else None
        if before is not None:
            classification = hold_progress(
                row.state, row.state_reason, before.attempts, classification, facts["attempts"]
            )
        state = classification.state
        stopping = classification.start_deadline_passed  # the Job has not finished: no facts
        if state.is_terminal and not (_settled(row) or stopping or self._final_facts_in(row, job)):
            return Result.requeue(SETTLE_RECHECK_SECONDS)
        if state == WorkloadState.FAILED and not _settled(row):
            classification = drift.failed_with_namespace(ctx, row, classification)
            if not stopping and job_finished(job) and retries_left(row, spec, facts):
                await restart_group(ctx, fence, row, classification, facts, job)
                return Result.requeue(deletion.RECHECK_SECONDS)
        facts, estimate = await self.planner.standing(row, state, facts)
        changed = (
            state.value != row.state
            or classification.reason != row.state_reason
            or facts != row.observed
            or row.observed_generation != row.generation
        )
        if (
            changed
            and not _settled(row)
            and not await self._record_change(
                fence, row, job, classification, facts, estimate, before
            )
        ):
            return Result.done()  # the row moved on; the change that moved it queues us
        if state.is_terminal or _settled(row):
            return await self._finish(fence, row, job)
        standing_after = self.planner.deferred(row.id)
        if standing_after is not None:
            return Result.requeue(standing_after)  # its standing comes with the next replay
        if state == WorkloadState.QUEUED:
            # its standing follows the queue (app.reconcile.steps.planning)
            return Result.requeue(min(self.planner.refresh_after(row), _next_look(classification)))
        return Result.requeue(_next_look(classification))

    async def _record_change(
        self,
        fence: Fence,
        row: WorkloadRow,
        job: Manifest,
        classification: Classification,
        facts: dict[str, Any],
        estimate: NewEstimate | None,
        before: Evidence | None,
    ) -> bool:
        """Write the new state and facts with the events of the milestones crossed; False when
        the row moved on meanwhile (nothing written)."""
        state = classification.state
        crossed = milestones(row.state, classification)
        cause = (
            EventReason.START_DEADLINE_EXCEEDED if classification.start_deadline_passed else None
        )
        events = [
            Event(kind, message, cause if kind == EventType.FAILED else None)
            for kind, message in crossed
        ]
        if row.observed_generation != row.generation and _of_generation(job, row.generation):
            # The first observation of this generation's Job: its creator died (or lost
            # its lease) between the create and the record. The adopter records it.
            events.insert(0, job_created(identity_of(row), row.generation, adopted=True))
        if state.is_terminal:
            events.append(evidence_recorded(job, summary(classification.evidence, name_of(job))))
        written = await self.ctx.write_status(
            fence,
            subject_of(row),
            generation=row.generation,
            state=state,
            reason=classification.reason,
            observed=facts,
            events=events,
        )
        if not written.written:
            return False
        _observe_latency(crossed, written.age_seconds, before)
        await self.planner.written(row, estimate, crossed, classification.evidence)
        if state.value != row.state:
            log.info(
                "workload %s/%s: %s -> %s: %s",
                row.project,
                row.name,
                row.state,
                state.value,
                classification.reason,
            )
        return True

    async def _finish(self, fence: Fence, row: WorkloadRow, job: Manifest) -> Result:
        """A finished (or settled) workload: stop a Job that still holds quota, else let the
        Job go by removing its evidence finalizer, and release the row."""
        if not job_finished(job):
            # Failed at its start deadline (in _observe, or by a step that stopped before the
            # Job was deleted): the Job still holds quota.
            return await self._stop(fence, row, job)
        # The final facts are in the row (written by _observe, or by an earlier step): the
        # Job may now be deleted by anyone; it is kept until then.
        if has_evidence_finalizer(job):
            async with kube_fenced(fence, "finalizer removal"):
                await remove_finalizer(
                    self.ctx.kube,
                    JOBS,
                    field(job, "metadata", "namespace"),
                    name_of(job),
                    EVIDENCE_FINALIZER,
                    current=job,
                )
        return Result.release()

    async def _stop(self, fence: Fence, row: WorkloadRow, job: Manifest) -> Result:
        """Delete the live Job of a workload recorded as failed at its start deadline: its
        facts are in the row, so the finalizer comes off first and the Job goes at once."""
        ctx = self.ctx
        namespace, name = str(field(job, "metadata", "namespace")), name_of(job)
        async with kube_fenced(fence, f"delete of Job {name}"):
            if has_evidence_finalizer(job):
                await remove_finalizer(
                    ctx.kube, JOBS, namespace, name, EVIDENCE_FINALIZER, current=job
                )
            await delete_job(ctx.kube, namespace, name, uid=field(job, "metadata", "uid"))
        log.info(
            "workload %s/%s: start deadline passed, Job %s deleted", row.project, row.name, name
        )
        return Result.release()


def _next_look(classification: Classification) -> float:
    """Seconds until the step should look again without an event (a queued one: the planner's
    `refresh_after`): at the start deadline of an admitted workload (if it comes before the
    resync), else at the resync."""
    deadline = classification.start_deadline
    if deadline is None:
        return RESYNC_SECONDS
    remaining = (deadline - datetime.now(UTC)).total_seconds()
    return min(RESYNC_SECONDS, max(remaining, 0.0) + DEADLINE_MARGIN_SECONDS)


def _had_job(row: WorkloadRow, identity: JobIdentity) -> bool:
    """Whether the row records this generation's Job (so its absence is a loss, not a start)."""
    recorded_job = (row.observed.get("job") or {}).get("name")
    return row.observed_generation == row.generation and recorded_job == identity.job_name


def _namespace_gone_at_create(
    row: WorkloadRow, identity: JobIdentity, exc: NotFound | Forbidden
) -> Result:
    """The namespace went (or is going) between its check and the create: deleted outside
    aicp. Its DELETED event wakes the project step, which re-creates it; look again later."""
    log.warning(
        "workload %s/%s: Job %s not created, namespace %s is gone: %s",
        row.project,
        row.name,
        identity.job_name,
        identity.namespace,
        exc.message,
    )
    return Result.requeue(WAIT_FOR_QUEUES_SECONDS)


def _created_event(row: WorkloadRow, identity: JobIdentity, recreated: bool, lost: bool) -> Event:
    """Why the Job was created: a restart's next attempt, a re-creation after someone deleted
    it (`lost`: before its evidence was recorded), or the generation's first Job."""
    if recreated and restarted(row):
        return next_attempt_created(identity, previous_attempts(row) + 1)
    if recreated:
        return drift.recreated_event(row, identity.job_name, previous_attempts(row), lost=lost)
    return job_created(identity, row.generation)


def _of_generation(job: Manifest, generation: int) -> bool:
    return job_generation(job) == generation


def _observe_latency(
    crossed: list[tuple[EventType, str]], age: float | None, before: Evidence | None
) -> None:
    """Time from accepted to admitted and to running, once per generation: a retried pod
    starting again crosses `Started` again, but the workload reached running only once."""
    if age is None:
        return
    kinds = {kind for kind, _ in crossed}
    if EventType.ADMITTED in kinds and (before is None or before.admission is None):
        TIME_TO_ADMITTED.observe(age)
    if EventType.STARTED in kinds and (before is None or before.started_at is None):
        TIME_TO_RUNNING.observe(age)
