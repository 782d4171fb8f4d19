"""Raw Kubernetes objects: the one alias for a manifest dict and every read-only accessor.

aicp reads Jobs, Kueue Workloads, Pods and Nodes exactly as the apiserver sends them, and
writes manifests as plain dicts, without converting to client models: a missing field is
simply absent. `Manifest` is a whole object as a dict (what rendering builds and what an
informer caches); the accessors take any read-only mapping (`KubeObject`), tolerate absent or
`null` fields and never raise on a well-formed object.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from app.domain.conditions import POD_SCHEDULED, UNSCHEDULABLE, PodPhase
from app.domain.labels import JOB_CONTROLLER_UID_LABEL, MAIN_CONTAINER

Manifest = dict[str, Any]
"""A whole Kubernetes object as its JSON dict: apiVersion, kind, metadata, spec, status."""
KubeObject = Mapping[str, Any]
"""What the accessors read: a `Manifest`, or any mapping of the same shape."""
Key = tuple[str, str]
"""(namespace, name); the namespace is "" for cluster-scoped objects."""

GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
GPU_MEMORY_LABEL = "nvidia.com/gpu.memory"


def field(obj: KubeObject | None, *path: str) -> Any:
    """`obj[path[0]][path[1]]...`, or None as soon as a step is absent or null."""
    current: Any = obj
    for step in path:
        if not isinstance(current, Mapping):
            return None
        current = current.get(step)
    return current


def name_of(obj: KubeObject) -> str:
    return str(field(obj, "metadata", "name") or "")


def namespace_of(obj: KubeObject) -> str:
    """The object's namespace, "" for a cluster-scoped object."""
    return str(field(obj, "metadata", "namespace") or "")


def key_of(obj: KubeObject) -> Key:
    """(namespace, name): how caches and routes address an object."""
    return (namespace_of(obj), name_of(obj))


def labels_of(obj: KubeObject) -> dict[str, str]:
    """The object's labels, {} when it has none."""
    labels = field(obj, "metadata", "labels")
    return labels if isinstance(labels, dict) else {}


def label_of(obj: KubeObject, label: str) -> str | None:
    """One label's value, None when the object does not carry it."""
    value = labels_of(obj).get(label)
    return str(value) if value is not None else None


def resource_version_of(obj: KubeObject) -> str | None:
    rv = field(obj, "metadata", "resourceVersion")
    return str(rv) if rv else None


def condition(obj: KubeObject | None, kind: str) -> KubeObject | None:
    """The status condition of type `kind`, if the object has one."""
    for cond in field(obj, "status", "conditions") or ():
        if isinstance(cond, Mapping) and cond.get("type") == kind:
            return cond
    return None


def is_true(obj: KubeObject | None, kind: str) -> bool:
    """Whether condition `kind` is present with status "True"."""
    cond = condition(obj, kind)
    return cond is not None and cond.get("status") == "True"


def parse_time(value: object) -> datetime | None:
    """An RFC 3339 time as Kubernetes writes it (`2026-08-01T10:00:00Z`), else None."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


def transition_time(obj: KubeObject | None, kind: str) -> datetime | None:
    """When condition `kind` last became True; None when it is absent or not True."""
    cond = condition(obj, kind)
    if cond is None or cond.get("status") != "True":
        return None
    return parse_time(cond.get("lastTransitionTime"))


def pods_of_job(job: KubeObject | None, pods: Iterable[KubeObject]) -> list[KubeObject]:
    """The pods that belong to `job`, in name order.

    A pod labelled with another Job's controller uid (an older generation, or a Job that was
    deleted and recreated under the same name) is left out so its facts never describe this
    Job. Pods without the label are kept: the caller already selected them for this Job.
    """
    job_uid = field(job, "metadata", "uid")
    mine = [
        pod
        for pod in pods
        if job_uid is None
        or field(pod, "metadata", "labels", JOB_CONTROLLER_UID_LABEL) in (None, job_uid)
    ]
    return sorted(mine, key=name_of)


def is_terminating(obj: KubeObject) -> bool:
    return field(obj, "metadata", "deletionTimestamp") is not None


def phase(pod: KubeObject) -> str:
    return str(field(pod, "status", "phase") or PodPhase.PENDING)


def node_name(pod: KubeObject) -> str | None:
    value = field(pod, "spec", "nodeName")
    return str(value) if value else None


#: The pod annotation (and label) in which the Job controller writes an Indexed Job pod's index.
COMPLETION_INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"


def completion_index(pod: KubeObject) -> int | None:
    """The rank of an Indexed Job's pod (its completion index), None for any other pod."""
    value = field(pod, "metadata", "annotations", COMPLETION_INDEX_ANNOTATION)
    if value is None:
        value = field(pod, "metadata", "labels", COMPLETION_INDEX_ANNOTATION)
    return int(value) if isinstance(value, str) and value.isdigit() else None


