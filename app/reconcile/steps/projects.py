"""The project step: the namespace `aicp-<project>` (docs/DESIGN.md §6).

1. row gone → release;
2. deletion requested → wait until no pool or workload row is left (the API refuses to
   delete a project that has them, but their own deletions may still be finishing), delete the
   namespace, and once the server no longer has it, finalize;
3. a READY project whose namespace the Namespace informer holds (and not being deleted) →
   release: nothing to do;
4. the namespace is being deleted by someone else → DEGRADED saying so, look again shortly
   (a namespace cannot be re-created before it is gone);
5. otherwise apply the namespace (plus, once per process, the three WorkloadPriorityClasses
   every Job names) and record READY — unless a namespace of that name exists and is not this
   project's (`app.domain.ownership`): then DEGRADED with a sentence naming its manager, and
   nothing is applied, nor deleted when the project is. A namespace re-created after it was
   deleted outside aicp is drift: `DriftCorrected` (`NamespaceRestored`); the router wakes
   the project's pools, which restore their LocalQueues in it.

The Namespace informer wakes the project when its namespace is deleted; otherwise the step
releases its lease when done.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from app.domain.events import EventReason, EventType
from app.domain.kube_objects import is_terminating
from app.domain.naming import namespace_for
from app.domain.ownership import foreign_owner, not_taken_over
from app.domain.render import namespace_owner_labels, render_namespace, render_priority_classes
from app.domain.states import ResourceState
from app.kube.apply import apply, apply_checked, delete, get
from app.kube.errors import Conflict
from app.kube.resources import NAMESPACES
from app.observability.metrics import DRIFT_CORRECTIONS
from app.reconcile.fencing import kube_fenced
from app.reconcile.steps.context import Event, Subject
from app.reconcile.steps.deletion import finalize
from app.reconcile.workers import Result
from app.store import reconciling

if TYPE_CHECKING:
    import uuid

    from app.reconcile.fencing import Fence
    from app.reconcile.steps.context import StepContext
    from app.store.reconciling import ProjectRow

log = logging.getLogger("aicp.reconcile")

#: While a deletion waits for the project's pools and workloads, or for its namespace to go.
DELETION_RECHECK_SECONDS = 1.0
#: While the namespace of the project's name is someone else's: look again this often.
FOREIGN_RECHECK_SECONDS = 30.0


def _subject(row: ProjectRow) -> Subject:
    return Subject(kind="project", id=row.id, project_id=row.id, name=row.name)


class ProjectStep:
    """The `ReconcileFn` of kind `project`."""

    def __init__(self, ctx: StepContext) -> None:
        self.ctx = ctx

    async def __call__(self, project_id: uuid.UUID, fence: Fence, /) -> Result:
        ctx = self.ctx
        row = await ctx.read_row(reconciling.load_project, project_id)
        if row is None:
            return Result.release()
        if row.deleting:
            return await self._delete(fence, row)
        await self._apply_priority_classes(fence)
        namespace = namespace_for(row.name)
        settled = row.observed_generation == row.generation
        cached = ctx.informers.namespaces.get(None, namespace)
        if settled and row.state == ResourceState.READY and cached and not is_terminating(cached):
            return Result.release()
        live = await get(ctx.kube, NAMESPACES, None, namespace)
        manager = foreign_owner(live, namespace_owner_labels(row.name, str(row.id)))
        if live is not None and is_terminating(live) and manager is None:
            return await self._terminating(fence, row, namespace)
        if manager is not None:
            await ctx.refuse_foreign(
                fence,
                _subject(row),
                generation=row.generation,
                current=(row.state, row.state_reason),
                reason=not_taken_over("Namespace", namespace, manager),
                observed={"namespace": namespace},
            )
            return Result.requeue(FOREIGN_RECHECK_SECONDS)
        try:
            async with kube_fenced(fence, f"apply of namespace {namespace}"):
                await apply_checked(ctx.kube, render_namespace(row.name, str(row.id)), live)
        except Conflict:
            # The namespace changed (or appeared) between its check and the write: check again.
            return Result.requeue(DELETION_RECHECK_SECONDS)
        await self._ready(fence, row, namespace, missing=settled and live is None)
        return Result.release()

    async def _apply_priority_classes(self, fence: Fence) -> None:
        """The cluster's priority classes, once per process (the first project step applies
        them)."""
        if self.ctx.priority_classes_applied:
            return
        for manifest in render_priority_classes():
            async with kube_fenced(fence, "apply of the priority classes"):
                await apply(self.ctx.kube, manifest)
        self.ctx.priority_classes_applied = True

    async def _ready(self, fence: Fence, row: ProjectRow, namespace: str, *, missing: bool) -> None:
        """READY with the namespace applied; `missing`: this generation's namespace was
        gone (a drift correction, when it had been applied before)."""
        reason = f"Namespace {namespace} is ready for the project's pools and workloads."
        events = [Event(EventType.READY, reason)] if row.state != ResourceState.READY else []
        if missing and row.observed.get("namespace") == namespace:
            # It was applied for this generation before: someone deleted it (or the cluster
            # was replaced under a database that remembers it).
            DRIFT_CORRECTIONS.labels("Namespace").inc()
            message = f"Namespace {namespace} was deleted outside aicp; re-created it."
            log.info("drift corrected on project %s: %s", row.name, message)
            events.insert(
                0, Event(EventType.DRIFT_CORRECTED, message, EventReason.NAMESPACE_RESTORED)
            )
        written = await self.ctx.write_status(
            fence,
            _subject(row),
            generation=row.generation,
            state=ResourceState.READY,
            reason=reason,
            observed={"namespace": namespace},
            events=events,
        )
        if written.written:
            log.info("project %s: namespace %s applied, READY", row.name, namespace)

    async def _terminating(self, fence: Fence, row: ProjectRow, namespace: str) -> Result:
        """The project's namespace is being deleted outside aicp: DEGRADED until it is gone
        (its DELETED event wakes the step, which re-creates it)."""
        reason = (
            f"Namespace {namespace} is being deleted outside aicp; aicp re-creates it once it "
            "is gone."
        )
        if (row.state, row.state_reason) != (ResourceState.DEGRADED, reason):
            log.warning("project %s: %s", row.name, reason)
            await self.ctx.write_status(
                fence,
                _subject(row),
                generation=row.generation,
                state=ResourceState.DEGRADED,
                reason=reason,
                observed={"namespace": namespace},
                events=[Event(EventType.DEGRADED, reason)],
            )
        return Result.requeue(DELETION_RECHECK_SECONDS)

    async def _delete(self, fence: Fence, row: ProjectRow) -> Result:
        ctx = self.ctx
        async with ctx.db.connection() as conn:
            if await reconciling.project_has_children(conn, row.id):
                return Result.requeue(DELETION_RECHECK_SECONDS)
        namespace = namespace_for(row.name)
        live = await get(ctx.kube, NAMESPACES, None, namespace)
        manager = foreign_owner(live, namespace_owner_labels(row.name, str(row.id)))
        if manager is None and live is not None:
            async with kube_fenced(fence, f"delete of namespace {namespace}"):
                await delete(ctx.kube, NAMESPACES, None, namespace)
            if await get(ctx.kube, NAMESPACES, None, namespace) is not None:
                return Result.requeue(DELETION_RECHECK_SECONDS)
        gone = f"namespace {namespace} is gone"
        if manager is not None:
            gone = f"namespace {namespace} is managed by {manager} and was left as it is"
        final = {
            "generation": row.generation,
            "state": "DELETED",
            "reason": f"Project {row.name} was deleted; {gone}.",
        }
        return await finalize(ctx, fence, _subject(row), row.generation, final)
