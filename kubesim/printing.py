"""Server-side printing: `kubectl get` asks for a `meta.k8s.io` Table (`Accept:
application/json;as=Table;v=v1;g=meta.k8s.io,...`) and prints its columns as they come.

Jobs, Pods, Services and Kueue Workloads get the columns the real apiserver (and Kueue's printer
columns) give them; every other type the default Name and Age. Ages and durations are
`duration.HumanDuration` of apimachinery (`45s`, `3m20s`, `5h10m`, `3d4h`). Each row carries
the object's metadata (`PartialObjectMetadata`, which `kubectl get -A` reads the namespace
from), the whole object with `includeObject=Object`, or nothing with `includeObject=None`.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from kubesim.cells import (
    AGE,
    NAME,
    Cell,
    Column,
    human_duration,
    parse_time,
    template_containers,
)
from kubesim.printing_serving import SERVING_COLUMNS

if TYPE_CHECKING:
    from kubesim.model import Obj, ResourceType

__all__ = ["human_duration", "table", "table_version"]

TABLE_VERSIONS = ("v1", "v1beta1")


def table_version(accept: str | None) -> str | None:
    """The `meta.k8s.io` version of the Table the Accept header asks for first, or None."""
    for media_range in (accept or "").split(","):
        params = dict(
            part.strip().partition("=")[::2] for part in media_range.split(";")[1:] if "=" in part
        )
        if (
            params.get("as") == "Table"
            and params.get("g") == "meta.k8s.io"
            and params.get("v") in TABLE_VERSIONS
        ):
            return params["v"]
    return None


def _condition(obj: Obj, kind: str) -> dict[str, Any] | None:
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if condition.get("type") == kind:
            found: dict[str, Any] = condition
            return found
    return None


def _true(obj: Obj, kind: str) -> bool:
    return (_condition(obj, kind) or {}).get("status") == "True"


# --- Jobs ------------------------------------------------------------------------------------


def _job_status(job: Obj, _now: datetime) -> str:
    for kind in ("Failed", "Complete", "FailureTarget", "SuccessCriteriaMet"):
        if _true(job, kind):
            return kind
    if job["metadata"].get("deletionTimestamp"):
        return "Terminating"
    if _true(job, "Suspended") or (job.get("spec") or {}).get("suspend"):
        return "Suspended"
    return "Running"


def _completions(job: Obj, _now: datetime) -> str:
    spec, status = job.get("spec") or {}, job.get("status") or {}
    succeeded = int(status.get("succeeded") or 0)
    if spec.get("completions") is not None:
        return f"{succeeded}/{spec['completions']}"
    parallelism = int(spec.get("parallelism") or 0)
    return f"{succeeded}/1 of {parallelism}" if parallelism > 1 else f"{succeeded}/1"


def _job_duration(job: Obj, now: datetime) -> str:
    status = job.get("status") or {}
    started = parse_time(status.get("startTime"))
    if started is None:
        return ""
    ended = parse_time(status.get("completionTime")) or now
    return human_duration((ended - started).total_seconds())


def _selector(job: Obj, _now: datetime) -> str:
    labels = ((job.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
    return ",".join(f"{k}={v}" for k, v in labels.items()) or "<none>"


# --- Pods ------------------------------------------------------------------------------------


def _statuses(pod: Obj) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = (pod.get("status") or {}).get("containerStatuses") or []
    return found


def _ready(pod: Obj, _now: datetime) -> str:
    total = len((pod.get("spec") or {}).get("containers") or [])
    ready = sum(1 for s in _statuses(pod) if s.get("ready"))
    return f"{ready}/{total}"


def _pod_status(pod: Obj, _now: datetime) -> str:
    status = pod.get("status") or {}
    reason = str(status.get("reason") or status.get("phase") or "Unknown")
    for container in _statuses(pod):
        state = container.get("state") or {}
        waiting, terminated = state.get("waiting") or {}, state.get("terminated")
        if waiting.get("reason"):
            reason = str(waiting["reason"])
        elif terminated is not None:
            code = terminated.get("exitCode", 0)
            reason = str(terminated.get("reason") or f"ExitCode:{code}")
    if pod["metadata"].get("deletionTimestamp"):
        return "Terminating"
    return reason


def _restarts(pod: Obj, _now: datetime) -> int:
    return sum(int(s.get("restartCount") or 0) for s in _statuses(pod))


def _pod_field(*path: str) -> Cell:
    def cell(pod: Obj, _now: datetime) -> str:
        value: Any = pod
        for key in path:
            value = (value or {}).get(key)
        return str(value) if value else "<none>"

    return cell


# --- Services --------------------------------------------------------------------------------


def _service_ports(svc: Obj, _now: datetime) -> str:
    """`8080/TCP`, `80:30080/TCP` with a node port, `<none>` without ports (kubectl's form)."""
    out = []
    for port in (svc.get("spec") or {}).get("ports") or []:
        node_port = f":{port['nodePort']}" if port.get("nodePort") else ""
        out.append(f"{port.get('port')}{node_port}/{port.get('protocol', 'TCP')}")
    return ",".join(out) or "<none>"


def _service_selector(svc: Obj, _now: datetime) -> str:
    labels = (svc.get("spec") or {}).get("selector") or {}
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items())) or "<none>"


