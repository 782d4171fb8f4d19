"""Kueue's plain-pod integration (the `pod` framework): its reconciler, for every pod its webhook
made Kueue's (`kueue_pod_webhook.py`: label `kueue.x-k8s.io/managed: "true"`, finalizer
`kueue.x-k8s.io/managed`, scheduling gates), as Kueue's jobframework reconciler runs a single pod:

- no Workload and the pod gated: create `pod-<name>-<sha1("Pod\\n\\n<name>\\n<uid>")[:5]>` with a
  controller ownerReference to the pod, finalizer `kueue.x-k8s.io/resource-in-use`, label
  `kueue.x-k8s.io/job-uid` = the pod's uid, `queueName`, `priority` (from the
  WorkloadPriorityClass named by label `kueue.x-k8s.io/priority-class`, else 0) and one pod
  set `main` of count 1 whose template is the pod's spec (Kueue's TAS-era podset also carries
  `topologyRequest.podIndexLabel`);
- Workload admitted, pod gated: ONE merge-patch of the pod as `kueue` carrying
  `metadata.resourceVersion`: both gates removed, the flavors' `nodeLabels` merged into
  `nodeSelector`, their `tolerations` appended, labels `kueue.x-k8s.io/podset`,
  `kueue.x-k8s.io/local-queue-name`, `kueue.x-k8s.io/cluster-queue-name` and annotation
  `kueue.x-k8s.io/workload`; a clash with what the pod has finishes the Workload
  (`FailedToStart`), as Kueue does;
- pod Succeeded or Failed: Workload `Finished=True` reason `Succeeded`/`Failed` (message: the
  pod's `status.message`), then the pod's finalizer removed, then the Workload's;
- pod deleting or gone: its Workloads finished (`OwnerNotFound`, "The workload's owner no
  longer exists", Kueue's FinishOrphanedWorkloads) and their finalizer removed, then the pod's;
- Workload evicted (preempted, readiness timeout): a pod that runs (not gated, not terminated)
  is stopped, that is condition `TerminationTarget=True` (reason `WorkloadEvictedDueTo<reason>`)
  and deleted; the admission is cleared at once with `Requeued=False` (a pod's Workload is
  never queued again; a Deployment's ReplicaSet replaces the pod, with a new Workload);
- Workload deleting (deleted by hand): the pod, gated or not, is stopped and deleted
  (`WorkloadDeleted`), then the Workload's finalizer removed; a running pod with no Workload
  at all is stopped too (`NoMatchingWorkload`), and a running pod whose Workload is not
  admitted (`NotAdmitted`);
- a gated pod's queue-name change is copied to its Workload's `queueName`.
"""

from __future__ import annotations

import hashlib
import logging
import re
from typing import TYPE_CHECKING, Any

from kubesim.controllers import conditions
from kubesim.controllers.kueue_api import (
    API_VERSION,
    JOB_UID_LABEL,
    KUEUE_MANAGER,
    MERGE,
    PODSET_LABEL,
    PRIORITY_LABEL,
    RESOURCE_IN_USE,
    apply_status,
    is_admitted,
    is_finished,
    owned_status,
)
from kubesim.controllers.kueue_pod_webhook import (
    ADMISSION_GATE,
    MANAGED_LABEL,
    POD_FINALIZER,
    TOPOLOGY_GATE,
    UNMANAGED_NAMESPACES,
    is_gated,
    is_terminated,
    queue_name,
)
from kubesim.controllers.kueue_preemption import clear_admission
from kubesim.controllers.podspec import controller_uid
from kubesim.controllers.runtime import Requeue, WorkQueue
from kubesim.store import StoreError

if TYPE_CHECKING:
    from kubesim.clock import Clock
    from kubesim.store import Store, WatchEvent

log = logging.getLogger("kubesim.kueue")
Obj = dict[str, Any]
Key = tuple[str, str]
LOCAL_QUEUE_LABEL = "kueue.x-k8s.io/local-queue-name"
CLUSTER_QUEUE_LABEL = "kueue.x-k8s.io/cluster-queue-name"
WORKLOAD_ANNOTATION = "kueue.x-k8s.io/workload"
POD_INDEX_LABEL = "kueue.x-k8s.io/pod-group-pod-index"
OWNER_GONE = ("OwnerNotFound", "The workload's owner no longer exists")
STRATEGIC = "application/strategic-merge-patch+json"
_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


