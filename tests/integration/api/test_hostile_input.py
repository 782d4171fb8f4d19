"""Odd and hostile input over HTTP: deep bodies, extreme quantities, user-chosen label keys.

Each answers with a problem a user can act on (never a 500) and leaves `/metrics` bounded.
"""

from __future__ import annotations

import re
import secrets

import httpx
import pytest
import pytest_asyncio

from app.api.field_labels import known_fields
from tests.support.scenario import Scenario

pytestmark = pytest.mark.asyncio(loop_scope="module")

BODY_ROUTES = [
    ("POST", "/api/v1/projects"),
    ("PUT", "/api/v1/accelerator-bindings/h100-80g"),
    ("POST", "/api/v1/projects/research/compute-pools"),
    ("POST", "/api/v1/projects/research/workloads"),
]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def research(shared_client: httpx.AsyncClient) -> httpx.AsyncClient:
    await Scenario(shared_client, binding={"node_labels": {}}).setup_pool(wait=False)
    return shared_client


@pytest.mark.parametrize(("method", "path"), BODY_ROUTES)
@pytest.mark.parametrize("levels", [33, 1000, 50_000])
async def test_a_deeply_nested_body_is_422_naming_the_body(
    research: httpx.AsyncClient, method: str, path: str, levels: int
) -> None:
    content = '{"name": "x", "labels": ' + "[" * levels + "]" * levels + "}"
    response = await research.request(
        method, path, content=content, headers={"content-type": "application/json"}
    )
    assert response.status_code == 422, response.text
    assert response.json()["errors"][0]["field"] == "body"


@pytest.mark.parametrize(
    ("field", "value", "status"),
    [
        ("cpu", "1E", 422),
        ("cpu", "1e2147483647", 422),
        ("cpu", "1e2147483648", 422),
        ("cpu", "9" * 64, 422),
        ("cpu", "1E-3", 202),
        ("memory", "1Ei", 422),
        ("memory", "1e-2147483648", 422),
        ("memory", "0." + "0" * 60 + "1", 422),
        ("cpu", "1e0", 202),
        ("memory", "1.5Gi", 202),
        ("memory", ".5Ki", 202),
    ],
)
async def test_extreme_quantities_are_answered_and_never_500(
    research: httpx.AsyncClient, field: str, value: str, status: int
) -> None:
    name = f"q-{secrets.token_hex(4)}"
    body = {"name": name, "compute_pool": "h100-pool", "image": "ghcr.io/acme/train:1.4"}
    response = await research.post(
        "/api/v1/projects/research/workloads", json={**body, field: value}
    )
    assert response.status_code == status, response.text
    if status == 422:
        assert [error["field"] for error in response.json()["errors"]] == [field]


@pytest.mark.parametrize("value", ["1E", "1Ei", "1e99", "9" * 64])
async def test_extreme_pool_quotas_are_422_naming_the_quota_field(
    research: httpx.AsyncClient, value: str
) -> None:
    quota = {"accelerators": 1, "cpu": value, "memory": value}
    response = await research.patch(
        "/api/v1/projects/research/compute-pools/h100-pool", json={"quota": quota}
    )
    assert response.status_code == 422, response.text
    fields = {error["field"] for error in response.json()["errors"]}
    assert fields == {"quota.cpu", "quota.memory"}


async def test_user_chosen_keys_never_become_metric_label_values(
    research: httpx.AsyncClient,
) -> None:
    for _ in range(40):
        key = f"Bad Key {secrets.token_hex(6)}!"
        body = {
            "name": f"m-{secrets.token_hex(4)}",
            "compute_pool": "h100-pool",
            "image": "ghcr.io/acme/train:1.4",
            "labels": {key: "v"},
            "env": {key: "v"},
            key: 1,
        }
        response = await research.post("/api/v1/projects/research/workloads", json=body)
        assert response.status_code == 422
        await research.request(f"X{secrets.token_hex(3).upper()}", "/api/v1/projects")
    metrics = (await research.get("/metrics")).text
    fields = set(re.findall(r'aicp_validation_errors_total\{field="([^"]*)"\}', metrics))
    assert fields and fields <= known_fields()
    methods = set(re.findall(r'aicp_http_requests_total\{method="([^"]*)"', metrics))
    assert methods <= {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "OTHER"}
