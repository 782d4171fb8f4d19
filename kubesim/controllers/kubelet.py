"""The kubelet of every simulated node: runs bound pods as their containers' env says.

A bound pod of a Job (`restartPolicy` Never or OnFailure) goes Pending -> Running (each
container `running.startedAt`, `ready`, pod `Ready`) and, after `KUBESIM_RUN_SECONDS` (default
2) of simulated time, to

- Succeeded: containers `terminated` reason `Completed`, exit 0;
- Failed: reason `Error` with `KUBESIM_EXIT_CODE` when it is not 0, or reason `OOMKilled`
  exit 137 when `KUBESIM_OOM=1`.

An image containing `does-not-exist` never starts: the container waits with `ErrImagePull`, then
`ImagePullBackOff`, and the pod stays Pending (image-pull waits never fail a pod). `KUBESIM_LOG`
lines (split on newlines or `|`) become what `/log` returns once the pod runs: all at once, or
with `KUBESIM_LOG_INTERVAL=S` one line every S simulated seconds from the start (what
`/log?follow=true` then streams as it is "printed"). `KUBESIM_PULL_SECONDS=S` keeps a bound pod
Pending (`ContainerCreating`) for S simulated seconds before it runs, like a slow image pull.
Per rank (the pod's `batch.kubernetes.io/job-completion-index`, so Indexed Jobs only):
`KUBESIM_FAIL_RANK=r` fails only rank r, with `KUBESIM_EXIT_CODE` (default 1), the other ranks
succeed; `KUBESIM_OOM_RANK=r` OOM-kills only rank r (either way the failing rank ends after half
of `KUBESIM_RUN_SECONDS`, while the other ranks still run); `KUBESIM_PENDING_RANK=r` keeps
only rank r Pending in `ContainerCreating` until it is deleted (a gang never all ready).
A pod deleted while running gets its containers "killed" (exit 143, reason `Error`, phase
Failed), as the kubelet reports a SIGTERM'd container; a pod removed from the store is simply
forgotten.

Pods with `restartPolicy: Always` (a Deployment's) never end by themselves: once pulled and
started they are run by `restarts.py` (readiness after `KUBESIM_READY_AFTER_SECONDS`, OOM kills
by the `kubesim.aicp.dev/oom-kills` annotation or `KUBESIM_OOM_AFTER_SECONDS`, restarts with
CrashLoopBackOff).

Not simulated: restarts under `restartPolicy: OnFailure` (it behaves like Never), probes, init
containers, resource enforcement, node heartbeats.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kubesim.controllers import podstatus
from kubesim.controllers.indexes import pod_index
from kubesim.controllers.podspec import container_env
from kubesim.controllers.restarts import LongRunning
from kubesim.controllers.runtime import Requeue, WorkQueue

if TYPE_CHECKING:
    from kubesim.clock import Clock
    from kubesim.store import Store, WatchEvent

log = logging.getLogger("kubesim.kubelet")
Obj = dict[str, Any]
Key = tuple[str, str]
MANAGER = "kubelet"
PULL_BACKOFF_AFTER = 2.0  # simulated seconds from ErrImagePull to ImagePullBackOff


@dataclass(frozen=True)
class RunPlan:
    """How one pod's run ends, read from its containers' env."""

    seconds: float
    exit_code: int
    oom: bool
    log_lines: tuple[str, ...]
    bad_image: str | None
    log_interval: float = 0.0
    pull_seconds: float = 0.0

    def lines_due(self, running_for: float) -> int:
        """How many log lines the container has printed after `running_for` seconds."""
        if self.log_interval <= 0:
            return len(self.log_lines)
        return min(len(self.log_lines), 1 + int(running_for / self.log_interval))

    def next_line_in(self, running_for: float) -> float | None:
        """Seconds until the next line is printed; None when all are out."""
        printed = self.lines_due(running_for)
        if printed >= len(self.log_lines):
            return None
        return printed * self.log_interval - running_for

    @classmethod
    def of(cls, spec: Obj, rank: int | None = None) -> RunPlan:
        """The plan of a pod; `rank` is its completion index (None outside Indexed Jobs), which
        the `KUBESIM_*_RANK` variables are compared with."""
        seconds: float | None = None
        exit_code, oom = 0, False
        lines: list[str] = []
        bad_image = None
        interval = pull = 0.0
        failing_rank = False
        for container in spec.get("containers") or []:
            fail_rank = _rank(container_env(container, "KUBESIM_FAIL_RANK"))
            if fail_rank is not None:
                # Only that rank fails, with KUBESIM_EXIT_CODE (default 1); the others succeed.
                if rank == fail_rank:
                    code = int(_float(container_env(container, "KUBESIM_EXIT_CODE") or "1", 1))
                    exit_code = exit_code or code or 1
                    failing_rank = True
                container = _without(container, "KUBESIM_EXIT_CODE")
            if rank is not None and rank == _rank(container_env(container, "KUBESIM_OOM_RANK")):
                oom = failing_rank = True
            if rank is not None and rank == _rank(container_env(container, "KUBESIM_PENDING_RANK")):
                pull = math.inf  # this rank's containers never get created
            if bad_image is None and "does-not-exist" in str(container.get("image", "")):
                bad_image = str(container.get("image"))
            if (value := container_env(container, "KUBESIM_RUN_SECONDS")) is not None:
                seconds = max(seconds or 0.0, _float(value, 2.0))  # the longest container
            if (value := container_env(container, "KUBESIM_EXIT_CODE")) is not None:
                exit_code = exit_code or int(_float(value, 0))
            oom = oom or container_env(container, "KUBESIM_OOM") == "1"
            if (value := container_env(container, "KUBESIM_LOG")) is not None:
                lines += [line for part in value.split("\n") for line in part.split("|")]
            if (value := container_env(container, "KUBESIM_LOG_INTERVAL")) is not None:
                interval = max(interval, _float(value, 0.0))
            if (value := container_env(container, "KUBESIM_PULL_SECONDS")) is not None:
                pull = max(pull, _float(value, 0.0))
        seconds = 2.0 if seconds is None else seconds
        if failing_rank:
            seconds /= 2  # the failing rank ends first: the others are still running then
        return cls(
            seconds,
            exit_code,
            oom,
            tuple(lines),
            bad_image,
            interval,
            pull,
        )


def _rank(value: str | None) -> int | None:
    try:
        return int(value) if value is not None and value.strip() else None
    except ValueError:
        return None


def _without(container: Obj, name: str) -> Obj:
    return {**container, "env": [v for v in container.get("env") or [] if v.get("name") != name]}


def _float(value: str, default: float) -> float:
    try:
        return float(value)
    except ValueError:
        return default


class Kubelet:
    """One kubelet loop for all simulated nodes (they share no state a real node would)."""

    def __init__(self, store: Store, clock: Clock) -> None:
        self._store = store
        self._clock = clock
        self.pods = store.resource("", "pods")
        self.queue: WorkQueue[Key] = WorkQueue(clock)
        # pod uid -> simulated time its containers started (or its image pull first failed)
        self._started: dict[str, float] = {}
        self.long_running = LongRunning(clock, self._write_status, self._log_so_far)

    def on_pod_event(self, event: WatchEvent) -> None:
        pod = event.object
        meta = pod["metadata"]
        if event.type == "DELETED":
            self._started.pop(meta.get("uid", ""), None)
            self.long_running.forget(meta.get("uid", ""))
            return
        if (pod.get("spec") or {}).get("nodeName"):
            self.queue.add((meta["namespace"], meta["name"]))

    def reconcile(self, key: Key) -> Requeue:
        pod = self._store.get(self.pods, *key)
        if pod is None:
            return None
        spec, status = pod.get("spec") or {}, pod.get("status") or {}
        phase = status.get("phase", "Pending")
        if not spec.get("nodeName") or phase in ("Succeeded", "Failed"):
            self._started.pop(pod["metadata"]["uid"], None)
            self.long_running.forget(pod["metadata"]["uid"])
            return None
        plan = RunPlan.of(spec, pod_index(pod))
        now = self._clock.now()
        if pod["metadata"].get("deletionTimestamp"):
            if phase == "Running":
                self._finish(pod, plan, killed=True)
            return None
        if plan.bad_image is not None:
            return self._pull_failure(pod, plan.bad_image)
        if phase != "Running":
            pulling = self._pulling(pod, plan)
            if pulling is not None:
                return None if math.isinf(pulling) else pulling  # inf: never, nothing to time
        if spec.get("restartPolicy") == "Always":
            return self.long_running.reconcile(pod)
        if phase != "Running":
            self._start(pod, plan)
            next_line = plan.next_line_in(0.0)
            return plan.seconds if next_line is None else min(plan.seconds, next_line)
        uid = pod["metadata"]["uid"]
        started = self._started.get(uid)
        if started is None:  # e.g. the controllers restarted: fall back to the recorded time
            started = podstatus.parse_time(podstatus.first_started_at(status)) or now
            self._started[uid] = started
        self._print(pod, plan, now - started)
        remaining = started + plan.seconds - now
        if remaining > 0:
            next_line = plan.next_line_in(now - started)
            return remaining if next_line is None else min(remaining, max(next_line, 0.001))
        self._finish(pod, plan, killed=False)
        return None

    def _log_so_far(self, pod: Obj, running_for: float) -> Requeue:
        """Print what a long-running container has printed by now; seconds to the next line."""
        plan = RunPlan.of(pod["spec"], pod_index(pod))
        self._print(pod, plan, running_for)
        return plan.next_line_in(running_for)

    def _print(self, pod: Obj, plan: RunPlan, running_for: float) -> None:
        """The log lines the container has printed by now (a rewrite only when one is new)."""
        if not plan.log_lines:
            return
        key = (pod["metadata"]["namespace"], pod["metadata"]["name"])
        text = "".join(f"{line}\n" for line in plan.log_lines[: plan.lines_due(running_for)])
        if self._store.pod_logs.get(key) != text:
            self._store.set_pod_log(key[0], key[1], text)

    # -- transitions ---------------------------------------------------------------------
    def _write_status(self, key: Key, status: Obj) -> None:
        self._store.patch(
            self.pods,
            key[0],
            key[1],
            {"status": status},
            content_type="application/merge-patch+json",
            manager=MANAGER,
            subresource="status",
        )
        self._store.wake_log_followers(*key)  # a follower ends when the container does

    def _start(self, pod: Obj, plan: RunPlan) -> None:
        key = (pod["metadata"]["namespace"], pod["metadata"]["name"])
        self._started[pod["metadata"]["uid"]] = self._clock.now()
        now = self._clock.now_rfc3339()
        state = {"running": {"startedAt": now}}
        status = podstatus.base_status(pod)
        status.update(
            phase="Running",
            startTime=now,
            conditions=podstatus.pod_conditions(pod, True, now),
            containerStatuses=[
                podstatus.container_status(pod, c, state, True)
                for c in pod["spec"].get("containers") or []
            ],
        )
        self._write_status(key, status)
        self._print(pod, plan, 0.0)

    def _finish(self, pod: Obj, plan: RunPlan, *, killed: bool) -> None:
        key = (pod["metadata"]["namespace"], pod["metadata"]["name"])
        now = self._clock.now_rfc3339()
        started = podstatus.first_started_at(pod.get("status") or {}) or now
        if killed:
            reason, code = "Error", 143
        elif plan.oom:
            reason, code = "OOMKilled", 137
        elif plan.exit_code:
            reason, code = "Error", plan.exit_code
        else:
            reason, code = "Completed", 0
        state = {
            "terminated": {
                "exitCode": code,
                "reason": reason,
                "startedAt": started,
                "finishedAt": now,
                "containerID": podstatus.container_id(pod["metadata"]["uid"], ""),
            }
        }
        statuses = []
        for container in pod["spec"].get("containers") or []:
            entry = podstatus.container_status(pod, container, state, False)
            entry["state"]["terminated"]["containerID"] = entry["containerID"]
            statuses.append(entry)
        phase = "Succeeded" if code == 0 else "Failed"
        self._write_status(
            key,
            {
                "phase": phase,
                "conditions": podstatus.pod_conditions(pod, False, now, "PodCompleted"),
                "containerStatuses": statuses,
            },
        )
        self._started.pop(pod["metadata"]["uid"], None)

    def _pulling(self, pod: Obj, plan: RunPlan) -> Requeue:
        """While a `KUBESIM_PULL_SECONDS` image pull lasts: Pending, containers waiting in
        `ContainerCreating`; the time left, or None once the pull is done."""
        if plan.pull_seconds <= 0:
            return None
        uid = pod["metadata"]["uid"]
        began = self._started.setdefault(uid, self._clock.now())
        left = began + plan.pull_seconds - self._clock.now()
        if left <= 0:
            return None
        if podstatus.waiting_reason(pod.get("status") or {}) != "ContainerCreating":
            now = self._clock.now_rfc3339()
            status = podstatus.base_status(pod)
            waiting = {"waiting": {"reason": "ContainerCreating"}}
            status.update(
                phase="Pending",
                startTime=now,
                conditions=podstatus.pod_conditions(pod, False, now, "ContainersNotReady"),
                containerStatuses=[
                    podstatus.container_status(pod, c, waiting, False)
                    for c in pod["spec"].get("containers") or []
                ],
            )
            key = (pod["metadata"]["namespace"], pod["metadata"]["name"])
            self._write_status(key, status)
        return left

    def _pull_failure(self, pod: Obj, image: str) -> Requeue:
        key = (pod["metadata"]["namespace"], pod["metadata"]["name"])
        now = self._clock.now_rfc3339()
        previous = podstatus.waiting_reason(pod.get("status") or {})
        if previous == "ImagePullBackOff":
            return None
        uid = pod["metadata"]["uid"]
        if previous == "ErrImagePull":
            # The first pull failed at `_started[uid]`; back off only once that is long enough ago.
            waited = self._clock.now() - self._started.setdefault(uid, self._clock.now())
            if waited < PULL_BACKOFF_AFTER:
                return PULL_BACKOFF_AFTER - waited
            state = {
                "waiting": {
                    "reason": "ImagePullBackOff",
                    "message": f'Back-off pulling image "{image}"',
                }
            }
            after: Requeue = None
        else:
            state = {
                "waiting": {
                    "reason": "ErrImagePull",
                    "message": (
                        "rpc error: code = NotFound desc = failed to pull and unpack image "
                        f'"{image}": '
                        f'failed to resolve reference "{image}": {image}: not found'
                    ),
                }
            }
            after = PULL_BACKOFF_AFTER
            self._started[uid] = self._clock.now()
        status = podstatus.base_status(pod)
        status.update(
            phase="Pending",
            startTime=(pod.get("status") or {}).get("startTime") or now,
            conditions=podstatus.pod_conditions(pod, False, now, "ContainersNotReady"),
            containerStatuses=[
                podstatus.container_status(
                    pod,
                    c,
                    state
                    if image == c.get("image")
                    else {"waiting": {"reason": "PodInitializing"}},
                    False,
                )
                for c in pod["spec"].get("containers") or []
            ],
        )
        for condition in status["conditions"]:
            if condition["type"] in ("ContainersReady", "Ready"):
                condition["message"] = podstatus.unready_message(pod)
        self._write_status(key, status)
        return after
