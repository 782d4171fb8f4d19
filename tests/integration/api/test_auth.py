"""Authentication details the tenancy matrix (test_tenancy_matrix.py) does not spell out:
the order of checks, the header forms that are refused, and the endpoints that are open."""

from __future__ import annotations

import httpx

from tests.support.api_client import Api

REFUSED_AUTHORIZATION = {
    "missing": None,
    "empty bearer": "Bearer",
    "basic scheme": "Basic dXNlcjpwYXNz",
    "two words": "Bearer aicp_x extra",
    "unknown project token": "Bearer aicp_not-a-real-token",
    "unknown other token": "Bearer something-else-entirely",
}


async def test_every_refused_authorization_form_is_401_with_www_authenticate(
    app_client: httpx.AsyncClient,
) -> None:
    wrong: list[str] = []
    for label, authorization in REFUSED_AUTHORIZATION.items():
        headers = {"Authorization": authorization} if authorization else {}
        async with httpx.AsyncClient(base_url=app_client.base_url, headers=headers) as anonymous:
            response = await anonymous.get("/api/v1/projects")
        if (
            response.status_code != 401
            or not response.headers.get("www-authenticate", "").startswith("Bearer")
            or not response.json()["type"].endswith("/unauthorized")
        ):
            wrong.append(f"{label}: {response.status_code}")
    assert wrong == []


async def test_authentication_comes_before_body_validation_and_project_lookup(
    app_client: httpx.AsyncClient,
) -> None:
    async with httpx.AsyncClient(base_url=app_client.base_url) as anonymous:
        invalid_body = await anonymous.post("/api/v1/projects", json={"nmae": 1})
        missing_project = await anonymous.get("/api/v1/projects/ghost")
        not_json = await anonymous.post("/api/v1/projects", content=b"x")
    assert invalid_body.status_code == 401
    assert missing_project.status_code == 401
    assert not_json.status_code == 401


async def test_scope_comes_before_role_and_body_for_project_tokens(api: Api) -> None:
    await api.create_project("alpha")
    await api.create_project("beta")
    viewer = await api.create_token("beta", role="viewer")
    async with api.as_token(viewer) as member:
        # Another project: 404 even though the role is too low and the body is invalid.
        foreign = await member.post("/api/v1/projects/alpha/tokens", json={"bad": True})
        # Its own project: 403 (role) before 422 (body).
        own = await member.post("/api/v1/projects/beta/tokens", json={"bad": True})
    assert foreign.status_code == 404
    assert own.status_code == 403
    assert own.json()["required_role"] == "admin"


async def test_open_endpoints_need_no_token(app_client: httpx.AsyncClient) -> None:
    async with httpx.AsyncClient(base_url=app_client.base_url) as anonymous:
        for path in ("/healthz", "/readyz", "/metrics", "/schema/openapi.json"):
            assert (await anonymous.get(path)).status_code == 200, path
