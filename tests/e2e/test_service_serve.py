"""`python -m app serve` finds its cluster in `KUBECONFIG` (or in-cluster), never a simulator
of its own: without either it refuses to start; with one it reconciles and stops on SIGTERM."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import httpx

from kubesim import Cluster
from tests.support.api_client import ADMIN_TOKEN, bearer
from tests.support.waiting import wait_until

REPO = Path(__file__).resolve().parents[2]


def _env(database_url: str, **extra: str) -> dict[str, str]:
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


async def test_serve_without_a_cluster_configuration_exits_2_saying_what_is_missing(
    database_url: str,
) -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "app",
        "serve",
        env=_env(database_url),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    _, stderr = await asyncio.wait_for(process.communicate(), 30)

    assert process.returncode == 2
    assert "no Kubernetes configuration" in stderr.decode()
    assert "KUBECONFIG" in stderr.decode()


async def test_serve_with_kubeconfig_reconciles_against_that_cluster_and_stops_on_sigterm(
    database_url: str, kube_cluster_with_controllers: Cluster, tmp_path: Path
) -> None:
    kubeconfig = kube_cluster_with_controllers.write_kubeconfig(tmp_path / "kubeconfig")
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "app",
        "serve",
        env=_env(database_url, KUBECONFIG=str(kubeconfig)),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stderr is not None
    try:
        line = b""
        while b"serving on" not in line:
            line = await asyncio.wait_for(process.stderr.readline(), 30)
            assert line, "serve exited before serving"
        url = line.decode().split("serving on ")[1].strip()
        # Keep reading its log so a full pipe never blocks the server.
        drain = asyncio.create_task(process.stderr.read())
        async with httpx.AsyncClient(base_url=url, headers=bearer(ADMIN_TOKEN)) as client:
            await wait_until(
                lambda: _answers(client, "/readyz", 200), timeout=15, message="/readyz 200"
            )
            created = await client.post("/api/v1/projects", json={"name": "served"})
            assert created.status_code == 202, created.text

            async def namespace_exists() -> bool:
                async with httpx.AsyncClient(base_url=kube_cluster_with_controllers.url) as sim:
                    found = await sim.get("/api/v1/namespaces/aicp-served")
                    return found.status_code == 200

            await wait_until(namespace_exists, timeout=15, message="namespace aicp-served")
        process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(process.wait(), 30) == 0
        assert b"released" in await drain  # the engine let its leases go on the way out
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def _answers(client: httpx.AsyncClient, path: str, status: int) -> bool:
    return (await client.get(path)).status_code == status
