"""Kueue's pod webhooks (`mpod.kb.io`, `vpod.kb.io`) for its plain-pod integration, plus the
apiserver's `SchedulingGated` condition on create.

Mutating, on create, in every namespace but `kube-system` and `kueue-system` (Kueue's default
`managedJobsNamespaceSelector`): a pod with label `kueue.x-k8s.io/queue-name` whose controller
chain holds no Kueue-managed Job (a Job with a queue name: the Job integration runs its pods)
gets label `kueue.x-k8s.io/managed: "true"`, finalizer `kueue.x-k8s.io/managed` and the
scheduling gates `kueue.x-k8s.io/admission` and `kueue.x-k8s.io/topology` (Kueue 0.19 has
TopologyAwareScheduling on by default; its start removes both). The chain is walked as Kueue
walks it: ReplicaSets and Deployments are passed through, an owner of another kind ends the
walk, and an owner that does not exist refuses the pod (404, the owner's NotFound as the
apiserver relays a webhook denial).

Validating, on create and update: `kueue.x-k8s.io/managed` can only be `"true"`, and the queue
name of a pod that is neither gated nor terminated cannot change (403, as for Jobs).

Then, as the apiserver's pod strategy does after the webhooks: a pod created with scheduling
gates gets `PodScheduled=False` reason `SchedulingGated`.

Not simulated: pod groups (`kueue.x-k8s.io/pod-group-name`: such pods are left alone),
`manageJobsWithoutQueueName`, the default LocalQueue (`default`) for pods without a queue
name, the `kueue.x-k8s.io/role-hash` annotation (used by pod groups only), the
`kueue.x-k8s.io/pod-suspending-parent` path of the Deployment/StatefulSet integrations, and
the owner walk for pods without a queue name (Kueue walks every pod's owners and refuses one
whose owner is missing).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Literal

from kubesim.controllers import conditions
from kubesim.controllers.kueue_api import QUEUE_LABEL
from kubesim.store import StoreError

if TYPE_CHECKING:
    from kubesim.clock import Clock
    from kubesim.store import Store

Obj = dict[str, Any]
ADMISSION_GATE = "kueue.x-k8s.io/admission"
TOPOLOGY_GATE = "kueue.x-k8s.io/topology"
MANAGED_LABEL = "kueue.x-k8s.io/managed"
POD_FINALIZER = "kueue.x-k8s.io/managed"
GROUP_NAME = "kueue.x-k8s.io/pod-group-name"
UNMANAGED_NAMESPACES = frozenset({"kube-system", "kueue-system"})
SCHEDULING_GATED = "Scheduling is blocked due to non-empty scheduling gates"
# Owner kinds Kueue walks through (known to its integration manager) and where kubesim serves
# them; of these only Jobs are managed (the integrations kubesim runs: batch/job and pod).
_KNOWN_OWNERS = {
    ("batch/v1", "Job"): ("batch", "jobs"),
    ("apps/v1", "ReplicaSet"): ("apps", "replicasets"),
    ("apps/v1", "Deployment"): ("apps", "deployments"),
    ("apps/v1", "StatefulSet"): ("apps", "statefulsets"),
}
_MANAGED_OWNERS = frozenset({("batch/v1", "Job")})
_OWNER_CHAIN_LIMIT = 10


def queue_name(pod: Obj) -> str:
    return str(((pod.get("metadata") or {}).get("labels") or {}).get(QUEUE_LABEL) or "")


def is_gated(pod: Obj) -> bool:
    """Whether Kueue's admission gate is still on the pod."""
    gates = (pod.get("spec") or {}).get("schedulingGates") or []
    return any(g.get("name") == ADMISSION_GATE for g in gates)