def main_status(pod: KubeObject) -> KubeObject | None:
    """The container status of `main` (or the only container), if the kubelet reported one."""
    statuses = [
        s for s in field(pod, "status", "containerStatuses") or () if isinstance(s, Mapping)
    ]
    for status in statuses:
        if status.get("name") == MAIN_CONTAINER:
            return status
    return statuses[0] if len(statuses) == 1 else None


def main_container(pod: KubeObject) -> KubeObject | None:
    """The `main` container of the pod spec (or the only one)."""
    containers = [c for c in field(pod, "spec", "containers") or () if isinstance(c, Mapping)]
    for container in containers:
        if container.get("name") == MAIN_CONTAINER:
            return container
    return containers[0] if len(containers) == 1 else None


def terminated(pod: KubeObject) -> KubeObject | None:
    """The `main` container's terminated state (current, else last), if it has ended."""
    status = main_status(pod)
    found = field(status, "state", "terminated") or field(status, "lastState", "terminated")
    return found if isinstance(found, Mapping) else None


def waiting_reason(pod: KubeObject) -> tuple[str, str] | None:
    """(reason, message) of the `main` container's waiting state, if it is waiting."""
    waiting = field(main_status(pod), "state", "waiting")
    if not isinstance(waiting, Mapping) or not waiting.get("reason"):
        return None
    return str(waiting["reason"]), str(waiting.get("message") or "")


def unschedulable_message(pod: KubeObject) -> str | None:
    """The scheduler's message when the pod is Pending with `PodScheduled=False/Unschedulable`."""
    cond = condition(pod, POD_SCHEDULED)
    if cond is None or cond.get("status") != "False" or cond.get("reason") != UNSCHEDULABLE:
        return None
    return str(cond.get("message") or "no node fits the pod")


def index_by_name(objects: Iterable[KubeObject]) -> dict[str, KubeObject]:
    return {name_of(obj): obj for obj in objects}


def job_count(job: KubeObject | None, key: str) -> int:
    """One of the Job's pod counters (`active`, `succeeded`, `failed`), 0 when absent."""
    value = field(job, "status", key)
    return value if isinstance(value, int) else 0


#: The annotation `kubectl apply` keeps a whole copy of the object in.
LAST_APPLIED_ANNOTATION = "kubectl.kubernetes.io/last-applied-configuration"
#: What aicp reads of a container in a cached Job or Pod (`main_container`, `main_status`):
#: its name, image and resources. Its command, args and environment (most of a large spec) and
#: the rest are dropped from the informer caches.
_CONTAINER_FIELDS = ("name", "image", "resources")


def slimmed(obj: Manifest) -> Manifest:
    """`obj` (changed in place) without what aicp never reads of it, as the informers cache it:
    `metadata.managedFields` and the last-applied annotation of every kind; the containers of a
    Job's pod template and of a Pod but for `_CONTAINER_FIELDS`; the pod templates of a Kueue
    Workload's `spec.podSets` (aicp reads its status). Drift is checked on a Job's metadata
    only (`app.reconcile.steps.drift`), which stays whole."""
    metadata = obj.get("metadata")
    if isinstance(metadata, dict):
        metadata.pop("managedFields", None)
        annotations = metadata.get("annotations")
        if isinstance(annotations, dict):
            annotations.pop(LAST_APPLIED_ANNOTATION, None)
    kind = obj.get("kind")
    if kind == "Job":
        _slim_pod_spec(field(obj, "spec", "template", "spec"))
    elif kind == "Pod":
        _slim_pod_spec(obj.get("spec"))
    elif kind == "Workload":
        for pod_set in field(obj, "spec", "podSets") or ():
            if isinstance(pod_set, dict):
                pod_set.pop("template", None)
    return obj


def _slim_pod_spec(spec: Any) -> None:
    if not isinstance(spec, dict):
        return
    for key in ("containers", "initContainers"):
        containers = spec.get(key)
        if isinstance(containers, list):
            spec[key] = [
                {k: c[k] for k in _CONTAINER_FIELDS if k in c} if isinstance(c, dict) else c
                for c in containers
            ]
