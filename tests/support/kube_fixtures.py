"""kubesim fixtures: `kube_cluster` (a running `kubesim.Cluster`, API server only) and
`kube_api` (a `kubernetes_asyncio` ApiClient configured for it). Both function-scoped.

Tests that want the controllers (Kueue, Job controller, scheduler, kubelet) take
`kube_cluster_with_controllers` instead. Override `kube_cluster_options` in a test module to pass
other `Cluster(...)` arguments.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from kubernetes_asyncio import client

from kubesim import Cluster


@pytest.fixture
def kube_cluster_options() -> dict[str, Any]:
    """Arguments for the `kube_cluster` fixtures (override per module or test)."""
    return {"bookmark_interval": 0.2}


@pytest.fixture
async def kube_cluster(kube_cluster_options: dict[str, Any]) -> AsyncIterator[Cluster]:
    """A running kubesim API server without controllers (nothing changes unless a test writes)."""
    options = {"controllers": False, **kube_cluster_options}
    async with Cluster(**options) as cluster:
        yield cluster


@pytest.fixture
async def kube_cluster_with_controllers(
    kube_cluster_options: dict[str, Any],
) -> AsyncIterator[Cluster]:
    """A running kubesim with its controllers (Kueue, jobs, scheduler, kubelet, GPU nodes)."""
    options = {"controllers": True, **kube_cluster_options}
    async with Cluster(**options) as cluster:
        yield cluster


def api_client_for(cluster: Any) -> client.ApiClient:
    """A kubernetes_asyncio ApiClient for `cluster`: kubesim (token accepted and ignored) or a
    real cluster's backend (a cluster admin's client, see tests/support/real_cluster.py)."""
    if not isinstance(cluster, Cluster):
        real_client: client.ApiClient = cluster.api_client()
        return real_client
    configuration = client.Configuration(host=cluster.url)
    configuration.api_key = {"authorization": "kubesim-token"}
    configuration.api_key_prefix = {"authorization": "Bearer"}
    return client.ApiClient(configuration)


@pytest.fixture
async def kube_api(kube_cluster: Cluster) -> AsyncIterator[client.ApiClient]:
    """A kubernetes_asyncio ApiClient talking to `kube_cluster`."""
    async with api_client_for(kube_cluster) as api:
        yield api
