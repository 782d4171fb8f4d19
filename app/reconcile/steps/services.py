"""The service step: an inference service's Deployment, Service, PodDisruptionBudget,
NetworkPolicy and (with `autoscaling`) HorizontalPodAutoscaler, kept as rendered, and its
status read from the Deployment, its pods and their Kueue Workloads.

One call, in order:

1. row gone → release; deletion requested → delete every object (the Deployment in the
   foreground: it is gone only once its ReplicaSets and pods are), and once the Deployment and
   its pods are gone, finalize (a tombstone with the last status);
2. the project's namespace or the pool's LocalQueue not applied yet → look again shortly;
3. each object of the service: one someone else made under its name → DEGRADED, nothing
   written; missing, or lacking a field this generation declares → server-side apply as
   field manager `aicp` (forcing conflicts only on the fields it declares). The Deployment and
   the Service are watched, so they are compared on every call; the PodDisruptionBudget,
   NetworkPolicy and autoscaler are read from the server on a new generation and every
   `UNWATCHED_CHECK_SECONDS`. A change by hand to an object the service already had is drift,
   undone and recorded (`DriftCorrected`: `ReplicasRestored` for a Deployment scaled by hand,
   `ObjectRestored` else). With `autoscaling` the Deployment declares no `spec.replicas`, so
   the autoscaler's count is never drift;
4. status from `app.domain.classify.service.classify_service` → a fenced write when anything
   changed, with an event when the state changed.
"""

from __future__ import annotations

import contextlib
import logging
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import msgspec

from app.domain.classify.service import classify_service, waits_for_quota
from app.domain.events import EventReason, EventType
from app.domain.kube_objects import field, is_terminating, label_of, name_of, namespace_of
from app.domain.labels import KUEUE_JOB_UID_LABEL, SERVICE_LABEL, UID_LABEL
from app.domain.ownership import foreign_owner
from app.domain.render import declared_drift
from app.domain.render.inputs import ServiceIdentity
from app.domain.render.service import (
    render_deployment,
    render_horizontal_pod_autoscaler,
    render_network_policy,
    render_pod_disruption_budget,
    render_service,
    service_endpoint,
)
from app.domain.service_specs import ServiceSpec
from app.domain.states import ServiceState
from app.kube.apply import Propagation, apply_checked, delete, get
from app.kube.errors import Conflict, NotFound
from app.kube.resources import (
    DEPLOYMENTS,
    HORIZONTAL_POD_AUTOSCALERS,
    NETWORK_POLICIES,
    POD_DISRUPTION_BUDGETS,
    SERVICES,
    Resource,
    resource_of,
)
from app.observability.metrics import DRIFT_CORRECTIONS
from app.reconcile.fencing import kube_fenced
from app.reconcile.steps.context import Event, Subject
from app.reconcile.steps.deletion import finalize
from app.reconcile.workers import Result
from app.store import reconciling

if TYPE_CHECKING:
    import uuid

    from app.domain.kube_objects import Manifest
    from app.reconcile.fencing import Fence
    from app.reconcile.steps.context import StepContext
    from app.store.reconciling import ServiceRow

log = logging.getLogger("aicp.reconcile")

WAIT_SECONDS = 0.5
#: How often a settled service's unwatched objects (PodDisruptionBudget, NetworkPolicy,
#: autoscaler) are read back, at most; also how often a settled service is looked at anyway.
UNWATCHED_CHECK_SECONDS = 30.0
#: While a deletion waits for the Deployment's pods to go.
DELETION_RECHECK_SECONDS = 1.0
#: The objects a service deletes, in order: the autoscaler first (it would scale the
#: Deployment back up), the Deployment (its ReplicaSets and pods go with it) last but one.
_OWNED: tuple[Resource, ...] = (
    HORIZONTAL_POD_AUTOSCALERS,
    NETWORK_POLICIES,
    POD_DISRUPTION_BUDGETS,
    SERVICES,
    DEPLOYMENTS,
)

#: The Deployment goes in the foreground: it stays (terminating) until the garbage collector
#: has removed its ReplicaSets and their pods, so that no ReplicaSet replaces a pod while its
#: Deployment is already gone, and a Deployment that is gone means no replica is left.
_PROPAGATION: dict[Resource, Propagation] = {DEPLOYMENTS: "Foreground"}

_STATE_EVENTS = {
    ServiceState.READY: EventType.READY,
    ServiceState.DEGRADED: EventType.DEGRADED,
    ServiceState.PROGRESSING: EventType.PROGRESSING,
    ServiceState.PENDING: EventType.PENDING,
}


def _subject(row: ServiceRow) -> Subject:
    return Subject(kind="service", id=row.id, project_id=row.project_id, name=row.name)


