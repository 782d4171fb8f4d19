"""The kubelet for pods with `restartPolicy: Always` (a Deployment's pods): their containers run
until the pod goes, are restarted with the kubelet's CrashLoopBackOff when they end, and turn
ready a set time after each start.

Each pod's run is set by its containers' env and one annotation:

- `KUBESIM_READY_AFTER_SECONDS=S` (default 0, the longest container wins): the containers'
  `ready` and the pod's `ContainersReady`/`Ready` turn True S seconds after each start (before,
  False with reason `ContainersNotReady`). A container due to end before then is never ready.
- `KUBESIM_RUN_SECONDS=S`, only when set: the containers end S seconds after each start, exit 0
  (reason `Completed`), or as `KUBESIM_EXIT_CODE` (reason `Error`) or `KUBESIM_OOM=1`
  (`OOMKilled`, 137) say.
- `KUBESIM_OOM_AFTER_SECONDS=S`: OOM-killed (reason `OOMKilled`, exit code 137) S seconds after
  every start, a crash loop.
- annotation `kubesim.aicp.dev/oom-kills: "N"` on the pod: OOM-killed at once, at start or
  when the annotation appears, while the containers' `restartCount` is below N; from then on
  they run normally.

An end is one status write: each container `state.terminated` (reason, exitCode, startedAt,
finishedAt, containerID), `ready: false`, the pod `Ready=False`; the phase stays Running. Then
the kubelet's back-off (client-go's `flowcontrol.Backoff` as the kubelet uses it) decides: the
first restart comes at once; after a later end the containers wait in `CrashLoopBackOff`
(message `back-off 10s restarting failed container=<c> pod=<pod>_<ns>(<uid>)`, the ended
state moved to `lastState`) for 10 s, then 20 s, 40 s, … at most 300 s; a container that ran
600 s (twice the cap) since the last restart starts again at 10 s. A restart is a new container
instance: `restartCount` + 1, a new `containerID`, `state.running` from now, `lastState` the
ended instance.

A pod's containers start, end and restart together (one plan per pod). The back-off lives in
memory; a restart of the controllers starts it afresh, as a kubelet restart does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kubesim.controllers import podstatus
from kubesim.controllers.podspec import container_env

if TYPE_CHECKING:
    from collections.abc import Callable

    from kubesim.clock import Clock
    from kubesim.controllers.runtime import Requeue

Obj = dict[str, Any]
OOM_KILLS = "kubesim.aicp.dev/oom-kills"
INITIAL_BACKOFF = 10.0
MAX_BACKOFF = 300.0


def _seconds(value: str | None) -> float | None:
    try:
        return float(value) if value is not None and value.strip() else None
    except ValueError:
        return None


@dataclass(frozen=True)
class ServePlan:
    """How a long-running pod's containers behave, from their env and the pod's annotation."""

    ready_after: float = 0.0
    run_seconds: float | None = None
    oom_after: float | None = None
    oom_kills: int = 0
    exit_code: int = 0
    oom: bool = False

    @classmethod
    def of(cls, pod: Obj) -> ServePlan:
        ready = 0.0
        run: float | None = None
        oom_after: float | None = None
        exit_code, oom = 0, False
        for container in pod["spec"].get("containers") or []:
            ready = max(
                ready, _seconds(container_env(container, "KUBESIM_READY_AFTER_SECONDS")) or 0
            )
            if (value := _seconds(container_env(container, "KUBESIM_RUN_SECONDS"))) is not None:
                run = value if run is None else min(run, value)
            if (
                value := _seconds(container_env(container, "KUBESIM_OOM_AFTER_SECONDS"))
            ) is not None:
                oom_after = value if oom_after is None else min(oom_after, value)
            exit_code = exit_code or int(
                _seconds(container_env(container, "KUBESIM_EXIT_CODE")) or 0
            )
            oom = oom or container_env(container, "KUBESIM_OOM") == "1"
        annotations = pod["metadata"].get("annotations") or {}
        kills = int(_seconds(annotations.get(OOM_KILLS)) or 0)
        return cls(ready, run, oom_after, kills, exit_code, oom)

    def end_after(self, restart_count: int) -> tuple[float, str, int] | None:
        """(seconds after a start, reason, exit code) of the instance's end; None: never."""
        ends = []
        if restart_count < self.oom_kills:
            ends.append((0.0, "OOMKilled", 137))
        if self.oom_after is not None:
            ends.append((self.oom_after, "OOMKilled", 137))
        if self.run_seconds is not None:
            if self.oom:
                ends.append((self.run_seconds, "OOMKilled", 137))
            elif self.exit_code:
                ends.append((self.run_seconds, "Error", self.exit_code))
            else:
                ends.append((self.run_seconds, "Completed", 0))
        return min(ends, key=lambda end: end[0]) if ends else None


