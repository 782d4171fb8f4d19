"""Discovery documents (`/api`, `/api/v1`, `/apis`, `/apis/<g>`, `/apis/<g>/<v>`, `/version`)
so generic clients (kubectl, kubernetes_asyncio's dynamic client) find the served resources,
Kueue's visibility API (`kubesim.visibility`) among them."""

from __future__ import annotations

from typing import Any

from kubesim import visibility
from kubesim.resources import CATEGORIES, SERVED, SHORT_NAMES, group_versions, subresources

VERBS = ["create", "delete", "get", "list", "patch", "update", "watch"]
VERSION_INFO = {
    "major": "1",
    "minor": "34",
    "gitVersion": "v1.34.0-kubesim",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "go1.24.0",
    "compiler": "gc",
    "platform": "linux/amd64",
}


def api_versions() -> dict[str, Any]:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}],
    }


def _versions(name: str) -> list[str]:
    if name == visibility.GROUP:
        return list(visibility.VERSIONS)
    return sorted({rt.version for rt in SERVED if rt.group == name})


def _group(name: str) -> dict[str, Any]:
    versions = _versions(name)
    entries = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {"name": name, "versions": entries, "preferredVersion": entries[-1]}


def api_groups() -> dict[str, Any]:
    names = sorted({rt.group for rt in SERVED if rt.group} | {visibility.GROUP})
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [_group(n) for n in names]}


def api_group(name: str) -> dict[str, Any] | None:
    if not _versions(name):
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group(name)}


def resource_list(group_version: str) -> dict[str, Any] | None:
    group, _, version = group_version.partition("/")
    if group == visibility.GROUP:
        return visibility.resource_list(version) if version in visibility.VERSIONS else None
    served = group_versions().get(group_version)
    if served is None:
        return None
    resources: list[dict[str, Any]] = []
    for rt in served:
        entry: dict[str, Any] = {
            "name": rt.plural,
            "singularName": rt.kind.lower(),
            "namespaced": rt.namespaced,
            "kind": rt.kind,
            "verbs": VERBS,
        }
        if rt.plural in SHORT_NAMES:
            entry["shortNames"] = SHORT_NAMES[rt.plural]
        if rt.plural in CATEGORIES:
            entry["categories"] = CATEGORIES[rt.plural]
        resources.append(entry)
        for sub in subresources(rt):
            verbs = ["get"] if sub == "log" else ["get", "patch", "update"]
            sub_entry: dict[str, Any] = {
                "name": f"{rt.plural}/{sub}",
                "singularName": "",
                "namespaced": rt.namespaced,
                "kind": "Pod" if sub == "log" else rt.kind,
                "verbs": verbs,
            }
            if sub == "scale":
                # Another group's kind: clients (kubectl scale) read it from here.
                sub_entry.update(group="autoscaling", version="v1", kind="Scale")
            resources.append(sub_entry)
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources,
    }