class ServiceStep:
    """The `ReconcileFn` of kind `service`."""

    def __init__(self, ctx: StepContext, *, ingress_namespace: str | None = None) -> None:
        self.ctx = ctx
        self.ingress_namespace = ingress_namespace
        self._checked: dict[uuid.UUID, tuple[int, float]] = {}  # id → (generation, monotonic)

    async def __call__(self, service_id: uuid.UUID, fence: Fence, /) -> Result:
        ctx = self.ctx
        row = await ctx.read_row(reconciling.load_service, service_id)
        if row is None:
            self._checked.pop(service_id, None)
            return Result.release()
        identity = ServiceIdentity(
            project=row.project,
            service=row.name,
            uid=str(row.id),
            generation=row.generation,
            accelerator_resource=row.accelerator_resource,
            ingress_namespace=self.ingress_namespace,
        )
        if row.deleting:
            return await self._delete(fence, row, identity)
        if not row.queues_ready or ctx.informers.namespaces.get(None, identity.namespace) is None:
            return Result.requeue(WAIT_SECONDS)
        spec = msgspec.convert(row.spec, ServiceSpec)
        try:
            events = await self._converge(fence, row, identity, spec)
        except _Foreign as refused:
            await ctx.refuse_foreign(
                fence,
                _subject(row),
                generation=row.generation,
                current=(row.state, row.state_reason),
                reason=str(refused),
                observed=row.observed,
            )
            return Result.requeue(UNWATCHED_CHECK_SECONDS)
        except Conflict:
            return Result.requeue(WAIT_SECONDS)  # it moved between the read and the write
        return await self._record(fence, row, identity, spec, events)

    # -- converging the objects ---------------------------------------------------------------

    async def _converge(
        self, fence: Fence, row: ServiceRow, identity: ServiceIdentity, spec: ServiceSpec
    ) -> list[Event]:
        """Apply what is missing or lacks a declared field; the DriftCorrected events of what
        had been applied before (a first apply, or one of a new generation, is no drift)."""
        ctx = self.ctx
        new_generation = row.observed_generation != row.generation
        known = bool(row.observed.get("deployment"))
        events: list[Event] = []
        watched = [
            (render_deployment(identity, spec), ctx.informers.deployments),
            (render_service(identity, spec), ctx.informers.services),
        ]
        for desired, cache in watched:
            live = cache.get(identity.namespace, identity.name)
            if live is None and known:
                live = await get(ctx.kube, resource_of(desired), identity.namespace, identity.name)
            event = await self._ensure(fence, identity, desired, live, drift=known)
            if event is not None and not new_generation:
                events.append(event)
        if self._unwatched_due(row):
            unwatched: list[tuple[Resource, Manifest | None]] = [
                (POD_DISRUPTION_BUDGETS, render_pod_disruption_budget(identity, spec)),
                (NETWORK_POLICIES, render_network_policy(identity, spec)),
                (HORIZONTAL_POD_AUTOSCALERS, render_horizontal_pod_autoscaler(identity, spec)),
            ]
            for resource, wanted in unwatched:
                live = await get(ctx.kube, resource, identity.namespace, identity.name)
                if wanted is None:
                    await self._remove_unwanted(fence, identity, resource, live)
                    continue
                event = await self._ensure(fence, identity, wanted, live, drift=known)
                if event is not None and not new_generation:
                    events.append(event)
        return events

    def _unwatched_due(self, row: ServiceRow) -> bool:
        """On a new generation, and at most every `UNWATCHED_CHECK_SECONDS` otherwise."""
        now = time.monotonic()
        generation, at = self._checked.get(row.id, (0, float("-inf")))
        if generation == row.generation and now - at < UNWATCHED_CHECK_SECONDS:
            return False
        self._checked[row.id] = (row.generation, now)
        return True

    async def _ensure(
        self,
        fence: Fence,
        identity: ServiceIdentity,
        desired: Manifest,
        live: Manifest | None,
        *,
        drift: bool,
    ) -> Event | None:
        """Apply `desired` unless `live` has every field of it; the drift event, if `drift`
        (the service had applied its objects before) and something had to change."""
        kind = str(desired["kind"])
        if (owner := foreign_owner(live, identity.owner_labels)) is not None:
            raise _Foreign(
                f"{kind} {identity.namespace}/{identity.name} exists and is managed by "
                f"{owner}; aicp does not take over objects it did not create. Rename the "
                f"service or remove that {kind}."
            )
        lacking = ["the object is missing"] if live is None else declared_drift(desired, live)
        if not lacking:
            return None
        async with kube_fenced(fence, f"{kind} {identity.name}"):
            await apply_checked(self.ctx.kube, desired, live)
        if not drift:
            return None
        DRIFT_CORRECTIONS.labels(kind).inc()
        scaled = live is not None and all(item.startswith("spec.replicas") for item in lacking)
        what = "; ".join(lacking)
        if scaled:
            message = (
                f"Deployment {identity.name} was scaled by hand to "
                f"{field(live, 'spec', 'replicas')} replicas; restored to "
                f"{field(desired, 'spec', 'replicas')} (scale the service instead)."
            )
            return Event(EventType.DRIFT_CORRECTED, message, EventReason.REPLICAS_RESTORED)
        verb = "re-created" if live is None else f"restored ({what})"
        return Event(
            EventType.DRIFT_CORRECTED,
            f"{kind} {identity.name} was changed outside aicp and was {verb}.",
            EventReason.OBJECT_RESTORED,
        )

    async def _remove_unwanted(
        self, fence: Fence, identity: ServiceIdentity, resource: Resource, live: Manifest | None
    ) -> None:
        """An autoscaler the spec no longer asks for: deleted if it is the service's own."""
        if live is None or foreign_owner(live, identity.owner_labels) is not None:
            return
        async with kube_fenced(fence, f"delete {resource.kind} {identity.name}"):
            await delete(self.ctx.kube, resource, identity.namespace, identity.name)

    # -- status ------------------------------------------------------------------------------

    def _pods(self, identity: ServiceIdentity) -> list[Manifest]:
        return [
            pod
            for pod in self.ctx.informers.pods.by_label(SERVICE_LABEL, identity.name)
            if namespace_of(pod) == identity.namespace and label_of(pod, UID_LABEL) == identity.uid
        ]

    async def _record(
        self,
        fence: Fence,
        row: ServiceRow,
        identity: ServiceIdentity,
        spec: ServiceSpec,
        events: list[Event],
    ) -> Result:
        ctx = self.ctx
        pods = self._pods(identity)
        kueue_workloads: dict[str, Manifest] = {}
        for pod in pods:
            if not waits_for_quota(pod):
                continue
            uid = str(field(pod, "metadata", "uid") or "")
            for workload in ctx.informers.workloads.by_label(KUEUE_JOB_UID_LABEL, uid):
                kueue_workloads[name_of(pod)] = workload
        verdict = classify_service(
            spec,
            row.generation,
            deployment=ctx.informers.deployments.get(identity.namespace, identity.name),
            pods=pods,
            kueue_workloads=kueue_workloads,
            pool=row.pool,
            accelerator_resource=row.accelerator_resource,
            now=datetime.now(UTC),
        )
        observed: dict[str, Any] = {
            **verdict.observed,
            "endpoint": service_endpoint(identity, spec),
        }
        state_changed = verdict.state != row.state
        if state_changed:
            events.append(Event(_STATE_EVENTS[verdict.state], verdict.reason))
        unchanged = (
            not events
            and row.observed_generation == row.generation
            and row.state_reason == verdict.reason
            and row.observed == observed
        )
        if not unchanged:
            await ctx.write_status(
                fence,
                _subject(row),
                generation=row.generation,
                state=verdict.state,
                reason=verdict.reason,
                observed=observed,
                events=events,
            )
        after = UNWATCHED_CHECK_SECONDS
        if verdict.recheck_at is not None:
            after = min(after, max(0.5, (verdict.recheck_at - datetime.now(UTC)).total_seconds()))
        return Result.requeue(after)

    # -- deletion ----------------------------------------------------------------------------

    async def _delete(self, fence: Fence, row: ServiceRow, identity: ServiceIdentity) -> Result:
        """Delete every object of the service that is its own; once the Deployment and its
        pods are gone, the tombstone."""
        ctx = self.ctx
        for resource in _OWNED:
            live = await get(ctx.kube, resource, identity.namespace, identity.name)
            if live is None or is_terminating(live):
                continue
            if foreign_owner(live, identity.owner_labels) is not None:
                continue  # someone else's object of that name: never ours to delete
            async with kube_fenced(fence, f"delete {resource.kind} {identity.name}"):
                with contextlib.suppress(NotFound, Conflict):  # gone, or replaced meanwhile
                    await delete(
                        ctx.kube,
                        resource,
                        identity.namespace,
                        identity.name,
                        propagation=_PROPAGATION.get(resource, "Background"),
                        uid=str(field(live, "metadata", "uid") or "") or None,
                    )
        deployment = await get(ctx.kube, DEPLOYMENTS, identity.namespace, identity.name)
        if deployment is not None and foreign_owner(deployment, identity.owner_labels) is None:
            return Result.requeue(DELETION_RECHECK_SECONDS)
        if self._pods(identity):
            return Result.requeue(DELETION_RECHECK_SECONDS)
        self._checked.pop(row.id, None)
        final = {
            "state": row.state,
            "reason": row.state_reason,
            "observed": row.observed,
            "spec": row.spec,
        }
        return await finalize(ctx, fence, _subject(row), row.generation, final)


class _Foreign(Exception):
    """An object of the service's name belongs to someone else (its message says who)."""
