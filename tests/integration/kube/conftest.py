"""aicp's `KubeClient` on the shared kubesim fixtures (`tests/support/kube_fixtures.py`: a
fresh cluster per test, bookmarks every 0.2 s), and helpers to steer and read the simulator."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from app.domain.kube_objects import Manifest
from app.kube.apply import apply
from app.kube.client import KubeClient
from app.kube.resources import Resource, request_json
from app.kube.watching import EventType, Informer
from kubesim import Cluster
from tests.support.kube_settings import client_settings


class Recorder:
    """Collects `(event type, object name)` as an informer's handler sees them."""

    def __init__(self, informer: Informer) -> None:
        self.events: list[tuple[EventType, str]] = []
        informer.add_handler(self)

    def __call__(self, kind: EventType, obj: Manifest) -> None:
        self.events.append((kind, obj["metadata"]["name"]))

    def seen(self) -> list[tuple[EventType, str]]:
        return list(self.events)


class SimControl:
    """kubesim's `/_sim/` endpoints: faults in, request counts out."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")

    async def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        async with (
            aiohttp.ClientSession() as session,
            session.request(method, f"{self.url}{path}", json=body) as response,
        ):
            response.raise_for_status()
            return await response.json(content_type=None)

    async def faults(self, **settings: Any) -> None:
        await self._call("POST", "/_sim/faults", settings)

    async def clear_faults(self) -> None:
        await self._call("DELETE", "/_sim/faults")

    async def drop_watches(self) -> None:
        """End every watch stream opened from now on after its first event."""
        await self.faults(watch_drop_after_events=1)

    async def expire_history(self) -> None:
        await self.faults(shrink_watch_history=True)

    async def restart_apiserver(self, seconds: float) -> None:
        await self.faults(refuse_connections_seconds=seconds)

    async def stats(self) -> dict[str, Any]:
        result: dict[str, Any] = await self._call("GET", "/_sim/stats")
        return result

    async def reset_stats(self) -> None:
        await self._call("POST", "/_sim/stats/reset")

    async def list_count(self, plural: str) -> int:
        """LIST requests for `plural` across all namespaces (what a relist costs)."""
        by_verb_path = (await self.stats())["by_verb_path"]
        return sum(
            n
            for key, n in by_verb_path.items()
            if key.startswith("list ") and key.endswith(f"/{plural}")
        )

    async def resource_version(self) -> int:
        """The cluster's current resourceVersion."""
        return int((await self.stats())["resource_version"])

    async def is_up(self) -> bool:
        try:
            await self.resource_version()
        except aiohttp.ClientError:
            return False
        return True


async def _client(cluster: Cluster, path: Path, monkeypatch: pytest.MonkeyPatch) -> KubeClient:
    # Only the explicit kubeconfig may point anywhere: never a real cluster from the env.
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    cluster.write_kubeconfig(path)
    return await KubeClient.connect(client_settings(str(path)))


@pytest.fixture
async def kube(
    kube_cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[KubeClient]:
    """aicp's client on an API server with no controllers: objects stay exactly as written."""
    client = await _client(kube_cluster, tmp_path / "kubeconfig", monkeypatch)
    try:
        yield client
    finally:
        await client.close()


@pytest.fixture
async def kube_with_controllers(
    kube_cluster_with_controllers: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[KubeClient]:
    """aicp's client on a full cluster: Kueue, Job controller, scheduler, kubelet, fake GPUs."""
    client = await _client(kube_cluster_with_controllers, tmp_path / "kubeconfig", monkeypatch)
    try:
        yield client
    finally:
        await client.close()


@pytest.fixture
def sim(kube_cluster: Cluster) -> SimControl:
    return SimControl(kube_cluster.url)


@pytest.fixture
async def namespace(kube: KubeClient) -> str:
    """A project namespace for the test's objects."""
    name = "aicp-test"
    await apply(
        kube,
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "aicp"}},
        },
    )
    return name


def job_manifest(
    name: str,
    namespace: str,
    *,
    managed: bool = True,
    labels: dict[str, str] | None = None,
    finalizers: list[str] | None = None,
    suspend: bool = True,
    run_seconds: float | None = None,
    log: str | None = None,
) -> dict[str, Any]:
    """A Job like the ones aicp renders (no Kueue queue label: nothing admits it)."""
    meta_labels = {"aicp.dev/uid": f"uid-{name}", **(labels or {})}
    if managed:
        meta_labels["app.kubernetes.io/managed-by"] = "aicp"
    env = []
    if run_seconds is not None:
        env.append({"name": "KUBESIM_RUN_SECONDS", "value": str(run_seconds)})
    if log is not None:
        env.append({"name": "KUBESIM_LOG", "value": log})
    container: dict[str, Any] = {
        "name": "main",
        "image": "busybox:1.36",
        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
    }
    if env:
        container["env"] = env
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, "labels": meta_labels}
    if finalizers:
        metadata["finalizers"] = finalizers
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": metadata,
        "spec": {
            "suspend": suspend,
            "backoffLimit": 0,
            "template": {
                "metadata": {"labels": dict(meta_labels)},
                "spec": {"restartPolicy": "Never", "containers": [container]},
            },
        },
    }


async def list_names(kube: KubeClient, resource: Resource, namespace: str | None) -> list[str]:
    """Names of the objects the API server lists now (not a cache)."""
    listed = await request_json(resource.method(kube, "list", namespace)(_preload_content=False))
    return sorted(item["metadata"]["name"] for item in listed["items"])
