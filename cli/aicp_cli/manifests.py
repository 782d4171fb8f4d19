"""`aicp apply -f`: documents from YAML or JSON files, and what applying each would change.

A document is a request body of the REST API with an optional `kind` (Workload when absent;
also ComputePool, Project, AcceleratorBinding). Several documents per file (`---`), several
files, or `-` for standard input. Applying is create-or-replace by name:

- Workload: created (POST) when absent; replaced (PUT, a new generation) when its spec differs
  from the stored one, the defaults filled in; unchanged otherwise.
- ComputePool: created when absent; its quota changed (PATCH) when it differs.
- Project: created when absent; its `limits` changed (PATCH) when the document names them and
  they differ (the other fields have no update).
- AcceleratorBinding: PUT (created or replaced).
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
    from aicp_cli.client import Client

KIND_NAMES = {
    "workload": "Workload",
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
    "max_runtime_seconds": 86400,
    "retries": 0,
    "priority": "normal",
    "labels": {},
}


@dataclass
class Document:
    source: str  # "file.yaml" or "file.yaml#2"
    kind: str
    body: dict[str, Any]

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
            found = _document(source, doc)
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


def _document(source: str, doc: dict[str, Any]) -> Document:
    body = dict(doc)
    raw_kind = body.pop("kind", "Workload")
    kind = KIND_NAMES.get(str(raw_kind).lower().replace("-", "").replace("_", ""))
    if kind is None:
        raise CliError(
            f"{source}: unknown kind {raw_kind!r} (Workload, ComputePool, Project, "
            "AcceleratorBinding)"
        )
    body.pop("apiVersion", None)
    return Document(source, kind, body)


@dataclass
class Plan:
    """What applying one document does: the action, the request, and the diff."""

    document: Document
    action: str  # created, replaced, configured, unchanged
    method: str | None
    path: str
    body: Any
    diff: str


def plan(client: Client, project: str | None, doc: Document) -> Plan:
    name = doc.name
    if doc.kind == "Workload":
        path = by_name("workload").path(_project(project, doc))
        one = by_name("workload").path(_project(project, doc), name)
        current = client.exists(one)
        if current is None:
            return Plan(doc, "created", "POST", path, doc.body, _diff(None, doc.body, name))
        wanted = {**WORKLOAD_DEFAULTS, **doc.body}
        stored = current.get("spec") or {}
        if wanted.get(SERVER_DEFAULTED) is None:
            # The server filled in its own default: a file that names none asks for just that.
            stored = {k: v for k, v in stored.items() if k != SERVER_DEFAULTED}
            wanted.pop(SERVER_DEFAULTED, None)
        if _same(stored, wanted):
            return Plan(doc, "unchanged", None, one, None, "")
        return Plan(doc, "replaced", "PUT", one, doc.body, _diff(stored, wanted, name))
    if doc.kind == "ComputePool":
        path = by_name("pool").path(_project(project, doc))
        one = by_name("pool").path(_project(project, doc), name)
        current = client.exists(one)
        if current is None:
            return Plan(doc, "created", "POST", path, doc.body, _diff(None, doc.body, name))
        if current.get("accelerator_class") != doc.body.get("accelerator_class", None) and (
            "accelerator_class" in doc.body
        ):
            raise CliError(f"{doc.source}: a pool's accelerator_class cannot change")
        if _same(current.get("quota"), doc.body.get("quota")):
            return Plan(doc, "unchanged", None, one, None, "")
        patch = {"quota": doc.body.get("quota")}
        diff = _diff({"quota": current.get("quota")}, patch, name)
        return Plan(doc, "configured", "PATCH", one, patch, diff)
    if doc.kind == "Project":
        current = client.exists(by_name("project").path(None, name))
        if current is None:
            return Plan(doc, "created", "POST", "/projects", doc.body, _diff(None, doc.body, name))
        if "limits" not in doc.body or _same_limits(current.get("limits"), doc.body["limits"]):
            return Plan(doc, "unchanged", None, by_name("project").path(None, name), None, "")
        patch = {"limits": doc.body["limits"]}
        diff = _diff({"limits": current.get("limits")}, patch, name)
        return Plan(doc, "configured", "PATCH", by_name("project").path(None, name), patch, diff)
    path = by_name("binding").path(None, name)
    current = client.exists(path)
    body = {k: v for k, v in doc.body.items() if k != "accelerator_class"}
    if current is not None:
        stored = {k: current.get(k) for k in body}
        if _same(stored, body):
            return Plan(doc, "unchanged", None, path, None, "")
        return Plan(doc, "configured", "PUT", path, body, _diff(stored, body, name))
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


def execute(client: Client, step: Plan) -> None:
    """Send the plan's request. Creates carry no Idempotency-Key: applying the same file after
    a deletion must create again, not replay the first answer; the existence check above
    already makes a repeated apply a no-op."""
    if step.method is not None:
        client.request(step.method, step.path, body=step.body)
