"""Kueue's batch/v1 Job integration: the mutating webhook and the job reconciler.

Webhooks (`job_webhook`): a Job created with label `kueue.x-k8s.io/queue-name` gets
`spec.suspend=true` before it is stored, from HTTP and in-process callers alike; the queue name
of a running (not suspended) Job is immutable.

Reconciler, per Job with a queue name (docs/KUBERNETES.md §1, steps 3-7):

- no Workload: suspend the Job if it somehow runs, then create `job-<name>-<hash>` with a
  controller ownerReference, finalizer `kueue.x-k8s.io/resource-in-use`, label
  `kueue.x-k8s.io/job-uid`, `queueName`, `priority` (from the WorkloadPriorityClass named by
  label `kueue.x-k8s.io/priority-class`, else 0) and pod set `main` of
  `count = min(parallelism, completions)` with the Job's pod template;
- Workload admitted and Job suspended: ONE merge-patch of the Job as `kueue` carrying
  `metadata.resourceVersion` (optimistic lock): `suspend=false`, the flavor's `nodeLabels`
  merged into the template's `nodeSelector`, its `tolerations` appended, template label
  `kueue.x-k8s.io/podset: main`;
- Workload not admitted and Job running: suspend it (annotation `kueue.x-k8s.io/stopping`),
  then, once the Job controller has cleared `startTime`, restore the template from the
  Workload's pod set and drop the annotation;
- Job finished: Workload `Finished=True` (`Succeeded`/`Failed`), then its finalizer removed,
  which releases the quota;
- Job gone: its Workload's finalizer removed and the Workload deleted.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any, Literal

from kubesim.controllers import conditions
from kubesim.controllers.kueue_api import (
    API_VERSION,
    JOB_UID_LABEL,
    KUEUE_MANAGER,
    MERGE,
    PODSET_LABEL,
    PRIORITY_LABEL,
    QUEUE_LABEL,
    RESOURCE_IN_USE,
    STOPPING_ANNOTATION,
    apply_status,
    is_admitted,
    is_finished,
    owned_status,
    workload_name,
)
from kubesim.controllers.kueue_preemption import clear_admission
from kubesim.controllers.podspec import controller_name, owned_by_job
from kubesim.controllers.runtime import Requeue, WorkQueue
from kubesim.store import StoreError

if TYPE_CHECKING:
    from kubesim.clock import Clock
    from kubesim.store import Store, WatchEvent

log = logging.getLogger("kubesim.kueue")
Obj = dict[str, Any]
Key = tuple[str, str]


def job_webhook(operation: Literal["CREATE", "UPDATE"], job: Obj, old: Obj | None) -> None:
    """Kueue's Job webhooks. Mutating, on create: a queued Job starts suspended
    (ApplyDefaultForSuspend). Validating, on update: the queue name of a Job that is not
    suspended cannot change, refused as the apiserver relays a webhook denial."""
    labels = (job.get("metadata") or {}).get("labels") or {}
    if operation == "CREATE" and labels.get(QUEUE_LABEL):
        job.setdefault("spec", {})["suspend"] = True
        return
    if operation != "UPDATE" or old is None or (job.get("spec") or {}).get("suspend"):
        return
    before = ((old.get("metadata") or {}).get("labels") or {}).get(QUEUE_LABEL)
    after = labels.get(QUEUE_LABEL)
    if before != after:
        raise StoreError(
            403,
            "Forbidden",
            'admission webhook "vjob.kb.io" denied the request: '
            f"metadata.labels[{QUEUE_LABEL}]: Invalid value: {json.dumps(after or '')}: "
            "field is immutable",
        )


def _job_finished(job: Obj) -> tuple[str, str] | None:
    conds = (job.get("status") or {}).get("conditions")
    if conditions.is_true(conds, "Complete"):
        return "Succeeded", "Job finished successfully"
    failed = conditions.find(conds, "Failed")
    if failed and failed.get("status") == "True":
        return "Failed", str(failed.get("message") or "Job failed")
    return None


def _started_by_kueue(job: Obj) -> bool:
    """Whether Kueue's start changes are (still) on the Job, so that a stop must undo them."""
    labels = (job["spec"]["template"].get("metadata") or {}).get("labels") or {}
    annotations = job["metadata"].get("annotations") or {}
    return PODSET_LABEL in labels or STOPPING_ANNOTATION in annotations


