"""aicp end to end in one process: kubesim (2 nodes x 8 H100, controllers on) + a fresh
database + the full `Service` (API, reconcile engine, informers, steps) on 127.0.0.1:0.

- ``running_service``: one replica, ready (``/readyz`` 200) when the test starts.
- ``two_replicas``: two replicas on one database and one kubesim (HA tests).

Each yields `RunningService` objects: the base URL, an admin HTTP client, `Api` shortcuts,
`scenario()` (tests/support/scenario.py), the kubesim `Cluster`, and an observer Kubernetes
client (an operator's kubectl, separate from the service's own). Everything is stopped in
order afterwards: services, then the cluster.

To build other shapes (e.g. a service that is not ready yet), use `start_service` directly.
`serve_process` runs `python -m app serve` as a child process instead (`serve_env`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.kube.client import KubeClient, KubeSettings, TokenBucket
from app.main import Service
from kubesim import Cluster
from tests.support.api_client import ADMIN_TOKEN, Api
from tests.support.kube_fixtures import api_client_for
from tests.support.pg_fixtures import service_settings
from tests.support.scenario import PROJECT, Scenario
from tests.support.waiting import wait_until

REPO = Path(__file__).resolve().parents[2]

#: Short enough that a test notices a lost lease in seconds, long enough to tell "released
#: at shutdown" (immediate) from "expired" (this long).
TEST_LEASE_TTL = 10.0


@dataclass
class RunningService:
    """One running replica and what a test needs to talk to it and to the cluster."""

    service: Service
    cluster: Any  # a kubesim Cluster, or the real cluster's backend (tests/support/real_cluster.py)
    client: httpx.AsyncClient  # sends the platform admin token
    kube: KubeClient  # an observer's client for kubesim, not the service's
    database_url: str

    @property
    def url(self) -> str:
        return self.service.url

    @property
    def instance_id(self) -> str:
        return self.service.settings.instance_id

    @property
    def api(self) -> Api:
        return Api(self.client)

    async def wait_ready(self, timeout: float = 10.0) -> None:
        async def ready() -> bool:
            return (await self.client.get("/readyz")).status_code == 200

        await wait_until(ready, timeout=timeout, message=f"{self.url}/readyz 200")

    def scenario(self, project: str = PROJECT, **options: Any) -> Scenario:
        """The scenario API (tests/support/scenario.py) for `project` through the admin client."""
        return Scenario(self.client, project=project, **options)


@contextlib.asynccontextmanager
async def start_service(
    database_url: str,
    cluster: Any,
    directory: Path,
    *,
    instance_id: str | None = None,
    wait_ready: bool = True,
    **settings: Any,
) -> AsyncIterator[RunningService]:
    """Start a full replica against `cluster`, kubesim or real (kubeconfig written into
    `directory`)."""
    kubeconfig = cluster.write_kubeconfig(directory / f"kubeconfig-{secrets.token_hex(3)}")
    options: dict[str, Any] = {
        "instance_id": instance_id or f"e2e-{secrets.token_hex(3)}",
        "lease_ttl_seconds": TEST_LEASE_TTL,
        "sweep_interval_seconds": 0.5,
        "workers": 4,
        **settings,
    }
    service = Service(
        service_settings(database_url, **options),
        kube_settings=KubeSettings(
            kubeconfig=str(kubeconfig),
            write_qps=1000,
            write_burst=1000,
            log_connection_pool_size=32,
        ),
    )
    observer = KubeClient(api_client_for(cluster), TokenBucket(1000.0, 1000))
    try:
        await service.start()
        async with httpx.AsyncClient(
            base_url=service.url, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=30
        ) as client:
            running = RunningService(service, cluster, client, observer, database_url)
            if wait_ready:
                await running.wait_ready()
            yield running
    finally:
        await service.stop()
        await observer.close()


def serve_env(database_url: str, **extra: str) -> dict[str, str]:
    """The environment of `python -m app serve` on `database_url` (on 127.0.0.1:0, the admin
    token `ADMIN_TOKEN`) with `extra` added: no cluster but one `extra` names."""
    env = {
        k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")
    }
    env.update(
        PYTHONPATH=str(REPO),
        DATABASE_URL=database_url,
        AICP_ADMIN_TOKEN=ADMIN_TOKEN,
        AICP_HTTP_HOST="127.0.0.1",
        AICP_HTTP_PORT="0",
        AICP_LOG_FORMAT="console",
        **extra,
    )
    return env


async def spawn_serve(env: dict[str, str]) -> asyncio.subprocess.Process:
    """`python -m app serve` with `env`, its log (stderr) piped for the caller to read."""
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "app",
        "serve",
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )


@contextlib.asynccontextmanager
async def serve_process(
    env: dict[str, str],
) -> AsyncIterator[tuple[asyncio.subprocess.Process, str]]:
    """`python -m app serve` with `env` (`serve_env`): the process and its URL once its log
    says it serves (the rest of the log is the caller's to read from its stderr), killed at
    the end if it is still running."""
    process = await spawn_serve(env)
    assert process.stderr is not None
    try:
        line = b""
        while b"serving on" not in line:
            line = await asyncio.wait_for(process.stderr.readline(), 30)
            assert line, "serve exited before serving"
        yield process, line.decode().split("serving on ")[1].strip()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


@pytest.fixture
def no_ambient_kubernetes(monkeypatch: pytest.MonkeyPatch) -> None:
    """The service must find kubesim through its explicit kubeconfig, never a real cluster."""
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)


@pytest.fixture
async def running_service(
    database_url: str,
    kube_cluster_with_controllers: Cluster,
    tmp_path: Path,
    no_ambient_kubernetes: None,
) -> AsyncIterator[RunningService]:
    """aicp (API + engine + informers + steps) on kubesim and a fresh database, ready."""
    async with start_service(database_url, kube_cluster_with_controllers, tmp_path) as running:
        yield running


@dataclass
class TwoReplicas:
    first: RunningService
    second: RunningService

    def by_instance(self, instance_id: str) -> RunningService:
        return self.first if self.first.instance_id == instance_id else self.second

    def other_than(self, replica: RunningService) -> RunningService:
        return self.second if replica is self.first else self.first


@pytest.fixture
async def two_replicas(
    database_url: str,
    kube_cluster_with_controllers: Cluster,
    tmp_path: Path,
    no_ambient_kubernetes: None,
) -> AsyncIterator[TwoReplicas]:
    """Two replicas (`replica-a`, `replica-b`) on one database and one kubesim, both ready."""
    cluster = kube_cluster_with_controllers
    async with (
        start_service(database_url, cluster, tmp_path, instance_id="replica-a") as first,
        start_service(database_url, cluster, tmp_path, instance_id="replica-b") as second,
    ):
        yield TwoReplicas(first, second)
