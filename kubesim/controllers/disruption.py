"""The disruption controller's side that keeps a PodDisruptionBudget's status
(`pkg/controller/disruption`), writing `/status` as `kube-controller-manager`.

Per budget, from the pods its selector picks in its namespace (an empty selector picks all):

- `expectedPods`: with `minAvailable` a number, the number of those pods; otherwise (a
  percentage, or `maxUnavailable`) the scale of their controllers — a Deployment's
  `spec.replicas` for the pods of its ReplicaSets, a ReplicaSet's own otherwise; pods with
  neither are left out, as the controller leaves out unmanaged pods;
- `desiredHealthy`: `minAvailable` (a percentage of `expectedPods`, rounded up), or
  `expectedPods - maxUnavailable` (a percentage rounded up), at least 0;
- `currentHealthy`: those pods that are Ready and not being deleted;
- `disruptionsAllowed`: `currentHealthy - desiredHealthy`, at least 0 (0 with no pods
  expected); `observedGeneration`; condition `DisruptionAllowed` True with reason
  `SufficientPods` or False with `InsufficientPods`.

Not simulated: the Eviction API (nothing is ever evicted, `disruptedPods` stays empty), the
`unhealthyPodEvictionPolicy` (it only matters to evictions), StatefulSets and other scale
targets.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kubesim.controllers import conditions
from kubesim.controllers.podspec import controller_name
from kubesim.controllers.runtime import Requeue, WorkQueue
from kubesim.controllers.status import write_status
from kubesim.selectors import format_label_selector
from kubesim.workloads import int_or_percent

if TYPE_CHECKING:
    from kubesim.clock import Clock
    from kubesim.store import Store, WatchEvent

Obj = dict[str, Any]
Key = tuple[str, str]
MANAGER = "kube-controller-manager"


class DisruptionController:
    def __init__(self, store: Store, clock: Clock) -> None:
        self._store = store
        self._clock = clock
        self.budgets = store.resource("policy", "poddisruptionbudgets")
        self.pods = store.resource("", "pods")
        self.deployments = store.resource("apps", "deployments")
        self.replicasets = store.resource("apps", "replicasets")
        self.queue: WorkQueue[Key] = WorkQueue(clock)

    def on_budget_event(self, event: WatchEvent) -> None:
        meta = event.object["metadata"]
        self.queue.add((meta["namespace"], meta["name"]))

    def on_namespace_object_event(self, event: WatchEvent) -> None:
        """A pod, ReplicaSet or Deployment changed: every budget of its namespace looks again."""
        namespace = event.object["metadata"].get("namespace")
        if namespace:
            for entry in self._store.entries(self.budgets, namespace):
                self.queue.add((namespace, entry.obj["metadata"]["name"]))

    def reconcile(self, key: Key) -> Requeue:
        budget = self._store.get(self.budgets, *key)
        if budget is None or budget["metadata"].get("deletionTimestamp"):
            return None
        spec = budget.get("spec") or {}
        selector = spec.get("selector")
        # The label index answers the selector's equality terms.
        pods = (
            []
            if selector is None
            else self._store.list(self.pods, key[0], label_selector=format_label_selector(selector))
        )
        expected, desired = self._expected(spec, pods)
        healthy = sum(
            1
            for p in pods
            if not p["metadata"].get("deletionTimestamp")
            and conditions.is_true((p.get("status") or {}).get("conditions"), "Ready")
        )
        allowed = max(healthy - desired, 0) if expected > 0 else 0
        generation = budget["metadata"].get("generation", 1)
        conds = [dict(c) for c in (budget.get("status") or {}).get("conditions") or []]
        reason = "SufficientPods" if allowed > 0 else "InsufficientPods"
        conditions.set_condition(
            conds,
            "DisruptionAllowed",
            allowed > 0,
            reason,
            "",
            self._clock.now_rfc3339(),
            observed_generation=generation,
        )
        status = {
            "observedGeneration": generation,
            "disruptionsAllowed": allowed,
            "currentHealthy": healthy,
            "desiredHealthy": desired,
            "expectedPods": expected,
            "conditions": conds,
        }
        if status != (budget.get("status") or {}):
            write_status(self._store, self.budgets, budget, status, MANAGER)
        return None

    def _expected(self, spec: Obj, pods: list[Obj]) -> tuple[int, int]:
        """`getExpectedPodCount`: (expectedPods, desiredHealthy)."""
        low, high = spec.get("minAvailable"), spec.get("maxUnavailable")
        if high is not None:
            expected = self._scale(pods)
            return expected, max(expected - int_or_percent(high, expected, round_up=True), 0)
        if isinstance(low, int):
            return len(pods), low
        if low is not None:
            expected = self._scale(pods)
            return expected, int_or_percent(low, expected, round_up=True)
        return 0, 0

    def _scale(self, pods: list[Obj]) -> int:
        """The summed `spec.replicas` of the pods' controllers, each counted once."""
        seen: dict[tuple[str, str], int] = {}
        for pod in pods:
            namespace = pod["metadata"]["namespace"]
            rs_name = controller_name(pod, "ReplicaSet")
            if rs_name is None:
                continue
            rs = self._store.get(self.replicasets, namespace, rs_name)
            if rs is None:
                continue
            owner = controller_name(rs, "Deployment")
            deployment = owner and self._store.get(self.deployments, namespace, owner)
            if deployment:
                seen[("Deployment", owner or "")] = int(deployment["spec"].get("replicas") or 0)
            else:
                seen[("ReplicaSet", rs_name)] = int(rs["spec"].get("replicas") or 0)
        return sum(seen.values())
