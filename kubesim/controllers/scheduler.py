"""The scheduler: binds pending pods to nodes that fit, as kube-scheduler's default profile does.

Filters, in kube-scheduler's words: node selector ("node(s) didn't match Pod's node
affinity/selector"), NoSchedule/NoExecute taints ("node(s) had untolerated taint {k: v}") and
resources ("Insufficient nvidia.com/gpu", also cpu, memory, pods). Among fitting nodes it
picks the least allocated (the default LeastAllocated score). A pod that fits nowhere gets
`PodScheduled=False` reason `Unschedulable` with the real message shape and waits in an
"unschedulable" set until a node changes or a bound pod releases its resources, as the real
scheduler moves pods back from its unschedulable queue on such events.

A pod with scheduling gates (`spec.schedulingGates`, e.g. Kueue's `kueue.x-k8s.io/admission`)
is left alone until they are all removed, as the real scheduler's SchedulingGates PreEnqueue
plugin keeps it out of the queue; its `PodScheduled=False` reason `SchedulingGated` comes from
the apiserver on create (kubesim: `kueue_pod_webhook.py`).

Binding is two writes, like the real Binding subresource followed by the status update:
`spec.nodeName`, then the `PodScheduled=True` condition. Not simulated: affinity and
anti-affinity, topology spread, priority preemption.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kubesim.controllers import conditions
from kubesim.controllers.podspec import pod_requests, selector_matches, untolerated_taint
from kubesim.controllers.quantity import parse_milli
from kubesim.controllers.runtime import Requeue, WorkQueue

if TYPE_CHECKING:
    from kubesim.clock import Clock
    from kubesim.store import Store, WatchEvent

log = logging.getLogger("kubesim.scheduler")
Obj = dict[str, Any]
Key = tuple[str, str]
MANAGER = "kube-scheduler"
_TERMINAL = ("Succeeded", "Failed")


@dataclass
class _Node:
    labels: dict[str, str]
    taints: list[Obj]
    allocatable: dict[str, int]
    used: Counter[str] = field(default_factory=Counter)


@dataclass(frozen=True)
class _Bound:
    node: str
    requests: dict[str, int]


class Scheduler:
    """Keeps a cache of nodes and of the resources bound pods hold on them (what the real
    scheduler's cache is), updated from watches and, for its own bindings, at once ("assume")."""

    def __init__(self, store: Store, clock: Clock) -> None:
        self._store = store
        self._clock = clock
        self.pods = store.resource("", "pods")
        self.queue: WorkQueue[Key] = WorkQueue(clock)
        self._nodes: dict[str, _Node] = {}
        self._bound: dict[Key, _Bound] = {}
        self._unschedulable: set[Key] = set()

    # -- informers -----------------------------------------------------------------------
    def on_node_event(self, event: WatchEvent) -> None:
        node = event.object
        name = node["metadata"]["name"]
        if event.type == "DELETED":
            self._nodes.pop(name, None)
            return
        status = node.get("status") or {}
        allocatable = {}
        for resource, value in (status.get("allocatable") or {}).items():
            try:
                allocatable[resource] = parse_milli(value)
            except ValueError:
                continue
        previous = self._nodes.get(name)
        if previous is not None:
            used = previous.used
        else:  # pods may have been seen bound here before the node's own ADDED event
            used = Counter()
            for bound in self._bound.values():
                if bound.node == name:
                    used.update(bound.requests)
        self._nodes[name] = _Node(
            labels=dict((node.get("metadata") or {}).get("labels") or {}),
            taints=list((node.get("spec") or {}).get("taints") or []),
            allocatable=allocatable,
            used=used,
        )
        self._retry_unschedulable()

    def on_pod_event(self, event: WatchEvent) -> None:
        pod = event.object
        meta = pod["metadata"]
        key = (meta["namespace"], meta["name"])
        node = (pod.get("spec") or {}).get("nodeName")
        phase = (pod.get("status") or {}).get("phase")
        if event.type == "DELETED" or phase in _TERMINAL:
            self._unschedulable.discard(key)
            if self._release(key):
                self._retry_unschedulable()
            return
        if node:
            if key not in self._bound:
                self._assume(key, node, pod_requests(pod.get("spec") or {}))
            return
        if meta.get("deletionTimestamp") or key in self._unschedulable or _gated(pod):
            return
        self.queue.add(key)

    # -- bookkeeping ---------------------------------------------------------------------
    def _assume(self, key: Key, node: str, requests: dict[str, int]) -> None:
        requests = {**requests, "pods": 1000}
        self._bound[key] = _Bound(node, requests)
        if node in self._nodes:
            self._nodes[node].used.update(requests)

    def _release(self, key: Key) -> bool:
        bound = self._bound.pop(key, None)
        if bound is None:
            return False
        if bound.node in self._nodes:
            self._nodes[bound.node].used.subtract(bound.requests)
        return True

    def _retry_unschedulable(self) -> None:
        if self._unschedulable:
            self.queue.add_all(sorted(self._unschedulable))
            self._unschedulable.clear()

    # -- reconcile -----------------------------------------------------------------------
    def _filter(self, pod: Obj, requests: dict[str, int]) -> tuple[list[str], Counter[str]]:
        spec = pod.get("spec") or {}
        fits: list[str] = []
        reasons: Counter[str] = Counter()
        for name, node in self._nodes.items():
            if not selector_matches(spec.get("nodeSelector"), node.labels):
                reasons["node(s) didn't match Pod's node affinity/selector"] += 1
                continue
            taint = untolerated_taint(spec.get("tolerations"), node.taints)
            if taint is not None:
                shown = f"{{{taint.get('key')}: {taint.get('value', '')}}}"
                reasons[f"node(s) had untolerated taint {shown}"] += 1
                continue
            short = [
                resource
                for resource, milli in requests.items()
                if node.used[resource] + milli > node.allocatable.get(resource, 0)
            ]
            for resource in short:
                reasons[f"Insufficient {resource}"] += 1
            if not short:
                fits.append(name)
        return fits, reasons

    def _score(self, name: str) -> float:
        node = self._nodes[name]
        fractions = [
            node.used[resource] / node.allocatable[resource]
            for resource in ("cpu", "memory", "nvidia.com/gpu")
            if node.allocatable.get(resource)
        ]
        return sum(fractions) / len(fractions) if fractions else 0.0

    def reconcile(self, key: Key) -> Requeue:
        pod = self._store.get(self.pods, *key)
        if pod is None or (pod.get("spec") or {}).get("nodeName"):
            return None
        if (
            pod["metadata"].get("deletionTimestamp")
            or pod.get("status", {}).get("phase") in _TERMINAL
            or _gated(pod)
        ):
            return None
        requests = {**pod_requests(pod.get("spec") or {}), "pods": 1000}
        fits, reasons = self._filter(pod, requests)
        now = self._clock.now_rfc3339()
        status_conditions = list((pod.get("status") or {}).get("conditions") or [])
        if not fits:
            total = len(self._nodes)
            detail = ", ".join(f"{count} {reason}" for reason, count in sorted(reasons.items()))
            message = (
                f"0/{total} nodes are available: {detail}."
                if detail
                else (f"0/{total} nodes are available.")
            )
            message += (
                f" preemption: 0/{total} nodes are available: {total} No preemption"
                " victims found for incoming pod."
            )
            self._unschedulable.add(key)
            if conditions.set_condition(
                status_conditions,
                "PodScheduled",
                False,
                "Unschedulable",
                message,
                now,
                probe_time=False,
            ):
                self._patch_status(key, status_conditions)
            return None
        node = min(fits, key=lambda n: (self._score(n), n))
        self._store.patch(
            self.pods,
            key[0],
            key[1],
            {"spec": {"nodeName": node}},
            content_type="application/merge-patch+json",
            manager=MANAGER,
        )
        self._assume(key, node, pod_requests(pod.get("spec") or {}))
        status_conditions = [c for c in status_conditions if c.get("type") != "PodScheduled"]
        conditions.set_condition(status_conditions, "PodScheduled", True, "", "", now)
        for condition in status_conditions:
            if condition["type"] == "PodScheduled":
                condition.pop("reason", None)
                condition.pop("message", None)
        self._patch_status(key, status_conditions)
        return None

    def _patch_status(self, key: Key, status_conditions: list[Obj]) -> None:
        self._store.patch(
            self.pods,
            key[0],
            key[1],
            {"status": {"conditions": status_conditions}},
            content_type="application/merge-patch+json",
            manager=MANAGER,
            subresource="status",
        )


def _gated(pod: Obj) -> bool:
    """Whether the pod still has scheduling gates (it is not even tried until they are gone)."""
    return bool((pod.get("spec") or {}).get("schedulingGates"))
