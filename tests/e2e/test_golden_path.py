"""The README's golden path against a real `python -m app dev` process (embedded kubesim,
2 nodes x 8 H100), as a newcomer would walk it with curl: binding → project → pool →
workload → SUCCEEDED with evidence → a failing workload's reason → delete → 404 → SIGTERM.

Only the database is this test's own (a fresh one, through `DATABASE_URL`), so runs do not
share state; everything else is the dev mode a user starts with `make run`.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "e2e-admin-token-0123456789abcdef"
BANNER = re.compile(r"aicp is running \(dev mode\): (http://\S+)")

pytestmark = pytest.mark.timeout(120)


async def _url_from(stderr: asyncio.StreamReader, seen: list[str]) -> str:
    while line := (await stderr.readline()).decode(errors="replace"):
        seen.append(line)
        if match := BANNER.search(line):
            return match.group(1)
    raise AssertionError("aicp exited before serving:\n" + "".join(seen[-40:]))


@pytest.fixture
async def aicp(database_url: str, tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    """`python -m app dev` on a free port; an admin client once /readyz says 200."""
    env = {
        **{k: v for k, v in os.environ.items() if k != "KUBECONFIG"},
        "DATABASE_URL": database_url,
        "AICP_ADMIN_TOKEN": TOKEN,
        "AICP_HTTP_HOST": "127.0.0.1",
        "AICP_HTTP_PORT": "0",
        "AICP_LOG_FORMAT": "json",
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "app",
        "dev",
        "--state-dir",
        str(tmp_path / "state"),
        cwd=ROOT,
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stderr is not None
    seen: list[str] = []
    drain: asyncio.Task[None] | None = None
    try:
        url = await asyncio.wait_for(_url_from(process.stderr, seen), 60)

        async def keep_reading() -> None:
            assert process.stderr is not None
            while line := await process.stderr.readline():
                seen.append(line.decode(errors="replace"))

        drain = asyncio.create_task(keep_reading(), name="aicp-stderr")
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with httpx.AsyncClient(base_url=url, headers=headers, timeout=30) as client:

            async def ready() -> bool:
                return (await client.get("/readyz")).status_code == 200

            await wait_until(ready, timeout=30, message="/readyz 200")
            yield client
        process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(process.wait(), 30) == 0, "".join(seen[-40:])
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        if drain is not None:
            await drain


async def _state(client: httpx.AsyncClient, path: str, *states: str) -> dict[str, Any]:
    async def probe() -> dict[str, Any] | None:
        response = await client.get(path)
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        return body if body["status"]["state"] in states else None

    return await wait_until(probe, timeout=30, message=f"{path} in {states}")


async def test_the_readme_golden_path_works_against_dev_mode(aicp: httpx.AsyncClient) -> None:
    client = aicp
    binding = {
        "resource_name": "nvidia.com/gpu",
        "flavor": "h100-80g",
        "node_labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
    }
    assert (await client.put("/api/v1/accelerator-bindings/h100-80g", json=binding)).is_success
    assert (await client.post("/api/v1/projects", json={"name": "research"})).status_code == 202
    pool = {
        "name": "h100-pool",
        "accelerator_class": "h100-80g",
        "quota": {"accelerators": 16, "cpu": "256", "memory": "2Ti"},
    }
    pools = "/api/v1/projects/research/compute-pools"
    assert (await client.post(pools, json=pool)).status_code == 202
    await _state(client, "/api/v1/projects/research", "READY")
    ready = await _state(client, f"{pools}/h100-pool", "READY")
    assert ready["status"]["cluster_queue"] == "aicp-research-h100-pool"

    workloads = "/api/v1/projects/research/workloads"
    train = {
        "name": "train-7b",
        "compute_pool": "h100-pool",
        "image": "ghcr.io/acme/train:1.4",
        "command": ["python", "train.py"],
        "accelerators": 8,
        "cpu": "32",
        "memory": "256Gi",
        "env": {"KUBESIM_RUN_SECONDS": "1"},
    }
    assert (await client.post(workloads, json=train)).status_code == 202
    done = await _state(client, f"{workloads}/train-7b", "SUCCEEDED")
    status = done["status"]
    assert status["accelerator"]["product"] == "NVIDIA-H100-80GB-HBM3"
    assert status["accelerator"]["count"] == 8
    assert status["nodes"] and status["admission"]["flavor"] == "h100-80g"
    assert status["exit_code"] == 0 and status["attempts"] == 1

    oom = {
        **train,
        "name": "oom",
        "memory": "16Gi",
        "env": {"KUBESIM_RUN_SECONDS": "0.5", "KUBESIM_OOM": "1"},
    }
    assert (await client.post(workloads, json=oom)).status_code == 202
    failed = await _state(client, f"{workloads}/oom", "FAILED")
    assert "OOMKilled" in failed["status"]["reason"] and "16Gi" in failed["status"]["reason"]

    assert (await client.delete(f"{workloads}/oom")).status_code == 202

    async def gone() -> bool:
        return (await client.get(f"{workloads}/oom")).status_code == 404

    await wait_until(gone, timeout=30, message="deleted workload 404")
    events = (await client.get(f"{workloads}/train-7b/events")).json()["items"]
    assert {"Accepted", "JobCreated", "Admitted", "Started", "Succeeded"} <= {
        e["type"] for e in events
    }
