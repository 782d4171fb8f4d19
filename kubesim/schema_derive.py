"""Derive kubesim's strict Kueue schemas (`kubesim/schemas/*.json`) from Kueue's CRDs.

Run once per Kueue upgrade and commit the output: `python -m kubesim.schema_derive CRD_DIR`,
where CRD_DIR holds the Kueue CRDs (`make real-cluster` copies those of the pinned Kueue module
into its cache; `tests/kubesim/test_schemas.py` checks the output against them).

The CRD's `openAPIV3Schema` (v1beta2) becomes a JSON Schema (draft 2020-12): descriptions and
`x-kubernetes-validations` (CEL) dropped, `nullable` and `x-kubernetes-int-or-string` turned into
JSON types, every object without `x-kubernetes-preserve-unknown-fields` closed with
`additionalProperties: false` (strict field validation), and pod templates replaced by a `$ref` to
the real `PodTemplateSpec` of the Kubernetes schemas (the CRD inlines a copy of it). `default`
stays: validators ignore it, and `kubesim.crd_defaults` applies it as the apiserver does.
"""

from __future__ import annotations

import json
import sys
from functools import cache
from pathlib import Path
from typing import Any

import yaml

POD_TEMPLATE_REF = "/api/_definitions.json#/$defs/io.k8s.api.core.v1.PodTemplateSpec"
KINDS = ("workloads", "clusterqueues", "localqueues", "resourceflavors", "workloadpriorityclasses")
_DROP = (
    "description",
    "x-kubernetes-validations",
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-map-type",
    "format",
)


def convert(node: Any, path: tuple[str, ...] = ()) -> Any:
    """One CRD schema node → JSON Schema."""
    if not isinstance(node, dict):
        return node
    if path[-2:] == ("items", "template") and "podSets" in path:
        return {"$ref": POD_TEMPLATE_REF}
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DROP or key == "nullable":
            continue
        if key == "properties":
            out[key] = {k: convert(v, (*path, k)) for k, v in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            out[key] = convert(value, (*path, key))
        elif key in ("anyOf", "allOf", "oneOf"):
            out[key] = [convert(v, path) for v in value]
        elif key == "x-kubernetes-int-or-string":
            out["type"] = ["integer", "string"]
        elif key == "x-kubernetes-preserve-unknown-fields":
            continue
        else:
            out[key] = value
    if node.get("x-kubernetes-int-or-string"):
        out.pop("anyOf", None)
    if (
        out.get("type") == "object"
        and "additionalProperties" not in out
        and not node.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    if node.get("nullable") and "type" in out:
        types = out["type"] if isinstance(out["type"], list) else [out["type"]]
        out["type"] = [*types, "null"]
    return out


@cache
def crd_schema(crd_dir: Path, plural: str, version: str = "v1beta2") -> dict[str, Any]:
    text = (crd_dir / f"kueue.x-k8s.io_{plural}.yaml").read_text()
    crd = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    for v in crd["spec"]["versions"]:
        if v["name"] == version:
            schema: dict[str, Any] = v["schema"]["openAPIV3Schema"]
            return schema
    raise KeyError(version)


def derive(crd_dir: Path, plural: str) -> dict[str, Any]:
    schema = convert(crd_schema(crd_dir, plural))
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = f"https://kubernetes.io/api/{plural}/kueue.x-k8s.io/v1beta2"
    schema["properties"]["metadata"] = {"type": "object"}
    return dict(schema)


def main(argv: list[str]) -> None:
    crd_dir = Path(argv[1])
    out_dir = Path(__file__).with_name("schemas")
    out_dir.mkdir(exist_ok=True)
    for plural in KINDS:
        text = json.dumps(derive(crd_dir, plural), indent=1, sort_keys=True)
        (out_dir / f"{plural}.json").write_text(text + "\n")


if __name__ == "__main__":
    main(sys.argv)
