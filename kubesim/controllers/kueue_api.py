"""Kueue's names, labels and Workload status helpers (docs/KUBERNETES.md §1), shared by the
webhook, the job integration and the admission scheduler."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

from kubesim.controllers import conditions

if TYPE_CHECKING:
    from kubesim.store import ResourceType, Store

Obj = dict[str, Any]
GROUP = "kueue.x-k8s.io"
VERSION = "v1beta2"
API_VERSION = f"{GROUP}/{VERSION}"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
PODSET_LABEL = "kueue.x-k8s.io/podset"
STOPPING_ANNOTATION = "kueue.x-k8s.io/stopping"
RESOURCE_IN_USE = "kueue.x-k8s.io/resource-in-use"
ADMISSION_MANAGER = "kueue-admission"
KUEUE_MANAGER = "kueue"
APPLY = "application/apply-patch+yaml"
MERGE = "application/merge-patch+json"


def workload_name(job_name: str, job_uid: str) -> str:
    """Kueue's `GetWorkloadNameForOwnerWithGVK` for a batch/v1 Job (test vector in the contract)."""
    digest = hashlib.sha1(f"Job\nbatch\n{job_name}\n{job_uid}".encode()).hexdigest()[:5]
    return f"{('job-' + job_name)[:247]}-{digest}"


def is_admitted(workload: Obj) -> bool:
    status = workload.get("status") or {}
    conds = status.get("conditions")
    return (
        bool(status.get("admission"))
        and conditions.is_true(conds, "QuotaReserved")
        and conditions.is_true(conds, "Admitted")
    )


def is_finished(workload: Obj) -> bool:
    return conditions.is_true((workload.get("status") or {}).get("conditions"), "Finished")


def apply_status(store: Store, rt: ResourceType, workload: Obj, status: Obj) -> None:
    """Server-side apply of the Workload's whole `status` as `kueue-admission`, forced, which is
    how Kueue writes admission (pkg/workload/patching). The applied set always carries every
    status field Kueue owns, so a field left out (e.g. `admission` after eviction) is removed."""
    meta = workload["metadata"]
    body = {
        "apiVersion": API_VERSION,
        "kind": "Workload",
        "metadata": {"name": meta["name"], "namespace": meta["namespace"]},
        "status": status,
    }
    store.patch(
        rt,
        meta["namespace"],
        meta["name"],
        body,
        content_type=APPLY,
        manager=ADMISSION_MANAGER,
        force=True,
        subresource="status",
    )


def owned_status(workload: Obj) -> Obj:
    """The part of a Workload's status this simulator writes, as a fresh dict to edit."""
    status = workload.get("status") or {}
    out: Obj = {"conditions": [dict(c) for c in status.get("conditions") or []]}
    if status.get("admission"):
        out["admission"] = status["admission"]
    if status.get("requeueState"):
        out["requeueState"] = status["requeueState"]
    return out
