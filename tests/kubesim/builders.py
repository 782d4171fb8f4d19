"""Small builders for the objects kubesim's tests create, plus raw-HTTP helpers for what the
typed client cannot express."""

from __future__ import annotations

from typing import Any

import aiohttp

KUEUE = "kueue.x-k8s.io"
V1BETA2 = "v1beta2"
APPLY = "application/apply-patch+yaml"
MERGE = "application/merge-patch+json"


def job(
    name: str,
    *,
    suspend: bool | None = None,
    labels: dict[str, str] | None = None,
    parallelism: int | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "template": {
            "spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "main", "image": "busybox", "command": ["true"]}],
            }
        }
    }
    if suspend is not None:
        spec["suspend"] = suspend
    if parallelism is not None:
        spec["parallelism"] = parallelism
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": spec,
    }


def pod(
    name: str,
    *,
    labels: dict[str, str] | None = None,
    owner: dict[str, Any] | None = None,
    block: bool = True,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": labels or {}}
    if owner is not None:
        meta["ownerReferences"] = [
            {
                "apiVersion": owner["apiVersion"],
                "kind": owner["kind"],
                "name": owner["metadata"]["name"],
                "uid": owner["metadata"]["uid"],
                "controller": True,
                "blockOwnerDeletion": block,
            }
        ]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"containers": [{"name": "main", "image": "busybox"}]},
    }


def local_queue(name: str, cluster_queue: str = "gpu-cq") -> dict[str, Any]:
    return {
        "apiVersion": f"{KUEUE}/{V1BETA2}",
        "kind": "LocalQueue",
        "metadata": {"name": name},
        "spec": {"clusterQueue": cluster_queue},
    }


async def patch_queue(
    custom: Any, patch: dict[str, Any], content_type: str = MERGE, **options: Any
) -> dict[str, Any]:
    """PATCH the LocalQueue `default/q` through `custom` (a `CustomObjectsApi`) with `patch`
    sent as `content_type`; `options` are the client's (`field_manager`, `force`)."""
    result: dict[str, Any] = await custom.patch_namespaced_custom_object(
        KUEUE, V1BETA2, "default", "localqueues", "q", patch, _content_type=content_type, **options
    )
    return result


def resource_flavor(name: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{KUEUE}/{V1BETA2}",
        "kind": "ResourceFlavor",
        "metadata": {"name": name},
        "spec": {"nodeLabels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}},
    }


async def raw(
    method: str,
    url: str,
    *,
    json_body: Any = None,
    data: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, Any, dict[str, str]]:
    """One plain HTTP request: (status, decoded JSON body or text, headers)."""
    async with (
        aiohttp.ClientSession() as session,
        session.request(method, url, json=json_body, data=data, headers=headers) as resp,
    ):
        text = await resp.text()
        try:
            body: Any = await resp.json(content_type=None)
        except ValueError:
            body = text
        return resp.status, body, dict(resp.headers)


async def watch_lines(url: str) -> list[dict[str, Any]]:
    """Read a whole watch stream (the URL should carry timeoutSeconds) as decoded lines."""
    import json

    async with aiohttp.ClientSession() as session, session.get(url) as resp:
        assert resp.status == 200
        return [json.loads(line) async for line in resp.content if line.strip()]