@dataclass
class BackOff:
    """One pod's entry of the kubelet's `flowcontrol.Backoff` (no jitter)."""

    duration: float | None = None
    updated: float = 0.0

    def _expired(self, event: float) -> bool:
        return event - self.updated > 2 * MAX_BACKOFF

    def holds(self, finished: float, now: float) -> bool:
        """`IsInBackOffSince(finishedAt)`: must a container that ended then still wait?"""
        if self.duration is None or self._expired(finished):
            return False
        return now - finished < self.duration

    def next(self, finished: float, now: float) -> None:
        if self.duration is None or self._expired(finished):
            self.duration = INITIAL_BACKOFF
        else:
            self.duration = min(self.duration * 2, MAX_BACKOFF)
        self.updated = now


@dataclass
class Run:
    """What the kubelet remembers of one long-running pod."""

    started: float | None = None  # when the current instance started
    finished: float | None = None  # when the last instance ended
    backoff: BackOff = field(default_factory=BackOff)


def _state(status: Obj) -> tuple[Obj, Obj | None, int]:
    """(state, lastState, restartCount) of the pod's first container."""
    for entry in status.get("containerStatuses") or []:
        return entry.get("state") or {}, entry.get("lastState"), int(entry.get("restartCount") or 0)
    return {}, None, 0


