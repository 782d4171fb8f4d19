"""What every step shares: the database, the cluster, the informer caches, and the writes that
must be fenced and audited together.

`StepContext.write_status` is the one way a step changes a resource's status: the fenced,
generation-guarded status update and its event rows commit in one statement (one round trip),
so the audit trail (invariant 10) never misses a state change and never shows one that did not land.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from app.domain.events import EventReason, EventType
from app.domain.states import ResourceState, ServiceState, WorkloadState
from app.observability.metrics import STUCK_DELETING, WORKLOADS_BY_STATE
from app.reconcile.steps.routing import PoolRoutes
from app.store import reconciling
from app.store.audit import record_event
from app.store.batching import Batcher

if TYPE_CHECKING:
    import uuid
    from collections.abc import Awaitable, Callable, Sequence

    from app.domain.kinds import Kind
    from app.domain.kube_objects import Manifest
    from app.domain.render.inputs import JobIdentity
    from app.kube.client import KubeClient
    from app.kube.informers import Informers
    from app.reconcile.fencing import Fence
    from app.store.db import Connection, Database
    from app.store.reconciling import WorkloadRow, Written

log = logging.getLogger("aicp.reconcile")

R = TypeVar("R")

#: How often the gauges counted from the database (live workloads by state, stuck deletions)
#: are refreshed, at most (each reads a partial index whose size follows the live rows); steps
#: trigger the refresh, so an idle replica does not query.
GAUGE_REFRESH_SECONDS = 15.0
#: How often the finished workloads (SUCCEEDED, FAILED) are recounted: that count reads every
#: finished row (540 ms for a million, loadtest/finished_rows_plans.py), and it changes slowly.
FINISHED_GAUGE_REFRESH_SECONDS = 300.0


@dataclass(frozen=True, slots=True)
class Event:
    """One event row to record with a status write.

    `once_key` names a fact that happens once per resource (see `job_created`): a second event
    with the same key is not recorded, whichever replica or retry attempts it.
    """

    type: EventType
    message: str
    reason: EventReason | None = None
    once_key: str | None = None


def job_created(identity: JobIdentity, generation: int, *, adopted: bool = False) -> Event:
    """The `JobCreated` event of a generation: one per generation."""
    message = (
        f"Created Job {identity.job_name} in namespace {identity.namespace} for generation "
        f"{generation}."
    )
    if adopted:
        message += " Recorded by the replica that took over: its creator stopped first."
    return Event(EventType.JOB_CREATED, message, once_key=f"JobCreated:{generation}")


def evidence_recorded(job: Manifest, message: str) -> Event:
    """The `EvidenceRecorded` event of one Job (by uid): one per Job."""
    uid = (job.get("metadata") or {}).get("uid") or (job.get("metadata") or {}).get("name")
    return Event(EventType.EVIDENCE_RECORDED, message, once_key=f"EvidenceRecorded:{uid}")


@dataclass(frozen=True, slots=True)
class Subject:
    """The resource a step works on, as its event rows name it."""

    kind: Kind
    id: uuid.UUID
    project_id: uuid.UUID | None
    name: str


@dataclass
class StepContext:
    """Shared by the steps of one engine (one replica)."""

    db: Database
    kube: KubeClient
    informers: Informers
    instance_id: str
    routes: PoolRoutes = field(default_factory=PoolRoutes)
    priority_classes_applied: bool = False
    _gauges_at: float = float("-inf")
    _finished_at: float = float("-inf")
    # The workers' workload reads and status writes, many to a statement under load.
    _workload_reads: Batcher[uuid.UUID, WorkloadRow | None] = field(init=False)
    _workload_writes: Batcher[reconciling.StatusWrite, Written] = field(init=False)

    def __post_init__(self) -> None:
        self._workload_reads = Batcher(self._read_workloads)
        self._workload_writes = Batcher(self._write_workloads)

    @property
    def actor(self) -> str:
        """The actor of every event the controller writes."""
        return f"controller:{self.instance_id}"

    async def write_status(
        self,
        fence: Fence,
        subject: Subject,
        *,
        generation: int,
        state: WorkloadState | ResourceState | ServiceState,
        reason: str,
        observed: dict[str, Any],
        events: list[Event] | None = None,
    ) -> Written:
        """Fenced status write plus its events, in one statement (one round trip).

        Raises `LeaseLost` when the lease moved. Returns `written=False` (and records no
        event) when the row moved on to another generation or a deletion meanwhile.
        """
        audit = reconciling.Audit(
            project_id=subject.project_id,
            resource_name=subject.name,
            actor=self.actor,
            events=[
                reconciling.StatusEvent(event.type, event.message, event.reason, event.once_key)
                for event in events or ()
            ],
        )
        if subject.kind == "workload":
            written = await self._workload_writes(
                reconciling.StatusWrite(
                    fence.owner, fence.epoch, subject.id, generation, state, reason, observed, audit
                )
            )
        else:
            async with self.db.connection() as conn:
                written = await reconciling.set_status(
                    conn,
                    subject.kind,
                    owner=fence.owner,
                    epoch=fence.epoch,
                    resource_id=subject.id,
                    generation=generation,
                    state=state,
                    reason=reason,
                    observed=observed,
                    audit=audit,
                )
        if not written.held:
            raise fence.lost(f"status write of {subject.kind} {subject.name}")
        return written

    async def refuse_foreign(
        self,
        fence: Fence,
        subject: Subject,
        *,
        generation: int,
        current: tuple[str, str | None],
        reason: str,
        observed: dict[str, Any],
    ) -> None:
        """DEGRADED with the sentence naming the cluster object that is not aicp's (nothing
        was written to it); no write when `current` (state, reason) says so already."""
        if current == (ResourceState.DEGRADED, reason):
            return
        log.warning("%s %s: %s", subject.kind, subject.name, reason)
        await self.write_status(
            fence,
            subject,
            generation=generation,
            state=ResourceState.DEGRADED,
            reason=reason,
            observed=observed,
            events=[Event(EventType.DEGRADED, reason)],
        )

    async def record(self, conn: Any, subject: Subject, event: Event, generation: int) -> None:
        """Append one controller event inside the caller's transaction."""
        await record_event(
            conn,
            project_id=subject.project_id,
            kind=subject.kind,
            resource_id=subject.id,
            resource_name=subject.name,
            type=event.type,
            reason=event.reason,
            message=event.message,
            generation=generation,
            actor=self.actor,
            once_key=event.once_key,
        )

    async def read_row(
        self, read: Callable[[Connection, uuid.UUID], Awaitable[R | None]], resource_id: uuid.UUID
    ) -> R | None:
        """The step's row as `read` gives it (None: the resource is gone, the step releases
        it); a row found refreshes the gauges first (`refresh_gauges`)."""
        async with self.db.connection() as conn:
            row = await read(conn, resource_id)
        if row is not None:
            await self.refresh_gauges()
        return row

    async def read_workload(self, workload_id: uuid.UUID) -> WorkloadRow | None:
        """`read_row` of a workload, read together with the rows other workers want meanwhile
        (one statement for them all, `app/store/batching.py`)."""
        row = await self._workload_reads(workload_id)
        if row is not None:
            await self.refresh_gauges()
        return row

    async def _read_workloads(self, ids: Sequence[uuid.UUID]) -> list[WorkloadRow | None]:
        async with self.db.connection() as conn:
            return await reconciling.load_workloads(conn, ids)

    async def _write_workloads(self, writes: Sequence[reconciling.StatusWrite]) -> list[Written]:
        async with self.db.connection() as conn:
            return await reconciling.set_workload_statuses(conn, writes)

    async def refresh_gauges(self) -> None:
        """Recount live workloads by state and stuck deletions, at most every few seconds, and
        finished workloads every few minutes."""
        now = time.monotonic()
        if now - self._gauges_at < GAUGE_REFRESH_SECONDS:
            return
        self._gauges_at = now
        finished: dict[str, int] | None = None
        async with self.db.connection() as conn:
            states = await reconciling.workload_state_counts(conn)
            stuck = await reconciling.stuck_deleting_counts(conn)
            if now - self._finished_at >= FINISHED_GAUGE_REFRESH_SECONDS:
                self._finished_at = now
                finished = await reconciling.workload_finished_counts(conn)
        for state in WorkloadState:
            if state.is_terminal:
                if finished is not None:
                    WORKLOADS_BY_STATE.labels(state.value).set(finished.get(state.value, 0))
                continue
            WORKLOADS_BY_STATE.labels(state.value).set(states.get(state.value, 0))
        for kind, count in stuck.items():
            STUCK_DELETING.labels(kind).set(count)
