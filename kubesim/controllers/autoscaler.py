"""One step of the HorizontalPodAutoscaler controller, on demand: `POST /_sim/autoscale`.

kubesim runs no metrics pipeline, so nothing scales by itself. A test names a size instead, and
this does what the controller does once it has one (`pkg/controller/podautoscaler`):

- the size is held within the autoscaler's `minReplicas` (default 1) and `maxReplicas`;
- the scale target (`spec.scaleTargetRef`, a Deployment or ReplicaSet) gets it through its
  `scale` subresource, written as `kube-controller-manager` — the field manager a real cluster
  records for the autoscaler, whose client's user agent is kube-controller-manager's — so that
  manager owns `.spec.replicas`, and a later apply that declares another value conflicts;
- the autoscaler's status: `currentReplicas` (the target's `spec.replicas` before),
  `desiredReplicas`, `lastScaleTime` when it rescaled, `observedGeneration`, and the conditions
  `AbleToScale` (`SucceededRescale`, or `ReadyForNewScale` when the size did not change),
  `ScalingActive` (`ValidMetricFound`) and `ScalingLimited` (`TooManyReplicas`,
  `TooFewReplicas` or `DesiredWithinRange`), with the controller's messages.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kubesim.controllers import conditions
from kubesim.controllers.status import write_status
from kubesim.model import StoreError, not_found

if TYPE_CHECKING:
    from kubesim.clock import Clock
    from kubesim.store import Store

Obj = dict[str, Any]
MANAGER = "kube-controller-manager"
TARGETS = {"Deployment": "deployments", "ReplicaSet": "replicasets"}


def autoscale(store: Store, clock: Clock, namespace: str, name: str, replicas: int) -> Obj:
    """Scale the target of autoscaler `namespace/name` to `replicas` (within its bounds);
    answers `{"scale": <the target's Scale>, "status": <the autoscaler's status>}`."""
    hpas = store.resource("autoscaling", "horizontalpodautoscalers")
    hpa = store.get(hpas, namespace, name)
    if hpa is None:
        raise not_found(hpas, name)
    spec = hpa["spec"]
    ref = spec.get("scaleTargetRef") or {}
    if ref.get("kind") not in TARGETS:
        raise StoreError(
            400, "BadRequest", f"kubesim cannot scale a {ref.get('kind')}: only {sorted(TARGETS)}"
        )
    target = store.resource("apps", TARGETS[ref["kind"]])
    low, high = int(spec.get("minReplicas") or 1), int(spec["maxReplicas"])
    desired = min(max(replicas, low), high)
    before = store.get_scale(target, namespace, ref["name"])
    current = int(before["spec"].get("replicas") or 0)
    rescale = desired != current
    scale = before
    if rescale:
        update = {"spec": {"replicas": desired}}
        scale = store.update_scale(target, namespace, ref["name"], update, manager=MANAGER)
    now = clock.now_rfc3339()
    status: Obj = {k: v for k, v in (hpa.get("status") or {}).items() if k == "lastScaleTime"}
    if rescale:
        status["lastScaleTime"] = now
    conds = [dict(c) for c in (hpa.get("status") or {}).get("conditions") or []]
    if rescale:
        message = f"the HPA controller was able to update the target scale to {desired}"
        conditions.set_condition(conds, "AbleToScale", True, "SucceededRescale", message, now)
    else:
        message = "recommended size matches current size"
        conditions.set_condition(conds, "AbleToScale", True, "ReadyForNewScale", message, now)
    message = (
        "the HPA was able to successfully calculate a replica count from cpu resource "
        "utilization (percentage of request)"
    )
    conditions.set_condition(conds, "ScalingActive", True, "ValidMetricFound", message, now)
    if replicas > high:
        limited = (
            "TooManyReplicas",
            "the desired replica count is more than the maximum replica count",
        )
    elif replicas < low:
        limited = (
            "TooFewReplicas",
            "the desired replica count is less than the minimum replica count",
        )
    else:
        limited = ("DesiredWithinRange", "the desired count is within the acceptable range")
    conditions.set_condition(conds, "ScalingLimited", replicas != desired, *limited, now)
    status.update(
        observedGeneration=hpa["metadata"].get("generation", 1),
        currentReplicas=current,
        desiredReplicas=desired,
        conditions=conds,
    )
    written = write_status(store, hpas, hpa, status, MANAGER)
    return {"scale": scale, "status": written["status"]}
