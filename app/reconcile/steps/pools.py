"""The pool step: a ResourceFlavor, a ClusterQueue and a LocalQueue per pool (docs/DESIGN.md §6).

One call, in order:

1. row gone → forget its route, release; deletion requested → remove the LocalQueue and the
   ClusterQueue, the flavor if no other live pool uses it (invariant 9), and once the
   ClusterQueue is gone and no workload row references the pool, finalize;
2. the project's namespace not applied yet, or not in the Namespace informer's cache (deleted
   outside aicp: the project step re-creates it) → look again shortly;
3. a new generation (quota change), or drift → apply all three objects; drift is recorded as
   `DriftCorrected`. The ClusterQueue is watched, so it is compared on every call; the flavor
   and the LocalQueue are not, so they are read from the server at most every
   `UNWATCHED_CHECK_SECONDS` per pool (and on every call while the pool is DEGRADED — a
   missing flavor deactivates the queue — or when the namespace is another than last checked:
   a namespace re-created after a deletion by hand holds no LocalQueue);
4. status from the ClusterQueue (`classify_pool`) and the nodes (`no_node_for_flavor`: no node
   carries the flavor's labels → DEGRADED): state, reason, usage → fenced write when anything
   changed, an event when the state changed. A pool without such a node is looked at again
   every `NO_NODE_RECHECK_SECONDS` (an in-memory check), so a node labelled for it makes it
   READY within seconds; a READY pool notices its last node going at its next look.

A flavor may be shared by pools of several projects. Applying and deleting it both happen
under a transaction-scoped advisory lock on its name, and the delete re-counts the live pools
using it under that lock, so a pool being created never loses its flavor to one being deleted.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgspec

from app.domain.classify.pool import classify_pool, no_node_for_flavor
from app.domain.events import EventReason, EventType
from app.domain.kube_objects import field, is_terminating
from app.domain.ownership import foreign_owner, not_taken_over
from app.domain.render import (
    PoolIdentity,
    declared_drift,
    render_cluster_queue,
    render_local_queue,
    render_resource_flavor,
)
from app.domain.specs import BindingPut, Quota
from app.domain.states import ResourceState
from app.kube.apply import apply_checked, delete, get
from app.kube.errors import Conflict, NotFound
from app.kube.resources import CLUSTER_QUEUES, LOCAL_QUEUES, RESOURCE_FLAVORS
from app.observability.metrics import DRIFT_CORRECTIONS
from app.reconcile.fencing import fenced_transaction, kube_fenced
from app.reconcile.steps.context import Event, Subject
from app.reconcile.steps.deletion import finalize
from app.reconcile.workers import Result
from app.store import reconciling

if TYPE_CHECKING:
    import uuid

    from app.domain.kube_objects import Manifest
    from app.reconcile.fencing import Fence
    from app.reconcile.steps.context import StepContext
    from app.store.reconciling import PoolRow

log = logging.getLogger("aicp.reconcile")

WAIT_SECONDS = 0.5
#: How often a settled pool's unwatched objects (flavor, LocalQueue) are read back, at most.
UNWATCHED_CHECK_SECONDS = 30.0
#: How often a pool whose flavor no node matches looks at the nodes again.
NO_NODE_RECHECK_SECONDS = 2.0
#: While a deletion waits for the pool's workloads to be finalized.
DELETION_RECHECK_SECONDS = 1.0

#: The event of each state a pool's ClusterQueue can put it in.
_STATE_EVENTS = {
    ResourceState.READY: EventType.READY,
    ResourceState.DEGRADED: EventType.DEGRADED,
    ResourceState.PENDING: EventType.PENDING,
}


@dataclass(frozen=True, slots=True)
class _Live:
    """The objects a pool writes, as read when their ownership was checked (None: absent)."""

    queue: Manifest | None
    local_queue: Manifest | None
    flavor: Manifest | None


def _subject(row: PoolRow) -> Subject:
    return Subject(kind="pool", id=row.id, project_id=row.project_id, name=row.name)


def _identity(row: PoolRow) -> PoolIdentity:
    return PoolIdentity(
        project=row.project,
        pool=row.name,
        accelerator_class=row.accelerator_class,
        uid=str(row.id),
    )


class PoolStep:
    """The `ReconcileFn` of kind `pool`."""

    def __init__(self, ctx: StepContext) -> None:
        self.ctx = ctx
        self._checked: dict[uuid.UUID, float] = {}  # pool id → monotonic time of last check
        self._flavors: dict[uuid.UUID, bytes] = {}  # pool id → the flavor it last checked
        self._namespaces: dict[uuid.UUID, str] = {}  # pool id → uid of the namespace checked

    async def __call__(self, pool_id: uuid.UUID, fence: Fence, /) -> Result:
        ctx = self.ctx
        await ctx.routes.load(ctx.db)
        row = await ctx.read_row(reconciling.load_pool, pool_id)
        if row is None:
            self._forget(pool_id)
            return Result.release()
        ctx.routes.learn(row.project, row.name, row.id)
        identity = _identity(row)
        binding = msgspec.convert(row.binding, BindingPut)
        if row.deleting:
            return await self._delete(fence, row, identity, binding)
        if not row.project_ready:
            return Result.requeue(WAIT_SECONDS)
        namespace = ctx.informers.namespaces.get(None, identity.namespace)
        if namespace is None or is_terminating(namespace):
            return Result.requeue(WAIT_SECONDS)

        desired = render_cluster_queue(identity, msgspec.convert(row.quota, Quota), binding)
        queue = ctx.informers.cluster_queues.get(None, identity.cluster_queue)
        new_generation = row.observed_generation != row.generation
        found: dict[str, list[str]] = {}  # kind → what it lacks
        if not new_generation:
            queue, found = await self._drift(row, identity, binding, desired, queue, namespace)
        events: list[Event] = []
        if new_generation or found:
            refused, live = await self._foreign(identity, binding, queue)
            if refused is not None:
                return await self._refuse(fence, row, identity, refused)
            try:
                queue = await self._apply(fence, row, identity, binding, desired, live)
            except Conflict as exc:
                # An object changed (or appeared) between its check and the write: check again.
                log.info("pool %s/%s: checking its objects again: %s", row.project, row.name, exc)
                return Result.requeue(WAIT_SECONDS)
            except NotFound as exc:
                # The namespace went between its check and the LocalQueue's apply (deleted
                # outside aicp): its DELETED event wakes the project step, which re-creates it.
                log.warning(
                    "pool %s/%s: namespace %s is gone; waiting for it: %s",
                    row.project,
                    row.name,
                    identity.namespace,
                    exc.message,
                )
                return Result.requeue(WAIT_SECONDS)
            events.append(_applied_event(row, identity, binding, found))
        no_node = no_node_for_flavor(
            binding.flavor, binding.node_labels, ctx.informers.nodes.list()
        )
        await self._record(fence, row, identity, binding, queue, events, no_node)
        return Result.requeue(
            UNWATCHED_CHECK_SECONDS if no_node is None else NO_NODE_RECHECK_SECONDS
        )

    async def _refuse(
        self, fence: Fence, row: PoolRow, identity: PoolIdentity, reason: str
    ) -> Result:
        """Another manager owns one of the pool's queues: say so, and look again later."""
        await self.ctx.refuse_foreign(
            fence,
            _subject(row),
            generation=row.generation,
            current=(row.state, row.state_reason),
            reason=reason,
            observed={"cluster_queue": identity.cluster_queue, "local_queue": identity.local_queue},
        )
        return Result.requeue(UNWATCHED_CHECK_SECONDS)

    def _forget(self, pool_id: uuid.UUID) -> None:
        """Drop what this step remembers of a pool that is gone."""
        self.ctx.routes.forget(pool_id)
        self._checked.pop(pool_id, None)
        self._flavors.pop(pool_id, None)
        self._namespaces.pop(pool_id, None)

    async def _drift(
        self,
        row: PoolRow,
        identity: PoolIdentity,
        binding: BindingPut,
        desired: Manifest,
        queue: Manifest | None,
        namespace: Manifest,
    ) -> tuple[Manifest | None, dict[str, list[str]]]:
        """The ClusterQueue as the server has it, and what the pool's objects lack of what
        this generation declared (by kind; nothing when they are as applied)."""
        if queue is None:
            # Not in the cache: ask the server before calling it drift.
            queue = await get(self.ctx.kube, CLUSTER_QUEUES, None, identity.cluster_queue)
        if lacking := declared_drift(desired, queue):
            return queue, {"ClusterQueue": lacking}
        if self._unwatched_due(row, queue, binding, namespace):
            return queue, await self._unwatched_drift(identity, binding)
        return queue, {}

    def _unwatched_due(
        self, row: PoolRow, queue: Manifest | None, binding: BindingPut, namespace: Manifest
    ) -> bool:
        """Whether to read the flavor and LocalQueue back now: every `UNWATCHED_CHECK_SECONDS`,
        at once while the queue says the pool cannot admit (a flavor may be missing), at once
        when the binding renders another flavor than last checked (a replaced binding rings
        its pools: the new node labels reach the flavor now, not at the next periodic check),
        and at once when the namespace is not the one last checked (a new uid: it was deleted
        and re-created, and its LocalQueue went with it)."""
        now = time.monotonic()
        state = classify_pool(queue, resource_name=binding.resource_name).state
        recent = now - self._checked.get(row.id, 0.0) < UNWATCHED_CHECK_SECONDS
        flavor = msgspec.json.encode(render_resource_flavor(binding))
        namespace_uid = str(field(namespace, "metadata", "uid") or "")
        if (
            recent
            and state != ResourceState.DEGRADED
            and self._flavors.get(row.id) == flavor
            and self._namespaces.get(row.id) == namespace_uid
        ):
            return False
        self._checked[row.id] = now
        self._flavors[row.id] = flavor
        self._namespaces[row.id] = namespace_uid
        return True

    async def _unwatched_drift(
        self, identity: PoolIdentity, binding: BindingPut
    ) -> dict[str, list[str]]:
        """What the flavor and the LocalQueue on the server lack of what aicp declares."""
        found: dict[str, list[str]] = {}
        for desired in (render_resource_flavor(binding), render_local_queue(identity)):
            meta, kind = desired["metadata"], str(desired["kind"])
            resource = RESOURCE_FLAVORS if kind == "ResourceFlavor" else LOCAL_QUEUES
            live = await get(self.ctx.kube, resource, meta.get("namespace"), meta["name"])
            if lacking := declared_drift(desired, live):
                found[kind] = [f"{kind} {m}" if live else m for m in lacking]
        return found

    async def _foreign(
        self, identity: PoolIdentity, binding: BindingPut, queue: Manifest | None
    ) -> tuple[str | None, _Live]:
        """The sentence of the first object the pool would write that is someone else's
        (`app.domain.ownership`), else None; and the three objects as they were checked."""
        kube = self.ctx.kube
        if queue is None:
            queue = await get(kube, CLUSTER_QUEUES, None, identity.cluster_queue)
        live = _Live(
            queue=queue,
            local_queue=await get(kube, LOCAL_QUEUES, identity.namespace, identity.local_queue),
            flavor=await get(kube, RESOURCE_FLAVORS, None, binding.flavor),
        )
        for kind, name, found, expected in (
            ("ClusterQueue", identity.cluster_queue, live.queue, identity.owner_labels),
            (
                "LocalQueue",
                f"{identity.namespace}/{identity.local_queue}",
                live.local_queue,
                identity.owner_labels,
            ),
            ("ResourceFlavor", binding.flavor, live.flavor, {}),
        ):
            if (manager := foreign_owner(found, expected)) is not None:
                return not_taken_over(kind, name, manager), live
        return None, live

    async def _apply(
        self,
        fence: Fence,
        row: PoolRow,
        identity: PoolIdentity,
        binding: BindingPut,
        desired: Manifest,
        live: _Live,
    ) -> Manifest:
        """Apply the flavor and the queues, each only over the object `_foreign` checked."""
        ctx = self.ctx
        async with ctx.db.transaction() as conn:
            await reconciling.lock_flavor(conn, binding.flavor)
            async with kube_fenced(fence, f"apply of ResourceFlavor {binding.flavor}"):
                await apply_checked(ctx.kube, render_resource_flavor(binding), live.flavor)
        local_queue = live.local_queue
        async with kube_fenced(fence, f"apply of the queues of pool {row.name}"):
            queue = await apply_checked(ctx.kube, desired, live.queue, pin_version=False)
            pointed = field(local_queue, "spec", "clusterQueue") if local_queue else None
            if pointed is not None and pointed != identity.cluster_queue:
                # Kueue keeps a LocalQueue's clusterQueue immutable: one rendered by an earlier
                # version under the old ClusterQueue name is replaced, not updated.
                uid = field(local_queue, "metadata", "uid")
                await delete(
                    ctx.kube,
                    LOCAL_QUEUES,
                    identity.namespace,
                    identity.local_queue,
                    uid=str(uid) if uid else None,
                )
                local_queue = None
            await apply_checked(
                ctx.kube, render_local_queue(identity), local_queue, pin_version=False
            )
        await self._retire_legacy_queue(fence, identity)
        log.info("pool %s/%s generation %d: queues applied", row.project, row.name, row.generation)
        return queue

    async def _retire_legacy_queue(self, fence: Fence, identity: PoolIdentity) -> None:
        """Delete the ClusterQueue an earlier version rendered under the old, non-injective
        name, when it is this pool's (by its project and pool labels); never another's."""
        legacy = identity.legacy_cluster_queue
        if legacy == identity.cluster_queue:
            return
        live = await get(self.ctx.kube, CLUSTER_QUEUES, None, legacy)
        if live is None or foreign_owner(live, identity.owner_labels) is not None:
            return
        uid = field(live, "metadata", "uid")
        async with kube_fenced(fence, f"delete of the earlier ClusterQueue {legacy}"):
            await delete(self.ctx.kube, CLUSTER_QUEUES, None, legacy, uid=str(uid) if uid else None)
        log.info(
            "pool %s/%s: deleted ClusterQueue %s of an earlier version",
            identity.project,
            identity.pool,
            legacy,
        )

    async def _record(
        self,
        fence: Fence,
        row: PoolRow,
        identity: PoolIdentity,
        binding: BindingPut,
        queue: Manifest | None,
        events: list[Event],
        no_node: str | None,
    ) -> None:
        state, reason, usage = classify_pool(
            queue, resource_name=binding.resource_name, no_node=no_node
        )
        observed: dict[str, Any] = {
            "cluster_queue": identity.cluster_queue,
            "local_queue": identity.local_queue,
            "usage": msgspec.to_builtins(usage),
        }
        if state.value != row.state:
            events.append(Event(_STATE_EVENTS[state], reason))
        unchanged = (
            state.value == row.state
            and reason == row.state_reason
            and observed == row.observed
            and row.observed_generation == row.generation
        )
        if unchanged and not events:
            return
        written = await self.ctx.write_status(
            fence,
            _subject(row),
            generation=row.generation,
            state=state,
            reason=reason,
            observed=observed,
            events=events,
        )
        if written.written and state.value != row.state:
            log.info("pool %s/%s: %s -> %s: %s", row.project, row.name, row.state, state, reason)

    async def _delete(
        self, fence: Fence, row: PoolRow, identity: PoolIdentity, binding: BindingPut
    ) -> Result:
        ctx = self.ctx
        mine = identity.owner_labels
        local_queue = await get(ctx.kube, LOCAL_QUEUES, identity.namespace, identity.local_queue)
        queue = await get(ctx.kube, CLUSTER_QUEUES, None, identity.cluster_queue)
        async with kube_fenced(fence, f"delete of the queues of pool {row.name}"):
            # Only the pool's own: a queue of that name someone else made is left as it is.
            if local_queue is not None and foreign_owner(local_queue, mine) is None:
                await delete(ctx.kube, LOCAL_QUEUES, identity.namespace, identity.local_queue)
            if queue is not None and foreign_owner(queue, mine) is None:
                await delete(ctx.kube, CLUSTER_QUEUES, None, identity.cluster_queue)
            else:
                queue = None
        await self._retire_legacy_queue(fence, identity)
        async with fenced_transaction(ctx.db, fence) as conn:
            await reconciling.lock_flavor(conn, binding.flavor)
            if await reconciling.flavor_other_users(conn, binding.flavor, row.id) == 0:
                flavor = await get(ctx.kube, RESOURCE_FLAVORS, None, binding.flavor)
                if flavor is not None and foreign_owner(flavor, {}) is None:
                    async with kube_fenced(fence, f"delete of ResourceFlavor {binding.flavor}"):
                        await delete(ctx.kube, RESOURCE_FLAVORS, None, binding.flavor)
        async with ctx.db.connection() as conn:
            in_use = await reconciling.pool_has_workloads(conn, row.id)
        gone = queue is None or not await get(
            ctx.kube, CLUSTER_QUEUES, None, identity.cluster_queue
        )
        if in_use or not gone:
            return Result.requeue(DELETION_RECHECK_SECONDS)
        ctx.routes.forget(row.id)
        final = {
            "generation": row.generation,
            "observed_generation": row.observed_generation,
            "quota": row.quota,
            "accelerator_class": row.accelerator_class,
            "state": "DELETED",
            "reason": f"Compute pool {row.name} was deleted; its queues are gone.",
        }
        return await finalize(ctx, fence, _subject(row), row.generation, final)


def _applied_event(
    row: PoolRow, identity: PoolIdentity, binding: BindingPut, found: dict[str, list[str]]
) -> Event:
    """What an apply did: restored what `found` lacked (drift), or applied a new generation."""
    if found:
        for kind in found:
            DRIFT_CORRECTIONS.labels(kind).inc()
        lacking = [item for items in found.values() for item in items]
        message = f"Restored the pool's queues: {'; '.join(lacking)}."
        log.info("drift corrected on pool %s/%s: %s", row.project, row.name, message)
        return Event(EventType.DRIFT_CORRECTED, message, EventReason.QUEUES_RESTORED)
    quota = row.quota
    return Event(
        EventType.QUEUES_APPLIED,
        f"Applied ClusterQueue {identity.cluster_queue} with quota "
        f"{quota['accelerators']} {binding.resource_name}, cpu {quota['cpu']}, "
        f"memory {quota['memory']} (generation {row.generation}), and "
        f"LocalQueue {identity.local_queue} in {identity.namespace}.",
    )
