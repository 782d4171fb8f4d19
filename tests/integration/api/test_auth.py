"""Authentication and tenancy: who gets 401, 403 and 404, on every endpoint."""

from __future__ import annotations

import httpx
import pytest

from app.main import Service
from tests.support.api_client import Api
from tests.support.pg_fixtures import service_settings

POOL = {
    "name": "h100-pool",
    "accelerator_class": "h100-80g",
    "quota": {"accelerators": 8, "cpu": "64", "memory": "512Gi"},
}
WORKLOAD = {"name": "train", "compute_pool": "h100-pool", "image": "ghcr.io/acme/train:1"}


def endpoints(project: str, token_id: str) -> list[tuple[str, str, object | None]]:
    """Every project-scoped endpoint of API.md (except logs/manifest), with a valid body."""
    base = f"/api/v1/projects/{project}"
    return [
        ("GET", base, None),
        ("DELETE", base, None),
        ("POST", f"{base}/tokens", {"name": "t2", "role": "viewer"}),
        ("GET", f"{base}/tokens", None),
        ("DELETE", f"{base}/tokens/{token_id}", None),
        ("POST", f"{base}/compute-pools", {**POOL, "name": "other-pool"}),
        ("GET", f"{base}/compute-pools", None),
        ("GET", f"{base}/compute-pools/h100-pool", None),
        ("PATCH", f"{base}/compute-pools/h100-pool", {"quota": POOL["quota"]}),
        ("DELETE", f"{base}/compute-pools/h100-pool", None),
        ("POST", f"{base}/workloads", {**WORKLOAD, "name": "train-2"}),
        ("GET", f"{base}/workloads", None),
        ("GET", f"{base}/workloads/train", None),
        ("PUT", f"{base}/workloads/train", WORKLOAD),
        ("DELETE", f"{base}/workloads/train", None),
        ("GET", f"{base}/workloads/train/events", None),
    ]


WRITES = {"POST", "PUT", "PATCH", "DELETE"}


async def _project_with_everything(api: Api, name: str) -> str:
    """A project with a pool and a workload; returns the id of a viewer token in it."""
    await api.create_project(name)
    pool = await api.client.post(f"/api/v1/projects/{name}/compute-pools", json=POOL)
    assert pool.status_code == 202, pool.text
    workload = await api.client.post(f"/api/v1/projects/{name}/workloads", json=WORKLOAD)
    assert workload.status_code == 202, workload.text
    token = await api.client.post(
        f"/api/v1/projects/{name}/tokens", json={"name": "reader", "role": "viewer"}
    )
    token_id: str = token.json()["id"]
    return token_id


async def _call(
    client: httpx.AsyncClient, method: str, path: str, body: object | None
) -> httpx.Response:
    return (
        await client.request(method, path, json=body)
        if body is not None
        else (await client.request(method, path))
    )


async def test_another_projects_token_gets_404_on_every_endpoint(api: Api) -> None:
    await api.put_binding("h100-80g")
    token_id = await _project_with_everything(api, "alpha")
    await api.create_project("beta")
    beta_admin = await api.create_token("beta", role="admin")
    wrong: list[str] = []
    async with api.as_token(beta_admin) as outsider:
        for method, path, body in endpoints("alpha", token_id):
            response = await _call(outsider, method, path, body)
            if response.status_code != 404 or not response.json()["type"].endswith("not-found"):
                wrong.append(f"{method} {path} -> {response.status_code}")
            # The same call on a project that does not exist answers the same: no oracle.
            ghost = await _call(outsider, method, path.replace("/alpha", "/ghost"), body)
            if ghost.status_code != 404:
                wrong.append(f"{method} {path} (ghost) -> {ghost.status_code}")
    assert wrong == []


async def test_a_viewer_reads_but_writing_anything_is_403_with_the_required_role(
    api: Api,
) -> None:
    await api.put_binding("h100-80g")
    token_id = await _project_with_everything(api, "alpha")
    viewer = await api.create_token("alpha", role="viewer", name="looker")
    wrong: list[str] = []
    async with api.as_token(viewer) as member:
        for method, path, body in endpoints("alpha", token_id):
            response = await _call(member, method, path, body)
            if method in WRITES or path.endswith("/tokens"):  # tokens are for project admins
                problem = response.json()
                if response.status_code != 403 or "required_role" not in problem:
                    wrong.append(f"{method} {path} -> {response.status_code}")
            elif response.status_code != 200:
                wrong.append(f"{method} {path} -> {response.status_code} (read)")
    assert wrong == []


async def test_an_editor_submits_workloads_but_only_a_project_admin_manages_pools(
    api: Api,
) -> None:
    await api.put_binding("h100-80g")
    await _project_with_everything(api, "alpha")
    editor = await api.create_token("alpha", role="editor", name="dev")
    async with api.as_token(editor) as dev:
        submitted = await dev.post(
            "/api/v1/projects/alpha/workloads", json={**WORKLOAD, "name": "mine"}
        )
        assert submitted.status_code == 202, submitted.text
        assert submitted.json()["created_by"].startswith("token:")
        pool = await dev.post("/api/v1/projects/alpha/compute-pools", json={**POOL, "name": "p2"})
        assert pool.status_code == 403
        assert pool.json()["required_role"] == "admin"
        assert (await dev.post("/api/v1/projects", json={"name": "x"})).status_code == 403


@pytest.mark.parametrize(
    "authorization",
    [
        pytest.param(None, id="missing"),
        pytest.param("Bearer", id="empty-bearer"),
        pytest.param("Basic dXNlcjpwYXNz", id="basic-scheme"),
        pytest.param("Bearer aicp_not-a-real-token", id="unknown-token"),
        pytest.param("Bearer something-else", id="unknown-format"),
    ],
)
async def test_a_request_without_a_valid_token_is_401_with_www_authenticate(
    app_client: httpx.AsyncClient, authorization: str | None
) -> None:
    headers = {"Authorization": authorization} if authorization else {}
    async with httpx.AsyncClient(base_url=app_client.base_url, headers=headers) as anonymous:
        response = await anonymous.get("/api/v1/projects")
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Bearer")
    assert response.json()["type"].endswith("/unauthorized")


async def test_an_invalid_token_is_401_even_with_an_invalid_body(
    app_client: httpx.AsyncClient,
) -> None:
    async with httpx.AsyncClient(base_url=app_client.base_url) as anonymous:
        response = await anonymous.post("/api/v1/projects", json={"nmae": 1})
    assert response.status_code == 401


async def test_open_endpoints_need_no_token(app_client: httpx.AsyncClient) -> None:
    async with httpx.AsyncClient(base_url=app_client.base_url) as anonymous:
        for path in ("/healthz", "/readyz", "/metrics", "/schema/openapi.json"):
            assert (await anonymous.get(path)).status_code == 200, path


async def test_a_revocation_holds_on_another_replica_at_its_next_request(
    api: Api, database_url: str
) -> None:
    await api.create_project("research")
    created = (
        await api.client.post(
            "/api/v1/projects/research/tokens", json={"name": "ci", "role": "viewer"}
        )
    ).json()
    replica = Service(service_settings(database_url))
    await replica.start()
    try:
        async with httpx.AsyncClient(
            base_url=replica.url, headers={"Authorization": f"Bearer {created['token']}"}
        ) as on_replica:
            assert (await on_replica.get("/api/v1/projects/research")).status_code == 200
            revoked = await api.client.delete(f"/api/v1/projects/research/tokens/{created['id']}")
            assert revoked.status_code == 204
            assert (await on_replica.get("/api/v1/projects/research")).status_code == 401
    finally:
        await replica.stop()
