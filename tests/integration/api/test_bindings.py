"""Accelerator bindings: the platform admin writes them, any valid token reads them."""

from __future__ import annotations

import asyncpg

from tests.support.api_client import Api
from tests.support.problems import assert_problem
from tests.support.scenario import Scenario

H100 = {
    "resource_name": "nvidia.com/gpu",
    "flavor": "h100-80g",
    "node_labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    "description": "H100 80GB nodes",
}


async def test_put_creates_with_201_then_replaces_with_200(api: Api) -> None:
    created = await api.client.put("/api/v1/accelerator-bindings/h100-80g", json=H100)
    assert created.status_code == 201, created.text
    body = created.json()
    assert body["accelerator_class"] == "h100-80g"
    assert body["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "value": None, "effect": "NoSchedule"}
    ]
    replaced = await api.client.put(
        "/api/v1/accelerator-bindings/h100-80g", json={**H100, "description": "H100 SXM"}
    )
    assert replaced.status_code == 200
    assert replaced.json()["description"] == "H100 SXM"
    assert replaced.json()["created_at"] == body["created_at"]
    fetched = await api.client.get("/api/v1/accelerator-bindings/h100-80g")
    assert fetched.json()["description"] == "H100 SXM"


async def test_any_project_token_reads_bindings_but_cannot_write_them(api: Api) -> None:
    await api.put_binding("h100-80g")
    await api.put_binding("a100-40g")
    await api.create_project("research")
    admin = await api.create_token("research", role="admin")
    async with api.as_token(admin) as member:
        listed = await member.get("/api/v1/accelerator-bindings")
        assert [b["accelerator_class"] for b in listed.json()["items"]] == [
            "a100-40g",
            "h100-80g",
        ]
        assert (await member.get("/api/v1/accelerator-bindings/h100-80g")).status_code == 200
        denied = await member.put("/api/v1/accelerator-bindings/h100-80g", json=H100)
        assert denied.status_code == 403
        assert denied.json()["required_role"] == "platform-admin"
        assert (await member.delete("/api/v1/accelerator-bindings/h100-80g")).status_code == 403


async def test_deleting_an_unused_binding_is_204_and_then_it_is_gone(api: Api) -> None:
    await api.put_binding("h100-80g")
    assert (await api.client.delete("/api/v1/accelerator-bindings/h100-80g")).status_code == 204
    missing = await api.client.get("/api/v1/accelerator-bindings/h100-80g")
    assert missing.status_code == 404
    assert (await api.client.delete("/api/v1/accelerator-bindings/h100-80g")).status_code == 404


async def test_deleting_a_binding_a_pool_uses_is_409_in_use_naming_the_pool(
    api: Scenario,
) -> None:
    await api.setup_pool(quota={"accelerators": 8, "cpu": "64", "memory": "512Gi"}, wait=False)
    response = await api.client.delete("/api/v1/accelerator-bindings/h100-80g")
    problem = assert_problem(response, 409, "in-use")
    assert problem["referenced_by"] == ["compute-pool/research/h100-pool"]


async def test_binding_writes_are_audited_with_the_admin_as_actor(
    api: Api, sql: asyncpg.Connection
) -> None:
    await api.put_binding("h100-80g")
    await api.put_binding("h100-80g", description="again")
    await api.client.delete("/api/v1/accelerator-bindings/h100-80g")
    rows = await sql.fetch("SELECT type, actor FROM events WHERE kind = 'binding' ORDER BY id")
    assert [(r["type"], r["actor"]) for r in rows] == [
        ("Created", "admin"),
        ("SpecUpdated", "admin"),
        ("Deleted", "admin"),
    ]


async def test_a_bad_accelerator_class_in_the_path_is_422(api: Api) -> None:
    response = await api.client.put("/api/v1/accelerator-bindings/H100_80G", json=H100)
    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == "accelerator_class"
