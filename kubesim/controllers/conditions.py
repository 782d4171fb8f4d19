"""Status conditions as Kubernetes controllers write them.

Two shapes exist: `metav1.Condition` (Kueue kinds: type, status, reason, message,
lastTransitionTime, observedGeneration) and the older built-in shape (Job, Pod: adds
lastProbeTime). Both keep `lastTransitionTime` when only the reason or message changes, and
both update in place so that a write with nothing new is a no-op (no RV, no event).
"""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]


def find(conditions: list[Obj] | None, type_: str) -> Obj | None:
    for condition in conditions or []:
        if condition.get("type") == type_:
            return condition
    return None


def is_true(conditions: list[Obj] | None, type_: str) -> bool:
    condition = find(conditions, type_)
    return condition is not None and condition.get("status") == "True"


def set_condition(
    conditions: list[Obj],
    type_: str,
    status: bool,
    reason: str,
    message: str,
    now: str,
    *,
    observed_generation: int | None = None,
    probe_time: bool = False,
) -> bool:
    """Set one condition in place; return whether anything changed.

    `probe_time` adds `lastProbeTime` (Job conditions carry it; metav1.Conditions do not).
    """
    wanted = "True" if status else "False"
    current = find(conditions, type_)
    if current is None:
        current = {"type": type_}
        conditions.append(current)
    elif (
        current.get("status") == wanted
        and current.get("reason") == reason
        and current.get("message") == message
        and (
            observed_generation is None or current.get("observedGeneration") == observed_generation
        )
    ):
        return False
    if current.get("status") != wanted:
        current["lastTransitionTime"] = now
    current.setdefault("lastTransitionTime", now)
    current["status"] = wanted
    current["reason"] = reason
    current["message"] = message
    if observed_generation is not None:
        current["observedGeneration"] = observed_generation
    if probe_time:
        current["lastProbeTime"] = now
    return True


def remove(conditions: list[Obj], type_: str) -> bool:
    before = len(conditions)
    conditions[:] = [c for c in conditions if c.get("type") != type_]
    return len(conditions) != before
