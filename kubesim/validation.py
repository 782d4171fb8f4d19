"""Strict schema validation: built-ins against the real Kubernetes JSON schemas
(`kubernetes-validate`, strict variant, `SCHEMA_VERSION`), Kueue kinds against the hand-kept
schemas in `kubesim/schemas/` (strict too: unknown fields are 422, like a strict apiserver).

Validators are built once per kind and cached; the schema files are read once.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kubernetes_validate import utils as kv_utils

from kubesim import rules, workloads
from kubesim.model import Obj, ResourceType, invalid
from kubesim.services import service_causes

if TYPE_CHECKING:
    from collections.abc import Callable

SCHEMA_VERSION = "1.37.0"
_SCHEMA_DIR = f"kubernetes-json-schema/v{SCHEMA_VERSION}-local-strict"
CUSTOM_SCHEMAS = Path(__file__).with_name("schemas")

_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


@dataclass(frozen=True)
class Problem:
    """One schema violation, whichever engine found it."""

    path: list[str | int]
    keyword: str  # "additionalProperties", "required", "type", …
    message: str


@cache
def _definitions() -> dict[str, Any]:
    defs: dict[str, Any] = kv_utils.schema_contents(
        f"{_SCHEMA_DIR}/_definitions.json", SCHEMA_VERSION
    )
    return defs


@cache
def schema_for(rt: ResourceType) -> dict[str, Any]:
    """The JSON schema `rt` objects are validated against (shared: do not mutate)."""
    if rt.is_custom:
        custom: dict[str, Any] = json.loads((CUSTOM_SCHEMAS / f"{rt.plural}.json").read_text())
        return custom
    group = rt.group.split(".")[0]
    name = f"{rt.kind.lower()}-{group + '-' if group else ''}{rt.version}.json"
    builtin: dict[str, Any] = kv_utils.schema_contents(f"{_SCHEMA_DIR}/{name}", SCHEMA_VERSION)
    return builtin


_RS_KEYWORDS = {"AdditionalProperties": "additionalProperties", "Required": "required"}


@cache
def _validator(rt: ResourceType) -> Callable[[Obj], list[Problem]]:
    """A Draft 2020-12 validator for `rt`, with the definitions registry resolved once.
    Uses the Rust `jsonschema_rs` when it is installed (~100x faster: this is the apiserver's
    hot path), else the pure-Python `jsonschema` that kubernetes-validate brings."""
    schema, defs = schema_for(rt), _definitions()
    try:
        import jsonschema_rs
    except ImportError:
        import jsonschema  # type: ignore[import-untyped]
        import referencing

        resource: referencing.Resource[Any] = referencing.Resource.from_contents(defs)
        registry: referencing.Registry[Any] = referencing.Registry().with_resource(
            defs["$id"], resource
        )
        slow = jsonschema.Draft202012Validator(schema, registry=registry)
        return lambda obj: [
            Problem(list(e.absolute_path), str(e.validator), e.message)
            for e in slow.iter_errors(obj)
        ]
    fast = jsonschema_rs.validator_for(
        schema, registry=jsonschema_rs.Registry([(defs["$id"], defs)])
    )

    def check(obj: Obj) -> list[Problem]:
        if fast.is_valid(obj):
            return []
        return [
            Problem(
                list(e.instance_path),
                _RS_KEYWORDS.get(type(e.kind).__name__, type(e.kind).__name__),
                e.message,
            )
            for e in fast.iter_errors(obj)
        ]

    return check


def _field(path: list[str | int]) -> str:
    parts = [p if isinstance(p, str) else f"[{p}]" for p in path]
    return ".".join(parts).replace(".[", "[")


def _cause(problem: Problem) -> dict[str, str]:
    field = _field(problem.path)
    if problem.keyword == "additionalProperties":
        extra = re.findall(r"'([^']+)' was unexpected", problem.message) or [problem.message]
        name = f"{field}.{extra[0]}" if field else extra[0]
        return {"reason": "FieldValueInvalid", "message": f'unknown field "{name}"', "field": name}
    if problem.keyword == "required":
        missing = re.findall(r"""["']([^"']+)["'] is a required""", problem.message)
        name = f"{field}.{missing[0]}" if field and missing else field or missing[0]
        return {"reason": "FieldValueRequired", "message": "Required value", "field": name}
    return {
        "reason": "FieldValueInvalid",
        "message": f"Invalid value: {problem.message}",
        "field": field,
    }


def _semantic(rt: ResourceType, obj: Obj) -> list[dict[str, str]]:
    """The few rules beyond the schema that a real apiserver checks and clients trip over."""
    causes = []
    meta = obj.get("metadata") or {}
    name = meta.get("name") or ""
    pattern = _DNS_LABEL if rt.plural in ("namespaces",) else _DNS_SUBDOMAIN
    if not pattern.fullmatch(name) or len(name) > 253:
        causes.append(
            {
                "reason": "FieldValueInvalid",
                "message": f"Invalid value: {name!r}: a lowercase RFC 1123 subdomain must consist "
                "of lower case alphanumeric characters, '-' or '.'",
                "field": "metadata.name",
            }
        )
    if rt.plural == "jobs":
        restart = obj.get("spec", {}).get("template", {}).get("spec", {}).get("restartPolicy")
        if restart not in ("Never", "OnFailure"):
            causes.append(
                {
                    "reason": "FieldValueNotSupported",
                    "message": f'Unsupported value: "{restart or ""}": supported values: '
                    '"OnFailure", "Never"',
                    "field": "spec.template.spec.restartPolicy",
                }
            )
    found = rules.check(rt.plural, obj)
    if rt.plural == "services" and isinstance(obj.get("spec"), dict):
        found += service_causes(obj["spec"])
    found += workloads.causes(rt.plural, obj)
    for field, message in found:
        reason = "FieldValueInvalid"
        if message.startswith("Required value"):
            reason = "FieldValueRequired"
        elif message.startswith("Unsupported value"):
            reason = "FieldValueNotSupported"
        elif message.startswith("Duplicate value"):
            reason = "FieldValueDuplicate"
        elif message.startswith("Forbidden"):
            reason = "FieldValueForbidden"
        causes.append({"reason": reason, "message": message, "field": field})
    return causes


def validate(rt: ResourceType, obj: Obj) -> None:
    """Raise 422 Invalid (with causes) unless `obj` is a valid `rt` object."""
    problems = sorted(_validator(rt)(obj), key=lambda p: [str(x) for x in p.path])
    causes = [_cause(p) for p in problems[:10]] + _semantic(rt, obj)
    if causes:
        raise invalid(rt, str(obj.get("metadata", {}).get("name", "")), causes)


def schema_files() -> list[str]:
    """The hand-kept Kueue schema files (for the CRD cross-check test)."""
    return sorted(p.name for p in CUSTOM_SCHEMAS.glob("*.json"))
