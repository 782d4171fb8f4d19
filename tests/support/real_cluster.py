"""The real-cluster tier: one real cluster (kube-apiserver, etcd, controller-manager, scheduler,
KWOK, Kueue; see `realcluster/`) per test session, and the `cluster` fixture that runs a test
once on kubesim and once on it.

- ``real_cluster`` (session): the running cluster. Skipped, with a reason saying so, when the
  machine has no Go toolchain; an error (not a skip) when Go is there but the binaries were not
  built (`make real-cluster`) or a component does not start.
- ``cluster`` (function, parametrized ``kubesim`` / ``real``): a cluster for one test. On the
  real one aicp gets a kubeconfig holding only the chart's ClusterRole, and after the test every
  `aicp-*` namespace, queue, Job and Deployment the test left is removed, so the next test
  starts clean.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator, Awaitable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from kubesim import Cluster
from realcluster import RealCluster
from realcluster import build as building
from tests.support.waiting import wait_until

KUBESIM = "kubesim"
REAL = "real"


class RealBackend:
    """What the tests need of a real cluster: aicp's kubeconfig and an observer client."""

    name = REAL

    def __init__(self, cluster: RealCluster) -> None:
        self.cluster = cluster

    @property
    def url(self) -> str:
        return self.cluster.url

    def write_kubeconfig(self, path: Path) -> Path:
        """aicp's kubeconfig: its user is bound to exactly the chart's ClusterRole."""
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(self.cluster.kubeconfig("aicp"), sort_keys=False))
        return path

    def api_client(self) -> client.ApiClient:
        """A cluster admin's client (an operator's kubectl), separate from aicp's."""
        configuration = client.Configuration(host=self.cluster.url)
        configuration.ssl_ca_cert = str(self.cluster.ca_file)
        configuration.api_key = {"BearerToken": self.cluster.tokens["admin"]}
        configuration.api_key_prefix = {"BearerToken": "Bearer"}
        return client.ApiClient(configuration)

    async def clean(self) -> None:
        """Remove what a test left: its Jobs (finalizers stripped), Deployments, pods, queues,
        namespaces.

        Namespaces of earlier tests may still be terminating, and anything may vanish between
        the list and the call: a 404 means done."""
        async with self.api_client() as api:
            core, batch, apps = client.CoreV1Api(api), client.BatchV1Api(api), client.AppsV1Api(api)
            custom = client.CustomObjectsApi(api)
            namespaces = [
                ns.metadata.name
                for ns in (await core.list_namespace()).items
                if ns.metadata.name.startswith("aicp-")
            ]
            for namespace in namespaces:
                for job in (await batch.list_namespaced_job(namespace)).items:
                    if job.metadata.finalizers:
                        await _unless_gone(
                            batch.patch_namespaced_job(
                                job.metadata.name, namespace, {"metadata": {"finalizers": None}}
                            )
                        )
                await _unless_gone(
                    batch.delete_collection_namespaced_job(
                        namespace, propagation_policy="Background"
                    )
                )
                # A service's Deployment first, or its ReplicaSet replaces the pods deleted next.
                await _unless_gone(
                    apps.delete_collection_namespaced_deployment(
                        namespace, propagation_policy="Background"
                    )
                )
                await _unless_gone(core.delete_collection_namespaced_pod(namespace))
            queues = await custom.list_cluster_custom_object(
                "kueue.x-k8s.io", "v1beta2", "clusterqueues"
            )
            for item in queues["items"]:
                name = item["metadata"]["name"]
                if name.startswith("aicp-"):  # LocalQueues go with their namespaces
                    await _unless_gone(
                        custom.delete_cluster_custom_object(
                            "kueue.x-k8s.io", "v1beta2", "clusterqueues", name
                        )
                    )
            for namespace in namespaces:
                await _unless_gone(core.delete_namespace(namespace))

            async def no_pods_left() -> bool:
                pods = await core.list_pod_for_all_namespaces()
                return not [p for p in pods.items if p.metadata.namespace in namespaces]

            await wait_until(no_pods_left, timeout=30, interval=0.1, message="test pods removed")


async def _unless_gone(call: Awaitable[Any]) -> None:
    try:
        await call
    except ApiException as exc:
        if exc.status != 404:
            raise


def go_missing_reason() -> str | None:
    if shutil.which("go") is None:
        return (
            "real-cluster tier skipped: no Go toolchain on this machine "
            "(install Go >= 1.26, then `make real-cluster`)"
        )
    return None


@pytest.fixture(scope="session")
def real_cluster() -> Iterator[RealBackend]:
    if reason := go_missing_reason():
        pytest.skip(reason)
    build = building.built()
    if build is None:
        pytest.fail("the real cluster is not built: run `make real-cluster` first", pytrace=False)
    cluster = RealCluster(build=build)
    cluster.start()
    try:
        yield RealBackend(cluster)
    finally:
        cluster.stop()


@pytest.fixture(params=[KUBESIM, pytest.param(REAL, marks=pytest.mark.real_cluster)])
async def cluster(request: pytest.FixtureRequest) -> AsyncIterator[Any]:
    """The cluster of one test: a fresh kubesim, or the session's real cluster (cleaned after)."""
    if request.param == KUBESIM:
        async with Cluster(controllers=True, bookmark_interval=0.2) as simulated:
            yield simulated
        return
    backend: RealBackend = request.getfixturevalue("real_cluster")
    try:
        yield backend
    finally:
        await asyncio.wait_for(backend.clean(), timeout=60)
