"""aicp as a user meets it, in one process: the HTTP API, the reconcile engine with the steps,
the informers, and kubesim with its controllers (Kueue, Job controller, scheduler, kubelet,
2 nodes x 8 H100). Tests talk to the API over HTTP and look at the cluster through a separate
Kubernetes client, as an operator with kubectl would.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from app.kube.apply import get
from app.kube.client import KubeClient, KubeSettings, TokenBucket
from app.kube.informers import Informers
from app.kube.resources import JOBS, Resource
from app.main import Service
from app.reconcile.engine import Reconciler
from kubesim import Cluster
from tests.support.api_client import ADMIN_TOKEN, Api
from tests.support.kube_fixtures import api_client_for
from tests.support.pg_fixtures import service_settings
from tests.support.waiting import wait_until

PROJECT = "research"
NAMESPACE = f"aicp-{PROJECT}"
POOL = "h100-pool"
CLASS = "h100-80g"
QUOTA = {"accelerators": 16, "cpu": "256", "memory": "2Ti"}
WORKLOADS = f"/api/v1/projects/{PROJECT}/workloads"
POOLS = f"/api/v1/projects/{PROJECT}/compute-pools"


def workload_body(name: str, **changes: Any) -> dict[str, Any]:
    """A workload that runs for a fraction of a second on kubesim unless `env` says otherwise."""
    body: dict[str, Any] = {
        "name": name,
        "compute_pool": POOL,
        "image": "ghcr.io/acme/train:1.4",
        "command": ["python", "train.py"],
        "accelerators": 8,
        "cpu": "8",
        "memory": "64Gi",
        "max_runtime_seconds": 3600,
        "labels": {"team": "nlp"},
        "env": {"KUBESIM_RUN_SECONDS": "0.3"},
    }
    body.update(changes)
    return body


@dataclass
class Stack:
    service: Service
    cluster: Cluster
    kube: KubeClient
    engine: Reconciler
    informers: Informers
    http: httpx.AsyncClient

    @property
    def api(self) -> Api:
        return Api(self.http)

    # -- API shortcuts ---------------------------------------------------------------------

    async def setup_pool(self, quota: dict[str, Any] | None = None) -> None:
        """Binding, project and pool, waited for until the pool is READY."""
        await self.api.put_binding(CLASS, flavor=CLASS)
        await self.api.create_project(PROJECT)
        response = await self.http.post(
            POOLS, json={"name": POOL, "accelerator_class": CLASS, "quota": quota or QUOTA}
        )
        assert response.status_code == 202, response.text
        await self.wait_pool_state("READY")

    async def pool(self) -> dict[str, Any]:
        response = await self.http.get(f"{POOLS}/{POOL}")
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        return body

    async def wait_pool_state(self, state: str, timeout: float = 10.0) -> dict[str, Any]:
        async def probe() -> dict[str, Any] | None:
            pool = await self.pool()
            return pool if pool["status"]["state"] == state else None

        return await wait_until(probe, timeout=timeout, message=f"pool {state}")

    async def submit(self, name: str, **changes: Any) -> dict[str, Any]:
        response = await self.http.post(WORKLOADS, json=workload_body(name, **changes))
        assert response.status_code == 202, response.text
        body: dict[str, Any] = response.json()
        return body

    async def workload(self, name: str) -> dict[str, Any] | None:
        response = await self.http.get(f"{WORKLOADS}/{name}")
        if response.status_code == 404:
            return None
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        return body

    async def wait_state(
        self, name: str, *states: str, timeout: float = 15.0, generation: int | None = None
    ) -> dict[str, Any]:
        """Wait until the workload's status is one of `states` (for `generation`, if given)."""

        async def probe() -> dict[str, Any] | None:
            found = await self.workload(name)
            if found is None:
                return None
            status = found["status"]
            if generation is not None and status["observed_generation"] != generation:
                return None
            return found if status["state"] in states else None

        return await wait_until(probe, timeout=timeout, message=f"{name} in {states}")

    async def wait_gone(self, name: str, timeout: float = 15.0) -> None:
        async def probe() -> bool:
            return await self.workload(name) is None

        await wait_until(probe, timeout=timeout, message=f"{name} finalized (404)")

    async def events(self, name: str) -> list[dict[str, Any]]:
        response = await self.http.get(f"{WORKLOADS}/{name}/events", params={"limit": 500})
        assert response.status_code == 200, response.text
        items: list[dict[str, Any]] = response.json()["items"]
        return list(reversed(items))  # oldest first

    async def event_types(self, name: str) -> list[str]:
        return [event["type"] for event in await self.events(name)]

    # -- cluster shortcuts (an operator's view, from the server, not the caches) -------------

    async def job(self, name: str) -> dict[str, Any] | None:
        return await get(self.kube, JOBS, NAMESPACE, name)

    async def jobs_of(self, uid: str) -> list[dict[str, Any]]:
        listed = await self.kube.batch.list_namespaced_job(
            NAMESPACE, label_selector=f"aicp.dev/uid={uid}", _preload_content=False
        )
        body = await listed.json()
        items: list[dict[str, Any]] = body["items"]
        return items

    async def read(self, resource: Resource, namespace: str | None, name: str) -> Any:
        return await get(self.kube, resource, namespace, name)

    async def sim(self, method: str, path: str, **kwargs: Any) -> Any:
        async with httpx.AsyncClient(base_url=self.cluster.url) as sim:
            response = await sim.request(method, path, **kwargs)
            response.raise_for_status()
            return response.json()


async def running_stack(
    database_url: str, cluster: Cluster, kubeconfig: Path, *, instance_id: str = "steps-test"
) -> AsyncIterator[Stack]:
    """Run the service as `python -m app serve` would against `cluster`: API, engine, steps
    and informers (`app.wiring`); wait until `/readyz` says the reconciler runs."""
    cluster.write_kubeconfig(kubeconfig)
    settings = service_settings(
        database_url,
        instance_id=instance_id,
        kubeconfig=str(kubeconfig),
        lease_ttl_seconds=5.0,
        sweep_interval_seconds=0.2,
        workers=4,
    )
    service = Service(
        settings,
        kube_settings=KubeSettings(
            kubeconfig=str(kubeconfig),
            write_qps=1000.0,
            write_burst=1000,
            log_connection_pool_size=32,
        ),
    )
    observer = KubeClient(api_client_for(cluster), TokenBucket(1000.0, 1000))
    await service.start()
    try:
        async with httpx.AsyncClient(
            base_url=service.url, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=30
        ) as http:

            async def ready() -> bool:
                return (await http.get("/readyz")).status_code == 200

            await wait_until(ready, timeout=15, message="/readyz 200")
            assert service.reconciler is not None and service.kubernetes is not None
            assert service.kubernetes.informers is not None
            yield Stack(
                service=service,
                cluster=cluster,
                kube=observer,
                engine=service.reconciler,
                informers=service.kubernetes.informers,
                http=http,
            )
    finally:
        await service.stop()
        await observer.close()
