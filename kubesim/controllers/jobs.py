"""The batch/v1 Job controller and TTL-after-finished controller, after kube-controller-manager.

Per Job, level-triggered from the Job and its pods:

- not suspended: keep `min(parallelism, completions - succeeded)` pods (`generateName
  <job>-`, the job labels, a controller ownerReference, finalizer
  `batch.kubernetes.io/job-tracking`); `startTime` is set on (re)start;
- a terminal pod is counted into `succeeded`/`failed`, then its tracking finalizer is removed
  (status first, so a count is never lost; an in-memory set keeps it from being counted twice);
- suspended: active pods deleted (not counted as failures), `startTime` cleared,
  `Suspended=True` reason `JobSuspended`; resuming sets `Suspended=False` `JobResumed`;
- terminal states take two steps, as with JobManagedBy/JobPodReplacementPolicy on:
  `FailureTarget` (reason `BackoffLimitExceeded` when failures exceed `backoffLimit`, or
  `DeadlineExceeded` after `activeDeadlineSeconds`, active pods then deleted and counted failed)
  and `Failed` once no pod is left running; `SuccessCriteriaMet` reason `CompletionsReached` and
  `Complete` plus `completionTime` likewise;
- Indexed Jobs: one pod per pending index (`<job>-<index>-xxxxx`, the completion-index
  annotation and label, `hostname <job>-<index>`, `JOB_COMPLETION_INDEX` from the annotation),
  `completedIndexes`, and with `backoffLimitPerIndex` per-index failure counts and
  `failedIndexes` (`FailedIndexes`, `MaxFailedIndexesExceeded`);
- `podFailurePolicy` (`pod_failure_policy.py`): FailJob fails the Job with reason
  `PodFailurePolicy` and stops the other pods, Ignore does not count the failure, FailIndex
  fails the index, Count (or no match) counts it.

Not simulated: successPolicy, the exponential back-off (10 s, 20 s, ...) before replacing a
failed pod, pod readiness gates.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from kubesim.controllers import conditions, pod_failure_policy
from kubesim.controllers.indexes import (
    FAILURE_COUNT_KEY,
    INDEX_KEY,
    format_intervals,
    parse_intervals,
    pod_index,
)
from kubesim.controllers.podspec import controller_name, controller_uid, owned_by_job
from kubesim.controllers.runtime import Requeue, WorkQueue
from kubesim.store import StoreError

if TYPE_CHECKING:
    from kubesim.clock import Clock
    from kubesim.store import Store, WatchEvent

log = logging.getLogger("kubesim.jobs")
Obj = dict[str, Any]
Key = tuple[str, str]
MANAGER = "kube-controller-manager"
TRACKING = "batch.kubernetes.io/job-tracking"
MERGE = "application/merge-patch+json"
_TERMINAL = ("Succeeded", "Failed")

BACKOFF_MESSAGE = "Job has reached the specified backoff limit"
DEADLINE_MESSAGE = "Job was active longer than specified deadline"
COMPLETIONS_MESSAGE = "Reached expected number of succeeded pods"
FAILED_INDEXES_MESSAGE = "Job has failed indexes"
MAX_FAILED_INDEXES_MESSAGE = "Job has exceeded the specified maximal number of failed indexes"
INDEX_ENV = "JOB_COMPLETION_INDEX"


def _epoch(value: str | None) -> float | None:
    if not value:
        return None
    return datetime.strptime(value, "%Y-%m-%dT%H:%M:%S%z").timestamp()


def _finished(conds: list[Obj]) -> bool:
    return conditions.is_true(conds, "Complete") or conditions.is_true(conds, "Failed")


@dataclass
class Census:
    """A Job's pods as the controller sees them in one pass."""

    active: list[Obj] = field(default_factory=list)
    terminating: list[Obj] = field(default_factory=list)
    ready: int = 0
    new_succeeded: list[Obj] = field(default_factory=list)  # terminal, not yet counted
    new_failed: list[Obj] = field(default_factory=list)
    uncountable: list[Obj] = field(default_factory=list)  # deleted by us: drop, never count


