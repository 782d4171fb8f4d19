"""`aicp apply -f`: documents from YAML or JSON files, and what applying each would change.

A document is a request body of the REST API with an optional `kind` (Workload when absent;
also Service, ComputePool, Project, AcceleratorBinding). Several documents per file (`---`),
several files, or `-` for standard input. Applying is create-or-replace by name:

- Workload and Service: created (POST) when absent; replaced (PUT, a new generation) when its
  spec differs from the stored one, the defaults filled in; unchanged otherwise.
- ComputePool: created when absent; its quota changed (PATCH) when it differs.
- Project: created when absent; its `limits` changed (PATCH) when the document names them and
  they differ (the other fields have no update).
- AcceleratorBinding: PUT (created or replaced).

What `aicp get ... -o yaml` (or `-o json`) prints applies back unchanged: a document without
`kind` that is a resource as the server answers it (it has `created_at`) is of the kind its
fields say, a list (`items:`) is each of its items, and the fields the server keeps (ids,
times, generation, status; a workload's or a service's fields outside `spec`) are dropped; a
resource with a `spec` is a service when its spec has a `port` or a `readiness_path`. A document's
`project` (in `get`'s output) is the project it applies to.

`--dry-run` sends each request with `?dry_run=true`: the server checks it as it would check
the real one (so its errors are the real apply's) and answers what it would store; the diff
is between what is stored and that answer.
"""

from __future__ import annotations

import difflib
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from aicp_cli.config import yaml_problem
from aicp_cli.errors import CliError
from aicp_cli.kinds import by_name

if TYPE_CHECKING:
    from collections.abc import Callable

    from aicp_cli.client import Client

KIND_NAMES = {
    "workload": "Workload",
    "service": "Service",
    "computepool": "ComputePool",
    "pool": "ComputePool",
    "project": "Project",
    "acceleratorbinding": "AcceleratorBinding",
    "binding": "AcceleratorBinding",
}
#: The spec field whose default is the installation's (AICP_WORKLOAD_START_DEADLINE_SECONDS),
#: filled in by the server: a file that omits it compares equal to any stored value.
SERVER_DEFAULTED = "start_deadline_seconds"
#: The workload spec's defaults (docs/API.md), so a file that omits them compares equal.
WORKLOAD_DEFAULTS: dict[str, Any] = {
    "command": [],
    "args": [],
    "env": {},
    "accelerators": 0,
    "cpu": "1",
    "memory": "1Gi",
    "replicas": 1,
    "nodes": 1,
    "max_runtime_seconds": 86400,
    "retries": 0,
    "priority": "normal",
    "labels": {},
}
#: The service spec's defaults as the API fills them in (its OpenAPI schema), and autoscaling's.
SERVICE_DEFAULTS: dict[str, Any] = {
    "command": [],
    "args": [],
    "env": {},
    "accelerators": 0,
    "cpu": "1",
    "memory": "1Gi",
    "replicas": 1,
    "port": 8000,
    "readiness_path": "/healthz",
    "autoscaling": None,
    "priority": "normal",
    "labels": {},
}
AUTOSCALING_DEFAULTS: dict[str, Any] = {"min_replicas": 1, "target_cpu_percent": 70}
#: The fields only a service's spec has: a resource as `get` prints it with one of them in its
#: spec is a service.
SERVICE_ONLY = frozenset({"port", "readiness_path", "autoscaling"})


#: The fields the server keeps, by kind: in `get`'s output, ignored on apply.
READ_ONLY: dict[str, frozenset[str]] = {
    "Workload": frozenset(
        {"project", "uid", "generation", "created_at", "updated_at", "created_by", "status"}
    ),
    "Service": frozenset(
        {"project", "uid", "generation", "created_at", "updated_at", "created_by", "status"}
    ),
    "ComputePool": frozenset(
        {"project", "uid", "generation", "created_at", "updated_at", "created_by", "status"}
    ),
    "Project": frozenset(
        {"uid", "namespace", "generation", "created_at", "updated_at", "created_by", "status"}
    ),
    "AcceleratorBinding": frozenset({"created_at", "updated_at"}),
}
#: The fields a kind's request sets, as the server answers them (what a diff compares).
WRITTEN: dict[str, tuple[str, ...]] = {
    "ComputePool": ("name", "accelerator_class", "quota"),
    "Project": ("name", "display_name", "labels", "limits"),
    "AcceleratorBinding": ("resource_name", "flavor", "node_labels", "tolerations", "description"),
}


@dataclass
class Document:
    source: str  # "file.yaml" or "file.yaml#2"
    kind: str
    body: dict[str, Any]
    project: str | None = None  # the `project` of a resource as `get` printed it

    @property
    def name(self) -> str:
        key = "accelerator_class" if self.kind == "AcceleratorBinding" else "name"
        value = self.body.get(key)
        if not isinstance(value, str) or not value:
            raise CliError(f"{self.source}: {self.kind} has no {key!r}")
        return value


