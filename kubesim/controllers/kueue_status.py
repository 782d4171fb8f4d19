"""Kueue's queue controllers: keep the QuotaBook's picture of ClusterQueues, LocalQueues,
ResourceFlavors and Namespaces, and write ClusterQueue and LocalQueue `status`.

ClusterQueue status (v1beta2 names, from the CRD): `flavorsReservation` and `flavorsUsage`
(equal here: no admission checks, so every reservation is an admission), `admittedWorkloads`,
`reservingWorkloads`, `pendingWorkloads` and condition `Active` (False, reason
`FlavorNotFound`, while a referenced ResourceFlavor is missing). LocalQueue status likewise,
with `Active` False reason `ClusterQueueDoesNotExist` when its ClusterQueue is missing.
Status writes are coalesced: a burst of admissions costs one write per queue.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from kubesim.controllers import conditions
from kubesim.controllers.kueue_api import KUEUE_MANAGER, MERGE
from kubesim.controllers.quantity import format_resource
from kubesim.controllers.runtime import Requeue, WorkQueue
from kubesim.store import StoreError

if TYPE_CHECKING:
    from collections import Counter
    from collections.abc import Callable

    from kubesim.clock import Clock
    from kubesim.controllers.quota import QuotaBook, WlKey
    from kubesim.store import Store, WatchEvent

log = logging.getLogger("kubesim.kueue")
Obj = dict[str, Any]
StatusKey = tuple[str, str, str]  # ("cq", "", name) or ("lq", namespace, name)


class QueueStatus:
    def __init__(
        self, store: Store, clock: Clock, book: QuotaBook, on_config: Callable[[WatchEvent], None]
    ) -> None:
        """`on_config` is called after the book has taken in a configuration change."""
        self._store = store
        self._clock = clock
        self._book = book
        self._on_config = on_config
        self.cqs = store.resource("kueue.x-k8s.io", "clusterqueues")
        self.lqs = store.resource("kueue.x-k8s.io", "localqueues")
        self.queue: WorkQueue[StatusKey] = WorkQueue(clock)

    # -- informers -----------------------------------------------------------------------
    def on_cluster_queue(self, event: WatchEvent) -> None:
        name = event.object["metadata"]["name"]
        if event.type == "DELETED":
            self._book.cluster_queues.pop(name, None)
        else:
            self._book.cluster_queues[name] = event.object
            self.queue.add(("cq", "", name))
        self._touch_local_queues(name)
        self._on_config(event)

    def on_local_queue(self, event: WatchEvent) -> None:
        meta = event.object["metadata"]
        key = (meta["namespace"], meta["name"])
        if event.type == "DELETED":
            self._book.local_queues.pop(key, None)
        else:
            self._book.local_queues[key] = event.object
            self.queue.add(("lq", *key))
        cq = (event.object.get("spec") or {}).get("clusterQueue")
        if cq:
            self.queue.add(("cq", "", cq))
        self._on_config(event)

    def on_flavor(self, event: WatchEvent) -> None:
        name = event.object["metadata"]["name"]
        if event.type == "DELETED":
            self._book.flavors.pop(name, None)
        else:
            self._book.flavors[name] = event.object
        self.queue.add_all(("cq", "", cq) for cq in sorted(self._book.cluster_queues))
        self._on_config(event)

    def on_namespace(self, event: WatchEvent) -> None:
        meta = event.object["metadata"]
        if event.type == "DELETED":
            self._book.namespaces.pop(meta["name"], None)
        else:
            labels = dict(meta.get("labels") or {})
            labels.setdefault("kubernetes.io/metadata.name", meta["name"])
            self._book.namespaces[meta["name"]] = labels
        self._on_config(event)

    def changed(self, cq: str | None, lq: WlKey | None) -> None:
        """Usage or pending counts of these queues changed."""
        if cq:
            self.queue.add(("cq", "", cq))
        if lq:
            self.queue.add(("lq", *lq))

    def _touch_local_queues(self, cq: str) -> None:
        for key, lq in self._book.local_queues.items():
            if (lq.get("spec") or {}).get("clusterQueue") == cq:
                self.queue.add(("lq", *key))

    # -- reconcile -----------------------------------------------------------------------
    def reconcile(self, key: StatusKey) -> Requeue:
        kind, namespace, name = key
        if kind == "cq":
            self._cluster_queue(name)
        else:
            self._local_queue((namespace, name))
        return None

    def _flavor_lists(
        self, cq_name: str, used: Counter[tuple[str, str]], *, borrowed: bool
    ) -> list[Obj]:
        cq = self._book.cluster_queues.get(cq_name) or {}
        out = []
        for group in (cq.get("spec") or {}).get("resourceGroups") or []:
            for flavor in group.get("flavors") or []:
                resources = []
                for resource in group.get("coveredResources") or []:
                    entry: Obj = {
                        "name": resource,
                        "total": format_resource(resource, used[(flavor["name"], resource)]),
                    }
                    if borrowed:
                        entry["borrowed"] = "0"
                    resources.append(entry)
                out.append({"name": flavor["name"], "resources": resources})
        return out

    def _cluster_queue(self, name: str) -> None:
        cq = self._store.get(self.cqs, None, name)
        if cq is None:
            return
        book = self._book
        admitted = book.admitted_count(cq=name)
        pending = book.pending_count(cq=name)
        flavors = self._flavor_lists(name, book.used(name), borrowed=True)
        conds = [dict(c) for c in (cq.get("status") or {}).get("conditions") or []]
        missing = book.missing_flavors(name)
        now = self._clock.now_rfc3339()
        generation = cq["metadata"].get("generation")
        if missing:
            conditions.set_condition(
                conds,
                "Active",
                False,
                "FlavorNotFound",
                f"Can't admit new workloads: references missing ResourceFlavor(s): {missing}.",
                now,
                observed_generation=generation,
            )
        else:
            conditions.set_condition(
                conds,
                "Active",
                True,
                "Ready",
                "Can admit new workloads",
                now,
                observed_generation=generation,
            )
        self._write(
            self.cqs,
            None,
            name,
            cq,
            {
                "flavorsReservation": flavors,
                "flavorsUsage": flavors,
                "admittedWorkloads": admitted,
                "reservingWorkloads": admitted,
                "pendingWorkloads": pending,
                "conditions": conds,
            },
        )

    def _local_queue(self, key: WlKey) -> None:
        lq = self._store.get(self.lqs, *key)
        if lq is None:
            return
        book = self._book
        cq_name = (lq.get("spec") or {}).get("clusterQueue", "")
        used = book.used_by_local_queue(key)
        admitted = book.admitted_count(lq=key)
        pending = book.pending_count(lq=key)
        flavors = self._flavor_lists(cq_name, used, borrowed=False)
        conds = [dict(c) for c in (lq.get("status") or {}).get("conditions") or []]
        now = self._clock.now_rfc3339()
        generation = lq["metadata"].get("generation")
        if cq_name in book.cluster_queues:
            conditions.set_condition(
                conds,
                "Active",
                True,
                "Ready",
                "Can submit new workloads to localQueue",
                now,
                observed_generation=generation,
            )
        else:
            conditions.set_condition(
                conds,
                "Active",
                False,
                "ClusterQueueDoesNotExist",
                "Can't submit new workloads to clusterQueue",
                now,
                observed_generation=generation,
            )
        self._write(
            self.lqs,
            key[0],
            key[1],
            lq,
            {
                "flavorsReservation": flavors,
                "flavorsUsage": flavors,
                "admittedWorkloads": admitted,
                "reservingWorkloads": admitted,
                "pendingWorkloads": pending,
                "conditions": conds,
            },
        )

    def _write(self, rt: Any, namespace: str | None, name: str, obj: Obj, status: Obj) -> None:
        current = obj.get("status") or {}
        patch = {k: v for k, v in status.items() if current.get(k) != v}
        if not patch:
            return
        try:
            self._store.patch(
                rt,
                namespace,
                name,
                {"status": patch},
                content_type=MERGE,
                manager=KUEUE_MANAGER,
                subresource="status",
            )
        except StoreError as exc:
            if exc.code != 404:
                raise
