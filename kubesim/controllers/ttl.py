"""The TTL-after-finished controller: deletes a finished Job `ttlSecondsAfterFinished` simulated
seconds after it finished (`completionTime`, or the `Failed` condition's transition time), with
propagation Foreground as the real controller does, so its pods go with it."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from kubesim.controllers import conditions
from kubesim.controllers.runtime import Requeue, WorkQueue
from kubesim.store import StoreError

if TYPE_CHECKING:
    from kubesim.clock import Clock
    from kubesim.store import Store, WatchEvent

Obj = dict[str, Any]
Key = tuple[str, str]


def finished_at(job: Obj) -> float | None:
    """When the Job finished, in epoch seconds, or None while it has not."""
    status = job.get("status") or {}
    conds = status.get("conditions")
    if conditions.is_true(conds, "Complete"):
        stamp = status.get("completionTime")
    elif conditions.is_true(conds, "Failed"):
        stamp = (conditions.find(conds, "Failed") or {}).get("lastTransitionTime")
    else:
        return None
    if not stamp:
        return None
    return datetime.strptime(str(stamp), "%Y-%m-%dT%H:%M:%S%z").timestamp()


class TtlController:
    def __init__(self, store: Store, clock: Clock) -> None:
        self._store = store
        self._clock = clock
        self.jobs = store.resource("batch", "jobs")
        self.queue: WorkQueue[Key] = WorkQueue(clock)

    def on_job_event(self, event: WatchEvent) -> None:
        job = event.object
        if event.type == "DELETED":
            return
        if (job.get("spec") or {}).get("ttlSecondsAfterFinished") is not None:
            self.queue.add((job["metadata"]["namespace"], job["metadata"]["name"]))

    def reconcile(self, key: Key) -> Requeue:
        job = self._store.get(self.jobs, *key)
        if job is None or job["metadata"].get("deletionTimestamp"):
            return None
        ttl = job["spec"].get("ttlSecondsAfterFinished")
        finished = finished_at(job)
        if ttl is None or finished is None:
            return None
        remaining = finished + int(ttl) - self._clock.now()
        if remaining > 0:
            return remaining
        try:
            self._store.delete(self.jobs, *key, propagation_policy="Foreground")
        except StoreError as exc:
            if exc.code != 404:
                raise
        return None
