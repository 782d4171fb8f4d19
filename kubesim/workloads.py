"""The registry strategies of the kinds a model server runs as: apps/v1 Deployments and
ReplicaSets, policy/v1 PodDisruptionBudgets and autoscaling/v2 HorizontalPodAutoscalers
(networking.k8s.io/v1 NetworkPolicies need nothing beyond their schema).

- Defaults, on create and on every main-resource update (the apiserver defaults every object it
  decodes, so a PUT that leaves them out gets them back):
  - Deployment: `replicas: 1`, `strategy.type: RollingUpdate` with `rollingUpdate.maxSurge` and
    `maxUnavailable` `25%` (only for RollingUpdate), `revisionHistoryLimit: 10`,
    `progressDeadlineSeconds: 600`;
  - ReplicaSet: `replicas: 1`;
  - both: the pod template's `restartPolicy: Always`, `terminationGracePeriodSeconds: 30`,
    `dnsPolicy: ClusterFirst`, `schedulerName: default-scheduler` (what a Pod gets on create);
  - HorizontalPodAutoscaler: `minReplicas: 1`, a CPU utilization target of 80 % when there are
    no `metrics`, and when `behavior` is given its missing scale-up/scale-down rules.
- Status on create: Deployment none, ReplicaSet `{replicas: 0}`, PodDisruptionBudget the four
  counters at 0, HorizontalPodAutoscaler `{desiredReplicas: 0}` (the Go types' zero values).
- Validation beyond the schema, in the apiserver's words (`ValidateDeployment`,
  `ValidateReplicaSet`, `ValidatePodDisruptionBudget`, `ValidateHorizontalPodAutoscaler`):
  replicas not negative, a non-empty selector that matches the template's labels, template
  `restartPolicy: Always`, the strategy (type, no `rollingUpdate` with Recreate, int-or-percent
  values, percentages at most 100 %, not both 0), `progressDeadlineSeconds` above
  `minReadySeconds`, a budget with one of `minAvailable`/`maxUnavailable`, an autoscaler's
  `minReplicas`/`maxReplicas` at least 1 and in order.
- Updates: the apps/v1 `spec.selector` is immutable; a Deployment's `generation` also goes up
  when its annotations change (they are copied to its ReplicaSets).
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Any

from kubesim.patching import clone_value
from kubesim.selectors import selector_matches

if TYPE_CHECKING:
    from kubesim.rules import Cause

Obj = dict[str, Any]
APPS = ("deployments", "replicasets")
_PERCENT = re.compile(r"[0-9]+%")
_POD_DEFAULTS = {
    "restartPolicy": "Always",
    "terminationGracePeriodSeconds": 30,
    "dnsPolicy": "ClusterFirst",
    "schedulerName": "default-scheduler",
}
SCALE_UP_RULES: Obj = {
    "stabilizationWindowSeconds": 0,
    "selectPolicy": "Max",
    "policies": [
        {"type": "Pods", "value": 4, "periodSeconds": 15},
        {"type": "Percent", "value": 100, "periodSeconds": 15},
    ],
}
SCALE_DOWN_RULES: Obj = {
    "selectPolicy": "Max",
    "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}],
}


def int_or_percent(value: Any, total: int, *, round_up: bool) -> int:
    """`GetScaledValueFromIntOrPercent`: an int as is, `N%` of `total` rounded up or down."""
    if isinstance(value, str) and _PERCENT.fullmatch(value):
        exact = int(value[:-1]) * total / 100
        return math.ceil(exact) if round_up else math.floor(exact)
    return int(value or 0)


def _dict(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def _default(obj: Obj, field: str, value: Any) -> Any:
    """`obj[field]`, set to `value` first when missing or null (a nil pointer is defaulted)."""
    if obj.get(field) is None:
        obj[field] = value
    return obj[field]


def _default_template(spec: Obj) -> None:
    template = spec.get("template")
    if isinstance(template, dict) and isinstance(template.get("spec"), dict):
        for field, value in _POD_DEFAULTS.items():
            _default(template["spec"], field, value)


def apply_defaults(plural: str, obj: Obj) -> None:
    """The create and update defaults of `plural` objects (in place; others untouched)."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    if plural in APPS:
        _default(spec, "replicas", 1)
        _default_template(spec)
    if plural == "deployments":
        strategy = _default(spec, "strategy", {})
        if isinstance(strategy, dict):
            if not strategy.get("type"):
                strategy["type"] = "RollingUpdate"
            if strategy["type"] == "RollingUpdate":
                rolling = _default(strategy, "rollingUpdate", {})
                if isinstance(rolling, dict):
                    _default(rolling, "maxUnavailable", "25%")
                    _default(rolling, "maxSurge", "25%")
        _default(spec, "revisionHistoryLimit", 10)
        _default(spec, "progressDeadlineSeconds", 600)
    elif plural == "horizontalpodautoscalers":
        _default(spec, "minReplicas", 1)
        if not spec.get("metrics"):
            target = {"type": "Utilization", "averageUtilization": 80}
            spec["metrics"] = [{"type": "Resource", "resource": {"name": "cpu", "target": target}}]
        behavior = spec.get("behavior")
        if isinstance(behavior, dict):
            for direction, rules in (("scaleUp", SCALE_UP_RULES), ("scaleDown", SCALE_DOWN_RULES)):
                given = _default(behavior, direction, {})
                if isinstance(given, dict):
                    for key, value in rules.items():
                        _default(given, key, clone_value(value))


