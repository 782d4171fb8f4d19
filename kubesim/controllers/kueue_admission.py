"""Kueue's scheduler: admits pending Workloads into their ClusterQueue's quota.

Workloads wait per ClusterQueue, ordered by priority, then creation (in whole seconds, as
stored), then uid, as Kueue orders them (kubesim's uids rise in creation order). BestEffortFIFO:
one that does not fit is passed over and later ones may go first; StrictFIFO: the head blocks
the queue.
A cycle for a ClusterQueue runs whenever something that could change its answer happens: a
Workload arrives or leaves, quota is released, or a ClusterQueue, LocalQueue, ResourceFlavor or
Namespace changes (so a raised `nominalQuota` admits waiting Workloads).

Admission is Kueue's server-side apply of the Workload's `/status` as `kueue-admission`
(`status.admission`, `QuotaReserved=True`, `Admitted=True`); starting the Job is the job
integration's business (`kueue_jobs.py`), reacting to that write. Not admitted →
`QuotaReserved=False` reason `Pending` with the flavor assigner's message, or reason
`Inadmissible` when the LocalQueue or ClusterQueue does not exist or is inactive.
"""

from __future__ import annotations

import itertools
import logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections import Counter
    from collections.abc import Iterable

from kubesim.controllers import conditions
from kubesim.controllers.kueue_api import (
    apply_status,
    is_admitted,
    is_finished,
    owned_status,
)
from kubesim.controllers.kueue_pods_ready import requeue_at
from kubesim.controllers.kueue_preemption import choose_victims, evict, readmitted
from kubesim.controllers.podspec import controller_name
from kubesim.controllers.quantity import parse_milli
from kubesim.controllers.quota import (
    Admission,
    FlavorResource,
    Pending,
    QuotaBook,
    Usage,
    WlKey,
    demands_of,
    selector_matches,
)
from kubesim.controllers.runtime import Requeue, WorkQueue

if TYPE_CHECKING:
    from collections.abc import Callable

    from kubesim.clock import Clock
    from kubesim.store import Store, WatchEvent

log = logging.getLogger("kubesim.kueue")
Obj = dict[str, Any]
NO_QUEUE = ""  # the work key for Workloads whose LocalQueue does not exist
NAMESPACE_MISMATCH = "Workload namespace doesn't match ClusterQueue selector"


