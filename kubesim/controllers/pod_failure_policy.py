"""A Job's `podFailurePolicy`, matched against a failed pod as the Job controller does
(`matchPodFailurePolicy`): rules in order, the first that matches decides.

- `onExitCodes`: a container (named by `containerName`, or any) that terminated with a non-zero
  exit code `In`/`NotIn` the `values`; init containers first, then containers.
- `onPodConditions`: a pod condition of that `type` with that `status` (default True), such as
  `DisruptionTarget`.

The answer is the rule's action (`FailJob`, `FailIndex`, `Ignore`, `Count`) and, for FailJob,
the controller's message: `Container main for pod ns/pod-x failed with exit code 1 matching
FailJob rule at index 0`. No matching rule means `Count`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

Obj = dict[str, Any]
ACTIONS = ("FailJob", "FailIndex", "Ignore", "Count")


@dataclass(frozen=True)
class Match:
    action: str
    message: str


def _exit_code_match(pod: Obj, requirement: Obj) -> tuple[str, int] | None:
    status = pod.get("status") or {}
    name = requirement.get("containerName")
    values = {int(v) for v in requirement.get("values") or []}
    operator = requirement.get("operator")
    for entry in (status.get("initContainerStatuses") or []) + (
        status.get("containerStatuses") or []
    ):
        terminated = (entry.get("state") or {}).get("terminated")
        if terminated is None or (name and name != entry.get("name")):
            continue
        code = int(terminated.get("exitCode") or 0)
        if code == 0:
            continue
        if (operator == "In" and code in values) or (operator == "NotIn" and code not in values):
            return str(entry.get("name")), code
    return None


def _condition_match(pod: Obj, patterns: list[Obj]) -> str | None:
    conditions = (pod.get("status") or {}).get("conditions") or []
    for pattern in patterns:
        wanted = pattern.get("status", "True")
        for condition in conditions:
            if condition.get("type") == pattern.get("type") and condition.get("status") == wanted:
                return str(condition.get("type"))
    return None


def match(policy: Obj | None, pod: Obj) -> Match | None:
    """The first rule of `policy` the failed `pod` matches, or None (handled as Count)."""
    meta = pod["metadata"]
    where = f"{meta.get('namespace')}/{meta.get('name')}"
    for index, rule in enumerate((policy or {}).get("rules") or []):
        action = rule.get("action")
        if action not in ACTIONS:
            continue  # an unknown action: the rule is skipped, as clients are told to
        if rule.get("onExitCodes"):
            found = _exit_code_match(pod, rule["onExitCodes"])
            if found is not None:
                container, code = found
                return Match(
                    action,
                    f"Container {container} for pod {where} failed with exit code {code} "
                    f"matching {action} rule at index {index}",
                )
        elif rule.get("onPodConditions"):
            kind = _condition_match(pod, rule["onPodConditions"])
            if kind is not None:
                return Match(
                    action,
                    f"Pod {where} has condition {kind} matching {action} rule at index {index}",
                )
    return None
