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
from kubesim.controllers.deployment_status import (
    calculate,
    complete,
    has_deadline,
    rollout_status,
    stuck_requeue,
)
from kubesim.controllers.podspec import controller_name, controller_uid
from kubesim.controllers.rollout import spec_replicas, status_count
from kubesim.controllers.runtime import Requeue, WorkQueue
from kubesim.controllers.status import Conditions, write_status
from kubesim.selectors import format_label_selector
from kubesim.store import StoreError
from kubesim.tables import clone

if TYPE_CHECKING:
    from kubesim.clock import Clock
    from kubesim.store import Store, WatchEvent

Obj = dict[str, Any]
Key = tuple[str, str]
MANAGER = "kube-controller-manager"
MERGE = "application/merge-patch+json"


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

    def _paused_condition(self, d: Obj) -> None:
        if not has_deadline(d):
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
        status = calculate(d, [*old, *([new] if new else [])], new, self._clock.now_rfc3339())
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
            return self._rollout(d, everything, new)
        if complete(d, d.get("status") or {}):
            self._cleanup(d, old)
        return self._rollout(d, everything, new)

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
            return self._rollout(d, [*old, *([new] if new else [])], new)
        if new is None:
            new, old = self._new_and_old(d, rss, create=True)
            if new is None:
                return 0.0
        self._scale_rs(d, new, spec_replicas(d))
        if complete(d, d.get("status") or {}):
            self._cleanup(d, old)
        return self._rollout(d, [*old, new], new)

    def _old_pods_running(self, d: Obj, new: Obj | None, old: list[Obj]) -> bool:
        if sum(status_count(rs, "replicas") for rs in old):
            return True
        new_uid = new["metadata"]["uid"] if new is not None else None
        old_uids = {rs["metadata"]["uid"] for rs in old}
        selector = format_label_selector(d["spec"].get("selector"))
        for pod in self._store.list(self.pods, d["metadata"]["namespace"], label_selector=selector):
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
        changed = rollout.set_new_annotations(d, updated, revision, exists=True)
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
        revised = rollout.set_revision(
            d, (rs["metadata"].get("annotations") or {}).get(rollout.REVISION)
        )
        if has_deadline(d) and conds.find("Progressing") is None:
            message = f'Found new replica set "{rs["metadata"]["name"]}"'
            conds.set("Progressing", "True", "FoundNewReplicaSet", message)
            revised = True
        if revised:
            self._write_deployment(d, {**(d.get("status") or {}), "conditions": conds.items})

    def _create_new(self, d: Obj, old: list[Obj], revision: str) -> Obj | None:
        meta = d["metadata"]
        status = d.get("status") or {}
        template = clone(d["spec"]["template"])
        digest = rollout.template_hash(rollout.without_hash(template), status.get("collisionCount"))
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
        rollout.set_new_annotations(d, rs, revision, exists=False)
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
        rollout.set_revision(d, revision)
        if has_deadline(d):
            message = f'Created new replica set "{created["metadata"]["name"]}"'
            conds.set("Progressing", "True", "NewReplicaSetCreated", message)
        self._write_deployment(d, {**status, "conditions": conds.items})
        return created

    def _rollout(self, d: Obj, everything: list[Obj], new: Obj | None) -> Requeue:
        """Write the rollout's status; when to look again for the progress deadline."""
        now = self._clock.now()
        status = rollout_status(d, everything, new, now, self._clock.now_rfc3339())
        if status != (d.get("status") or {}):
            self._write_deployment(d, status)
        return stuck_requeue(d, status, now)


def _owner(d: Obj) -> Obj:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": d["metadata"]["name"],
        "uid": d["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
