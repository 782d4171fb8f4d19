"""The Deployment controller, after kube-controller-manager's (`pkg/controller/deployment`),
writing as `kube-controller-manager`.

Per Deployment, level-triggered from it and its ReplicaSets (a controller ownerReference to it):

- **The new ReplicaSet** is the one whose template equals the Deployment's, the
  `pod-template-hash` label aside. Missing, it is created as `<deployment>-<hash>`: the
  template's labels plus `pod-template-hash: <hash>` on it, its selector and its template, a
  controller ownerReference (blockOwnerDeletion), the Deployment's annotations and
  `deployment.kubernetes.io/revision` (the old ones' highest + 1), `desired-replicas` and
  `max-replicas`. An old template coming back (a rollback) moves its ReplicaSet to the next
  revision, noting the old one in `revision-history`. The Deployment's own
  `deployment.kubernetes.io/revision` follows the new ReplicaSet's (written through /status).
  A name taken by another template bumps `status.collisionCount` (a new hash).
- **RollingUpdate**: the new ReplicaSet grows while all ReplicaSets' replicas stay within
  `replicas + maxSurge`; old ones shrink, unavailable replicas first, while the available pods
  stay at least `replicas - maxUnavailable` (percentages of `replicas`: surge rounded up,
  unavailable down; both 0 means unavailable 1). **Recreate**: old ReplicaSets go to 0, and
  the new one is created or grown once no old pod runs.
- **Scaling** (`replicas` differs from a ReplicaSet's `desired-replicas`) or `paused`: the one
  active ReplicaSet is resized, or the change is shared out in proportion across them.
- **Old ReplicaSets** beyond `revisionHistoryLimit`, scaled to 0, are deleted, lowest revision
  first, once the rollout is complete.
- **Status** (`/status`): `observedGeneration`, `replicas`, `updatedReplicas`,
  `readyReplicas`, `availableReplicas`, `unavailableReplicas` (zeros left out, as the API
  does) and the conditions `Available` (`MinimumReplicasAvailable` /
  `MinimumReplicasUnavailable`) and `Progressing` (`NewReplicaSetCreated`,
  `FoundNewReplicaSet`, `ReplicaSetUpdated`, `NewReplicaSetAvailable`,
  `ProgressDeadlineExceeded` once `progressDeadlineSeconds` pass without progress,
  `DeploymentPaused` / `DeploymentResumed`), each with `lastUpdateTime` and
  `lastTransitionTime`.

Not simulated: adoption of orphaned ReplicaSets that match the selector, the `ReplicaFailure`
condition, Events.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kubesim.controllers import rollout
from kubesim.controllers.podspec import controller_name, controller_uid
from kubesim.controllers.podstatus import parse_time
from kubesim.controllers.rollout import spec_replicas, status_count
from kubesim.controllers.runtime import Requeue, WorkQueue
from kubesim.controllers.status import Conditions, write_status
from kubesim.store import StoreError
from kubesim.tables import clone

if TYPE_CHECKING:
    from kubesim.clock import Clock
    from kubesim.store import Store, WatchEvent

Obj = dict[str, Any]
Key = tuple[str, str]
MANAGER = "kube-controller-manager"
MERGE = "application/merge-patch+json"
NO_DEADLINE = 2147483647


def _active(rss: list[Obj]) -> list[Obj]:
    return [rs for rs in rss if spec_replicas(rs) > 0]


class DeploymentController:
    def __init__(self, store: Store, clock: Clock) -> None:
        self._store = store
        self._clock = clock
        self.deployments = store.resource("apps", "deployments")
        self.replicasets = store.resource("apps", "replicasets")
        self.pods = store.resource("", "pods")
        self.queue: WorkQueue[Key] = WorkQueue(clock)

    # -- informers -----------------------------------------------------------------------
    def on_deployment_event(self, event: WatchEvent) -> None:
        meta = event.object["metadata"]
        self.queue.add((meta["namespace"], meta["name"]))

    def on_replicaset_event(self, event: WatchEvent) -> None:
        name = controller_name(event.object, "Deployment")
        if name is not None:
            self.queue.add((event.object["metadata"]["namespace"], name))

    def on_pod_event(self, event: WatchEvent) -> None:
        """A Recreate rollout waits for the old pods to be gone."""
        rs_name = controller_name(event.object, "ReplicaSet")
        if event.type != "DELETED" or rs_name is None:
            return
        namespace = event.object["metadata"]["namespace"]
        rs = self._store.get(self.replicasets, namespace, rs_name)
        owner = controller_name(rs, "Deployment") if rs is not None else None
        if owner is not None:
            self.queue.add((namespace, owner))

    # -- reconcile -----------------------------------------------------------------------
    def reconcile(self, key: Key) -> Requeue:
        d = self._store.get(self.deployments, *key)
        if d is None or d["metadata"].get("deletionTimestamp"):
            return None  # garbage collection takes its ReplicaSets and their pods
        uid = d["metadata"]["uid"]
        rss = [
            rs
            for rs in self._store.list(self.replicasets, key[0])
            if controller_uid(rs, "Deployment") == uid
        ]
        rss.sort(key=lambda rs: (rs["metadata"]["creationTimestamp"], rs["metadata"]["name"]))
        self._paused_condition(d)
        if d["spec"].get("paused") or self._scaling_event(d, rss):
            return self._sync(d, rss)
        if (d["spec"].get("strategy") or {}).get("type") == "Recreate":
            return self._recreate(d, rss)
        return self._rolling(d, rss)

    def _has_deadline(self, d: Obj) -> bool:
        return d["spec"].get("progressDeadlineSeconds") not in (None, NO_DEADLINE)

    def _paused_condition(self, d: Obj) -> None:
        if not self._has_deadline(d):
            return
        conds = Conditions(d, self._clock.now_rfc3339())
        reason = (conds.find("Progressing") or {}).get("reason")
        if reason == "ProgressDeadlineExceeded":
            return
        if d["spec"].get("paused") and reason != "DeploymentPaused":
            conds.set("Progressing", "Unknown", "DeploymentPaused", "Deployment is paused")
        elif not d["spec"].get("paused") and reason == "DeploymentPaused":
            conds.set("Progressing", "Unknown", "DeploymentResumed", "Deployment is resumed")
        else:
            return
        self._write_deployment(d, {**(d.get("status") or {}), "conditions": conds.items})

    def _write_deployment(self, d: Obj, status: Obj) -> None:
        written = write_status(self._store, self.deployments, d, status, MANAGER)
        d.clear()
        d.update(written)

    def _scaling_event(self, d: Obj, rss: list[Obj]) -> bool:
        new, old = self._new_and_old(d, rss, create=False)
        for rs in _active([*old, *([new] if new else [])]):
            desired = (rs["metadata"].get("annotations") or {}).get(rollout.DESIRED)
            if desired is not None and desired != str(spec_replicas(d)):
                return True
        return False

    def _sync(self, d: Obj, rss: list[Obj]) -> Requeue:
        """`sync()`: scale only (paused, or `replicas` changed), then the plain status."""
        new, old = self._new_and_old(d, rss, create=False)
        self._scale(d, new, old)
        if d["spec"].get("paused"):
            self._cleanup(d, old)
        status = self._calculate(d, [*old, *([new] if new else [])], new)
        if status != (d.get("status") or {}):
            self._write_deployment(d, status)
        return None

    def _scale(self, d: Obj, new: Obj | None, old: list[Obj]) -> None:
        desired = spec_replicas(d)
        newest_old = sorted(old, key=lambda rs: rs["metadata"]["creationTimestamp"], reverse=True)
        active = _active([*newest_old, *([new] if new else [])])
        if len(active) <= 1:
            target = active[0] if active else new or (newest_old[0] if newest_old else None)
            if target is not None and spec_replicas(target) != desired:
                self._scale_rs(d, target, desired)
            return
        saturated = (
            new is not None
            and (new["metadata"].get("annotations") or {}).get(rollout.DESIRED) == str(desired)
            and status_count(new, "availableReplicas") == desired
            and spec_replicas(new) == desired
        )
        if saturated:
            for rs in _active(old):
                self._scale_rs(d, rs, 0)
            return
        if rollout.rolling(d):
            sizes = rollout.proportional(d, active)
            for rs in active:
                self._scale_rs(d, rs, sizes.get(rs["metadata"]["name"], spec_replicas(rs)))

    def _scale_rs(self, d: Obj, rs: Obj, size: int) -> bool:
        """`scaleReplicaSet`: the new size and the replicas annotations; True if it resized."""
        wanted = {
            rollout.DESIRED: str(spec_replicas(d)),
            rollout.MAX_REPLICAS: str(spec_replicas(d) + rollout.max_surge(d)),
        }
        annotations = rs["metadata"].get("annotations") or {}
        resized = spec_replicas(rs) != size
        if resized or any(annotations.get(k) != v for k, v in wanted.items()):
            patch = {"metadata": {"annotations": wanted}, "spec": {"replicas": size}}
            written = self._store.patch(
                self.replicasets,
                rs["metadata"]["namespace"],
                rs["metadata"]["name"],
                patch,
                content_type=MERGE,
                manager=MANAGER,
            )
            rs.clear()
            rs.update(written)
        return resized

    def _rolling(self, d: Obj, rss: list[Obj]) -> Requeue:
        new, old = self._new_and_old(d, rss, create=True)
        if new is None:
            return 0.0  # a hash collision: try again with the new collisionCount
        everything = [*old, new]
        if self._grow_new(d, everything, new) or self._shrink_old(d, everything, old, new):
            return self._rollout_status(d, everything, new)
        if self._complete(d, d.get("status") or {}):
            self._cleanup(d, old)
        return self._rollout_status(d, everything, new)

    def _grow_new(self, d: Obj, everything: list[Obj], new: Obj) -> bool:
        desired = spec_replicas(d)
        if spec_replicas(new) == desired:
            return False
        if spec_replicas(new) > desired:
            return self._scale_rs(d, new, desired)
        return self._scale_rs(d, new, rollout.new_rs_replicas(d, everything, new))

    def _shrink_old(self, d: Obj, everything: list[Obj], old: list[Obj], new: Obj) -> bool:
        active_old = _active(old)
        if not sum(spec_replicas(rs) for rs in active_old):
            return False
        least = spec_replicas(d) - rollout.max_unavailable(d)
        unavailable_new = spec_replicas(new) - status_count(new, "availableReplicas")
        room = sum(spec_replicas(rs) for rs in everything) - least - unavailable_new
        if room <= 0:
            return False
        by_name = {rs["metadata"]["name"]: rs for rs in active_old}
        changed = False
        for name, size in rollout.unhealthy_cleanup(active_old, room).items():
            changed |= self._scale_rs(d, by_name[name], size)
        for name, size in rollout.old_scale_down(d, everything, active_old).items():
            changed |= self._scale_rs(d, by_name[name], size)
        return changed

    def _recreate(self, d: Obj, rss: list[Obj]) -> Requeue:
        new, old = self._new_and_old(d, rss, create=False)
        scaled = [self._scale_rs(d, rs, 0) for rs in _active(old)]
        if any(scaled) or self._old_pods_running(d, new, old):
            return self._rollout_status(d, [*old, *([new] if new else [])], new)
        if new is None:
            new, old = self._new_and_old(d, rss, create=True)
            if new is None:
                return 0.0
        self._scale_rs(d, new, spec_replicas(d))
        if self._complete(d, d.get("status") or {}):
            self._cleanup(d, old)
        return self._rollout_status(d, [*old, new], new)

    def _old_pods_running(self, d: Obj, new: Obj | None, old: list[Obj]) -> bool:
        if sum(status_count(rs, "replicas") for rs in old):
            return True
        new_uid = new["metadata"]["uid"] if new is not None else None
        old_uids = {rs["metadata"]["uid"] for rs in old}
        for pod in self._store.list(self.pods, d["metadata"]["namespace"]):
            owner = controller_uid(pod, "ReplicaSet")
            phase = (pod.get("status") or {}).get("phase")
            if owner in old_uids and owner != new_uid and phase not in ("Succeeded", "Failed"):
                return True
        return False

    def _cleanup(self, d: Obj, old: list[Obj]) -> None:
        """Delete old ReplicaSets beyond `revisionHistoryLimit` (only those scaled to 0)."""
        limit = d["spec"].get("revisionHistoryLimit")
        alive = [rs for rs in old if not rs["metadata"].get("deletionTimestamp")]
        if limit is None or len(alive) <= int(limit):
            return
        for rs in sorted(alive, key=rollout.revision)[: len(alive) - int(limit)]:
            status = rs.get("status") or {}
            if status.get("replicas") or spec_replicas(rs):
                continue
            if rs["metadata"].get("generation", 1) > status.get("observedGeneration", 0):
                continue
            try:
                self._store.delete(
                    self.replicasets, rs["metadata"]["namespace"], rs["metadata"]["name"]
                )
            except StoreError as exc:
                if exc.code != 404:
                    raise

    # -- the new ReplicaSet --------------------------------------------------------------
    def _new_and_old(self, d: Obj, rss: list[Obj], *, create: bool) -> tuple[Obj | None, list[Obj]]:
        """`getAllReplicaSetsAndSyncRevision`: the new ReplicaSet (created when `create`) with
        its revision and annotations in step, and the old ones."""
        wanted = rollout.without_hash(d["spec"]["template"])
        found = next(
            (rs for rs in rss if rollout.without_hash(rs["spec"]["template"]) == wanted), None
        )
        old = [rs for rs in rss if rs is not found]
        revision = str(max((rollout.revision(rs) for rs in old), default=0) + 1)
        if found is not None:
            self._sync_new(d, found, revision)
            return found, old
        if not create:
            return None, old
        return self._create_new(d, old, revision), old

    def _sync_new(self, d: Obj, rs: Obj, revision: str) -> None:
        updated = clone(rs)
        changed = _set_new_annotations(d, updated, revision, exists=True)
        min_ready = d["spec"].get("minReadySeconds", 0)
        if changed or updated["spec"].get("minReadySeconds", 0) != min_ready:
            patch = {
                "metadata": {"annotations": updated["metadata"]["annotations"]},
                "spec": {"minReadySeconds": min_ready},
            }
            written = self._store.patch(
                self.replicasets,
                rs["metadata"]["namespace"],
                rs["metadata"]["name"],
                patch,
                content_type=MERGE,
                manager=MANAGER,
            )
            rs.clear()
            rs.update(written)
        conds = Conditions(d, self._clock.now_rfc3339())
        revised = _set_revision(d, (rs["metadata"].get("annotations") or {}).get(rollout.REVISION))
        if self._has_deadline(d) and conds.find("Progressing") is None:
            message = f'Found new replica set "{rs["metadata"]["name"]}"'
            conds.set("Progressing", "True", "FoundNewReplicaSet", message)
            revised = True
        if revised:
            self._write_deployment(d, {**(d.get("status") or {}), "conditions": conds.items})

    def _create_new(self, d: Obj, old: list[Obj], revision: str) -> Obj | None:
        meta = d["metadata"]
        status = d.get("status") or {}
        template = clone(d["spec"]["template"])
        digest = rollout.template_hash(template, status.get("collisionCount"))
        labels = {**(template.get("metadata") or {}).get("labels", {}), rollout.HASH_LABEL: digest}
        template.setdefault("metadata", {})["labels"] = labels
        selector = clone(d["spec"]["selector"])
        selector["matchLabels"] = {
            **(selector.get("matchLabels") or {}),
            rollout.HASH_LABEL: digest,
        }
        rs: Obj = {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {
                "name": f"{meta['name']}-{digest}",
                "namespace": meta["namespace"],
                "labels": labels,
                "ownerReferences": [_owner(d)],
            },
            "spec": {
                "replicas": 0,
                "minReadySeconds": d["spec"].get("minReadySeconds", 0),
                "selector": selector,
                "template": template,
            },
        }
        rs["spec"]["replicas"] = rollout.new_rs_replicas(d, [*old, rs], rs)
        _set_new_annotations(d, rs, revision, exists=False)
        try:
            created = self._store.create(self.replicasets, rs, manager=MANAGER)
        except StoreError as exc:
            if exc.code != 409:
                raise
            taken = self._store.get(self.replicasets, meta["namespace"], rs["metadata"]["name"])
            if taken is not None and controller_uid(taken, "Deployment") == meta["uid"]:
                return taken
            collisions = int(status.get("collisionCount") or 0) + 1
            self._write_deployment(d, {**status, "collisionCount": collisions})
            return None
        conds = Conditions(d, self._clock.now_rfc3339())
        _set_revision(d, revision)
        if self._has_deadline(d):
            message = f'Created new replica set "{created["metadata"]["name"]}"'
            conds.set("Progressing", "True", "NewReplicaSetCreated", message)
        self._write_deployment(d, {**status, "conditions": conds.items})
        return created

    # -- status --------------------------------------------------------------------------
    def _calculate(self, d: Obj, everything: list[Obj], new: Obj | None) -> Obj:
        """`calculateStatus`: the counts over the ReplicaSets and the Available condition."""
        available = sum(status_count(rs, "availableReplicas") for rs in everything)
        total = sum(spec_replicas(rs) for rs in everything)
        before = d.get("status") or {}
        counts = {
            "observedGeneration": d["metadata"].get("generation", 1),
            "replicas": sum(status_count(rs, "replicas") for rs in everything),
            "updatedReplicas": status_count(new, "replicas"),
            "readyReplicas": sum(status_count(rs, "readyReplicas") for rs in everything),
            "availableReplicas": available,
            "unavailableReplicas": max(total - available, 0),
            "collisionCount": before.get("collisionCount"),
        }
        status: Obj = {k: v for k, v in counts.items() if v}
        conds = Conditions(d, self._clock.now_rfc3339())
        if available >= spec_replicas(d) - rollout.max_unavailable(d):
            message = "Deployment has minimum availability."
            conds.set("Available", "True", "MinimumReplicasAvailable", message)
        else:
            message = "Deployment does not have minimum availability."
            conds.set("Available", "False", "MinimumReplicasUnavailable", message)
        status["conditions"] = conds.items
        return status

    def _complete(self, d: Obj, status: Obj) -> bool:
        desired = spec_replicas(d)
        return (
            int(status.get("updatedReplicas") or 0) == desired
            and int(status.get("replicas") or 0) == desired
            and int(status.get("availableReplicas") or 0) == desired
            and int(status.get("observedGeneration") or 0) >= d["metadata"].get("generation", 1)
        )

    def _rollout_status(self, d: Obj, everything: list[Obj], new: Obj | None) -> Requeue:
        """`syncRolloutStatus`: the status with the Progressing condition, and when to look
        again for the progress deadline."""
        status = self._calculate(d, everything, new)
        before = d.get("status") or {}
        current = Conditions(d, "").find("Progressing")
        done = (
            int(status.get("replicas") or 0) == int(status.get("updatedReplicas") or 0)
            and current is not None
            and current.get("reason") == "NewReplicaSetAvailable"
        )
        conds = Conditions({"status": status}, self._clock.now_rfc3339())
        subject = (
            f'ReplicaSet "{new["metadata"]["name"]}"'
            if new
            else f'Deployment "{d["metadata"]["name"]}"'
        )
        if self._has_deadline(d) and not done:
            if self._complete(d, status):
                message = f"{subject} has successfully progressed."
                conds.set("Progressing", "True", "NewReplicaSetAvailable", message)
            elif _progressing(before, status):
                message = f"{subject} is progressing."
                conds.replace("Progressing", "True", "ReplicaSetUpdated", message)
            elif self._timed_out(d, conds):
                message = f"{subject} has timed out progressing."
                conds.set("Progressing", "False", "ProgressDeadlineExceeded", message)
        status["conditions"] = conds.items
        if status != before:
            self._write_deployment(d, status)
        return self._stuck_requeue(d, status)

    def _timed_out(self, d: Obj, conds: Conditions) -> bool:
        found = conds.find("Progressing")
        if found is None or found.get("reason") == "NewReplicaSetAvailable":
            return False
        if found.get("reason") == "ProgressDeadlineExceeded":
            return True
        return self._deadline_in(d, found) < 0

    def _deadline_in(self, d: Obj, condition: Obj) -> float:
        updated = parse_time(condition.get("lastUpdateTime")) or self._clock.now()
        return updated + int(d["spec"]["progressDeadlineSeconds"]) - self._clock.now()

    def _stuck_requeue(self, d: Obj, status: Obj) -> Requeue:
        """`requeueStuckDeployment`: look again a second after the deadline would pass."""
        found = Conditions({"status": status}, "").find("Progressing")
        if not self._has_deadline(d) or found is None or self._complete(d, status):
            return None
        if found.get("reason") in ("ProgressDeadlineExceeded", "NewReplicaSetAvailable"):
            return None
        return max(self._deadline_in(d, found), 0.0) + 1.0


def _progressing(before: Obj, after: Obj) -> bool:
    """`DeploymentProgressing`: more updated, ready or available pods, or fewer old ones."""

    def count(status: Obj, field: str) -> int:
        return int(status.get(field) or 0)

    old_before = count(before, "replicas") - count(before, "updatedReplicas")
    old_after = count(after, "replicas") - count(after, "updatedReplicas")
    return (
        count(after, "updatedReplicas") > count(before, "updatedReplicas")
        or old_after < old_before
        or count(after, "readyReplicas") > count(before, "readyReplicas")
        or count(after, "availableReplicas") > count(before, "availableReplicas")
    )


def _owner(d: Obj) -> Obj:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": d["metadata"]["name"],
        "uid": d["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _set_revision(d: Obj, revision: str | None) -> bool:
    """`SetDeploymentRevision` (in memory; written with the status)."""
    annotations = d["metadata"].setdefault("annotations", {})
    if revision is None or annotations.get(rollout.REVISION) == revision:
        return False
    annotations[rollout.REVISION] = revision
    return True


def _set_new_annotations(d: Obj, rs: Obj, revision: str, *, exists: bool) -> bool:
    """`SetNewReplicaSetAnnotations`: the Deployment's annotations copied, the revision raised
    to `revision` (the previous one kept in `revision-history`), and on create the replicas
    annotations. True when anything changed."""
    annotations = rs["metadata"].setdefault("annotations", {})
    changed = False
    for key, value in (d["metadata"].get("annotations") or {}).items():
        if key not in rollout.NOT_COPIED and annotations.get(key) != value:
            annotations[key] = value
            changed = True
    previous = annotations.get(rollout.REVISION)
    if int(previous or 0) < int(revision):
        annotations[rollout.REVISION] = revision
        changed = True
        if previous is not None:
            history = annotations.get(rollout.REVISION_HISTORY)
            annotations[rollout.REVISION_HISTORY] = f"{history},{previous}" if history else previous
    if not exists:
        desired = spec_replicas(d)
        annotations[rollout.DESIRED] = str(desired)
        annotations[rollout.MAX_REPLICAS] = str(desired + rollout.max_surge(d))
        changed = True
    return changed
