"""Test shortcuts over the real HTTP API: create a project, a token, a binding in one line."""

from __future__ import annotations

from typing import Any

import httpx

ADMIN_TOKEN = "test-admin-token-0123456789"


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


class Api:
    """Setup helpers; each asserts its call succeeded so tests fail where the setup broke."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self.client = client

    async def create_project(self, name: str, **fields: Any) -> dict[str, Any]:
        response = await self.client.post("/api/v1/projects", json={"name": name, **fields})
        assert response.status_code == 202, response.text
        body: dict[str, Any] = response.json()
        return body

    async def create_token(
        self, project: str, role: str = "editor", name: str | None = None, **fields: Any
    ) -> str:
        """A new token's secret."""
        response = await self.client.post(
            f"/api/v1/projects/{project}/tokens",
            json={"name": name or f"{role}-token", "role": role, **fields},
        )
        assert response.status_code == 201, response.text
        secret: str = response.json()["token"]
        return secret

    async def put_binding(
        self, accelerator_class: str = "h100-80g", **fields: Any
    ) -> dict[str, Any]:
        body = {
            "resource_name": "nvidia.com/gpu",
            "flavor": accelerator_class,
            "node_labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
            **fields,
        }
        response = await self.client.put(
            f"/api/v1/accelerator-bindings/{accelerator_class}", json=body
        )
        assert response.status_code in (200, 201), response.text
        result: dict[str, Any] = response.json()
        return result

    def as_token(self, token: str) -> httpx.AsyncClient:
        """A client for the same server that sends ``token`` instead of the admin's."""
        return httpx.AsyncClient(base_url=self.client.base_url, headers=bearer(token), timeout=30)
