"""Rules a real apiserver checks beyond the JSON schemas: label syntax, container resource
names, and the CEL rules (`x-kubernetes-validations`) of Kueue's ResourceFlavor CRD.

The schemas kubesim validates against cannot express these (the CEL rules are dropped when the
CRD schemas are derived), so they are written out here from the rules themselves:

- every object's `metadata.labels`: qualified-name keys (optional DNS-subdomain prefix, name of
  at most 63 characters) and values of at most 63 characters (kube-apiserver `ValidateLabels`);
- a Pod's container `resources.requests`/`limits` names, and those of a Job's, Deployment's or
  ReplicaSet's pod template: a standard resource (`cpu`,
  `memory`, `ephemeral-storage`, `hugepages-*`) or an extended resource name, fully qualified
  and outside `kubernetes.io` (`IsStandardContainerResourceName` / `IsExtendedResourceName`);
- a Job's completion mode (Indexed needs `completions`), `backoffLimitPerIndex` (Indexed only,
  and needed by `maxFailedIndexes` and by FailIndex rules) and `podFailurePolicy` (only with
  `restartPolicy: Never`; each rule one of onExitCodes/onPodConditions, known actions and
  operators, no exit code 0 under In);
- a ResourceFlavor's `spec.nodeLabels` as labels, and its tolerations and taints as the CRD's
  CEL rules say (operator Exists when key is empty, no value with Exists, only Equal/Exists,
  only the three effects, NoExecute with `tolerationSeconds`).

Each rule answers `(field, message)` in the apiserver's words, as 422 causes.
"""

from __future__ import annotations

import re
from typing import Any

_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_STANDARD_CONTAINER_RESOURCES = {"cpu", "memory", "ephemeral-storage"}
_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")

Cause = tuple[str, str]


def qualified_name_problem(key: str) -> str | None:
    """Kubernetes' `IsQualifiedName`: None when `key` is one, else the apiserver's complaint."""
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN.fullmatch(prefix)):
        return "prefix part must be a lowercase RFC 1123 subdomain"
    if not name or len(name) > 63 or not _NAME.fullmatch(name):
        return (
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start "
            "and end with an alphanumeric character (at most 63 characters)"
        )
    return None


def label_value_problem(value: object) -> str | None:
    if not isinstance(value, str):
        return "must be a string"
    if len(value) > 63 or (value and not _NAME.fullmatch(value)):
        return (
            "a valid label must be an empty string or consist of alphanumeric characters, '-', "
            "'_' or '.', and must start and end with an alphanumeric character (at most 63)"
        )
    return None


def _labels(field: str, labels: object) -> list[Cause]:
    causes: list[Cause] = []
    for key, value in (labels or {}).items() if isinstance(labels, dict) else ():
        if problem := qualified_name_problem(str(key)):
            causes.append((field, f"Invalid value: {key!r}: {problem}"))
        if problem := label_value_problem(value):
            causes.append((f"{field}[{key}]", f"Invalid value: {value!r}: {problem}"))
    return causes


def resource_name_problem(name: str) -> str | None:
    """None for a name a container may request; else why not."""
    if name in _STANDARD_CONTAINER_RESOURCES or name.startswith("hugepages-"):
        return None
    prefix, slash, _ = name.rpartition("/")
    if not slash or prefix == "kubernetes.io" or prefix.endswith(".kubernetes.io"):
        return "must be a standard resource for containers"
    if name.startswith("requests."):
        return "must be a standard resource for containers"
    problem = qualified_name_problem(name) or qualified_name_problem("requests." + name)
    return f"must be a valid extended resource name: {problem}" if problem else None


def _containers(spec: dict[str, Any], field: str) -> list[Cause]:
    causes: list[Cause] = []
    for index, container in enumerate(spec.get("containers") or []):
        resources = (container.get("resources") or {}) if isinstance(container, dict) else {}
        for kind in ("requests", "limits"):
            for name in resources.get(kind) or {}:
                if problem := resource_name_problem(str(name)):
                    at = f"{field}.containers[{index}].resources.{kind}[{name}]"
                    causes.append((at, f"Invalid value: {name!r}: {problem}"))
    return causes


def _tolerations(field: str, tolerations: object) -> list[Cause]:
    causes: list[Cause] = []
    for index, item in enumerate(tolerations if isinstance(tolerations, list) else []):
        if not isinstance(item, dict):
            continue
        at = f"{field}[{index}]"
        operator = item.get("operator")
        if "key" not in item and operator != "Exists":
            causes.append(
                (at, "operator must be Exists when 'key' is empty, which means "
                     "'match all values and all keys'")
            )  # fmt: skip
        if "tolerationSeconds" in item and item.get("effect") != "NoExecute":
            causes.append((at, "effect must be 'NoExecute' when 'tolerationSeconds' is set"))
        if operator is not None and operator not in ("Equal", "Exists"):
            causes.append((at, "supported toleration values: 'Equal'(default), 'Exists'"))
        if operator == "Exists" and "value" in item:
            causes.append((at, "a value must be empty when 'operator' is 'Exists'"))
        if item.get("effect") is not None and item.get("effect") not in _EFFECTS:
            causes.append(
                (at, "supported taint effect values: 'NoSchedule', 'PreferNoSchedule', 'NoExecute'")
            )
        if item.get("key") and (problem := qualified_name_problem(str(item["key"]))):
            causes.append((f"{at}.key", f"Invalid value: {item['key']!r}: {problem}"))
    return causes


