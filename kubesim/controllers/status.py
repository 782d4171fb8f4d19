"""How the apps controllers write status: a merge patch of `/status` holding only what changed
(fields gone are removed, as Go's `omitempty` drops zeros), and the apps/v1 conditions, which
carry `lastUpdateTime` besides `lastTransitionTime`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kubesim.model import not_found

if TYPE_CHECKING:
    from kubesim.store import ResourceType, Store

Obj = dict[str, Any]
MERGE = "application/merge-patch+json"


def write_status(store: Store, rt: ResourceType, obj: Obj, status: Obj, manager: str) -> Obj:
    """Make the stored object's status `status`, and its annotations those of `obj` (a
    Deployment's /status may change them); one write, none when nothing differs. Returns the
    stored object."""
    meta = obj["metadata"]
    current = store.get(rt, meta.get("namespace"), meta["name"])
    if current is None:
        raise not_found(rt, meta["name"])
    before = current.get("status") or {}
    changes: Obj = {k: v for k, v in status.items() if before.get(k) != v}
    changes.update({k: None for k in before if k not in status})
    patch: Obj = {"status": changes} if changes else {}
    stored = current["metadata"].get("annotations") or {}
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if stored.get(k) != v}
    if annotations:
        patch["metadata"] = {"annotations": annotations}
    if not patch:
        return current
    return store.patch(
        rt,
        meta.get("namespace"),
        meta["name"],
        patch,
        content_type=MERGE,
        manager=manager,
        subresource="status",
    )


class Conditions:
    """An apps/v1 object's conditions, edited as `SetDeploymentCondition` does: a condition is
    replaced (and moved last) when its status or reason changes; `lastTransitionTime` is kept
    while the status stays."""

    def __init__(self, obj: Obj, now: str) -> None:
        self.items: list[Obj] = [dict(c) for c in (obj.get("status") or {}).get("conditions") or []]
        self.now = now

    def find(self, type_: str) -> Obj | None:
        return next((c for c in self.items if c.get("type") == type_), None)

    def set(self, type_: str, status: str, reason: str, message: str) -> None:
        current = self.find(type_)
        if current is not None and (current.get("status"), current.get("reason")) == (
            status,
            reason,
        ):
            return
        self.replace(type_, status, reason, message)

    def put(self, condition: Obj) -> None:
        """`SetDeploymentCondition` of a whole condition (times included), as the controller
        copies a ReplicaSet's `ReplicaFailure`."""
        current = self.find(condition["type"])
        if current is not None and (current.get("status"), current.get("reason")) == (
            condition["status"],
            condition.get("reason"),
        ):
            return
        self.items = [c for c in self.items if c.get("type") != condition["type"]]
        self.items.append(condition)

    def remove(self, type_: str) -> None:
        self.items = [c for c in self.items if c.get("type") != type_]

    def replace(self, type_: str, status: str, reason: str, message: str) -> None:
        """Set even when only the message or the time changes (how `ReplicaSetUpdated` notes
        progress)."""
        current = self.find(type_)
        since = self.now
        if current is not None and current.get("status") == status:
            since = current.get("lastTransitionTime") or self.now
        self.items = [c for c in self.items if c.get("type") != type_]
        self.items.append(
            {
                "type": type_,
                "status": status,
                "lastUpdateTime": self.now,
                "lastTransitionTime": since,
                "reason": reason,
                "message": message,
            }
        )