def reset_status(plural: str, obj: Obj) -> None:
    """The status an object of `plural` starts with (what the create strategy leaves)."""
    obj.pop("status", None)
    if plural == "replicasets":
        obj["status"] = {"replicas": 0}
    elif plural == "poddisruptionbudgets":
        counters = ("currentHealthy", "desiredHealthy", "disruptionsAllowed", "expectedPods")
        obj["status"] = dict.fromkeys(counters, 0)
    elif plural == "horizontalpodautoscalers":
        obj["status"] = {"desiredReplicas": 0}


def go_map(labels: Any) -> str:
    """A label map as Go's `%#v` prints it in validation messages."""
    if not labels:
        return "map[string]string(nil)"
    inner = ", ".join(f'"{k}":"{v}"' for k, v in sorted(dict(labels).items()))
    return f"map[string]string{{{inner}}}"


def _not_negative(field: str, value: Any) -> list[Cause]:
    if isinstance(value, int) and value < 0:
        return [(field, f"Invalid value: {value}: must be greater than or equal to 0")]
    return []


def _int_or_percent(field: str, value: Any) -> list[Cause]:
    if isinstance(value, str):
        if not _PERCENT.fullmatch(value):
            return [
                (
                    field,
                    f'Invalid value: "{value}": a valid percent string must be a numeric string '
                    "followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation "
                    "is '[0-9]+%')",
                )
            ]
        if int(value[:-1]) > 100:
            return [(field, f'Invalid value: "{value}": must not be greater than 100%')]
        return []
    return _not_negative(field, value)


def _template(spec: Obj, kind: str) -> list[Cause]:
    causes: list[Cause] = []
    selector = spec.get("selector")
    if isinstance(selector, dict):
        if not selector.get("matchLabels") and not selector.get("matchExpressions"):
            causes.append(
                ("spec.selector", f"Invalid value: {{}}: empty selector is invalid for {kind}")
            )
        else:
            labels = _dict(_dict(spec.get("template")).get("metadata")).get("labels") or {}
            if not selector_matches(selector, labels):
                causes.append(
                    (
                        "spec.template.metadata.labels",
                        f"Invalid value: {go_map(labels)}: `selector` does not match template "
                        "`labels`",
                    )
                )
    pod = _dict(_dict(spec.get("template")).get("spec"))
    restart = pod.get("restartPolicy", "Always")
    if restart != "Always":
        causes.append(
            (
                "spec.template.spec.restartPolicy",
                f'Unsupported value: "{restart}": supported values: "Always"',
            )
        )
    if pod.get("activeDeadlineSeconds") is not None:
        causes.append(
            (
                "spec.template.spec.activeDeadlineSeconds",
                "Forbidden: activeDeadlineSeconds in ReplicaSet is not Supported",
            )
        )
    return causes