def read_documents(paths: list[str]) -> list[Document]:
    docs: list[Document] = []
    for path in paths:
        text = _read(path)
        label = "<stdin>" if path == "-" else path
        try:
            loaded = [d for d in yaml.safe_load_all(text) if d is not None]
        except yaml.YAMLError as exc:
            raise CliError(f"{label}: not valid YAML or JSON: {yaml_problem(exc)}") from exc
        for index, doc in enumerate(loaded, start=1):
            source = label if len(loaded) == 1 else f"{label}#{index}"
            if isinstance(doc, list):
                raise CliError(f"{source}: a document must be a mapping, not a list")
            if not isinstance(doc, dict):
                raise CliError(f"{source}: a document must be a mapping of fields")
            for item_source, item in _items(source, doc):
                found = _document(item_source, item)
                _ = found.name  # a document without its name is reported here, with its source
                docs.append(found)
    if not docs:
        raise CliError("no documents to apply")
    return docs


def _read(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise CliError(f"{path}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise CliError(f"{path}: not UTF-8 text") from exc


def _items(source: str, doc: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """A list as `get` prints it (`items:`, and `next_cursor`) is its items; any other
    document is itself."""
    items = doc.get("items")
    if "kind" in doc or not isinstance(items, list) or set(doc) - {"items", "next_cursor"}:
        return [(source, doc)]
    found = []
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            raise CliError(f"{source}: items[{index}] must be a mapping of fields")
        found.append((f"{source} items[{index}]", item))
    return found


def _kind_of_resource(source: str, doc: dict[str, Any]) -> str:
    """The kind of a document without `kind`: Workload, unless it is a resource as the
    server answers it (with `created_at`), whose fields tell its kind."""
    if "created_at" not in doc:
        return "Workload"
    if "spec" in doc:
        spec = doc["spec"]
        return "Service" if isinstance(spec, dict) and SERVICE_ONLY & set(spec) else "Workload"
    if "quota" in doc:
        return "ComputePool"
    if "resource_name" in doc:
        return "AcceleratorBinding"
    if "namespace" in doc:
        return "Project"
    if "role" in doc:
        raise CliError(f"{source}: tokens are not applied from files; use 'aicp create token'")
    return "Workload"


def _document(source: str, doc: dict[str, Any]) -> Document:
    body = dict(doc)
    raw_kind = body.pop("kind", None) or _kind_of_resource(source, body)
    kind = KIND_NAMES.get(str(raw_kind).lower().replace("-", "").replace("_", ""))
    if kind is None:
        raise CliError(
            f"{source}: unknown kind {raw_kind!r} (Workload, Service, ComputePool, Project, "
            "AcceleratorBinding)"
        )
    body.pop("apiVersion", None)
    project = body.get("project") if kind in ("Workload", "Service", "ComputePool") else None
    body = {key: value for key, value in body.items() if key not in READ_ONLY[kind]}
    if kind in ("Workload", "Service") and isinstance(body.get("spec"), dict):
        body = {**body.pop("spec"), **body}  # a workload or service as `get` prints it: its spec
    return Document(source, kind, body, project if isinstance(project, str) else None)


@dataclass
class Plan:
    """What applying one document does: the action, the request, and the diff."""

    document: Document
    action: str  # created, replaced, configured, unchanged
    method: str | None
    path: str
    body: Any
    diff: str
    stored: Any = None  # the resource as the server answered it before; None when absent
    admission: Any = None  # a workload dry run's admission forecast


def _plan_workload(doc: Document, one: str, current: Any) -> Plan:
    wanted = {**WORKLOAD_DEFAULTS, **doc.body}
    stored = current.get("spec") or {}
    if wanted.get(SERVER_DEFAULTED) is None:
        # The server filled in its own default: a file that names none asks for just that.
        stored = {k: v for k, v in stored.items() if k != SERVER_DEFAULTED}
        wanted.pop(SERVER_DEFAULTED, None)
    if _same(stored, wanted):
        return Plan(doc, "unchanged", None, one, None, "")
    return Plan(doc, "replaced", "PUT", one, doc.body, _diff(stored, wanted, doc.name), current)


def service_wanted(body: dict[str, Any]) -> dict[str, Any]:
    """A service document as the server stores its spec: the defaults filled in, its
    autoscaling's too."""
    wanted = {**SERVICE_DEFAULTS, **body}
    if isinstance(wanted["autoscaling"], dict):
        wanted["autoscaling"] = {**AUTOSCALING_DEFAULTS, **wanted["autoscaling"]}
    return wanted


def _plan_service(doc: Document, one: str, current: Any) -> Plan:
    wanted, stored = service_wanted(doc.body), current.get("spec") or {}
    if _same(stored, wanted):
        return Plan(doc, "unchanged", None, one, None, "")
    return Plan(doc, "replaced", "PUT", one, doc.body, _diff(stored, wanted, doc.name), current)


def _plan_pool(doc: Document, one: str, current: Any) -> Plan:
    if current.get("accelerator_class") != doc.body.get("accelerator_class", None) and (
        "accelerator_class" in doc.body
    ):
        raise CliError(f"{doc.source}: a pool's accelerator_class cannot change")
    if _same(current.get("quota"), doc.body.get("quota")):
        return Plan(doc, "unchanged", None, one, None, "")
    patch = {"quota": doc.body.get("quota")}
    diff = _diff({"quota": current.get("quota")}, patch, doc.name)
    return Plan(doc, "configured", "PATCH", one, patch, diff, current)


#: The kinds that live in a project: their resource name, and how one that exists is updated.
_IN_A_PROJECT: dict[str, tuple[str, Callable[[Document, str, Any], Plan]]] = {
    "Workload": ("workload", _plan_workload),
    "Service": ("service", _plan_service),
    "ComputePool": ("pool", _plan_pool),
}


def plan(client: Client, project: str | None, doc: Document) -> Plan:
    name = doc.name
    if doc.kind in _IN_A_PROJECT:
        resource, update = _IN_A_PROJECT[doc.kind]
        path = by_name(resource).path(_project(project, doc))
        one = by_name(resource).path(_project(project, doc), name)
        current = client.exists(one)
        if current is None:
            return Plan(doc, "created", "POST", path, doc.body, _diff(None, doc.body, name))
        return update(doc, one, current)
    if doc.kind == "Project":
        current = client.exists(by_name("project").path(None, name))
        if current is None:
            return Plan(doc, "created", "POST", "/projects", doc.body, _diff(None, doc.body, name))
        if "limits" not in doc.body or _same_limits(current.get("limits"), doc.body["limits"]):
            return Plan(doc, "unchanged", None, by_name("project").path(None, name), None, "")
        patch = {"limits": doc.body["limits"]}
        diff = _diff({"limits": current.get("limits")}, patch, name)
        one = by_name("project").path(None, name)
        return Plan(doc, "configured", "PATCH", one, patch, diff, current)
    path = by_name("binding").path(None, name)
    current = client.exists(path)
    body = {k: v for k, v in doc.body.items() if k != "accelerator_class"}
    if current is not None:
        stored = {k: current.get(k) for k in body}
        if _same(stored, body):
            return Plan(doc, "unchanged", None, path, None, "")
        return Plan(doc, "configured", "PUT", path, body, _diff(stored, body, name), current)
    return Plan(doc, "created", "PUT", path, body, _diff(None, body, name))


def _same_limits(stored: Any, wanted: Any) -> bool:
    """Limits as the server shows them (every ceiling, null when none) against a document's
    (only those it names)."""
    if stored is None or wanted is None:
        return stored is None and wanted is None
    if not isinstance(wanted, dict):
        return False
    return _same(stored, {"accelerators": None, "cpu": None, "memory": None, **wanted})


def _project(project: str | None, doc: Document) -> str:
    if doc.project and project and doc.project != project:
        raise CliError(
            f"the document is of project {doc.project!r}, not {project!r} "
            "(drop its `project` or pass --project to match)"
        )
    project = doc.project or project
    if not project:
        raise CliError(f"{doc.source}: no project (pass --project NAME or set AICP_PROJECT)")
    return project


def _same(left: Any, right: Any) -> bool:
    return json.dumps(left, sort_keys=True) == json.dumps(right, sort_keys=True)


def _diff(before: Any, after: Any, name: str) -> str:
    def lines(value: Any) -> list[str]:
        if value is None:
            return []
        return yaml.safe_dump(value, sort_keys=True).splitlines(keepends=True)

    return "".join(
        difflib.unified_diff(lines(before), lines(after), f"{name} (stored)", f"{name} (file)")
    )


def dry_run(client: Client, step: Plan) -> Plan:
    """The plan as the server's dry run answers it: the server's errors are raised as the
    real request would raise them, and the diff is between what `plan` read (none when
    absent) and what the server would store; "unchanged" when it would change nothing."""
    if step.method is None:
        return step
    answer = client.request(
        step.method, step.path, body=step.body, params={"dry_run": "true"}
    ).json()
    admission = answer.get("admission")
    if not answer.get("changes"):
        return Plan(step.document, "unchanged", None, step.path, None, "", admission=admission)
    kind, name = step.document.kind, step.document.name
    after = written(kind, answer["object"])
    before = written(kind, step.stored) if step.stored is not None else None
    diff = _diff(before, after, name)
    return Plan(
        step.document, step.action, step.method, step.path, step.body, diff, step.stored, admission
    )


def written(kind: str, obj: dict[str, Any]) -> dict[str, Any]:
    """The fields of a resource as the server answers it that a request of `kind` sets."""
    if kind in ("Workload", "Service"):
        spec: dict[str, Any] = obj.get("spec") or {}
        return spec
    return {key: obj.get(key) for key in WRITTEN[kind]}


def execute(client: Client, step: Plan) -> None:
    """Send the plan's request. Creates carry no Idempotency-Key: applying the same file after
    a deletion must create again, not replay the first answer; the existence check above
    already makes a repeated apply a no-op."""
    if step.method is not None:
        client.request(step.method, step.path, body=step.body)