def _taints(field: str, taints: object) -> list[Cause]:
    return [
        (f"{field}[{index}]", "supported taint effect values: 'NoSchedule', 'PreferNoSchedule', "
         "'NoExecute'")
        for index, taint in enumerate(taints if isinstance(taints, list) else [])
        if isinstance(taint, dict) and taint.get("effect") not in _EFFECTS
    ]  # fmt: skip


def check(plural: str, obj: dict[str, Any]) -> list[Cause]:
    """Every cause `obj` (of resource `plural`) violates beyond its JSON schema."""
    meta = obj.get("metadata") or {}
    causes = _labels("metadata.labels", meta.get("labels"))
    spec = obj.get("spec") or {}
    if not isinstance(spec, dict):
        return causes
    if plural == "resourceflavors":
        causes += _labels("spec.nodeLabels", spec.get("nodeLabels"))
        causes += _tolerations("spec.tolerations", spec.get("tolerations"))
        causes += _taints("spec.nodeTaints", spec.get("nodeTaints"))
    elif plural == "pods":
        causes += _containers(spec, "spec")
    elif plural in ("jobs", "deployments", "replicasets"):
        template = (spec.get("template") or {}).get("spec") or {}
        causes += _containers(template, "spec.template.spec")
        if plural == "jobs" and isinstance(template, dict):
            causes += _job_modes(spec, template)
    return causes


def _job_modes(spec: dict[str, Any], template: dict[str, Any]) -> list[Cause]:
    """`ValidateJobSpec` on completion modes, per-index back-off and the pod failure policy."""
    causes: list[Cause] = []
    mode = spec.get("completionMode", "NonIndexed")
    if mode not in ("NonIndexed", "Indexed"):
        causes.append(
            (
                "spec.completionMode",
                f'Unsupported value: "{mode}": supported values: "NonIndexed", "Indexed"',
            )
        )
    if mode == "Indexed" and spec.get("completions") is None:
        causes.append(("spec.completions", "Required value: when completion mode is Indexed"))
    per_index = spec.get("backoffLimitPerIndex")
    if per_index is not None and mode != "Indexed":
        causes.append(
            (
                "spec.backoffLimitPerIndex",
                f"Invalid value: {per_index}: requires indexed completion mode",
            )
        )
    if spec.get("maxFailedIndexes") is not None and per_index is None:
        causes.append(
            ("spec.backoffLimitPerIndex", "Required value: when maxFailedIndexes is specified")
        )
    policy = spec.get("podFailurePolicy")
    if not isinstance(policy, dict):
        return causes
    restart = template.get("restartPolicy")
    if restart != "Never":
        causes.append(
            (
                "spec.template.spec.restartPolicy",
                f'Invalid value: "{restart or ""}": only "Never" is supported when '
                "podFailurePolicy is specified",
            )
        )
    return causes + _policy_rules(policy, per_index)


def _policy_rules(policy: dict[str, Any], per_index: object) -> list[Cause]:
    causes: list[Cause] = []
    for index, rule in enumerate(policy.get("rules") or []):
        if not isinstance(rule, dict):
            continue
        at = f"spec.podFailurePolicy.rules[{index}]"
        action = rule.get("action")
        if action not in ("Count", "FailIndex", "FailJob", "Ignore"):
            causes.append(
                (
                    f"{at}.action",
                    f'Unsupported value: "{action or ""}": supported values: "Count", '
                    '"FailIndex", "FailJob", "Ignore"',
                )
            )
        elif action == "FailIndex" and per_index is None:
            causes.append(
                (
                    f"{at}.action",
                    'Invalid value: "FailIndex": requires the backoffLimitPerIndex to be set',
                )
            )
        on_codes, on_conditions = rule.get("onExitCodes"), rule.get("onPodConditions")
        if bool(on_codes) == bool(on_conditions):
            causes.append(
                (at, "Invalid value: specifying one of OnExitCodes and OnPodConditions is required")
            )
        if isinstance(on_codes, dict):
            operator = on_codes.get("operator")
            if operator not in ("In", "NotIn"):
                causes.append(
                    (
                        f"{at}.onExitCodes.operator",
                        f'Unsupported value: "{operator or ""}": supported values: "In", "NotIn"',
                    )
                )
            values = on_codes.get("values") or []
            if not values:
                causes.append((f"{at}.onExitCodes.values", "Required value: at least one value"))
            if operator == "In" and 0 in values:
                causes.append(
                    (
                        f"{at}.onExitCodes.values",
                        "Invalid value: 0: must not be 0 for the In operator",
                    )
                )
    return causes
