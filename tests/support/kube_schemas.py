"""Validation of rendered manifests against the real schemas, as a strict apiserver would.

Built-in kinds go through `kubernetes_validate` (the newest Kubernetes version it ships,
strict: unknown fields are errors). Kueue kinds go through kubesim's strict copies of their
schemas (`kubesim/schemas/`, ours) and, once the real cluster is built (`make real-cluster`),
also through the v1beta2 `openAPIV3Schema` of the Kueue CRDs that the build takes from the
pinned Kueue module, made strict the way the apiserver prunes: every object schema with
declared properties rejects other keys. Neither schema checks label and name syntax, so
`check_metadata` does that with apimachinery's rules.
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import yaml
from kubernetes_validate.utils import all_versions

from realcluster import build as real_cluster_build

#: kubesim's own strict copies of the Kueue schemas (what its apiserver enforces), if shipped.
KUBESIM_SCHEMAS = Path(__file__).resolve().parents[2] / "kubesim" / "schemas"

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def latest_kubernetes_version() -> str:
    """The newest Kubernetes version whose schemas kubernetes-validate ships."""
    return max(all_versions(), key=lambda v: tuple(int(p) for p in v.split(".")))


def validate_builtin(manifest: dict[str, Any]) -> None:
    """Raise unless `manifest` is valid for the newest Kubernetes version, strictly."""
    kubernetes_validate.validate(manifest, latest_kubernetes_version(), strict=True)


def _strict(schema: Any) -> Any:
    if isinstance(schema, dict):
        out = {key: _strict(value) for key, value in schema.items()}
        if (
            "properties" in out
            and "additionalProperties" not in out
            and not out.get("x-kubernetes-preserve-unknown-fields")
        ):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [_strict(item) for item in schema]
    return schema


def kueue_crds() -> Path | None:
    """The Kueue CRDs of the pinned Kueue module, once `make real-cluster` has built."""
    build = real_cluster_build.built()
    return build.kueue_crds if build is not None else None


def _crd_schema(crds: Path, kind: str, version: str) -> dict[str, Any]:
    """The strict openAPIV3Schema of `kind` at `version` from the CRD files in `crds`."""
    for path in sorted(crds.glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        if crd.get("kind") != "CustomResourceDefinition" or crd["spec"]["names"]["kind"] != kind:
            continue
        for served in crd["spec"]["versions"]:
            if served["name"] == version:
                return dict(_strict(served["schema"]["openAPIV3Schema"]))
    raise LookupError(f"no CRD for {kind} {version} in {crds}")


@functools.cache
def kueue_schema(kind: str, version: str = "v1beta2") -> dict[str, Any] | None:
    """The strict openAPIV3Schema of a Kueue kind from its CRD; None before the build."""
    crds = kueue_crds()
    return None if crds is None else _crd_schema(crds, kind, version)


@functools.cache
def gateway_api_schema(kind: str, version: str = "v1") -> dict[str, Any] | None:
    """The strict openAPIV3Schema of a Gateway API kind (HTTPRoute) from its CRD at the version
    the pinned Kueue module depends on; None while the Go module cache lacks it (no Go, or
    no build yet)."""
    crds = real_cluster_build.gateway_api_crds()
    return None if crds is None else _crd_schema(crds, kind, version)


@functools.cache
def kubesim_schema(kind: str) -> dict[str, Any] | None:
    """kubesim's schema for a Kueue kind (`kubesim/schemas/<plural>.json`), None if absent."""
    path = KUBESIM_SCHEMAS / f"{kind.lower()}{'es' if kind.endswith('s') else 's'}.json"
    return json.loads(path.read_text()) if path.is_file() else None


def validate_kueue(manifest: dict[str, Any]) -> None:
    """Raise unless `manifest` is valid against kubesim's strict schema of its kind and, once
    the real cluster is built, against the Kueue CRD's (strict): a field one accepts and the
    other refuses shows up here rather than as a 422 at run time."""
    group, _, version = manifest["apiVersion"].partition("/")
    assert group == "kueue.x-k8s.io", manifest["apiVersion"]
    simulated = kubesim_schema(manifest["kind"])
    assert simulated is not None, f"kubesim has no schema for {manifest['kind']}"
    jsonschema.Draft202012Validator(simulated).validate(manifest)
    real = kueue_schema(manifest["kind"], version)
    if real is not None:
        jsonschema.validate(manifest, real)


def check_metadata(manifest: dict[str, Any], *, namespaced: bool) -> None:
    """Assert name, namespace and labels follow Kubernetes syntax and SSA needs are present."""
    assert manifest.get("apiVersion") and manifest.get("kind")
    meta = manifest["metadata"]
    name = meta["name"]
    assert len(name) <= 63 and _DNS_LABEL.match(name), f"bad name {name!r}"
    if namespaced:
        namespace = meta["namespace"]
        assert len(namespace) <= 63 and _DNS_LABEL.match(namespace), namespace
    else:
        assert "namespace" not in meta
    for key, value in meta.get("labels", {}).items():
        prefix, _, label = key.rpartition("/")
        assert not prefix or (len(prefix) <= 253 and _DNS_SUBDOMAIN.match(prefix)), key
        assert len(label) <= 63 and _LABEL_NAME.match(label), key
        assert isinstance(value, str) and len(value) <= 63 and _LABEL_VALUE.match(value), value
    assert "managedFields" not in meta and "resourceVersion" not in meta
