"""aicp as a user meets it, in one process: the HTTP API, the reconcile engine with the steps,
the informers, and kubesim with its controllers (Kueue, Job controller, scheduler, kubelet,
2 nodes x 8 H100). Tests talk to the API over HTTP and look at the cluster through a separate
Kubernetes client, as an operator with kubectl would.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
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
from tests.support.api_client import ADMIN_TOKEN
from tests.support.kube_fixtures import api_client_for
from tests.support.pg_fixtures import service_settings
from tests.support.scenario import NAMESPACE, Scenario
from tests.support.waiting import wait_until

#: Every workload of a stack runs for a fraction of a second on kubesim unless `env` says
#: otherwise, with the label `team: nlp`.
DEFAULTS: dict[str, Any] = {"labels": {"team": "nlp"}, "env": {"KUBESIM_RUN_SECONDS": "0.3"}}


class Stack(Scenario):
    """The scenario API (tests/support/scenario.py) for project `research` through the admin
    client `http`, and the parts of the running service a step test looks at."""

    def __init__(
        self,
        service: Service,
        cluster: Cluster,
        kube: KubeClient,
        engine: Reconciler,
        informers: Informers,
        http: httpx.AsyncClient,
    ) -> None:
        super().__init__(http, defaults=DEFAULTS, wait_timeout=15.0)
        self.service = service
        self.cluster = cluster
        self.kube = kube
        self.engine = engine
        self.informers = informers
        self.http = http

    # -- cluster shortcuts (an operator's view, from the server, not the caches) -------------

    async def job(self, name: str) -> dict[str, Any] | None:
        return await get(self.kube, JOBS, NAMESPACE, name)

    async def jobs_of(self, uid: str) -> list[dict[str, Any]]:
        listed = await self.kube.batch.list_namespaced_job(
            NAMESPACE, label_selector=f"aicp.dev/uid={uid}", _preload_content=False
        )
        body = await listed.json()  # type: ignore[attr-defined]  # a raw (_preload_content=False) response
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
