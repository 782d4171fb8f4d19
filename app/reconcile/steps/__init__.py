"""The reconcile steps of projects, pools and workloads, and how informer events reach them.

`install_steps` is the one seam the composition root calls: it registers a step per kind on
the engine and subscribes the informer handler that maps Kubernetes events to resource keys.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.kube.client import KubeClient
    from app.kube.informers import Informers
    from app.reconcile.engine import Reconciler
    from app.store.db import Database


def install_steps(
    engine: Reconciler, *, db: Database, kube: KubeClient, informers: Informers, instance_id: str
) -> None:
    """Register the project/pool/workload step functions on the engine and subscribe the
    informer handler that maps Kubernetes events to resource keys (engine.enqueue_local).

    Call before `informers.start()` (so the first list's ADDEDs are routed) and before
    `engine.start()`.
    """
    # First version: the engine's default no-op steps stay registered until the real ones land.
    del engine, db, kube, informers, instance_id
