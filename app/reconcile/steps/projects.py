"""The project step: the namespace `aicp-<project>` (docs/DESIGN.md §6).

1. row gone → release;
2. deletion requested → wait until no pool or workload row is left (the API refuses to
   delete a project that has them, but their own deletions may still be finishing), delete the
   namespace, and once the server no longer has it, finalize;
3. otherwise apply the namespace (plus, once per process, the three WorkloadPriorityClasses
   every Job names) and record READY — unless a namespace of that name exists and is not this
   project's (`app.domain.ownership`): then DEGRADED with a sentence naming its manager, and
   nothing is applied, nor deleted when the project is.

Projects have nothing an informer watches, so the step releases its lease when done.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from app.domain.events import EventType
from app.domain.naming import namespace_for
from app.domain.ownership import foreign_owner, not_taken_over
from app.domain.render import namespace_owner_labels, render_namespace, render_priority_classes
from app.domain.states import ResourceState
from app.kube.apply import apply, apply_checked, delete, get
from app.kube.errors import Conflict
from app.kube.resources import NAMESPACES
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
        async with ctx.db.connection() as conn:
            row = await reconciling.load_project(conn, project_id)
        if row is None:
            return Result.release()
        await ctx.refresh_gauges()
        if row.deleting:
            return await self._delete(fence, row)
        if not ctx.priority_classes_applied:
            for manifest in render_priority_classes():
                async with kube_fenced(fence, "apply of the priority classes"):
                    await apply(ctx.kube, manifest)
            ctx.priority_classes_applied = True
        namespace = namespace_for(row.name)
        if row.observed_generation == row.generation and row.state == ResourceState.READY:
            return Result.release()
        live = await get(ctx.kube, NAMESPACES, None, namespace)
        manager = foreign_owner(live, namespace_owner_labels(row.name, str(row.id)))
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
        reason = f"Namespace {namespace} is ready for the project's pools and workloads."
        events = [Event(EventType.READY, reason)] if row.state != ResourceState.READY else []
        written = await ctx.write_status(
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
        return Result.release()

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