def _external_ip(svc: Obj, _now: datetime) -> str:
    ips = (svc.get("spec") or {}).get("externalIPs") or []
    return ",".join(ips) or "<none>"


# --- Kueue Workloads ---------------------------------------------------------------------------


def _condition_status(kind: str) -> Cell:
    def cell(obj: Obj, _now: datetime) -> str:
        return str((_condition(obj, kind) or {}).get("status") or "")

    return cell


def _reserved_in(workload: Obj, _now: datetime) -> str:
    admission = (workload.get("status") or {}).get("admission") or {}
    return str(admission.get("clusterQueue") or "")


DEFAULT = [NAME, AGE]
COLUMNS: dict[tuple[str, str], list[Column]] = {
    **SERVING_COLUMNS,
    ("batch", "jobs"): [
        NAME,
        ("Status", "string", "", "Status of the job.", 0, _job_status),
        ("Completions", "string", "", "The completion status of the job.", 0, _completions),
        ("Duration", "string", "", "Time required to complete the job.", 0, _job_duration),
        AGE,
        (
            "Containers",
            "string",
            "",
            "Names of each container in the template.",
            1,
            lambda o, _n: template_containers(o, "name"),
        ),
        (
            "Images",
            "string",
            "",
            "Images referenced by each container in the template.",
            1,
            lambda o, _n: template_containers(o, "image"),
        ),
        (
            "Selector",
            "string",
            "",
            "Query over pods that should match the pod count.",
            1,
            _selector,
        ),
    ],
    ("", "pods"): [
        NAME,
        ("Ready", "string", "", "The aggregate readiness state of this pod.", 0, _ready),
        (
            "Status",
            "string",
            "",
            "The aggregate status of the containers in this pod.",
            0,
            _pod_status,
        ),
        (
            "Restarts",
            "string",
            "",
            "The number of times the containers have restarted.",
            0,
            _restarts,
        ),
        AGE,
        (
            "IP",
            "string",
            "",
            "The IP address assigned to the pod.",
            1,
            _pod_field("status", "podIP"),
        ),
        (
            "Node",
            "string",
            "",
            "The name of the node the pod is assigned to.",
            1,
            _pod_field("spec", "nodeName"),
        ),
        (
            "Nominated Node",
            "string",
            "",
            "The node the pod is nominated to.",
            1,
            _pod_field("status", "nominatedNodeName"),
        ),
        ("Readiness Gates", "string", "", "The pod's readiness gates.", 1, lambda o, _n: "<none>"),
    ],
    ("", "services"): [
        NAME,
        ("Type", "string", "", "The type of the service.", 0, _pod_field("spec", "type")),
        (
            "Cluster-IP",
            "string",
            "",
            "The IP address of the service.",
            0,
            _pod_field("spec", "clusterIP"),
        ),
        ("External-IP", "string", "", "The external IP of the service.", 0, _external_ip),
        ("Port(s)", "string", "", "The ports of the service.", 0, _service_ports),
        AGE,
        ("Selector", "string", "", "The selector of the service.", 1, _service_selector),
    ],
    ("kueue.x-k8s.io", "workloads"): [
        NAME,
        (
            "Queue",
            "string",
            "",
            "Name of the queue this workload was submitted to",
            0,
            lambda o, _n: str((o.get("spec") or {}).get("queueName") or ""),
        ),
        (
            "Reserved in",
            "string",
            "",
            "Name of the ClusterQueue where the workload is reserving quota",
            0,
            _reserved_in,
        ),
        ("Admitted", "string", "", "Admission status", 0, _condition_status("Admitted")),
        ("Finished", "string", "", "Workload finished", 0, _condition_status("Finished")),
        AGE,
    ],
}


def _row_object(obj: Obj, include: str, version: str) -> Obj | None:
    if include == "None":
        return None
    if include == "Object":
        return obj
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": f"meta.k8s.io/{version}",
        "metadata": obj["metadata"],
    }


def table(
    rt: ResourceType,
    objects: list[Obj],
    list_metadata: dict[str, Any],
    *,
    version: str = "v1",
    include_object: str | None = None,
    now: datetime | None = None,
) -> Obj:
    """The `meta.k8s.io/<version>` Table of `objects` (one object: a one-row Table)."""
    columns = COLUMNS.get(rt.key, DEFAULT)
    when = now or datetime.now(UTC)
    include = include_object or "PartialObjectMetadata"
    rows = []
    for obj in objects:
        row: Obj = {"cells": [cell(obj, when) for *_, cell in columns]}
        shown = _row_object(obj, include, version)
        if shown is not None:
            row["object"] = shown
        rows.append(row)
    return {
        "kind": "Table",
        "apiVersion": f"meta.k8s.io/{version}",
        "metadata": list_metadata,
        "columnDefinitions": [
            {"name": n, "type": t, "format": f, "description": d, "priority": p}
            for n, t, f, d, p, _ in columns
        ],
        "rows": rows,
    }
