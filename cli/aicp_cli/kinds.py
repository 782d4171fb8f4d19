"""The resource kinds the command line knows: their names, paths and table columns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from aicp_cli.errors import CliError
from aicp_cli.output import Column, age, eta_span


def _status(obj: dict[str, Any], key: str) -> Any:
    return (obj.get("status") or {}).get(key)


def _gpus(obj: dict[str, Any]) -> str:
    spec = obj.get("spec") or {}
    per, replicas = spec.get("accelerators", 0), spec.get("replicas", 1)
    count = spec.get("nodes", 1) if spec.get("nodes", 1) != 1 else replicas
    return f"{per}x{count}" if count != 1 else str(per)


def _accelerator(obj: dict[str, Any]) -> str | None:
    found = _status(obj, "accelerator") or {}
    return found.get("product")


def _queue(obj: dict[str, Any]) -> str | None:
    """`#3 5m-20m`: the place in its pool's queue and the estimated start band from now
    (`#3 -` without an estimate); QUEUED workloads only."""
    queue = _status(obj, "queue")
    return f"#{queue['position']} {eta_span(queue.get('eta'))}" if queue else None


WORKLOAD_COLUMNS: list[Column] = [
    ("NAME", lambda o: o["name"]),
    ("STATE", lambda o: _status(o, "state")),
    ("POOL", lambda o: o.get("compute_pool")),
    ("GPUS", _gpus),
    ("AGE", lambda o: age(o.get("created_at"))),
    ("QUEUE", _queue),
    ("REASON", lambda o: _status(o, "reason")),
]
WORKLOAD_WIDE: list[Column] = [
    *WORKLOAD_COLUMNS[:-1],
    ("GEN", lambda o: f"{o.get('generation')}/{_status(o, 'observed_generation')}"),
    ("NODES", lambda o: _status(o, "nodes")),
    ("ACCELERATOR", _accelerator),
    ("ATTEMPTS", lambda o: _status(o, "attempts")),
    ("EXIT", lambda o: _status(o, "exit_code")),
    ("JOB", lambda o: (_status(o, "job") or {}).get("name")),
    WORKLOAD_COLUMNS[-1],
]


def _replicas(obj: dict[str, Any]) -> dict[str, Any]:
    replicas: dict[str, Any] = _status(obj, "replicas") or {}
    return replicas


def desired(obj: dict[str, Any]) -> int:
    """How many replicas a service asks for: the controller's count once it has reported one
    (the autoscaler's when it scales), the spec's until then (its autoscaling minimum)."""
    if _status(obj, "observed_generation"):
        return int(_replicas(obj).get("desired") or 0)
    spec = obj.get("spec") or {}
    autoscaling = spec.get("autoscaling")
    if autoscaling:
        return int(autoscaling.get("min_replicas", 1))
    return int(spec.get("replicas", 1))


def _service_gpus(obj: dict[str, Any]) -> str:
    """`8x2`: accelerators per replica times the replicas asked for (`8` for one)."""
    per, count = (obj.get("spec") or {}).get("accelerators", 0), desired(obj)
    return f"{per}x{count}" if count != 1 else str(per)


SERVICE_COLUMNS: list[Column] = [
    ("NAME", lambda o: o["name"]),
    ("STATE", lambda o: _status(o, "state")),
    ("POOL", lambda o: o.get("compute_pool")),
    ("READY", lambda o: f"{_replicas(o).get('ready', 0)}/{desired(o)}"),
    ("GPUS", _service_gpus),
    ("ENDPOINT", lambda o: _status(o, "endpoint")),
    ("AGE", lambda o: age(o.get("created_at"))),
    ("REASON", lambda o: _status(o, "reason")),
]
SERVICE_WIDE: list[Column] = [
    *SERVICE_COLUMNS[:-1],
    ("GEN", lambda o: f"{o.get('generation')}/{_status(o, 'observed_generation')}"),
    ("NODES", lambda o: _status(o, "nodes")),
    ("UPDATED", lambda o: _replicas(o).get("updated", 0)),
    ("WAITING", lambda o: _replicas(o).get("waiting_for_quota", 0)),
    SERVICE_COLUMNS[-1],
]


def _usage(obj: dict[str, Any], key: str) -> Any:
    return ((obj.get("status") or {}).get("usage") or {}).get(key)


POOL_COLUMNS: list[Column] = [
    ("NAME", lambda o: o["name"]),
    ("STATE", lambda o: _status(o, "state")),
    ("CLASS", lambda o: o.get("accelerator_class")),
    ("GPUS", lambda o: (o.get("quota") or {}).get("accelerators")),
    ("IN USE", lambda o: _usage(o, "accelerators_admitted")),
    ("ADMITTED", lambda o: _usage(o, "workloads_admitted")),
    ("PENDING", lambda o: _usage(o, "workloads_pending")),
    ("AGE", lambda o: age(o.get("created_at"))),
]
POOL_WIDE: list[Column] = [
    *POOL_COLUMNS,
    ("CPU", lambda o: (o.get("quota") or {}).get("cpu")),
    ("MEMORY", lambda o: (o.get("quota") or {}).get("memory")),
    ("CLUSTER QUEUE", lambda o: _status(o, "cluster_queue")),
    ("REASON", lambda o: _status(o, "reason")),
]


def limits_text(limits: dict[str, Any] | None) -> str:
    """A project's limits in one cell: `h100-80g=16,cpu=256,memory=2Ti`, or `none`."""
    if not limits:
        return "none"
    parts = [f"{k}={v}" for k, v in sorted((limits.get("accelerators") or {}).items())]
    if limits.get("accelerators") == {}:
        parts.append("no accelerators")
    parts += [f"{key}={limits[key]}" for key in ("cpu", "memory") if limits.get(key) is not None]
    return ",".join(parts) or "none"


PROJECT_COLUMNS: list[Column] = [
    ("NAME", lambda o: o["name"]),
    ("STATE", lambda o: _status(o, "state")),
    ("NAMESPACE", lambda o: o.get("namespace")),
    ("AGE", lambda o: age(o.get("created_at"))),
]
PROJECT_WIDE: list[Column] = [
    *PROJECT_COLUMNS,
    ("LIMITS", lambda o: limits_text(o.get("limits"))),
    ("DISPLAY NAME", lambda o: o.get("display_name")),
    ("REASON", lambda o: _status(o, "reason")),
]
TOKEN_COLUMNS: list[Column] = [
    ("ID", lambda o: o["id"]),
    ("NAME", lambda o: o["name"]),
    ("ROLE", lambda o: o["role"]),
    ("AGE", lambda o: age(o.get("created_at"))),
    ("EXPIRES", lambda o: o.get("expires_at") or "never"),
    ("REVOKED", lambda o: o.get("revoked_at") or "-"),
]
BINDING_COLUMNS: list[Column] = [
    ("CLASS", lambda o: o["accelerator_class"]),
    ("RESOURCE", lambda o: o.get("resource_name")),
    ("FLAVOR", lambda o: o.get("flavor")),
    ("NODE LABELS", lambda o: [f"{k}={v}" for k, v in (o.get("node_labels") or {}).items()]),
    ("AGE", lambda o: age(o.get("created_at"))),
]


WORKLOAD_STATES = ("PENDING", "QUEUED", "ADMITTED", "RUNNING", "SUCCEEDED", "FAILED", "DELETING")
SERVICE_STATES = ("PENDING", "PROGRESSING", "READY", "DEGRADED", "DELETING")


@dataclass(frozen=True)
class Kind:
    name: str  # singular, as printed: "workload"
    plural: str  # "workloads"
    aliases: tuple[str, ...]
    scoped: bool  # under /projects/{project}
    segment: str  # the path segment
    key: str  # the field naming one
    columns: list[Column]
    wide: list[Column]
    #: What `--state` takes; none for a kind whose list has no `state`, `compute_pool` and
    #: `name_contains` filters.
    states: tuple[str, ...] = ()
    #: The widths of a live watch's columns but the last (`-w`, `-o wide`'s; the plain table
    #: takes the first ones); none for a kind the server streams no changes of.
    watch_widths: tuple[int, ...] = ()

    def path(self, project: str | None, name: str | None = None) -> str:
        """The API path of the list (or of one by `name`), every segment percent-encoded."""
        if self.scoped:
            base = f"/projects/{segment(project or '')}/{self.segment}"
        else:
            base = f"/{self.segment}"
        return base if name is None else f"{base}/{segment(name)}"


KINDS = [
    Kind(
        "workload",
        "workloads",
        ("wl", "workload", "workloads"),
        True,
        "workloads",
        "name",
        WORKLOAD_COLUMNS,
        WORKLOAD_WIDE,
        WORKLOAD_STATES,
        (24, 10, 14, 5, 6, 6, 24, 24, 8, 4, 28),
    ),
    Kind(
        "service",
        "services",
        ("svc", "service", "services"),
        True,
        "services",
        "name",
        SERVICE_COLUMNS,
        SERVICE_WIDE,
        SERVICE_STATES,
        (24, 11, 14, 5, 5, 36, 6, 5, 24, 7, 7),
    ),
    Kind(
        "pool",
        "pools",
        ("pool", "pools", "compute-pool", "compute-pools", "cp"),
        True,
        "compute-pools",
        "name",
        POOL_COLUMNS,
        POOL_WIDE,
    ),
    Kind(
        "project",
        "projects",
        ("project", "projects", "proj"),
        False,
        "projects",
        "name",
        PROJECT_COLUMNS,
        PROJECT_WIDE,
    ),
    Kind(
        "token",
        "tokens",
        ("token", "tokens"),
        True,
        "tokens",
        "id",
        TOKEN_COLUMNS,
        TOKEN_COLUMNS,
    ),
    Kind(
        "binding",
        "bindings",
        ("binding", "bindings", "accelerator-binding", "accelerator-bindings", "ab"),
        False,
        "accelerator-bindings",
        "accelerator_class",
        BINDING_COLUMNS,
        BINDING_COLUMNS,
    ),
]
NAMES = sorted({alias for kind in KINDS for alias in kind.aliases})


def segment(value: str) -> str:
    """One path segment, percent-encoded: a name with `/`, `?`, `#` or `%` stays one segment
    (the server then answers that no such resource exists)."""
    return quote(value, safe="")


def by_name(name: str) -> Kind:
    """The kind of this singular name (`workload`, `pool`, ...)."""
    return next(found for found in KINDS if found.name == name)


def kind_named(word: str) -> Kind:
    for kind in KINDS:
        if word.lower() in kind.aliases:
            return kind
    known = ", ".join(kind.plural for kind in KINDS)
    raise CliError(f"unknown resource type {word!r} (one of: {known})")
