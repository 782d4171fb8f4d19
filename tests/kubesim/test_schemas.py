"""kubesim's Kueue schemas agree with Kueue's own CRDs, as the pinned Kueue module ships them
(the real-cluster build copies them out of the module: part of the real-cluster tier)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kubesim.schema_derive import crd_schema
from kubesim.validation import CUSTOM_SCHEMAS, schema_files
from tests.support.kube_schemas import kueue_crds

pytestmark = pytest.mark.real_cluster


@pytest.fixture(scope="module")
def crd_dir() -> Path:
    crds = kueue_crds()
    if crds is None:
        pytest.fail("the Kueue CRDs come from the real-cluster build: run `make real-cluster`")
    return crds


def _types(node: dict[str, Any]) -> set[str]:
    declared = node.get("type")
    if node.get("x-kubernetes-int-or-string"):
        return {"integer", "string"}
    if declared is None:
        return set()
    return set(declared) if isinstance(declared, list) else {declared}


def compare(ours: dict[str, Any], crd: dict[str, Any], path: str, problems: list[str]) -> None:
    """Every field we declare exists in the CRD with the same type, and strictness matches."""
    if "$ref" in ours:
        return  # pod templates: the real PodTemplateSpec schema
    our_types = _types(ours) - {"null"}
    if our_types != _types(crd):
        problems.append(f"{path}: type {sorted(our_types)} vs CRD {sorted(_types(crd))}")
    for name, sub in (ours.get("properties") or {}).items():
        if path == "" and name == "metadata":
            continue
        theirs = (crd.get("properties") or {}).get(name)
        if theirs is None:
            problems.append(f"{path}.{name}: not in the CRD")
            continue
        compare(sub, theirs, f"{path}.{name}", problems)
    if isinstance(ours.get("items"), dict):
        compare(ours["items"], crd.get("items") or {}, f"{path}[]", problems)
    if isinstance(ours.get("additionalProperties"), dict):
        compare(
            ours["additionalProperties"],
            crd.get("additionalProperties") or {},
            f"{path}{{}}",
            problems,
        )
    if set(ours.get("required") or ()) != set(crd.get("required") or ()):
        problems.append(f"{path}: required {ours.get('required')} vs CRD {crd.get('required')}")


@pytest.mark.parametrize("filename", schema_files())
def test_each_kueue_schema_matches_its_crd(filename, crd_dir):
    ours = json.loads((CUSTOM_SCHEMAS / filename).read_text())
    problems: list[str] = []
    compare(ours, crd_schema(crd_dir, filename.removesuffix(".json")), "", problems)
    assert problems == []


def test_every_served_kueue_kind_has_a_schema():
    assert schema_files() == [
        "clusterqueues.json",
        "localqueues.json",
        "resourceflavors.json",
        "workloadpriorityclasses.json",
        "workloads.json",
    ]
