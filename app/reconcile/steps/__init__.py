"""The reconcile steps of projects, pools, workloads and services, and how informer events
reach them.

`install_steps` is the one seam the composition root calls: it registers a step per kind on
the engine and subscribes the informer handler that maps Kubernetes events to resource keys.

    informers ──(event_type, obj)──▶ routing.EventRouter ──key──▶ engine (enqueue_local / wake)
    engine worker ──(id, fence)──▶ ProjectStep | PoolStep | WorkloadStep | ServiceStep
                                   ──▶ kube + fenced SQL
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.reconcile.steps.context import StepContext
from app.reconcile.steps.pools import PoolStep
from app.reconcile.steps.projects import ProjectStep
from app.reconcile.steps.routing import EventRouter
from app.reconcile.steps.services import ServiceStep
from app.reconcile.steps.workloads import WorkloadStep

if TYPE_CHECKING:
    from app.kube.client import KubeClient
    from app.kube.informers import Informers
    from app.reconcile.engine import Reconciler
    from app.store.db import Database

__all__ = ["StepContext", "install_steps"]


def install_steps(
    engine: Reconciler,
    *,
    db: Database,
    kube: KubeClient,
    informers: Informers,
    instance_id: str,
    service_ingress_namespace: str | None = None,
) -> StepContext:
    """Register the project/pool/workload/service step functions on the engine and subscribe the
    informer handler that maps Kubernetes events to resource keys (engine.enqueue_local).

    Call before `informers.start()` (so the first list's ADDEDs are routed) and before
    `engine.start()`. Steps read the informer caches: start the engine's workers only once
    `informers.wait_synced()` has returned, or a step may take an unsynced cache for an empty
    cluster (it asks the server before creating anything, so this costs reads, not
    duplicates). `service_ingress_namespace`: the namespace whose pods may reach every
    inference service besides its project's own (`AICP_SERVICE_INGRESS_NAMESPACE`). Returns
    the shared context (tests and diagnostics).
    """
    ctx = StepContext(db=db, kube=kube, informers=informers, instance_id=instance_id)
    engine.register("project", ProjectStep(ctx))
    engine.register("pool", PoolStep(ctx))
    engine.register("workload", WorkloadStep(ctx))
    engine.register("service", ServiceStep(ctx, ingress_namespace=service_ingress_namespace))
    informers.on_change(EventRouter(engine, informers, ctx.routes))
    informers.on_recovered(engine.retry_failed_now)
    return ctx
