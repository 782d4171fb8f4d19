"""Kueue's all-or-nothing start (`waitForPodsReady`), after its Workload controller
(`reconcileNotReadyTimeout`).

Once a Workload is admitted it must have every pod of its pod sets ready (or succeeded) within
`timeout` of its `Admitted` condition:

- while it waits: `PodsReady=False` reason `WaitForStart`, "Not all pods are ready or
  succeeded"; once they are: `PodsReady=True` reason `Started`, "All pods reached readiness and
  the workload is running";
- past the timeout: `status.requeueState.count` goes up by one and `requeueAt` is set
  `backoffBaseSeconds * 2^(count-1)` later (capped at `backoffMaxSeconds`), and the Workload is
  evicted: `Evicted=True` reason `PodsReadyTimeout`, "Exceeded the PodsReady timeout ns/name".
  The job integration then suspends the Job (its pods go) and, once no pod is left, clears the
  admission: `QuotaReserved=False` (`Pending`), `Admitted=False`, `Requeued=False`
  (`PodsReadyTimeout`) until `requeueAt`, then `Requeued=True` (`BackoffFinished`, "The
  workload backoff was finished") and it queues again;
- a pod's own Workload (Kueue's pod integration, `kueue_pods.py`) is ready when its pod is
  `Ready`; evicted, its pod is deleted at once and the Workload is not requeued (it finishes
  with the pod);
- when one more requeue would pass `backoffLimitCount`, the Workload is deactivated instead:
  `spec.active=false`, `Evicted=True` reason `Deactivated`, "The workload is deactivated due to
  exceeding the maximum number of re-queuing retries", `requeueState` cleared; it is never
  admitted again (Kueue passes through a `DeactivationTarget` condition first).

Not simulated: `blockAdmission`, `recoveryTimeout` (WaitForRecovery), the `Creation` timestamp
of the requeuing strategy (requeued Workloads keep their place by creation time, as here
anyway), the jitter of the back-off.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from kubesim.controllers import conditions
from kubesim.controllers.kueue_api import (
    KUEUE_MANAGER,
    MERGE,
    apply_status,
    is_admitted,
    is_finished,
    owned_status,
    workload_name,
)
from kubesim.controllers.kueue_pod_webhook import MANAGED_LABEL
from kubesim.controllers.kueue_pods import pod_workload_name
from kubesim.controllers.podspec import controller_name
from kubesim.controllers.runtime import Requeue, WorkQueue

if TYPE_CHECKING:
    from kubesim.clock import Clock
    from kubesim.store import Store, WatchEvent

Obj = dict[str, Any]
Key = tuple[str, str]
TIMEOUT_ENV = "KUBESIM_WAIT_FOR_PODS_READY_SECONDS"
NOT_READY = "Not all pods are ready or succeeded"
READY = "All pods reached readiness and the workload is running"
BACKOFF_FINISHED = "The workload backoff was finished"
DEACTIVATED = (
    "The workload is deactivated due to exceeding the maximum number of re-queuing retries"
)


@dataclass(frozen=True)
class WaitForPodsReady:
    """Kueue's Configuration `waitForPodsReady` (seconds where Kueue takes durations)."""

    enable: bool = True
    timeout: float = 300.0  # Kueue's default, 5m
    backoff_base_seconds: int = 60
    backoff_max_seconds: int = 3600
    backoff_limit_count: int | None = None  # None: requeued for ever, as in Kueue

    @classmethod
    def from_env(cls) -> WaitForPodsReady:
        """The default, with `KUBESIM_WAIT_FOR_PODS_READY_SECONDS` as the timeout (0: off)."""
        value = os.environ.get(TIMEOUT_ENV)
        if not value:
            return cls()
        seconds = float(value)
        return cls(enable=seconds > 0, timeout=max(seconds, 0.0))


def _epoch(value: str | None) -> float | None:
    if not value:
        return None
    return datetime.strptime(value, "%Y-%m-%dT%H:%M:%S%z").timestamp()


