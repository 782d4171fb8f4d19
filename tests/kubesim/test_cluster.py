"""`kubesim.Cluster` wires the controllers in: a cluster started with them has GPU nodes."""

from __future__ import annotations

from kubernetes_asyncio import client

from tests.support.kube_fixtures import api_client_for
from tests.support.waiting import wait_until


async def test_a_cluster_with_controllers_serves_its_gpu_nodes(kube_cluster_with_controllers):
    async with api_client_for(kube_cluster_with_controllers) as api:
        core = client.CoreV1Api(api)

        async def gpu_nodes() -> list[client.V1Node]:
            nodes = (await core.list_node(label_selector="nvidia.com/gpu.present=true")).items
            return [n for n in nodes if (n.status.allocatable or {}).get("nvidia.com/gpu")]

        nodes = await wait_until(gpu_nodes, timeout=5, message="GPU nodes")
    assert len(nodes) == 2
    assert {n.status.allocatable["nvidia.com/gpu"] for n in nodes} == {"8"}


async def test_a_cluster_without_controllers_has_only_its_namespaces(kube_api):
    core = client.CoreV1Api(kube_api)
    assert (await core.list_node()).items == []
    names = {n.metadata.name for n in (await core.list_namespace()).items}
    assert names == {"default", "kube-system", "kube-public", "kube-node-lease"}