@dataclass
class Step:
    """The Job status being computed by one reconcile."""

    conds: list[Obj]
    succeeded: int
    failed: int
    start_time: str | None
    completion_time: str | None
    active: int
    ready: int
    requeue: Requeue = None
    indexed: bool = False
    completed: set[int] = field(default_factory=set)  # Indexed: succeeded indexes
    failed_indexes: set[int] = field(default_factory=set)  # with backoffLimitPerIndex
    policy_failure: str | None = None  # a FailJob rule's message


def _is_ready(pod: Obj) -> bool:
    return conditions.is_true((pod.get("status") or {}).get("conditions"), "Ready")


class JobController:
    def __init__(self, store: Store, clock: Clock) -> None:
        self._store = store
        self._clock = clock
        self.jobs = store.resource("batch", "jobs")
        self.pods = store.resource("", "pods")
        self.queue: WorkQueue[Key] = WorkQueue(clock)
        # Pods whose outcome is already in their Job's status while their finalizer is still on.
        self._counted: set[str] = set()
        # Pods this controller deleted for suspension or scale-down: not failures.
        self._deleted_by_us: set[str] = set()
        # Job uid -> completion index -> failures counted (for backoffLimitPerIndex).
        self._index_failures: dict[str, dict[int, int]] = {}

    # -- informers -----------------------------------------------------------------------
    def on_job_event(self, event: WatchEvent) -> None:
        meta = event.object["metadata"]
        self.queue.add((meta["namespace"], meta["name"]))

    def on_pod_event(self, event: WatchEvent) -> None:
        pod = event.object
        name = controller_name(pod, "Job")
        if name is None:
            labels = pod["metadata"].get("labels") or {}
            name = labels.get("batch.kubernetes.io/job-name")
            if name is None or TRACKING not in (pod["metadata"].get("finalizers") or []):
                return
        if event.type == "DELETED":
            self._counted.discard(pod["metadata"]["uid"])
            self._deleted_by_us.discard(pod["metadata"]["uid"])
        self.queue.add((pod["metadata"]["namespace"], name))

    # -- helpers -------------------------------------------------------------------------
    def _owned_pods(self, job: Obj) -> list[Obj]:
        uid = job["metadata"]["uid"]
        pods = self._store.list(
            self.pods,
            job["metadata"]["namespace"],
            label_selector=f"batch.kubernetes.io/controller-uid={uid}",
        )
        return [p for p in pods if controller_uid(p, "Job") == uid]

    def _drop_finalizer(self, pod: Obj) -> None:
        finalizers = pod["metadata"].get("finalizers") or []
        if TRACKING not in finalizers:
            return
        meta = pod["metadata"]
        try:
            self._store.patch(
                self.pods,
                meta["namespace"],
                meta["name"],
                {"metadata": {"finalizers": [f for f in finalizers if f != TRACKING] or None}},
                content_type=MERGE,
                manager=MANAGER,
            )
        except StoreError as exc:
            if exc.code != 404:
                raise

    def _delete_pod(self, pod: Obj, *, counted_as_failure: bool) -> None:
        if not counted_as_failure:
            self._deleted_by_us.add(pod["metadata"]["uid"])
        try:
            self._store.delete(self.pods, pod["metadata"]["namespace"], pod["metadata"]["name"])
        except StoreError as exc:
            if exc.code != 404:
                raise

    def _create_pods(self, job: Obj, count: int, indexes: list[int] | None = None) -> None:
        """`count` pods of a NonIndexed Job, or one pod per index of an Indexed one."""
        meta = job["metadata"]
        template = job["spec"]["template"]
        labels = dict((template.get("metadata") or {}).get("labels") or {})
        labels.update(
            {
                "batch.kubernetes.io/job-name": meta["name"],
                "job-name": meta["name"],
                "batch.kubernetes.io/controller-uid": meta["uid"],
                "controller-uid": meta["uid"],
            }
        )
        pod_meta: Obj = {
            "generateName": f"{meta['name']}-",
            "namespace": meta["namespace"],
            "labels": labels,
            "ownerReferences": owned_by_job(meta),
            "finalizers": [TRACKING],
        }
        annotations = (template.get("metadata") or {}).get("annotations")
        if annotations:
            pod_meta["annotations"] = dict(annotations)
        if indexes is None:
            for _ in range(count):
                self._store.create(
                    self.pods,
                    {
                        "apiVersion": "v1",
                        "kind": "Pod",
                        "metadata": pod_meta,
                        "spec": template["spec"],
                    },
                    manager=MANAGER,
                )
            return
        failures = self._index_failures.get(meta["uid"], {})
        per_index = job["spec"].get("backoffLimitPerIndex") is not None
        for index in indexes:
            indexed_meta = dict(pod_meta)
            indexed_meta["generateName"] = f"{meta['name']}-{index}-"
            annotations = {**(pod_meta.get("annotations") or {}), INDEX_KEY: str(index)}
            if per_index:
                annotations[FAILURE_COUNT_KEY] = str(failures.get(index, 0))
            indexed_meta["annotations"] = annotations
            indexed_meta["labels"] = {**labels, INDEX_KEY: str(index)}
            self._store.create(
                self.pods,
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": indexed_meta,
                    "spec": _indexed_spec(template["spec"], meta["name"], index),
                },
                manager=MANAGER,
            )

    # -- reconcile -----------------------------------------------------------------------
    def _census(self, pods: list[Obj]) -> Census:
        census = Census()
        for pod in pods:
            phase = (pod.get("status") or {}).get("phase")
            uid = pod["metadata"]["uid"]
            if phase not in _TERMINAL and not pod["metadata"].get("deletionTimestamp"):
                census.active.append(pod)
                census.ready += _is_ready(pod)
                continue
            if phase not in _TERMINAL:
                census.terminating.append(pod)
            if TRACKING not in (pod["metadata"].get("finalizers") or []) or uid in self._counted:
                continue
            if uid in self._deleted_by_us:
                census.uncountable.append(pod)
            elif phase == "Succeeded":
                census.new_succeeded.append(pod)
            else:
                census.new_failed.append(pod)
        return census

    def reconcile(self, key: Key) -> Requeue:
        job = self._store.get(self.jobs, *key)
        if job is None:
            self._release_orphans(key)
            return None
        pods = self._owned_pods(job)
        if job["metadata"].get("deletionTimestamp"):
            for pod in pods:
                self._drop_finalizer(pod)
            return None
        status = job.get("status") or {}
        census = self._census(pods)
        step = Step(
            conds=[dict(c) for c in status.get("conditions") or []],
            succeeded=int(status.get("succeeded") or 0) + len(census.new_succeeded),
            failed=int(status.get("failed") or 0),
            start_time=status.get("startTime"),
            completion_time=status.get("completionTime"),
            active=len(census.active),
            ready=census.ready,
            indexed=job["spec"].get("completionMode") == "Indexed",
        )
        self._count_failures(job, status, census, step)
        now_s = self._clock.now_rfc3339()
        finished = _finished(step.conds)
        if finished:
            for pod in census.active:
                self._delete_pod(pod, counted_as_failure=True)
            step.active = step.ready = 0
        elif job["spec"].get("suspend"):
            for pod in census.active:
                self._delete_pod(pod, counted_as_failure=False)
            step.active, step.ready, step.start_time = 0, 0, None
            conditions.set_condition(
                step.conds,
                "Suspended",
                True,
                "JobSuspended",
                "Job suspended",
                now_s,
                probe_time=True,
            )
        else:
            if conditions.is_true(step.conds, "Suspended"):
                conditions.set_condition(
                    step.conds,
                    "Suspended",
                    False,
                    "JobResumed",
                    "Job resumed",
                    now_s,
                    probe_time=True,
                )
            step.start_time = step.start_time or now_s
            self._drive(job, census, step)
        self._write_status(key, status, census, step)
        # Only now that the counts are stored may the pods go.
        for pod in census.new_succeeded + census.new_failed:
            self._counted.add(pod["metadata"]["uid"])
        for pod in census.new_succeeded + census.new_failed + census.uncountable:
            self._drop_finalizer(pod)
        return None if finished else step.requeue

    def _count_failures(self, job: Obj, status: Obj, census: Census, step: Step) -> None:
        """Fold the newly ended pods into the step: completed indexes, and each failure as the
        podFailurePolicy says (Ignore: not counted; FailJob: the Job fails; FailIndex, or
        backoffLimitPerIndex exceeded: the index fails)."""
        spec = job["spec"]
        if step.indexed:
            completions = int(spec.get("completions") or 0)
            step.completed = parse_intervals(status.get("completedIndexes"))
            step.failed_indexes = parse_intervals(status.get("failedIndexes"))
            for pod in census.new_succeeded:
                index = pod_index(pod)
                if index is not None and 0 <= index < completions:
                    step.completed.add(index)
            step.succeeded = max(int(status.get("succeeded") or 0), len(step.completed))
        judged = conditions.is_true(step.conds, "FailureTarget") or _finished(step.conds)
        per_index = spec.get("backoffLimitPerIndex")
        failures = self._index_failures.setdefault(job["metadata"]["uid"], {})
        for pod in census.new_failed:
            found = None if judged else pod_failure_policy.match(spec.get("podFailurePolicy"), pod)
            action = found.action if found is not None else "Count"
            if action == "Ignore":
                continue
            step.failed += 1
            if judged:
                continue
            index = pod_index(pod) if step.indexed else None
            if action == "FailJob" and step.policy_failure is None and found is not None:
                step.policy_failure = found.message
            elif action == "FailIndex" and index is not None:
                step.failed_indexes.add(index)
            elif per_index is not None and index is not None:
                failures[index] = failures.get(index, 0) + 1
                if failures[index] > int(per_index):
                    step.failed_indexes.add(index)

    def _write_status(self, key: Key, status: Obj, census: Census, step: Step) -> None:
        new_status: Obj = {
            "active": step.active,
            "ready": step.ready,
            "terminating": len(census.terminating),
            "succeeded": step.succeeded,
            "failed": step.failed,
            "startTime": step.start_time,
            "completionTime": step.completion_time,
            "conditions": step.conds or None,
        }
        if step.indexed:
            new_status["completedIndexes"] = format_intervals(step.completed)
            if step.failed_indexes:
                new_status["failedIndexes"] = format_intervals(step.failed_indexes)
        patch = {k: v for k, v in new_status.items() if status.get(k) != v}
        for counter in ("active", "ready", "terminating", "succeeded", "failed"):
            if patch.get(counter) == 0 and counter not in status:
                del patch[counter]  # the API omits zero counters it never set
        if patch:
            self._store.patch(
                self.jobs,
                *key,
                {"status": patch},
                content_type=MERGE,
                manager=MANAGER,
                subresource="status",
            )

    def _verdict(self, job: Obj, census: Census, step: Step) -> str | None:
        """ "success", a failure reason, or None while the Job still runs (sets `step.requeue`
        to when the deadline falls)."""
        spec = job["spec"]
        failure = conditions.find(step.conds, "FailureTarget")
        if failure and failure.get("status") == "True":
            return str(failure.get("reason"))
        if conditions.is_true(step.conds, "SuccessCriteriaMet"):
            return "success"
        if step.policy_failure is not None:
            return "PodFailurePolicy"
        completions = spec.get("completions")
        if step.indexed and step.failed_indexes:
            limit = spec.get("maxFailedIndexes")
            if limit is not None and len(step.failed_indexes) > int(limit):
                return "MaxFailedIndexesExceeded"
            if len(step.completed | step.failed_indexes) >= int(completions or 0):
                return "FailedIndexes"
        if completions is not None and step.succeeded >= int(completions):
            return "success"
        if completions is None and step.succeeded > 0 and not census.active:
            return "success"
        if step.failed > int(spec.get("backoffLimit", 6)):
            return "BackoffLimitExceeded"
        deadline = spec.get("activeDeadlineSeconds")
        if deadline is not None:
            now = self._clock.now()
            remaining = (_epoch(step.start_time) or now) + int(deadline) - now
            if remaining <= 0:
                return "DeadlineExceeded"
            step.requeue = remaining
        return None

    def _drive(self, job: Obj, census: Census, step: Step) -> None:
        """Take a running Job's next step: finish it (in two steps) or keep its pods."""
        now_s = self._clock.now_rfc3339()
        verdict = self._verdict(job, census, step)
        all_gone = not census.active and not census.terminating
        if verdict is not None:
            if verdict == "success":
                interim, final, reason, message = (
                    "SuccessCriteriaMet",
                    "Complete",
                    "CompletionsReached",
                    COMPLETIONS_MESSAGE,
                )
            else:
                message = _failure_message(verdict, step)
                interim, final, reason = "FailureTarget", "Failed", verdict
            conditions.set_condition(
                step.conds, interim, True, reason, message, now_s, probe_time=True
            )
            for pod in census.active:
                self._delete_pod(pod, counted_as_failure=verdict != "success")
            if all_gone:
                conditions.set_condition(
                    step.conds, final, True, reason, message, now_s, probe_time=True
                )
                if final == "Complete":
                    step.completion_time = now_s
            step.active = step.ready = 0
            step.requeue = None
            return
        spec = job["spec"]
        if step.indexed:
            self._keep_indexed_pods(job, census, step)
            return
        wanted = int(spec.get("parallelism", 1))
        if spec.get("completions") is not None:
            wanted = max(0, min(wanted, int(spec["completions"]) - step.succeeded))
        if len(census.active) < wanted:
            self._create_pods(job, wanted - len(census.active))
        elif len(census.active) > wanted:
            # Scale down the newest first, as the real controller prefers not-yet-ready pods.
            by_age = sorted(census.active, key=lambda p: p["metadata"]["creationTimestamp"])
            for pod in by_age[wanted:]:
                self._delete_pod(pod, counted_as_failure=False)
            step.ready = sum(_is_ready(p) for p in by_age[:wanted])
        step.active = wanted

    def _keep_indexed_pods(self, job: Obj, census: Census, step: Step) -> None:
        """One pod per index not yet completed or failed, lowest first, at most `parallelism`
        at once; a pod whose index is done or taken twice is deleted."""
        spec = job["spec"]
        done = step.completed | step.failed_indexes
        seen: set[int] = set()
        keep = []
        for pod in sorted(census.active, key=lambda p: p["metadata"]["creationTimestamp"]):
            index = pod_index(pod)
            if index is None or index in done or index in seen:
                self._delete_pod(pod, counted_as_failure=False)
                continue
            seen.add(index)
            keep.append(pod)
        pending = [i for i in range(int(spec.get("completions") or 0)) if i not in done | seen]
        room = max(0, int(spec.get("parallelism", 1)) - len(keep))
        self._create_pods(job, 0, pending[:room])
        step.active = len(keep) + len(pending[:room])
        step.ready = sum(_is_ready(p) for p in keep)

    def _release_orphans(self, key: Key) -> None:
        """A deleted Job's pods keep living (Orphan is the Job default) but lose the tracking
        finalizer, as the real controller strips it from pods whose Job is gone."""
        pods = self._store.list(
            self.pods, key[0], label_selector=f"batch.kubernetes.io/job-name={key[1]}"
        )
        for pod in pods:
            if TRACKING in (pod["metadata"].get("finalizers") or []):
                uid = controller_uid(pod, "Job")
                if uid is None or self._job_uid_gone(key, uid):
                    self._drop_finalizer(pod)

    def _job_uid_gone(self, key: Key, uid: str) -> bool:
        job = self._store.get(self.jobs, *key)
        return job is None or job["metadata"]["uid"] != uid


