"""Test shortcuts over the real HTTP API: create a project, a token, a binding in one line.

Every call goes through `Api.request`, the one place a harness changes how requests travel
(tests/faults/workloads.py retries them across replicas); tests/support/scenario.py builds the
pools, workloads and waits on top.
"""

from __future__ import annotations

from typing import Any

import httpx

ADMIN_TOKEN = "test-admin-token-0123456789"
PRODUCT = "NVIDIA-H100-80GB-HBM3"


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def binding_body(accelerator_class: str = "h100-80g", **fields: Any) -> dict[str, Any]:
    """An accelerator binding counting `nvidia.com/gpu` on kubesim's H100 nodes."""
    return {
        "resource_name": "nvidia.com/gpu",
        "flavor": accelerator_class,
        "node_labels": {"nvidia.com/gpu.product": PRODUCT},
        **fields,
    }


class Api:
    """Setup helpers; each asserts its call succeeded so tests fail where the setup broke.

    `client` sends the admin's token; a harness that overrides `request` (sending through
    something else) may pass None.
    """

    def __init__(self, client: httpx.AsyncClient | None) -> None:
        self._client = client

    @property
    def client(self) -> httpx.AsyncClient:
        assert self._client is not None, "this Api sends its requests through its own `request`"
        return self._client

    async def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: dict[str, Any] | None = None,
        accept: tuple[int, ...] = (200,),
        key: str | None = None,
    ) -> httpx.Response:
        """Send one request; its status must be one of `accept`. `key` is an Idempotency-Key."""
        headers = {"Idempotency-Key": key} if key else None
        response = await self.client.request(
            method, path, json=json, params=params, headers=headers
        )
        assert response.status_code in accept, f"{method} {path}: {response.text}"
        return response

    async def create_project(self, name: str, **fields: Any) -> dict[str, Any]:
        response = await self.request(
            "POST", "/api/v1/projects", json={"name": name, **fields}, accept=(202,)
        )
        body: dict[str, Any] = response.json()
        return body

    async def create_token(
        self, project: str, role: str = "editor", name: str | None = None, **fields: Any
    ) -> str:
        """A new token's secret."""
        response = await self.request(
            "POST",
            f"/api/v1/projects/{project}/tokens",
            json={"name": name or f"{role}-token", "role": role, **fields},
            accept=(201,),
        )
        secret: str = response.json()["token"]
        return secret

    async def put_binding(
        self, accelerator_class: str = "h100-80g", **fields: Any
    ) -> dict[str, Any]:
        response = await self.request(
            "PUT",
            f"/api/v1/accelerator-bindings/{accelerator_class}",
            json=binding_body(accelerator_class, **fields),
            accept=(200, 201),
        )
        result: dict[str, Any] = response.json()
        return result

    def as_token(self, token: str) -> httpx.AsyncClient:
        """A client for the same server that sends ``token`` instead of the admin's."""
        return httpx.AsyncClient(base_url=self.client.base_url, headers=bearer(token), timeout=30)
