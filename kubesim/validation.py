"""Strict schema validation: built-ins against the real Kubernetes JSON schemas
(`kubernetes-validate`, strict variant, `SCHEMA_VERSION`), Kueue kinds against the hand-kept
schemas in `kubesim/schemas/` (strict too: unknown fields are 422, like a strict apiserver).

Validators are built once per kind and cached; the schema files are read once.
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import referencing
from kubernetes_validate import utils as kv_utils

from kubesim.model import Obj, ResourceType, invalid

SCHEMA_VERSION = "1.37.0"
_SCHEMA_DIR = f"kubernetes-json-schema/v{SCHEMA_VERSION}-local-strict"
CUSTOM_SCHEMAS = Path(__file__).with_name("schemas")

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


@cache
def _definitions() -> referencing.Resource[Any]:
    contents = kv_utils.schema_contents(f"{_SCHEMA_DIR}/_definitions.json", SCHEMA_VERSION)
    return referencing.Resource.from_contents(contents)


@cache
def _validator(rt: ResourceType) -> Any:
    """A Draft 2020-12 validator for `rt`, with the definitions registry resolved once."""
    if rt.is_custom:
        schema = json.loads((CUSTOM_SCHEMAS / f"{rt.plural}.json").read_text())
    else:
        group = rt.group.split(".")[0]
        name = f"{rt.kind.lower()}-{group + '-' if group else ''}{rt.version}.json"
        schema = kv_utils.schema_contents(f"{_SCHEMA_DIR}/{name}", SCHEMA_VERSION)
    defs = _definitions()
    registry: referencing.Registry[Any] = referencing.Registry().with_resource(
        defs.id() or "/api/_definitions.json", defs
    )
    return jsonschema.Draft202012Validator(schema, registry=registry)


def _field(error: Any) -> str:
    parts = [str(p) if isinstance(p, str) else f"[{p}]" for p in error.absolute_path]
    return ".".join(parts).replace(".[", "[")


def _cause(error: Any) -> dict[str, str]:
    field = _field(error)
    if error.validator == "additionalProperties":
        extra = re.findall(r"'([^']+)' was unexpected", error.message) or [error.message]
        name = f"{field}.{extra[0]}" if field else extra[0]
        return {"reason": "FieldValueInvalid", "message": f'unknown field "{name}"', "field": name}
    if error.validator == "required":
        missing = re.findall(r"'([^']+)' is a required", error.message)
        name = f"{field}.{missing[0]}" if field and missing else field or missing[0]
        return {"reason": "FieldValueRequired", "message": "Required value", "field": name}
    return {
        "reason": "FieldValueInvalid",
        "message": f"Invalid value: {error.message}",
        "field": field,
    }


def _semantic(rt: ResourceType, obj: Obj) -> list[dict[str, str]]:
    """The few rules beyond the schema that a real apiserver checks and clients trip over."""
    causes = []
    meta = obj.get("metadata") or {}
    name = meta.get("name") or ""
    pattern = _DNS_LABEL if rt.plural in ("namespaces",) else _DNS_SUBDOMAIN
    if not pattern.match(name) or len(name) > 253:
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
    return causes


def validate(rt: ResourceType, obj: Obj) -> None:
    """Raise 422 Invalid (with causes) unless `obj` is a valid `rt` object."""
    errors = sorted(_validator(rt).iter_errors(obj), key=lambda e: list(map(str, e.absolute_path)))
    causes = [_cause(e) for e in errors[:10]] + _semantic(rt, obj)
    if causes:
        raise invalid(rt, str(obj.get("metadata", {}).get("name", "")), causes)


def schema_files() -> list[str]:
    """The hand-kept Kueue schema files (for the CRD cross-check test)."""
    return sorted(p.name for p in CUSTOM_SCHEMAS.glob("*.json"))
