"""Deletion: finalizers, `deletionTimestamp`, and ownerReference garbage collection with the
three propagation policies (K8s `registry/generic/registry/store.go` and the GC controller).

- Background: the owner goes at once; its dependents are deleted right after.
- Foreground: the owner gets `deletionTimestamp` and the `foregroundDeletion` finalizer; its
  dependents are deleted first; when none that `blockOwnerDeletion` is left, the finalizer is
  removed and the owner goes.
- Orphan: dependents lose their ownerReference to the owner, then the owner goes.
- No policy: Background, except batch/v1 Jobs, which orphan their pods (the Job default).

Unlike the real GC, which works asynchronously, the dependents are handled within the DELETE
call; the order of events (owner first for Background, dependents first for Foreground) is the
same as on a real cluster.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from kubesim.model import Obj, ResourceType, StoreError, not_found
from kubesim.tables import Key, Stored, Table, clone

if TYPE_CHECKING:
    from kubesim import fieldowners
    from kubesim.clock import Clock

FOREGROUND = "foregroundDeletion"
POLICIES = ("Background", "Foreground", "Orphan")


class DeletionMixin:
    """The delete half of `Store` (it uses the store's tables and commit)."""

    tables: dict[tuple[str, str], Table]
    uids: dict[str, tuple[ResourceType, Key]]
    pod_logs: dict[tuple[str, str], str]
    _owners: dict[str, fieldowners.Ownership]
    clock: Clock

    def wake_log_followers(self, namespace: str, name: str) -> None:
        raise NotImplementedError

    def _key(self, rt: ResourceType, namespace: str | None, name: str) -> Key:
        raise NotImplementedError

    def _commit(
        self,
        rt: ResourceType,
        key: Key,
        obj: Obj,
        old: Obj | None,
        event: Literal["ADDED", "MODIFIED", "DELETED"],
    ) -> Obj:
        raise NotImplementedError

    def delete(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        *,
        propagation_policy: str | None = None,
    ) -> Obj:
        """Delete, or mark deleting when finalizers remain; garbage-collects dependents.
        Returns the object's last state (with `deletionTimestamp` when it is only marked)."""
        key = self._key(rt, namespace, name)
        current = self.tables[rt.key].get(key)
        if current is None:
            raise not_found(rt, name)
        policy = propagation_policy or ("Orphan" if rt.plural == "jobs" else "Background")
        if policy not in POLICIES:
            raise StoreError(422, "Invalid", f"propagationPolicy: Unsupported value: {policy!r}")
        uid = current.obj["metadata"]["uid"]
        if rt.plural == "namespaces":
            self._delete_namespace_contents(name)
        if policy == "Orphan":
            self._orphan(uid)
            current = self.tables[rt.key].get(key) or current
        obj = clone(current.obj)
        meta = obj["metadata"]
        finalizers = list(meta.get("finalizers") or [])
        if policy == "Foreground" and self._dependents(uid) and FOREGROUND not in finalizers:
            finalizers.append(FOREGROUND)
        if not finalizers:
            return self._remove(rt, key, obj)
        if not meta.get("deletionTimestamp"):
            meta["finalizers"] = finalizers
            meta["deletionTimestamp"] = self.clock.now_rfc3339()
            meta["deletionGracePeriodSeconds"] = 0
            meta["generation"] = meta.get("generation", 1) + 1
            obj = self._commit(rt, key, obj, current.obj, "MODIFIED")
        elif finalizers != meta.get("finalizers"):
            meta["finalizers"] = finalizers
            obj = self._commit(rt, key, obj, current.obj, "MODIFIED")
        if policy == "Foreground":
            for dep_rt, dep_key in self._dependents(uid):
                self._delete_entry(dep_rt, dep_key, "Foreground")
            self._release_foreground(uid)
            latest = self.tables[rt.key].get(key)
            return clone(latest.obj) if latest is not None else obj
        return obj

    def _delete_entry(self, rt: ResourceType, key: Key, policy: str) -> None:
        if self.tables[rt.key].get(key) is not None:
            self.delete(rt, key[0] or None, key[1], propagation_policy=policy)

    def _dependents(self, uid: str) -> list[tuple[ResourceType, Key]]:
        found: list[tuple[ResourceType, Key]] = []
        for table in self.tables.values():
            found.extend((table.rt, key) for key in sorted(table.by_owner.get(uid, ())))
        return found

    def _orphan(self, uid: str) -> None:
        """Strip the ownerReferences to `uid` from every dependent (one write each)."""
        for rt, key in self._dependents(uid):
            entry = self.tables[rt.key].get(key)
            if entry is None:
                continue
            obj = clone(entry.obj)
            refs = [r for r in obj["metadata"].get("ownerReferences", []) if r.get("uid") != uid]
            if refs:
                obj["metadata"]["ownerReferences"] = refs
            else:
                obj["metadata"].pop("ownerReferences", None)
            self._commit(rt, key, obj, entry.obj, "MODIFIED")

    def _remove(self, rt: ResourceType, key: Key, obj: Obj) -> Obj:
        """Remove for good: DELETED (with the delete's RV), then collect dependents and let a
        foreground-deleting owner finish when this was its last blocking dependent."""
        uid = obj["metadata"]["uid"]
        prior: Stored | None = self.tables[rt.key].get(key)
        last = self._commit(rt, key, obj, prior.obj if prior else None, "DELETED")
        self._owners.pop(uid, None)
        self.uids.pop(uid, None)
        if rt.plural == "pods":
            self.pod_logs.pop(key, None)
            self.wake_log_followers(*key)
        for dep_rt, dep_key in self._dependents(uid):
            entry = self.tables[dep_rt.key].get(dep_key)
            if entry is None:
                continue
            alive = [
                r
                for r in entry.obj["metadata"].get("ownerReferences", [])
                if r.get("uid") != uid and r.get("uid") in self.uids
            ]
            if alive:
                dep = clone(entry.obj)
                dep["metadata"]["ownerReferences"] = alive
                self._commit(dep_rt, dep_key, dep, entry.obj, "MODIFIED")
            else:
                self._delete_entry(dep_rt, dep_key, "Background")
        for ref in obj["metadata"].get("ownerReferences") or ():
            if ref.get("uid") in self.uids:
                self._release_foreground(ref["uid"])
        return last

    def _release_foreground(self, uid: str) -> None:
        """Drop `foregroundDeletion` from a deleting owner once no blocking dependent is left."""
        where = self.uids.get(uid)
        if where is None:
            return
        rt, key = where
        entry = self.tables[rt.key].get(key)
        if entry is None or FOREGROUND not in (entry.obj["metadata"].get("finalizers") or ()):
            return
        for dep_rt, dep_key in self._dependents(uid):
            dep = self.tables[dep_rt.key].get(dep_key)
            if dep is not None and any(
                r.get("uid") == uid and r.get("blockOwnerDeletion")
                for r in dep.obj["metadata"].get("ownerReferences", [])
            ):
                return
        obj = clone(entry.obj)
        obj["metadata"]["finalizers"] = [
            f for f in obj["metadata"]["finalizers"] if f != FOREGROUND
        ]
        if obj["metadata"]["finalizers"]:
            self._commit(rt, key, obj, entry.obj, "MODIFIED")
        else:
            obj["metadata"].pop("finalizers")
            self._remove(rt, key, obj)

    def _delete_namespace_contents(self, namespace: str) -> None:
        """What the namespace controller does, at once: delete everything in the namespace."""
        for table in self.tables.values():
            if not table.rt.namespaced:
                continue
            for key in [k for k in table.items if k[0] == namespace]:
                self._delete_entry(table.rt, key, "Background")
