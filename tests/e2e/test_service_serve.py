"""`python -m app serve` finds its cluster in `KUBECONFIG` (or in-cluster), never a simulator
of its own: without either it refuses to start; with one it reconciles and stops on SIGTERM,
ending the log streams still open with a last line rather than a traceback."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx

from app.api.shutdown import LOG_STREAM_END
from app.main import SHUTDOWN_GRACE_SECONDS
from kubesim import Cluster
from tests.support.api_client import ADMIN_TOKEN, bearer
from tests.support.service import serve_env, serve_process
from tests.support.waiting import wait_until


async def test_serve_without_a_cluster_configuration_exits_2_saying_what_is_missing(
    database_url: str,
) -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "app",
        "serve",
        env=serve_env(database_url),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    _, stderr = await asyncio.wait_for(process.communicate(), 30)

    assert process.returncode == 2
    assert "no Kubernetes configuration" in stderr.decode()
    assert "KUBECONFIG" in stderr.decode()


@contextlib.asynccontextmanager
async def _served(
    database_url: str, cluster: Cluster, tmp_path: Path
) -> AsyncIterator[tuple[asyncio.subprocess.Process, str, asyncio.Task[bytes]]]:
    """`python -m app serve` on `cluster`: the process, its URL once it serves, and the rest
    of its log (read all along, so a full pipe never blocks the server), killed at the end if
    it is still running."""
    kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
    env = serve_env(database_url, KUBECONFIG=str(kubeconfig))
    async with serve_process(env) as (process, url):
        assert process.stderr is not None
        yield process, url, asyncio.create_task(process.stderr.read())


async def test_serve_with_kubeconfig_reconciles_against_that_cluster_and_stops_on_sigterm(
    database_url: str, kube_cluster_with_controllers: Cluster, tmp_path: Path
) -> None:
    async with _served(database_url, kube_cluster_with_controllers, tmp_path) as served:
        process, url, log = served
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
        assert b"released" in await log  # the engine let its leases go on the way out


async def test_a_log_follow_open_at_sigterm_ends_with_a_last_line_and_no_traceback(
    database_url: str, kube_cluster_with_controllers: Cluster, tmp_path: Path
) -> None:
    async with _served(database_url, kube_cluster_with_controllers, tmp_path) as served:
        process, url, log = served
        async with httpx.AsyncClient(
            base_url=url, headers=bearer(ADMIN_TOKEN), timeout=30
        ) as client:
            await wait_until(
                lambda: _answers(client, "/readyz", 200), timeout=15, message="/readyz 200"
            )
            workload = await _running_workload(client)
            async with client.stream("GET", workload + "/logs", params={"follow": "true"}) as logs:
                assert logs.status_code == 200
                lines = logs.aiter_lines()
                assert "tick" in await asyncio.wait_for(anext(lines), 15)  # streaming now
                process.send_signal(signal.SIGTERM)
                signalled = time.monotonic()
                rest = await asyncio.wait_for(_all(lines), SHUTDOWN_GRACE_SECONDS)
                ended_after = time.monotonic() - signalled
        assert rest[-1] == LOG_STREAM_END
        assert ended_after < SHUTDOWN_GRACE_SECONDS / 2, ended_after
        assert await asyncio.wait_for(process.wait(), 2 * SHUTDOWN_GRACE_SECONDS) == 0
        stderr = (await log).decode()
        assert "Traceback" not in stderr and "Exception in ASGI" not in stderr, stderr
        # kubesim's side of the pod's log stream ends with the pod (the test leaves nothing).
        await wait_until(
            lambda: _pod_ended(kube_cluster_with_controllers), timeout=30, message="pod ended"
        )


async def _running_workload(client: httpx.AsyncClient) -> str:
    """A workload printing `tick` every 0.2 s for 10 s, running: its path."""
    binding = {"resource_name": "nvidia.com/gpu", "flavor": "h100-80g", "node_labels": {}}
    assert (await client.put("/api/v1/accelerator-bindings/h100-80g", json=binding)).is_success
    assert (await client.post("/api/v1/projects", json={"name": "served"})).is_success
    pools = "/api/v1/projects/served/compute-pools"
    quota = {"accelerators": 8, "cpu": "64", "memory": "512Gi"}
    pool = {"name": "p", "accelerator_class": "h100-80g", "quota": quota}
    await wait_until(lambda: _posted(client, pools, pool), timeout=15, message="pool accepted")
    env = {"KUBESIM_RUN_SECONDS": "10", "KUBESIM_LOG": "tick", "KUBESIM_LOG_INTERVAL": "0.2"}
    body = {"name": "ticking", "compute_pool": "p", "image": "i", "accelerators": 1, "env": env}
    path = "/api/v1/projects/served/workloads"
    await wait_until(lambda: _posted(client, path, body), timeout=15, message="workload accepted")

    async def running() -> bool:
        found = await client.get(path + "/ticking")
        return bool(found.json()["status"]["state"] == "RUNNING")

    await wait_until(running, timeout=20, message="workload RUNNING")
    return path + "/ticking"


async def _posted(client: httpx.AsyncClient, path: str, body: dict[str, object]) -> bool:
    """POSTed (True), or refused only because what it needs is not READY yet (False)."""
    answer = await client.post(path, json=body)
    assert answer.status_code in (202, 409, 422), answer.text
    return answer.status_code == 202


async def _pod_ended(cluster: Cluster) -> bool:
    async with httpx.AsyncClient(base_url=cluster.url) as sim:
        pods = (await sim.get("/api/v1/namespaces/aicp-served/pods")).json()["items"]
    return all(pod["status"].get("phase") in ("Succeeded", "Failed") for pod in pods)


async def _all(lines: AsyncIterator[str]) -> list[str]:
    return [line async for line in lines]


async def _answers(client: httpx.AsyncClient, path: str, status: int) -> bool:
    return (await client.get(path)).status_code == status