def _failure_message(verdict: str, step: Step) -> str:
    """The message of a failure: the FailureTarget already set keeps its own."""
    target = conditions.find(step.conds, "FailureTarget")
    if target and target.get("status") == "True" and target.get("message"):
        return str(target["message"])
    if verdict == "PodFailurePolicy" and step.policy_failure:
        return step.policy_failure
    return {
        "DeadlineExceeded": DEADLINE_MESSAGE,
        "FailedIndexes": FAILED_INDEXES_MESSAGE,
        "MaxFailedIndexesExceeded": MAX_FAILED_INDEXES_MESSAGE,
    }.get(verdict, BACKOFF_MESSAGE)


def _indexed_spec(spec: Obj, job_name: str, index: int) -> Obj:
    """The pod spec of one index: `hostname <job>-<index>` (so that with a `subdomain` the pod
    has the stable name `<job>-<index>.<subdomain>`), and `JOB_COMPLETION_INDEX` appended to
    every container's env from the index annotation, as the real controller does."""
    out = dict(spec)
    out["hostname"] = f"{job_name}-{index}"
    variable = {
        "name": INDEX_ENV,
        "valueFrom": {
            "fieldRef": {"apiVersion": "v1", "fieldPath": f"metadata.annotations['{INDEX_KEY}']"}
        },
    }
    for kind in ("initContainers", "containers"):
        if kind not in spec:
            continue
        containers = []
        for container in spec[kind]:
            env = list(container.get("env") or [])
            if not any(var.get("name") == INDEX_ENV for var in env):
                env.append(variable)
            containers.append({**container, "env": env})
        out[kind] = containers
    return out