class LongRunning:
    """The kubelet's half for `restartPolicy: Always` pods (see the module docstring)."""

    def __init__(
        self,
        clock: Clock,
        write_status: Callable[[tuple[str, str], Obj], None],
        print_log: Callable[[Obj, float], Requeue],
    ) -> None:
        self._clock = clock
        self._write_status = write_status
        self._print_log = print_log
        self._runs: dict[str, Run] = {}

    def forget(self, uid: str) -> None:
        self._runs.pop(uid, None)

    def reconcile(self, pod: Obj) -> Requeue:
        """Take the pod's next step; the simulated seconds until the one after, or None."""
        status = pod.get("status") or {}
        state, last, restarts = _state(status)
        run = self._runs.setdefault(pod["metadata"]["uid"], Run())
        now = self._clock.now()
        plan = ServePlan.of(pod)
        if status.get("phase") != "Running":
            return self._start(pod, plan, run, 0, None)
        if "running" in state:
            return self._running(pod, plan, run, state, last, restarts)
        ended = state.get("terminated") or (last or {}).get("terminated") or {}
        finished = run.finished or podstatus.parse_time(ended.get("finishedAt")) or now
        if run.backoff.holds(finished, now):
            if podstatus.waiting_reason(status) != "CrashLoopBackOff":
                self._back_off(pod, run, ended, restarts)
            return finished + (run.backoff.duration or 0) - now
        run.backoff.next(finished, now)
        return self._start(pod, plan, run, restarts + 1, {"terminated": ended})

    def _running(
        self, pod: Obj, plan: ServePlan, run: Run, state: Obj, last: Obj | None, restarts: int
    ) -> Requeue:
        now = self._clock.now()
        if run.started is None:  # the controllers restarted: the recorded start, to the second
            run.started = podstatus.parse_time(state["running"].get("startedAt")) or now
        end = plan.end_after(restarts)
        end_at = run.started + end[0] if end is not None else math.inf
        if now >= end_at and end is not None:
            self._end(pod, run, state, last, restarts, end[1], end[2])
            return 0.0
        ready_at = run.started + plan.ready_after
        ready = ready_at < end_at and now >= ready_at
        entries = (pod.get("status") or {}).get("containerStatuses") or []
        if any(bool(e.get("ready")) != ready for e in entries):
            self._write(pod, state, ready, restarts, last)
        line_in = self._print_log(pod, now - run.started)
        due = [t for t in (ready_at if ready_at < end_at else math.inf, end_at) if t > now]
        if line_in is not None:
            due.append(now + max(line_in, 0.001))
        return min(due) - now if due and min(due) < math.inf else None

    def _start(
        self, pod: Obj, plan: ServePlan, run: Run, restarts: int, last: Obj | None
    ) -> Requeue:
        now = self._clock.now()
        run.started, run.finished = now, None
        state = {"running": {"startedAt": self._clock.now_rfc3339()}}
        end = plan.end_after(restarts)
        ready = plan.ready_after <= 0 and (end is None or end[0] > 0)
        self._write(pod, state, ready, restarts, last)
        self._print_log(pod, 0.0)
        return 0.0  # the next step (ready, end, log lines) is worked out from the new state

    def _end(
        self,
        pod: Obj,
        run: Run,
        state: Obj,
        last: Obj | None,
        restarts: int,
        reason: str,
        code: int,
    ) -> None:
        run.finished = self._clock.now()
        ended = {
            "exitCode": code,
            "reason": reason,
            "startedAt": state["running"].get("startedAt"),
            "finishedAt": self._clock.now_rfc3339(),
        }
        self._write(pod, {"terminated": ended}, False, restarts, last)

    def _back_off(self, pod: Obj, run: Run, ended: Obj, restarts: int) -> None:
        meta = pod["metadata"]
        seconds = int(run.backoff.duration or INITIAL_BACKOFF)
        name = (pod["spec"].get("containers") or [{}])[0].get("name", "")
        message = (
            f"back-off {_go_duration(seconds)} restarting failed container={name} "
            f"pod={meta['name']}_{meta['namespace']}({meta['uid']})"
        )
        waiting = {"waiting": {"reason": "CrashLoopBackOff", "message": message}}
        self._write(pod, waiting, False, restarts, {"terminated": ended})

    def _write(self, pod: Obj, state: Obj, ready: bool, restarts: int, last: Obj | None) -> None:
        now = self._clock.now_rfc3339()
        status = podstatus.base_status(pod)
        if ready:
            conds = podstatus.pod_conditions(pod, True, now)
        else:
            message = podstatus.unready_message(pod)
            conds = podstatus.pod_conditions(pod, False, now, "ContainersNotReady", message)
        statuses = []
        for container in pod["spec"].get("containers") or []:
            own_state = state
            if "terminated" in state:
                instance = podstatus.container_id(
                    pod["metadata"]["uid"], container["name"], restarts
                )
                own_state = {"terminated": {**state["terminated"], "containerID": instance}}
            statuses.append(
                podstatus.container_status(
                    pod, container, own_state, ready, restart_count=restarts, last_state=last
                )
            )
        status.update(
            phase="Running",
            startTime=(pod.get("status") or {}).get("startTime") or now,
            conditions=conds,
            containerStatuses=statuses,
        )
        key = (pod["metadata"]["namespace"], pod["metadata"]["name"])
        self._write_status(key, status)


def _go_duration(seconds: int) -> str:
    """Go's `time.Duration` text for whole seconds: `10s`, `5m0s`."""
    return f"{seconds // 60}m{seconds % 60}s" if seconds >= 60 else f"{seconds}s"