def pod_workload_name(pod_name: str, pod_uid: str) -> str:
    """Kueue's GetWorkloadNameForOwnerWithGVK for a core/v1 Pod."""
    digest = hashlib.sha1(f"Pod\n\n{pod_name}\n{pod_uid}".encode()).hexdigest()[:5]
    return f"{('pod-' + pod_name)[:247]}-{digest}"


def _pod_finished(pod: Obj) -> tuple[str, str] | None:
    status = pod.get("status") or {}
    if not is_terminated(pod):
        return None
    reason = "Succeeded" if status.get("phase") == "Succeeded" else "Failed"
    return reason, str(status.get("message") or "")


def _merge_conflict(what: str, current: dict[str, str], wanted: dict[str, str]) -> str | None:
    """Kueue's podset.Merge refusal when the pod already has a key with another value."""
    for key in sorted(current):
        if key in wanted and current[key] != wanted[key]:
            return (
                f"invalid admission check PodSetUpdate: conflict for {what}: conflict for "
                f"key={key}, value1={current[key]}, value2={wanted[key]}"
            )
    return None


class KueuePodReconciler:
    def __init__(self, store: Store, clock: Clock) -> None:
        self._store = store
        self._clock = clock
        self.pods = store.resource("", "pods")
        self.workloads = store.resource("kueue.x-k8s.io", "workloads")
        self.priority_classes = store.resource("kueue.x-k8s.io", "workloadpriorityclasses")
        self.flavors = store.resource("kueue.x-k8s.io", "resourceflavors")
        self.queue: WorkQueue[Key] = WorkQueue(clock)
        self._uids: dict[Key, str] = {}  # the managed pod last reconciled under each name

    # -- informers -----------------------------------------------------------------------
    def on_pod_event(self, event: WatchEvent) -> None:
        meta = event.object["metadata"]
        key = (meta["namespace"], meta["name"])
        if (meta.get("labels") or {}).get(MANAGED_LABEL) == "true" or key in self._uids:
            self.queue.add(key)

    def on_workload_event(self, event: WatchEvent) -> None:
        for ref in event.object["metadata"].get("ownerReferences") or []:
            if ref.get("controller") and ref.get("kind") == "Pod" and ref.get("apiVersion") == "v1":
                self.queue.add((event.object["metadata"]["namespace"], ref["name"]))

    # -- reconcile -----------------------------------------------------------------------
    def reconcile(self, key: Key) -> Requeue:
        pod = self._store.get(self.pods, *key)
        remembered = self._uids.get(key)
        if pod is None:
            if remembered is not None:
                self._finalize_workloads(key[0], remembered)
                del self._uids[key]
            return None
        meta = pod["metadata"]
        if remembered not in (None, meta["uid"]):  # deleted and re-created under one name
            self._finalize_workloads(key[0], remembered)
        if (meta.get("labels") or {}).get(MANAGED_LABEL) != "true":
            self._uids.pop(key, None)  # Kueue skips a pod without its managed label
            return None
        self._uids[key] = meta["uid"]
        if meta.get("deletionTimestamp"):
            self._finalize_workloads(key[0], meta["uid"])
            self._drop_pod_finalizer(pod)
            return None
        if key[0] in UNMANAGED_NAMESPACES or not queue_name(pod):
            return None
        return self._sync(pod)

    def _sync(self, pod: Obj) -> Requeue:
        wl = self._one_workload(pod)
        if wl is not None and is_finished(wl):
            self._drop_pod_finalizer(pod)
            self._drop_workload_finalizer(wl)
            return None
        if wl is not None and wl["metadata"].get("deletionTimestamp"):
            self._stop(pod, "WorkloadDeleted", "Workload is deleted", even_suspended=True)
            self._drop_workload_finalizer(wl)
            return None
        finished = _pod_finished(pod)
        if finished is not None:
            if wl is not None:
                self._finish(wl, *finished)
            self._drop_pod_finalizer(pod)
            return None
        if wl is None:
            return self._create_workload(pod)
        conds = (wl.get("status") or {}).get("conditions")
        evicted = conditions.find(conds, "Evicted")
        if evicted is not None and evicted.get("status") == "True":
            reason = f"WorkloadEvictedDueTo{evicted.get('reason', '')}"
            self._stop(pod, reason, str(evicted.get("message") or ""))
            if conditions.is_true(conds, "QuotaReserved"):
                clear_admission(self._store, self.workloads, self._clock, wl, pod_owned=True)
            return None
        if is_gated(pod):
            if is_admitted(wl):
                self._start(pod, wl)
            elif (wl.get("spec") or {}).get("queueName") != queue_name(pod):
                self._patch(self.workloads, wl, {"spec": {"queueName": queue_name(pod)}})
            return None
        if not is_admitted(wl):
            self._stop(pod, "NotAdmitted", "Not admitted by cluster queue")
        return None

    def _one_workload(self, pod: Obj) -> Obj | None:
        """The pod's Workload; any other carrying its uid is deleted. A running pod without
        one is stopped (Kueue then creates one anyway; the pod's end finishes it)."""
        meta = pod["metadata"]
        name = pod_workload_name(meta["name"], meta["uid"])
        owned = self._store.list(
            self.workloads, meta["namespace"], label_selector=f"{JOB_UID_LABEL}={meta['uid']}"
        )
        match = next(
            (
                w
                for w in owned
                if w["metadata"]["name"] == name and controller_uid(w, "Pod") == meta["uid"]
            ),
            None,
        )
        extras = [w for w in owned if w is not match]
        if match is None and not (is_gated(pod) or is_terminated(pod)):
            message = (
                "No matching Workload; restoring pod templates according to existent Workload"
                if len(extras) == 1
                else "Missing Workload; unable to restore pod templates"
            )
            self._stop(pod, "NoMatchingWorkload", message)
        for wl in extras:
            self._drop_workload_finalizer(wl)
            if not wl["metadata"].get("deletionTimestamp"):
                self._delete(self.workloads, wl)
        return match

    # -- steps ---------------------------------------------------------------------------
    def _create_workload(self, pod: Obj) -> Requeue:
        meta = pod["metadata"]
        labels = meta.get("labels") or {}
        wl_spec: Obj = {"queueName": queue_name(pod), "priority": 0}
        priority_class = labels.get(PRIORITY_LABEL)
        if priority_class:
            wpc = self._store.get(self.priority_classes, None, priority_class)
            if wpc is None:  # Kueue refuses to create the Workload and retries
                log.warning(
                    "WorkloadPriorityClass %s not found for pod %s/%s",
                    priority_class,
                    meta["namespace"],
                    meta["name"],
                )
                return 5.0
            wl_spec["priority"] = int(wpc.get("value", 0))
            wl_spec["priorityClassRef"] = {
                "group": "kueue.x-k8s.io",
                "kind": "WorkloadPriorityClass",
                "name": priority_class,
            }
        wl_spec["podSets"] = [
            {
                "name": "main",
                "count": 1,
                "template": {"spec": pod["spec"]},
                "topologyRequest": {"podIndexLabel": POD_INDEX_LABEL},
            }
        ]
        owner = {"apiVersion": "v1", "kind": "Pod", "name": meta["name"], "uid": meta["uid"]}
        workload = {
            "apiVersion": API_VERSION,
            "kind": "Workload",
            "metadata": {
                "name": pod_workload_name(meta["name"], meta["uid"]),
                "namespace": meta["namespace"],
                "labels": {JOB_UID_LABEL: meta["uid"]},
                "ownerReferences": [{**owner, "controller": True, "blockOwnerDeletion": True}],
                "finalizers": [RESOURCE_IN_USE],
            },
            "spec": wl_spec,
        }
        try:
            self._store.create(self.workloads, workload, manager=KUEUE_MANAGER)
        except StoreError as exc:
            if exc.code != 409:
                raise
        return None

    def _start(self, pod: Obj, wl: Obj) -> None:
        """Kueue's Pod.Run: ungate, with the admission's flavors and Kueue's labels."""
        admission = (wl.get("status") or {}).get("admission") or {}
        assignment = (admission.get("podSetAssignments") or [{}])[0]
        selector: dict[str, str] = {}
        tolerations: list[Obj] = []
        for name in sorted(set((assignment.get("flavors") or {}).values())):
            flavor_spec = (self._store.get(self.flavors, None, name) or {}).get("spec") or {}
            selector.update(flavor_spec.get("nodeLabels") or {})
            tolerations += flavor_spec.get("tolerations") or []
        cluster_queue = str(admission.get("clusterQueue") or "")
        labels = {
            PODSET_LABEL: str(assignment.get("name") or "main"),
            LOCAL_QUEUE_LABEL: str((wl.get("spec") or {}).get("queueName") or ""),
        }
        if len(cluster_queue) <= 63 and _DNS1123_LABEL.fullmatch(cluster_queue):
            labels[CLUSTER_QUEUE_LABEL] = cluster_queue
        annotations = {WORKLOAD_ANNOTATION: wl["metadata"]["name"]}
        meta, spec = pod["metadata"], pod["spec"]
        for what, current, wanted in (
            ("annotations", meta.get("annotations") or {}, annotations),
            ("labels", meta.get("labels") or {}, labels),
            ("nodeSelector", spec.get("nodeSelector") or {}, selector),
        ):
            clash = _merge_conflict(what, current, wanted)
            if clash is not None:  # permanent: Kueue finishes the Workload
                self._finish(wl, "FailedToStart", clash)
                return
        have = list(spec.get("tolerations") or [])
        gates = [
            g
            for g in spec.get("schedulingGates") or []
            if g.get("name") not in (ADMISSION_GATE, TOPOLOGY_GATE)
        ]
        spec_patch: Obj = {"schedulingGates": gates or None}
        if selector:
            spec_patch["nodeSelector"] = selector
        if any(t not in have for t in tolerations):
            spec_patch["tolerations"] = have + [t for t in tolerations if t not in have]
        patch = {
            "metadata": {
                "resourceVersion": meta["resourceVersion"],
                "labels": labels,
                "annotations": annotations,
            },
            "spec": spec_patch,
        }
        self._patch(self.pods, pod, patch)

    def _stop(self, pod: Obj, reason: str, message: str, *, even_suspended: bool = False) -> None:
        """Kueue's Pod.Stop: condition `TerminationTarget`, then delete the pod."""
        meta = pod["metadata"]
        if meta.get("deletionTimestamp"):
            return
        if not even_suspended and (is_gated(pod) or is_terminated(pod)):
            return
        condition = {
            "type": "TerminationTarget",
            "status": "True",
            "lastTransitionTime": self._clock.now_rfc3339(),
            "reason": reason,
            "message": message,
        }
        try:
            self._store.patch(
                self.pods,
                meta["namespace"],
                meta["name"],
                {"status": {"conditions": [condition]}},
                content_type=STRATEGIC,
                manager=KUEUE_MANAGER,
                subresource="status",
            )
        except StoreError as exc:
            if exc.code != 404:
                raise
            return
        self._delete(self.pods, pod)

    def _finish(self, wl: Obj, reason: str, message: str) -> None:
        if is_finished(wl):
            return
        status = owned_status(wl)
        conditions.set_condition(
            status["conditions"],
            "Finished",
            True,
            reason,
            message,
            self._clock.now_rfc3339(),
            observed_generation=wl["metadata"].get("generation"),
        )
        apply_status(self._store, self.workloads, wl, status)

    def _finalize_workloads(self, namespace: str, pod_uid: str) -> None:
        """Kueue's FinalizeOrphanedWorkload for each Workload of a pod that is going or gone."""
        selector = f"{JOB_UID_LABEL}={pod_uid}"
        for wl in self._store.list(self.workloads, namespace, label_selector=selector):
            if not wl["metadata"].get("deletionTimestamp") and controller_uid(wl, "Pod"):
                self._finish(wl, *OWNER_GONE)
            self._drop_workload_finalizer(wl)

    # -- writes --------------------------------------------------------------------------
    def _drop_pod_finalizer(self, pod: Obj) -> None:
        finalizers = pod["metadata"].get("finalizers") or []
        if POD_FINALIZER in finalizers:
            rest = [f for f in finalizers if f != POD_FINALIZER]
            self._patch(self.pods, pod, {"metadata": {"finalizers": rest or None}})

    def _drop_workload_finalizer(self, wl: Obj) -> None:
        finalizers = wl["metadata"].get("finalizers") or []
        if RESOURCE_IN_USE in finalizers:
            rest = [f for f in finalizers if f != RESOURCE_IN_USE]
            self._patch(self.workloads, wl, {"metadata": {"finalizers": rest or None}})

    def _patch(self, rt: Any, obj: Obj, patch: Obj) -> None:
        meta = obj["metadata"]
        try:
            self._store.patch(
                rt,
                meta["namespace"],
                meta["name"],
                patch,
                content_type=MERGE,
                manager=KUEUE_MANAGER,
            )
        except StoreError as exc:
            if exc.code not in (404, 409):
                raise
            # 409: the pod moved on since it was read; its event brings the reconcile back.

    def _delete(self, rt: Any, obj: Obj) -> None:
        try:
            self._store.delete(rt, obj["metadata"]["namespace"], obj["metadata"]["name"])
        except StoreError as exc:
            if exc.code != 404:
                raise
