"""The ReplicaSet controller, after kube-controller-manager's (`pkg/controller/replicaset`),
writing as `kube-controller-manager`.

Per ReplicaSet, level-triggered from it and its pods (those with a controller ownerReference
to it):

- **Pods.** It keeps `spec.replicas` active pods (not Succeeded or Failed, not deleting). A
  missing one is created from the template: `generateName: <replicaset>-` (so
  `<replicaset>-<5 random characters>`), the template's labels, annotations and finalizers, and
  a controller ownerReference with `blockOwnerDeletion`. Extra ones are deleted in the
  controller's order (`ActivePodsWithRanks`): unscheduled before scheduled, Pending before
  Unknown before Running, not ready before ready, lower `controller.kubernetes.io/pod-deletion-cost`
  first, those sharing a node with more of the set's pods first, ready for less time first,
  more restarts first, newer first.
- **Status** (`/status`): `replicas` (active pods), `fullyLabeledReplicas` (active pods
  carrying all of the template's labels), `readyReplicas`, `availableReplicas` (ready for
  `minReadySeconds`; looked at again when the next one will be) and `observedGeneration`;
  zeros are left out, as the API does; `ReplicaFailure` True (reason `FailedCreate` or
  `FailedDelete`, the apiserver's refusal as message) while pods cannot be created or deleted,
  tried again every 10 simulated seconds, and gone once they can.

A pod with `schedulingGates` is Pending and not ready like any other. Not simulated: adoption
of orphaned pods that match the selector, release of pods that stop matching it, slow-start
batches and expectations (reads are never stale here).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kubesim.controllers import conditions
from kubesim.controllers.podspec import controller_name, controller_uid
from kubesim.controllers.podstatus import parse_time
from kubesim.controllers.runtime import Requeue, WorkQueue
from kubesim.controllers.status import write_status
from kubesim.selectors import format_label_selector
from kubesim.store import StoreError

if TYPE_CHECKING:
    from kubesim.clock import Clock
    from kubesim.store import Store, WatchEvent

Obj = dict[str, Any]
Key = tuple[str, str]
MANAGER = "kube-controller-manager"
DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
_PHASE_RANK = {"Pending": 0, "Unknown": 1, "Running": 2}
RETRY_AFTER = 10.0  # simulated seconds before a refused create or delete is tried again


def _ready_since(pod: Obj) -> float | None:
    found = conditions.find((pod.get("status") or {}).get("conditions"), "Ready")
    if found is None or found.get("status") != "True":
        return None
    return parse_time(found.get("lastTransitionTime")) or 0.0


def _cost(pod: Obj) -> int:
    try:
        return int((pod["metadata"].get("annotations") or {}).get(DELETION_COST, 0))
    except ValueError:
        return 0


def deletion_order(pods: list[Obj]) -> list[Obj]:
    """The pods in the order the controller deletes them (`ActivePodsWithRanks`)."""
    per_node: dict[str, int] = {}
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if node:
            per_node[node] = per_node.get(node, 0) + 1

    def rank(pod: Obj) -> tuple[Any, ...]:
        node = (pod.get("spec") or {}).get("nodeName")
        ready = _ready_since(pod)
        restarts = max(
            (
                int(s.get("restartCount") or 0)
                for s in (pod.get("status") or {}).get("containerStatuses") or []
            ),
            default=0,
        )
        return (
            bool(node),
            _PHASE_RANK.get((pod.get("status") or {}).get("phase", "Pending"), 0),
            ready is not None,
            _cost(pod),
            -per_node.get(node or "", 0),
            -(ready or 0.0),
            -restarts,
            -(parse_time(pod["metadata"].get("creationTimestamp")) or 0.0),
        )

    return sorted(pods, key=rank)


def _failure(rs: Obj, active: list[Obj], refused: StoreError | None, now: str) -> list[Obj]:
    """The conditions with `ReplicaFailure` as `calculateStatus` keeps it: set (reason
    `FailedCreate` or `FailedDelete`, the refusal's message) when pods could not be made or
    removed and it is not there yet, dropped once they could."""
    conds = [dict(c) for c in (rs.get("status") or {}).get("conditions") or []]
    failing = conditions.find(conds, "ReplicaFailure")
    if refused is not None and failing is None:
        short = len(active) < int(rs["spec"].get("replicas") or 0)
        conds.append(
            {
                "type": "ReplicaFailure",
                "status": "True",
                "lastTransitionTime": now,
                "reason": "FailedCreate" if short else "FailedDelete",
                "message": refused.message,
            }
        )
    elif refused is None and failing is not None:
        conds = [c for c in conds if c.get("type") != "ReplicaFailure"]
    return conds


class ReplicaSetController:
    def __init__(self, store: Store, clock: Clock) -> None:
        self._store = store
        self._clock = clock
        self.replicasets = store.resource("apps", "replicasets")
        self.pods = store.resource("", "pods")
        self.queue: WorkQueue[Key] = WorkQueue(clock)

    def on_replicaset_event(self, event: WatchEvent) -> None:
        meta = event.object["metadata"]
        self.queue.add((meta["namespace"], meta["name"]))

    def on_pod_event(self, event: WatchEvent) -> None:
        name = controller_name(event.object, "ReplicaSet")
        if name is not None:
            self.queue.add((event.object["metadata"]["namespace"], name))

    def reconcile(self, key: Key) -> Requeue:
        rs = self._store.get(self.replicasets, *key)
        if rs is None:
            return None
        uid = rs["metadata"]["uid"]
        selector = format_label_selector(rs["spec"].get("selector"))
        pods = [
            p
            for p in self._store.list(self.pods, key[0], label_selector=selector)
            if controller_uid(p, "ReplicaSet") == uid
        ]
        active = [
            p
            for p in pods
            if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
            and not p["metadata"].get("deletionTimestamp")
        ]
        refused = None
        if not rs["metadata"].get("deletionTimestamp"):
            active, refused = self._manage(rs, active)
        after = self._write_status(rs, active, refused)
        if refused is not None:
            return RETRY_AFTER if after is None else min(after, RETRY_AFTER)
        return after

    def _manage(self, rs: Obj, active: list[Obj]) -> tuple[list[Obj], StoreError | None]:
        """Create or delete pods until `spec.replicas` are active: the active pods after, and
        the refusal that stopped it (the first; no more pods are tried after it)."""
        wanted = int(rs["spec"].get("replicas") or 0)
        try:
            while len(active) < wanted:
                active = [*active, self._create_pod(rs)]
            for pod in deletion_order(active)[: len(active) - wanted]:
                self._delete_pod(pod)
                active = [p for p in active if p["metadata"]["uid"] != pod["metadata"]["uid"]]
        except StoreError as exc:
            return active, exc
        return active, None

    def _delete_pod(self, pod: Obj) -> None:
        try:
            self._store.delete(self.pods, pod["metadata"]["namespace"], pod["metadata"]["name"])
        except StoreError as exc:
            if exc.code != 404:
                raise

    def _create_pod(self, rs: Obj) -> Obj:
        meta, template = rs["metadata"], rs["spec"]["template"]
        template_meta = template.get("metadata") or {}
        pod_meta: Obj = {
            "generateName": f"{meta['name']}-",
            "namespace": meta["namespace"],
            "labels": dict(template_meta.get("labels") or {}),
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        }
        for field in ("annotations", "finalizers"):
            if template_meta.get(field):
                pod_meta[field] = template_meta[field]
        body = {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": template["spec"]}
        return self._store.create(self.pods, body, manager=MANAGER)

    def _write_status(self, rs: Obj, active: list[Obj], refused: StoreError | None) -> Requeue:
        template_labels = ((rs["spec"].get("template") or {}).get("metadata") or {}).get(
            "labels"
        ) or {}
        min_ready = int(rs["spec"].get("minReadySeconds") or 0)
        now = self._clock.now()
        ready = available = labelled = 0
        next_available: float | None = None
        for pod in active:
            labels = pod["metadata"].get("labels") or {}
            labelled += all(labels.get(k) == v for k, v in template_labels.items())
            since = _ready_since(pod)
            if since is None:
                continue
            ready += 1
            if since + min_ready <= now:
                available += 1
            else:
                wait = since + min_ready - now
                next_available = wait if next_available is None else min(next_available, wait)
        counts = {
            "replicas": len(active),
            "fullyLabeledReplicas": labelled,
            "readyReplicas": ready,
            "availableReplicas": available,
            "observedGeneration": rs["metadata"].get("generation", 1),
        }
        status: Obj = {k: v for k, v in counts.items() if v or k == "replicas"}
        conds = _failure(rs, active, refused, self._clock.now_rfc3339())
        if conds:
            status["conditions"] = conds
        if status != (rs.get("status") or {}):
            write_status(self._store, self.replicasets, rs, status, MANAGER)
        return next_available