def _rfc3339(epoch: float) -> str:
    return datetime.fromtimestamp(int(epoch), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def requeue_at(workload: Obj) -> float | None:
    """When a Workload evicted for readiness may queue again (None: no back-off)."""
    state = (workload.get("status") or {}).get("requeueState") or {}
    return _epoch(state.get("requeueAt"))


class PodsReadyController:
    def __init__(self, store: Store, clock: Clock, config: WaitForPodsReady) -> None:
        self._store = store
        self._clock = clock
        self.config = config
        self.workloads = store.resource("kueue.x-k8s.io", "workloads")
        self.jobs = store.resource("batch", "jobs")
        self.pods = store.resource("", "pods")
        self.queue: WorkQueue[Key] = WorkQueue(clock)

    def on_workload_event(self, event: WatchEvent) -> None:
        if self.config.enable and event.type != "DELETED":
            meta = event.object["metadata"]
            self.queue.add((meta["namespace"], meta["name"]))

    def on_job_event(self, event: WatchEvent) -> None:
        meta = event.object["metadata"]
        if self.config.enable and event.type != "DELETED":
            self.queue.add((meta["namespace"], workload_name(meta["name"], meta["uid"])))

    def on_pod_event(self, event: WatchEvent) -> None:
        """A pod of Kueue's pod integration: its own Workload's readiness may have changed."""
        meta = event.object["metadata"]
        managed = (meta.get("labels") or {}).get(MANAGED_LABEL) == "true"
        if self.config.enable and managed and event.type != "DELETED":
            self.queue.add((meta["namespace"], pod_workload_name(meta["name"], meta["uid"])))

    def reconcile(self, key: Key) -> Requeue:
        wl = self._store.get(self.workloads, *key)
        if wl is None or is_finished(wl) or wl["metadata"].get("deletionTimestamp"):
            return None
        if (wl.get("spec") or {}).get("active") is False:
            return None
        conds = (wl.get("status") or {}).get("conditions") or []
        if not is_admitted(wl):
            return self._end_backoff(wl)
        if conditions.is_true(conds, "Evicted"):
            return None
        ready = self._pods_ready(wl)
        if ready is None:
            return None
        self._set_pods_ready(wl, ready)
        if ready:
            return None
        admitted = conditions.find(conds, "Admitted") or {}
        since = _epoch(admitted.get("lastTransitionTime")) or self._clock.now()
        left = since + self.config.timeout - self._clock.now()
        if left > 0:
            return left
        self._evict(key, wl)
        return None

    def _pods_ready(self, wl: Obj) -> bool | None:
        """Whether the Job has as many ready or succeeded pods as the pod sets count; for a
        pod's own Workload, whether that pod is `Ready` (Kueue's Pod.PodsReady)."""
        pod_name = controller_name(wl, "Pod")
        if pod_name is not None:
            pod = self._store.get(self.pods, wl["metadata"]["namespace"], pod_name)
            if pod is None:
                return None
            return conditions.is_true((pod.get("status") or {}).get("conditions"), "Ready")
        name = controller_name(wl, "Job")
        job = self._store.get(self.jobs, wl["metadata"]["namespace"], name) if name else None
        if job is None:
            return None
        want = sum(int(p.get("count") or 0) for p in (wl.get("spec") or {}).get("podSets") or [])
        status = job.get("status") or {}
        return int(status.get("ready") or 0) + int(status.get("succeeded") or 0) >= want

    def _set_pods_ready(self, wl: Obj, ready: bool) -> None:
        status = owned_status(wl)
        changed = conditions.set_condition(
            status["conditions"],
            "PodsReady",
            ready,
            "Started" if ready else "WaitForStart",
            READY if ready else NOT_READY,
            self._clock.now_rfc3339(),
            observed_generation=wl["metadata"].get("generation"),
        )
        if changed:
            apply_status(self._store, self.workloads, wl, status)

    def _evict(self, key: Key, wl: Obj) -> None:
        config, now = self.config, self._clock.now()
        status = owned_status(wl)
        count = int((status.get("requeueState") or {}).get("count") or 0)
        limit = config.backoff_limit_count
        if limit is not None and count + 1 > limit:
            self._store.patch(
                self.workloads,
                *key,
                {"spec": {"active": False}},
                content_type=MERGE,
                manager=KUEUE_MANAGER,
            )
            reason, message = "Deactivated", DEACTIVATED
            status.pop("requeueState", None)  # Kueue clears it on deactivation
        else:
            count += 1
            wait = min(config.backoff_base_seconds * 2 ** (count - 1), config.backoff_max_seconds)
            status["requeueState"] = {"count": count, "requeueAt": _rfc3339(now + wait)}
            reason, message = (
                "PodsReadyTimeout",
                f"Exceeded the PodsReady timeout {key[0]}/{key[1]}",
            )
        conditions.set_condition(
            status["conditions"],
            "Evicted",
            True,
            reason,
            message,
            self._clock.now_rfc3339(),
            observed_generation=wl["metadata"].get("generation"),
        )
        fresh = self._store.get(self.workloads, *key) or wl
        apply_status(self._store, self.workloads, fresh, status)

    def _end_backoff(self, wl: Obj) -> Requeue:
        """A requeued Workload waits out its back-off, then is `Requeued` again."""
        when = requeue_at(wl)
        conds = (wl.get("status") or {}).get("conditions") or []
        requeued = conditions.find(conds, "Requeued")
        if when is None or requeued is None or requeued.get("status") == "True":
            return None
        left = when - self._clock.now()
        if left > 0:
            return left
        status = owned_status(wl)
        conditions.set_condition(
            status["conditions"],
            "Requeued",
            True,
            "BackoffFinished",
            BACKOFF_FINISHED,
            self._clock.now_rfc3339(),
            observed_generation=wl["metadata"].get("generation"),
        )
        apply_status(self._store, self.workloads, wl, status)
        return None