def is_terminated(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def _controller_ref(obj: Obj) -> Obj | None:
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return dict(ref)
    return None


def _denied(webhook: str, code: int, reason: str, message: str) -> StoreError:
    return StoreError(code, reason, f'admission webhook "{webhook}" denied the request: {message}')


class PodWebhook:
    """`store.add_admission_hook(pods, PodWebhook(store, clock))`."""

    def __init__(self, store: Store, clock: Clock) -> None:
        self._store = store
        self._clock = clock

    def __call__(self, operation: Literal["CREATE", "UPDATE"], pod: Obj, old: Obj | None) -> None:
        managed_namespace = (pod.get("metadata") or {}).get("namespace") not in (
            UNMANAGED_NAMESPACES
        )
        if operation == "CREATE":
            if managed_namespace:
                self._default(pod)
            self._scheduling_gated(pod)
        if managed_namespace:
            _validate(pod, old)

    def _default(self, pod: Obj) -> None:
        meta = pod.setdefault("metadata", {})
        labels = meta.get("labels") or {}
        if not labels.get(QUEUE_LABEL) or labels.get(GROUP_NAME):
            return
        if self._has_managed_ancestor(pod):
            return
        meta["labels"] = {**labels, MANAGED_LABEL: "true"}
        finalizers = list(meta.get("finalizers") or [])
        if POD_FINALIZER not in finalizers:
            meta["finalizers"] = [*finalizers, POD_FINALIZER]
        spec = pod.setdefault("spec", {})
        gates = list(spec.get("schedulingGates") or [])
        for gate in (ADMISSION_GATE, TOPOLOGY_GATE):
            if not any(g.get("name") == gate for g in gates):
                gates.append({"name": gate})
        spec["schedulingGates"] = gates

    def _has_managed_ancestor(self, pod: Obj) -> bool:
        """Kueue's FindAncestorJobManagedByKueue over the controller ownerReferences."""
        namespace = pod["metadata"].get("namespace")
        current, managed, seen = pod, False, 0
        while seen < _OWNER_CHAIN_LIMIT:
            seen += 1
            ref = _controller_ref(current)
            kind = (str(ref.get("apiVersion")), str(ref.get("kind"))) if ref else None
            if ref is None or kind not in _KNOWN_OWNERS:
                return managed
            try:
                rt = self._store.resource(*_KNOWN_OWNERS[kind])
            except KeyError:  # a kind kubesim does not serve: nothing can be walked there
                return managed
            name = str(ref.get("name") or "")
            parent = self._store.get(rt, namespace, name)
            if parent is None:
                error = _denied("mpod.kb.io", 404, "NotFound", f'{rt.qualified} "{name}" not found')
                raise error.about(rt, name)
            if parent["metadata"].get("uid") != ref.get("uid"):
                return managed
            if kind in _MANAGED_OWNERS and queue_name(parent):
                managed = True
            current = parent
        return managed

    def _scheduling_gated(self, pod: Obj) -> None:
        """The apiserver's applySchedulingGatedCondition (after the mutating webhooks)."""
        if not (pod.get("spec") or {}).get("schedulingGates"):
            return
        status = pod.setdefault("status", {})
        conds = list(status.get("conditions") or [])
        if conditions.find(conds, "PodScheduled") is not None:
            return
        now = self._clock.now_rfc3339()
        conditions.set_condition(
            conds, "PodScheduled", False, "SchedulingGated", SCHEDULING_GATED, now
        )
        status["conditions"] = conds


def _validate(pod: Obj, old: Obj | None) -> None:
    labels = (pod.get("metadata") or {}).get("labels") or {}
    managed = labels.get(MANAGED_LABEL)
    if managed is not None and managed != "true":
        raise _denied(
            "vpod.kb.io",
            403,
            "Forbidden",
            f"metadata.labels[{MANAGED_LABEL}]: Forbidden: managed label value can only be 'true'",
        )
    if old is None or is_gated(pod) or is_terminated(pod):
        return
    before, after = queue_name(old), queue_name(pod)
    if before != after:
        raise _denied(
            "vpod.kb.io",
            403,
            "Forbidden",
            f"metadata.labels[{QUEUE_LABEL}]: Invalid value: {json.dumps(after)}: "
            "field is immutable",
        )
