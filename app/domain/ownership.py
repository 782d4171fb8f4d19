"""Whether an object found in the cluster is aicp's own, for the resource being reconciled.

aicp never modifies or deletes an object someone else made: before an apply or a delete the
object of that name is read and checked here. It is aicp's when it carries the id of the
resource it was rendered for (`aicp.dev/uid`; a managed-by label removed by hand is drift,
which aicp restores), or `app.kubernetes.io/managed-by: aicp` and no id — then, for objects
rendered by earlier versions before the id label, its names (`aicp.dev/project`,
`aicp.dev/pool`). Anything else (no aicp label, another resource's id) is someone else's:
`foreign_owner` answers who, for the sentence the resource's state and the API's 409 carry.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.domain.labels import (
    FIELD_MANAGER,
    JOB_METADATA_FIELD_MANAGER,
    MANAGED_BY_LABEL,
    MANAGED_BY_VALUE,
    UID_LABEL,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

    from app.domain.kube_objects import Manifest

_AICP_MANAGERS = (FIELD_MANAGER, JOB_METADATA_FIELD_MANAGER)


def _labels(obj: Manifest) -> Mapping[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


def manager_of(obj: Manifest) -> str:
    """Who manages `obj`: its managed-by label, else the first field manager that is not aicp."""
    labelled = _labels(obj).get(MANAGED_BY_LABEL)
    if labelled:
        return str(labelled)
    for entry in (obj.get("metadata") or {}).get("managedFields") or []:
        manager = entry.get("manager")
        if manager and manager not in _AICP_MANAGERS:
            return str(manager)
    return "an unknown manager (no managed-by label)"


def foreign_owner(obj: Manifest | None, expected: Mapping[str, str]) -> str | None:
    """None when `obj` is absent or aicp's own for the resource `expected` describes (its
    `aicp.dev/uid` and name labels; no labels at all for shared objects such as flavors), else
    who manages it, in words."""
    if obj is None:
        return None
    labels = _labels(obj)
    uid = labels.get(UID_LABEL)
    if UID_LABEL in expected and uid == expected[UID_LABEL]:
        return None  # the resource's own id: aicp's, even if its managed-by label was removed
    if labels.get(MANAGED_BY_LABEL) != MANAGED_BY_VALUE:
        return manager_of(obj)
    if uid is not None and UID_LABEL in expected:
        return f"aicp for another resource ({UID_LABEL}={uid})"
    names = {key: value for key, value in expected.items() if key != UID_LABEL}
    mismatched = [key for key, value in names.items() if labels.get(key) != value]
    if not mismatched:
        return None
    shown = ", ".join(f"{key}={labels.get(key, '')}" for key in mismatched)
    return f"aicp for another resource ({shown})"


def not_taken_over(kind: str, name: str, manager: str) -> str:
    """The sentence of a resource whose object is someone else's."""
    return f"{kind} {name} exists and is managed by {manager}; aicp will not take it over."
