"""A replica whose engine dies, or whose database or cluster stays out of reach, does not linger.

It answers 503 on `/healthz` with the reason, shuts down in order and exits with status 1, so
Kubernetes restarts it, instead of staying Running, unready and reconciling nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import urllib.parse
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import httpx
import pytest

from kubesim import Cluster
from tests.support.pg_fixtures import with_database
from tests.support.service import RunningService, serve_env, serve_process
from tests.support.waiting import wait_until

RECOVERY_SECONDS = 2


async def test_killing_an_engine_task_turns_healthz_to_503_and_asks_the_process_to_exit(
    running_service: RunningService,
) -> None:
    (worker,) = [t for t in asyncio.all_tasks() if t.get_name() == "reconcile-worker-0"]

    worker.cancel()
    failure = await asyncio.wait_for(running_service.service.wait_failed(), 10)

    assert failure == (
        "the reconcile engine ended (its task reconcile-worker-0 ended: CancelledError())"
    )
    health = await running_service.client.get("/healthz")
    assert health.status_code == 503
    assert health.json() == {"status": "failing", "reason": failure}


@dataclass
class Served:
    process: asyncio.subprocess.Process
    client: httpx.AsyncClient

    async def exit_status_and_log(self) -> tuple[int, str]:
        assert self.process.stderr is not None
        log = await asyncio.wait_for(self.process.stderr.read(), 60)
        return await asyncio.wait_for(self.process.wait(), 30), log.decode()


@contextlib.asynccontextmanager
async def serve(database_url: str, cluster: Cluster, directory: Path) -> AsyncIterator[Served]:
    """`python -m app serve` against `cluster`, ready, with a short recovery bound."""
    kubeconfig = cluster.write_kubeconfig(directory / "kubeconfig")
    env = serve_env(
        database_url,
        KUBECONFIG=str(kubeconfig),
        AICP_RECOVERY_TIMEOUT_SECONDS=str(RECOVERY_SECONDS),
    )
    async with serve_process(env) as (process, url), httpx.AsyncClient(base_url=url) as client:

        async def ready() -> bool:
            return (await client.get("/readyz")).status_code == 200

        await wait_until(ready, timeout=20, message="/readyz 200")
        yield Served(process, client)


@contextlib.asynccontextmanager
async def database_refusing_connections(database_url: str) -> AsyncIterator[None]:
    """The service's database accepts no connection and has lost every one it had."""
    # By the URL's path, not its last "/": an embedded server's URL ends in `?host=/tmp/...`.
    name = urllib.parse.urlsplit(database_url).path.lstrip("/")
    admin = await asyncpg.connect(with_database(database_url, "postgres"))
    try:
        await admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
        await admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = $1 AND pid <> pg_backend_pid()",
            name,
        )
        yield
    finally:
        await admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
        await admin.close()


@pytest.mark.timeout(120)
async def test_serve_exits_1_when_its_doorbell_cannot_reach_the_database_within_the_bound(
    database_url: str, kube_cluster_with_controllers: Cluster, tmp_path: Path
) -> None:
    async with (
        serve(database_url, kube_cluster_with_controllers, tmp_path) as served,
        database_refusing_connections(database_url),
    ):
        status, log = await served.exit_status_and_log()

    assert status == 1
    [exit_line] = [line for line in log.splitlines() if line.startswith("aicp: exiting because")]
    # At least the bound; the supervisor looks once a second, so a loaded machine says more.
    assert re.match(r"aicp: exiting because the doorbell has been down for (\d+)s: ", exit_line)
    assert int(exit_line.split("down for ")[1].split("s")[0]) >= RECOVERY_SECONDS


@pytest.mark.timeout(120)
async def test_serve_exits_1_when_the_kubernetes_api_stays_unreachable_past_the_bound(
    database_url: str, kube_cluster_with_controllers: Cluster, tmp_path: Path
) -> None:
    cluster = kube_cluster_with_controllers
    async with serve(database_url, cluster, tmp_path) as served:
        async with httpx.AsyncClient(base_url=cluster.url) as sim:
            # An API server restart that lasts far longer than the bound.
            answer = await sim.post("/_sim/faults", json={"refuse_connections_seconds": 60})
            assert answer.status_code == 200
        status, log = await served.exit_status_and_log()

    assert status == 1
    [exit_line] = [line for line in log.splitlines() if line.startswith("aicp: exiting because")]
    assert re.match(
        r"aicp: exiting because the \w+ informer has been down for \d+s: list/watch", exit_line
    )
    assert int(exit_line.split("down for ")[1].split("s")[0]) >= RECOVERY_SECONDS
