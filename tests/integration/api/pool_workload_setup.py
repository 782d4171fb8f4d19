"""Setup shared by the compute pool, workload and event tests: one binding, project and pool."""

from __future__ import annotations

from typing import Any

from tests.support.api_client import Api

PROJECT = "research"
POOL = "h100-pool"
CLASS = "h100-80g"
QUOTA = {"accelerators": 16, "cpu": "256", "memory": "2Ti"}
POOLS = f"/api/v1/projects/{PROJECT}/compute-pools"
WORKLOADS = f"/api/v1/projects/{PROJECT}/workloads"

TRAIN_7B: dict[str, Any] = {
    "name": "train-7b",
    "compute_pool": POOL,
    "image": "ghcr.io/acme/train:1.4",
    "command": ["python", "train.py"],
    "args": ["--epochs", "3"],
    "env": {"WANDB_MODE": "offline"},
    "accelerators": 8,
    "cpu": "32",
    "memory": "256Gi",
    "replicas": 1,
    "max_runtime_seconds": 86400,
    "start_deadline_seconds": 3600,
    "retries": 0,
    "priority": "normal",
    "labels": {"team": "nlp"},
}


def workload(name: str = "train-7b", **changes: Any) -> dict[str, Any]:
    """A valid workload body (docs/API.md's example) with `changes` applied."""
    return {**TRAIN_7B, "name": name, **changes}


async def create_pool(
    api: Api, name: str = POOL, project: str = PROJECT, quota: dict[str, Any] | None = None
) -> dict[str, Any]:
    response = await api.client.post(
        f"/api/v1/projects/{project}/compute-pools",
        json={"name": name, "accelerator_class": CLASS, "quota": quota or QUOTA},
    )
    assert response.status_code == 202, response.text
    body: dict[str, Any] = response.json()
    return body


async def project_with_pool(api: Api, project: str = PROJECT) -> None:
    """The binding `h100-80g`, the project and its pool `h100-pool` (quota QUOTA)."""
    await api.put_binding(CLASS)
    await api.create_project(project)
    await create_pool(api, project=project)


async def create_workload(api: Api, name: str = "train-7b", **changes: Any) -> dict[str, Any]:
    response = await api.client.post(WORKLOADS, json=workload(name, **changes))
    assert response.status_code == 202, response.text
    body: dict[str, Any] = response.json()
    return body