class KueueJobReconciler:
    def __init__(self, store: Store, clock: Clock) -> None:
        self._store = store
        self._clock = clock
        self.jobs = store.resource("batch", "jobs")
        self.workloads = store.resource("kueue.x-k8s.io", "workloads")
        self.priority_classes = store.resource("kueue.x-k8s.io", "workloadpriorityclasses")
        self.flavors = store.resource("kueue.x-k8s.io", "resourceflavors")
        self.queue: WorkQueue[Key] = WorkQueue(clock)
        self._uids: dict[Key, str] = {}  # last uid seen per Job, to find a deleted Job's Workload

    # -- informers -----------------------------------------------------------------------
    def on_job_event(self, event: WatchEvent) -> None:
        meta = event.object["metadata"]
        key = (meta["namespace"], meta["name"])
        if not (meta.get("labels") or {}).get(QUEUE_LABEL) and key not in self._uids:
            return
        if event.type != "DELETED":
            self._uids[key] = meta["uid"]
        self.queue.add(key)

    def on_workload_event(self, event: WatchEvent) -> None:
        name = controller_name(event.object, "Job")
        if name is not None:
            self.queue.add((event.object["metadata"]["namespace"], name))

    # -- reconcile -----------------------------------------------------------------------
    def reconcile(self, key: Key) -> Requeue:
        job = self._store.get(self.jobs, *key)
        if job is None or job["metadata"].get("deletionTimestamp"):
            self._job_gone(key, job)
            return None
        uid = job["metadata"]["uid"]
        if self._uids.get(key) not in (None, uid):
            self._job_gone(key, None)  # a Job of the same name was deleted and re-created
        self._uids[key] = uid
        labels = job["metadata"].get("labels") or {}
        if not labels.get(QUEUE_LABEL):
            return None
        wl = self._store.get(self.workloads, key[0], workload_name(key[1], uid))
        finished = _job_finished(job)
        if wl is None:
            if finished is not None:
                return None
            if not job["spec"].get("suspend"):
                self._suspend(job)
                return None
            return self._create_workload(job)
        if wl["metadata"].get("deletionTimestamp"):
            if not job["spec"].get("suspend") and finished is None:
                self._suspend(job)
            self._drop_finalizer(wl)
            return None
        if finished is not None:
            self._finish(wl, *finished)
            return None
        evicted = conditions.is_true((wl.get("status") or {}).get("conditions"), "Evicted")
        if is_admitted(wl) and not evicted:
            if job["spec"].get("suspend"):
                self._start(job, wl)
            return None
        self._keep_stopped(job, wl, evicted=evicted)
        return None

    def _keep_stopped(self, job: Obj, wl: Obj, *, evicted: bool) -> None:
        """A Job whose Workload is not (or no longer) admitted: suspend it, undo Kueue's start
        changes, release an evicted Workload's quota once no pod is left, follow queue moves."""
        queue = job["metadata"]["labels"][QUEUE_LABEL]
        job_status = job.get("status") or {}
        if not job["spec"].get("suspend"):
            self._suspend(job)
        elif not job_status.get("startTime") and _started_by_kueue(job):
            self._restore(job, wl)
        elif evicted and is_admitted(wl) and not job_status.get("active"):
            # Stopped and restored, no pod left: the quota may go back (and the Workload wait).
            clear_admission(self._store, self.workloads, self._clock, wl)
        if (wl.get("spec") or {}).get("queueName") != queue:
            self._store.patch(
                self.workloads,
                job["metadata"]["namespace"],
                wl["metadata"]["name"],
                {"spec": {"queueName": queue}},
                content_type=MERGE,
                manager=KUEUE_MANAGER,
            )

    # -- steps ---------------------------------------------------------------------------
    def _create_workload(self, job: Obj) -> Requeue:
        meta, spec = job["metadata"], job["spec"]
        labels = meta.get("labels") or {}
        wl_spec: Obj = {"queueName": labels[QUEUE_LABEL], "priority": 0}
        priority_class = labels.get(PRIORITY_LABEL)
        if priority_class:
            wpc = self._store.get(self.priority_classes, None, priority_class)
            if wpc is None:
                # Kueue refuses to create the Workload and retries: the Job stays suspended.
                log.warning(
                    "WorkloadPriorityClass %s not found for Job %s/%s",
                    priority_class,
                    meta["namespace"],
                    meta["name"],
                )
                return 5.0
            wl_spec["priority"] = int(wpc.get("value", 0))
            wl_spec["priorityClassRef"] = {
                "group": "kueue.x-k8s.io",
                "kind": "WorkloadPriorityClass",
                "name": priority_class,
            }
        parallelism = int(spec.get("parallelism", 1))
        completions = spec.get("completions")
        count = parallelism if completions is None else min(parallelism, int(completions))
        wl_spec["podSets"] = [{"name": "main", "count": count, "template": spec["template"]}]
        workload = {
            "apiVersion": API_VERSION,
            "kind": "Workload",
            "metadata": {
                "name": workload_name(meta["name"], meta["uid"]),
                "namespace": meta["namespace"],
                "labels": {JOB_UID_LABEL: meta["uid"]},
                "ownerReferences": owned_by_job(meta),
                "finalizers": [RESOURCE_IN_USE],
            },
            "spec": wl_spec,
        }
        try:
            self._store.create(self.workloads, workload, manager=KUEUE_MANAGER)
        except StoreError as exc:
            if exc.code != 409:
                raise
        return None

    def _start(self, job: Obj, wl: Obj) -> None:
        assignment = ((wl.get("status") or {}).get("admission") or {}).get(
            "podSetAssignments"
        ) or []
        flavor_names = sorted({f for a in assignment for f in (a.get("flavors") or {}).values()})
        template = job["spec"]["template"]
        node_selector = dict(template["spec"].get("nodeSelector") or {})
        tolerations = list(template["spec"].get("tolerations") or [])
        for name in flavor_names:
            flavor = self._store.get(self.flavors, None, name)
            flavor_spec = (flavor or {}).get("spec") or {}
            for label, value in (flavor_spec.get("nodeLabels") or {}).items():
                if node_selector.get(label, value) != value:
                    log.warning(
                        "Job %s: nodeSelector %s=%s clashes with flavor %s",
                        job["metadata"]["name"],
                        label,
                        node_selector[label],
                        name,
                    )
                    return
                node_selector[label] = value
            tolerations += [t for t in flavor_spec.get("tolerations") or [] if t not in tolerations]
        pod_spec: Obj = {"nodeSelector": node_selector or None}
        if tolerations:
            pod_spec["tolerations"] = tolerations
        self._patch_job(
            job,
            {
                "metadata": {"resourceVersion": job["metadata"]["resourceVersion"]},
                "spec": {
                    "suspend": False,
                    "template": {"metadata": {"labels": {PODSET_LABEL: "main"}}, "spec": pod_spec},
                },
            },
        )

    def _suspend(self, job: Obj) -> None:
        self._patch_job(
            job,
            {
                "metadata": {
                    "resourceVersion": job["metadata"]["resourceVersion"],
                    "annotations": {STOPPING_ANNOTATION: "true"},
                },
                "spec": {"suspend": True},
            },
        )

    def _restore(self, job: Obj, wl: Obj) -> None:
        """Put back the pod template Kueue changed on start (from the Workload's pod set)."""
        podsets = (wl.get("spec") or {}).get("podSets") or []
        original = (podsets[0].get("template") or {}) if podsets else {}
        template = job["spec"]["template"]
        want_selector = (original.get("spec") or {}).get("nodeSelector") or None
        want_tolerations = (original.get("spec") or {}).get("tolerations") or None
        labels = (template.get("metadata") or {}).get("labels") or {}
        annotations = job["metadata"].get("annotations") or {}
        spec_patch: Obj = {}
        if (template["spec"].get("nodeSelector") or None) != want_selector:
            spec_patch["nodeSelector"] = want_selector
        if (template["spec"].get("tolerations") or None) != want_tolerations:
            spec_patch["tolerations"] = want_tolerations
        patch: Obj = {}
        if spec_patch or PODSET_LABEL in labels:
            patch["spec"] = {"template": {"spec": spec_patch}}
            if PODSET_LABEL in labels:
                patch["spec"]["template"]["metadata"] = {"labels": {PODSET_LABEL: None}}
        if STOPPING_ANNOTATION in annotations:
            patch["metadata"] = {"annotations": {STOPPING_ANNOTATION: None}}
        if patch:
            patch.setdefault("metadata", {})["resourceVersion"] = job["metadata"]["resourceVersion"]
            self._patch_job(job, patch)

    def _finish(self, wl: Obj, reason: str, message: str) -> None:
        if not is_finished(wl):
            status = owned_status(wl)
            conditions.set_condition(
                status["conditions"],
                "Finished",
                True,
                reason,
                message,
                self._clock.now_rfc3339(),
                observed_generation=wl["metadata"].get("generation"),
            )
            apply_status(self._store, self.workloads, wl, status)
        self._drop_finalizer(wl)

    def _drop_finalizer(self, wl: Obj) -> None:
        finalizers = wl["metadata"].get("finalizers") or []
        if RESOURCE_IN_USE not in finalizers:
            return
        rest = [f for f in finalizers if f != RESOURCE_IN_USE]
        try:
            self._store.patch(
                self.workloads,
                wl["metadata"]["namespace"],
                wl["metadata"]["name"],
                {"metadata": {"finalizers": rest or None}},
                content_type=MERGE,
                manager=KUEUE_MANAGER,
            )
        except StoreError as exc:
            if exc.code != 404:
                raise

    def _job_gone(self, key: Key, job: Obj | None) -> None:
        uid = job["metadata"]["uid"] if job is not None else self._uids.get(key)
        if uid is None:
            return
        for wl in self._store.list(self.workloads, key[0], label_selector=f"{JOB_UID_LABEL}={uid}"):
            self._drop_finalizer(wl)
            if not wl["metadata"].get("deletionTimestamp"):
                try:
                    self._store.delete(self.workloads, key[0], wl["metadata"]["name"])
                except StoreError as exc:
                    if exc.code != 404:
                        raise
        if job is None and self._uids.get(key) == uid:
            del self._uids[key]

    def _patch_job(self, job: Obj, patch: Obj) -> None:
        meta = job["metadata"]
        try:
            self._store.patch(
                self.jobs,
                meta["namespace"],
                meta["name"],
                patch,
                content_type=MERGE,
                manager=KUEUE_MANAGER,
            )
        except StoreError as exc:
            if exc.code not in (404, 409):
                raise
            # 409: the Job moved on since we read it; its event brings us back.