class KueueScheduler:
    def __init__(
        self,
        store: Store,
        clock: Clock,
        book: QuotaBook,
        on_change: Callable[[str | None, WlKey | None], None],
    ) -> None:
        """`on_change(cq, lq)` is told whenever a queue's usage or pending count changed."""
        self._store = store
        self._clock = clock
        self._book = book
        self._on_change = on_change
        self.workloads = store.resource("kueue.x-k8s.io", "workloads")
        self.queue: WorkQueue[str] = WorkQueue(clock)
        self._seq = itertools.count()

    # -- informers -----------------------------------------------------------------------
    def on_workload_event(self, event: WatchEvent) -> None:
        wl = event.object
        meta = wl["metadata"]
        key = (meta["namespace"], meta["name"])
        lq_name = (wl.get("spec") or {}).get("queueName", "")
        if event.type == "DELETED" or meta.get("deletionTimestamp") or is_finished(wl):
            self._forget(key)
            return
        status = wl.get("status") or {}
        admission = status.get("admission")
        if admission and conditions.is_true(status.get("conditions"), "QuotaReserved"):
            if self._book.pop_pending(key) is not None:
                self._on_change(admission.get("clusterQueue"), (key[0], lq_name))
            usage = _usage_of(admission, (key[0], lq_name))
            known = self._book.usage.get(key)
            usage.priority = int((wl.get("spec") or {}).get("priority") or 0)
            usage.admitted_at = known.admitted_at if known else self._clock.now()
            usage.evicted = conditions.is_true(status.get("conditions"), "Evicted")
            self._book.put_usage(key, usage)
            return
        released = self._book.pop_usage(key)  # evicted: its quota is free again
        if released is not None:
            self._on_change(released.cluster_queue, released.local_queue)
            self.queue.add(released.cluster_queue)
        if not _queueable(wl, self._clock.now()):
            self._forget(key)  # deactivated, or waiting out a readiness back-off
            return
        reserved = conditions.find(status.get("conditions"), "QuotaReserved")
        message = reserved.get("message") if reserved and reserved["status"] == "False" else None
        old = self._book.pending.get(key)
        entry = Pending(
            key,
            lq_name,
            int((wl.get("spec") or {}).get("priority") or 0),
            meta.get("creationTimestamp", ""),
            old.seq if old else next(self._seq),
            demands_of(wl),
            message,
            uid=meta.get("uid", ""),
        )
        self._book.put_pending(entry)
        # A change of status only (e.g. our own Pending message) needs no new cycle: that
        # would make every pending write trigger a pass over every pending Workload.
        if (
            old is None
            or old.order() != entry.order()
            or old.local_queue != entry.local_queue
            or old.podsets != entry.podsets
        ):
            self._enqueue_for(entry)
            self._on_change(self._book.cluster_queue_of(key[0], lq_name), (key[0], lq_name))

    def on_config_event(self, _event: WatchEvent) -> None:
        """Any ClusterQueue, LocalQueue, ResourceFlavor or Namespace change: re-evaluate all."""
        self.queue.add(NO_QUEUE)
        self.queue.add_all(sorted(self._book.cluster_queues))

    def _forget(self, key: WlKey) -> None:
        pending = self._book.pop_pending(key)
        if pending is not None:
            self._on_change(
                self._book.cluster_queue_of(key[0], pending.local_queue),
                (key[0], pending.local_queue),
            )
        released = self._book.pop_usage(key)
        if released is not None:
            self._on_change(released.cluster_queue, released.local_queue)
            self.queue.add(released.cluster_queue)

    def _enqueue_for(self, entry: Pending) -> None:
        cq = self._book.cluster_queue_of(entry.key[0], entry.local_queue)
        self.queue.add(NO_QUEUE if cq is None else cq)

    # -- cycles --------------------------------------------------------------------------
    def reconcile(self, cq_name: str) -> Requeue:
        book = self._book
        if cq_name == NO_QUEUE:
            for entry in book.pending_without_queue():
                self._mark(entry, "Inadmissible", f"LocalQueue {entry.local_queue} doesn't exist")
            return None
        entries = book.pending_in(cq_name)
        cq = book.cluster_queues.get(cq_name)
        if cq is None or book.missing_flavors(cq_name) or _stopped(cq):
            why = "doesn't exist" if cq is None else "is inactive"
            for entry in entries:
                self._mark(entry, "Inadmissible", f"ClusterQueue {cq_name} {why}")
            return None
        self._cycle(cq_name, cq, entries)
        return None

    def _cycle(self, cq_name: str, cq: Obj, entries: Iterable[Pending]) -> None:
        """One pass over the ClusterQueue's pending Workloads, in order.

        Cheap per entry on purpose (a full queue may hold 10,000): the flavor assigner's
        answer is reused for every Workload with the same signature until an admission
        changes the free quota, and once nothing is free the ordered pass stops; only
        Workloads requesting nothing could still fit, and newcomers are told why they wait."""
        book = self._book
        spec = cq.get("spec") or {}
        strict = spec.get("queueingStrategy") == "StrictFIFO"
        nominal = book.nominal(cq_name)
        used = book.used(cq_name)
        failed: dict[tuple[object, ...], str] = {}
        preempts = (spec.get("preemption") or {}).get("withinClusterQueue", "Never") != "Never"
        full = False
        for entry in entries:
            if full and entry.requests_anything:
                if not book.pending_requesting_nothing:
                    break
                continue
            if not self._namespace_selected(spec, entry):
                continue
            result = failed.get(entry.signature) or book.assign(cq_name, entry, used)
            if isinstance(result, str):
                failed[entry.signature] = result
                self._mark(entry, "Pending", result)
                victims = choose_victims(book, cq_name, cq, entry, used) if preempts else None
                for victim in victims or ():
                    self._evict(victim, entry)
                if strict:
                    return
                full = not preempts and all(used[fr] >= q for fr, q in nominal.items())
                continue
            if self._admit(entry, result):
                used.update(result.usage)
                failed.clear()  # what failed before may not fail in a different way now
        if full:
            self._explain(cq_name, spec, failed, used)

    def _namespace_selected(self, spec: Obj, entry: Pending) -> bool:
        labels = self._book.namespace_labels(entry.key[0])
        if selector_matches(spec.get("namespaceSelector"), labels):
            return True
        self._mark(entry, "Pending", NAMESPACE_MISMATCH)
        return False

    def _explain(
        self,
        cq_name: str,
        spec: Obj,
        failed: dict[tuple[object, ...], str],
        used: Counter[FlavorResource],
    ) -> None:
        """Tell the ClusterQueue's newcomers, which a full queue's pass did not reach, why
        they wait (Kueue's head-of-queue evaluation would reach each of them in turn)."""
        book = self._book
        for key in list(book.unexplained):
            entry = book.pending.get(key)
            if entry is None or book.cluster_queue_of(key[0], entry.local_queue) != cq_name:
                continue
            if not self._namespace_selected(spec, entry):
                continue
            result = failed.get(entry.signature) or book.assign(cq_name, entry, used)
            if isinstance(result, str):
                failed[entry.signature] = result
                self._mark(entry, "Pending", result)
            else:
                self.queue.add(cq_name)  # it fits after all: admit it in order, next cycle

    def _evict(self, victim: WlKey, preemptor: Pending) -> None:
        workload = self._store.get(self.workloads, *victim)
        preempting = self._store.get(self.workloads, *preemptor.key)
        if workload is None or preempting is None or not is_admitted(workload):
            return
        evict(self._store, self.workloads, self._clock, workload, preempting)
        self._book.usage[victim].evicted = True  # its quota is now on its way back

    def _mark(self, entry: Pending, reason: str, message: str) -> None:
        if entry.message == message:
            return
        self._book.unexplained.discard(entry.key)
        wl = self._store.get(self.workloads, *entry.key)
        if wl is None or is_admitted(wl) or is_finished(wl):
            return
        status = owned_status(wl)
        status.pop("admission", None)
        changed = conditions.set_condition(
            status["conditions"],
            "QuotaReserved",
            False,
            reason,
            message,
            self._clock.now_rfc3339(),
            observed_generation=wl["metadata"].get("generation"),
        )
        if changed:
            apply_status(self._store, self.workloads, wl, status)
        entry.message = message
        self._book.unexplained.discard(entry.key)

    def _admit(self, entry: Pending, admission: Admission) -> bool:
        wl = self._store.get(self.workloads, *entry.key)
        if wl is None or is_finished(wl) or wl["metadata"].get("deletionTimestamp"):
            self._book.pop_pending(entry.key)
            return False
        now = self._clock.now_rfc3339()
        generation = wl["metadata"].get("generation")
        status = owned_status(wl)
        status["admission"] = {
            "clusterQueue": admission.cluster_queue,
            "podSetAssignments": admission.podset_assignments,
        }
        conds = status["conditions"]
        conditions.set_condition(
            conds,
            "QuotaReserved",
            True,
            "QuotaReserved",
            f"Quota reserved in ClusterQueue {admission.cluster_queue}",
            now,
            observed_generation=generation,
        )
        readmitted(conds, now, generation)
        conditions.set_condition(
            conds,
            "Admitted",
            True,
            "Admitted",
            "The workload is admitted",
            now,
            observed_generation=generation,
        )
        apply_status(self._store, self.workloads, wl, status)
        self._book.pop_pending(entry.key)
        lq = (entry.key[0], entry.local_queue)
        # The priority and admission time now, not when the watch event comes back: a cycle
        # in between must not see a priority-0 victim (it let a requeued low workload preempt
        # the high one that had just preempted it, and so on, while real Kueue admits it).
        usage = Usage(admission.cluster_queue, lq, admission.usage, priority=entry.priority)
        usage.admitted_at = self._clock.now()
        self._book.put_usage(entry.key, usage)
        self._on_change(admission.cluster_queue, lq)
        return True


def _queueable(wl: Obj, now: float) -> bool:
    """Active, and past any `requeueState.requeueAt` once `Requeued` again. A pod's evicted
    Workload (`Requeued=False`, no back-off) is never queued again: it dies with its pod."""
    if (wl.get("spec") or {}).get("active") is False:
        return False
    conds = (wl.get("status") or {}).get("conditions")
    requeued = conditions.find(conds, "Requeued")
    if requeued is None or requeued.get("status") == "True":
        return True
    return requeue_at(wl) is None and controller_name(wl, "Pod") is None


def _stopped(cq: Obj) -> bool:
    return (cq.get("spec") or {}).get("stopPolicy", "None") not in ("None", None)


def _usage_of(admission: Obj, local_queue: WlKey) -> Usage:
    from collections import Counter

    amounts: Counter[tuple[str, str]] = Counter()
    for assignment in admission.get("podSetAssignments") or []:
        flavors = assignment.get("flavors") or {}
        for resource, quantity in (assignment.get("resourceUsage") or {}).items():
            if resource in flavors:
                try:
                    amounts[(flavors[resource], resource)] += parse_milli(quantity)
                except ValueError:
                    continue
    return Usage(str(admission.get("clusterQueue", "")), local_queue, amounts)