def _strategy(strategy: Obj) -> list[Cause]:
    kind = strategy.get("type")
    rolling = strategy.get("rollingUpdate")
    if kind == "Recreate":
        if rolling is not None:
            return [
                (
                    "spec.strategy.rollingUpdate",
                    "Forbidden: may not be specified when strategy `type` is 'Recreate'",
                )
            ]
        return []
    if kind != "RollingUpdate":
        return [
            (
                "spec.strategy.type",
                f'Unsupported value: "{kind}": supported values: "Recreate", "RollingUpdate"',
            )
        ]
    rolling = _dict(rolling)
    at = "spec.strategy.rollingUpdate"
    unavailable, surge = rolling.get("maxUnavailable"), rolling.get("maxSurge")
    causes = _int_or_percent(f"{at}.maxUnavailable", unavailable)
    causes += _int_or_percent(f"{at}.maxSurge", surge)
    if not causes and _zero(unavailable) and _zero(surge):
        causes.append(
            (f"{at}.maxUnavailable", "Invalid value: 0: may not be 0 when `maxSurge` is 0")
        )
    return causes


def _zero(value: Any) -> bool:
    return value in (0, "0%", None)


def _deployment(spec: Obj) -> list[Cause]:
    causes = _not_negative("spec.replicas", spec.get("replicas"))
    causes += _template(spec, "deployment")
    causes += _strategy(_dict(spec.get("strategy")))
    causes += _not_negative("spec.revisionHistoryLimit", spec.get("revisionHistoryLimit"))
    causes += _not_negative("spec.minReadySeconds", spec.get("minReadySeconds"))
    deadline, min_ready = spec.get("progressDeadlineSeconds"), spec.get("minReadySeconds") or 0
    if isinstance(deadline, int) and isinstance(min_ready, int) and deadline <= min_ready:
        causes.append(
            (
                "spec.progressDeadlineSeconds",
                f"Invalid value: {deadline}: must be greater than minReadySeconds",
            )
        )
    return causes


def _budget(spec: Obj) -> list[Cause]:
    causes: list[Cause] = []
    for field in ("minAvailable", "maxUnavailable"):
        if spec.get(field) is not None:
            causes += _int_or_percent(f"spec.{field}", spec[field])
    if spec.get("minAvailable") is not None and spec.get("maxUnavailable") is not None:
        causes.append(("spec", "Invalid value: minAvailable and maxUnavailable cannot be both set"))
    policy = spec.get("unhealthyPodEvictionPolicy")
    if policy is not None and policy not in ("IfHealthyBudget", "AlwaysAllow"):
        causes.append(
            (
                "spec.unhealthyPodEvictionPolicy",
                f'Unsupported value: "{policy}": supported values: "AlwaysAllow", '
                '"IfHealthyBudget"',
            )
        )
    return causes


def _autoscaler(spec: Obj) -> list[Cause]:
    causes: list[Cause] = []
    low, high = spec.get("minReplicas"), spec.get("maxReplicas")
    for field, value in (("minReplicas", low), ("maxReplicas", high)):
        if isinstance(value, int) and value < 1:
            causes.append(
                (f"spec.{field}", f"Invalid value: {value}: must be greater than or equal to 1")
            )
    if isinstance(low, int) and isinstance(high, int) and 1 <= high < low:
        causes.append(
            (
                "spec.maxReplicas",
                f"Invalid value: {high}: must be greater than or equal to `minReplicas`",
            )
        )
    return causes


def causes(plural: str, obj: Obj) -> list[Cause]:
    """Every rule `obj` (of resource `plural`) breaks beyond its schema, as `(field, message)`."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return []
    if plural == "deployments":
        return _deployment(spec)
    if plural == "replicasets":
        return _not_negative("spec.replicas", spec.get("replicas")) + _template(spec, "deployment")
    if plural == "scale":
        return _not_negative("spec.replicas", spec.get("replicas"))
    if plural == "poddisruptionbudgets":
        return _budget(spec)
    if plural == "horizontalpodautoscalers":
        return _autoscaler(spec)
    return []


def immutable_fields(plural: str, old: Obj, new: Obj) -> list[str]:
    """The fields an update of `plural` may not change and does: the apps/v1 selector."""
    if plural in APPS and _dict(old.get("spec")).get("selector") != _dict(new.get("spec")).get(
        "selector"
    ):
        return ["spec.selector"]
    return []


def bumps_generation(plural: str, old: Obj, new: Obj) -> bool:
    """Beyond a spec change: a Deployment's annotations (copied to its ReplicaSets)."""
    return plural == "deployments" and old["metadata"].get("annotations") != new["metadata"].get(
        "annotations"
    )
