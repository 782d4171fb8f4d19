"""The objects of the golden path, set up over HTTP: a binding, a project, a pool, workloads."""

from __future__ import annotations

from typing import Any

from tests.support.service import RunningService
from tests.support.waiting import wait_until

PROJECT = "research"
NAMESPACE = f"aicp-{PROJECT}"
POOL = "h100-pool"
CLASS = "h100-80g"
WORKLOADS = f"/api/v1/projects/{PROJECT}/workloads"


def workload_body(name: str, **changes: Any) -> dict[str, Any]:
    """One 8-GPU pod that prints a line and succeeds after `KUBESIM_RUN_SECONDS` (0.3 s)."""
    body: dict[str, Any] = {
        "name": name,
        "compute_pool": POOL,
        "image": "ghcr.io/acme/train:1.4",
        "command": ["python", "train.py"],
        "accelerators": 8,
        "cpu": "8",
        "memory": "64Gi",
        "max_runtime_seconds": 3600,
        "env": {"KUBESIM_RUN_SECONDS": "0.3", "KUBESIM_LOG": f"{name}: step 1 loss 0.42"},
    }
    body.update(changes)
    return body


async def setup_pool(
    running: RunningService,
    accelerators: int = 16,
    *,
    project: str = PROJECT,
    timeout: float = 15,
) -> None:
    """Binding, project and a pool of `accelerators` H100s, waited for until READY."""
    await running.api.put_binding(CLASS, flavor=CLASS)
    await running.api.create_project(project)
    response = await running.client.post(
        f"/api/v1/projects/{project}/compute-pools",
        json={
            "name": POOL,
            "accelerator_class": CLASS,
            "quota": {"accelerators": accelerators, "cpu": "256", "memory": "2Ti"},
        },
    )
    assert response.status_code == 202, response.text

    async def ready() -> bool:
        pool = await running.client.get(f"/api/v1/projects/{project}/compute-pools/{POOL}")
        return bool(pool.json()["status"]["state"] == "READY")

    await wait_until(ready, timeout=timeout, message="pool READY")


async def submit(running: RunningService, name: str, **changes: Any) -> dict[str, Any]:
    response = await running.client.post(WORKLOADS, json=workload_body(name, **changes))
    assert response.status_code == 202, response.text
    body: dict[str, Any] = response.json()
    return body
