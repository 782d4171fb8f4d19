"""Tenancy and auth across every endpoint of the API (docs/API.md "Authentication and tenancy").

- a token of another project gets 404 on everything under `/projects/research`, as if the
  project did not exist;
- a viewer (and an editor, where admin is needed) that writes gets 403 naming the role;
- no token, a malformed, unknown, expired or revoked one gets 401 with `WWW-Authenticate`;
- a revocation made through one replica holds on another replica's next request.

Each table runs against one service; a failure names the endpoint.
"""

from __future__ import annotations

from typing import Any

import httpx

from app.main import Service
from tests.support.api_client import bearer
from tests.support.pg_fixtures import connected, service_settings
from tests.support.scenario import CLASS, POOL, QUOTA, Scenario, example_workload
from tests.support.waiting import wait_until

P = "/api/v1/projects/research"
BINDING = {"resource_name": "nvidia.com/gpu", "flavor": "a100", "node_labels": {}}
POOL_BODY = {"name": "second-pool", "accelerator_class": CLASS, "quota": QUOTA}

SERVICE_BODY = {"name": "chat", "compute_pool": POOL, "image": "ghcr.io/acme/serve:2.1"}

Call = tuple[str, str, Any]
NO_BINDING = "00000000-0000-0000-0000-000000000001"


def project_calls(token_id: str) -> list[Call]:
    """Every endpoint scoped to the project `research` (method, path, json body)."""
    return [
        ("GET", P, None),
        ("PATCH", P, {"limits": None}),
        ("DELETE", P, None),
        ("POST", f"{P}/tokens", {"name": "ci", "role": "viewer", "expires_in_days": 1}),
        ("GET", f"{P}/tokens", None),
        ("DELETE", f"{P}/tokens/{token_id}", None),
        ("POST", f"{P}/compute-pools", POOL_BODY),
        ("GET", f"{P}/compute-pools", None),
        ("GET", f"{P}/compute-pools/{POOL}", None),
        ("PATCH", f"{P}/compute-pools/{POOL}", {"quota": QUOTA}),
        ("DELETE", f"{P}/compute-pools/{POOL}", None),
        ("GET", f"{P}/compute-pools/{POOL}/events", None),
        ("GET", f"{P}/compute-pools/{POOL}/forecast-accuracy", None),
        ("POST", f"{P}/workloads", example_workload("new-one")),
        ("GET", f"{P}/workloads", None),
        ("GET", f"{P}/workloads/train-7b", None),
        ("PUT", f"{P}/workloads/train-7b", example_workload()),
        ("DELETE", f"{P}/workloads/train-7b", None),
        ("GET", f"{P}/workloads/train-7b/events", None),
        ("GET", f"{P}/workloads/train-7b/manifest", None),
        ("GET", f"{P}/workloads/train-7b/logs", None),
        ("GET", f"{P}/workloads/train-7b/watch", None),
        ("POST", f"{P}/services", SERVICE_BODY | {"name": "new-svc"}),
        ("GET", f"{P}/services", None),
        ("GET", f"{P}/services/chat", None),
        ("PUT", f"{P}/services/chat", SERVICE_BODY),
        ("PATCH", f"{P}/services/chat", {"replicas": 2}),
        ("DELETE", f"{P}/services/chat", None),
        ("GET", f"{P}/services/chat/events", None),
        ("GET", f"{P}/services/chat/watch", None),
        ("GET", f"{P}/services/chat/logs", None),
    ]


GLOBAL_CALLS: list[Call] = [
    ("POST", "/api/v1/projects", {"name": "another"}),
    ("GET", "/api/v1/projects", None),
    ("PUT", "/api/v1/accelerator-bindings/a100", BINDING),
    ("GET", "/api/v1/accelerator-bindings", None),
    ("GET", f"/api/v1/accelerator-bindings/{CLASS}", None),
    ("DELETE", f"/api/v1/accelerator-bindings/{CLASS}", None),
    ("POST", "/api/v1/role-bindings", {"group": "g", "role": "platform-admin"}),
    ("GET", "/api/v1/role-bindings", None),
    ("GET", f"/api/v1/role-bindings/{NO_BINDING}", None),
    ("DELETE", f"/api/v1/role-bindings/{NO_BINDING}", None),
    ("GET", "/api/v1/whoami", None),
]
# Answered without a token (how to sign in).
PUBLIC_CALLS: list[Call] = [("GET", "/api/v1/sign-on", None)]

# The least role each project-scoped write needs ("platform-admin": project tokens never may).
WRITE_ROLE = {
    ("DELETE", P): "platform-admin",
    ("PATCH", P): "platform-admin",
    ("POST", f"{P}/tokens"): "admin",
    ("GET", f"{P}/tokens"): "admin",
    ("DELETE", f"{P}/tokens/"): "admin",
    ("POST", f"{P}/compute-pools"): "admin",
    ("PATCH", f"{P}/compute-pools/"): "admin",
    ("DELETE", f"{P}/compute-pools/"): "admin",
    ("POST", f"{P}/workloads"): "editor",
    ("PUT", f"{P}/workloads/"): "editor",
    ("DELETE", f"{P}/workloads/"): "editor",
    ("POST", f"{P}/services"): "editor",
    ("PUT", f"{P}/services/"): "editor",
    ("PATCH", f"{P}/services/"): "editor",
    ("DELETE", f"{P}/services/"): "editor",
}


def needed_role(method: str, path: str) -> str | None:
    """The role a call needs per docs/API.md; None for reads any member may make."""
    for (m, prefix), role in WRITE_ROLE.items():
        if m == method and (
            path == prefix
            or (
                prefix.endswith("/")
                and path.startswith(prefix)
                and path.count("/") == prefix.count("/")
            )
        ):
            return role
    return None


async def _world(api: Scenario) -> dict[str, str]:
    """Projects `research` (pool, workload) and `other`; tokens of each role; returns them."""
    await api.setup_pool(wait=False)
    response = await api.client.post(f"{P}/workloads", json=example_workload())
    assert response.status_code == 202, response.text
    response = await api.client.post(f"{P}/services", json=SERVICE_BODY)
    assert response.status_code == 202, response.text
    await api.create_project("other")
    tokens = {
        role: await api.create_token("research", role=role)
        for role in ("viewer", "editor", "admin")
    }
    tokens["other-admin"] = await api.create_token("other", role="admin")
    listed = (await api.client.get(f"{P}/tokens")).json()["items"]
    tokens["victim-id"] = next(t["id"] for t in listed if t["name"] == "viewer-token")
    return tokens


async def _call(client: httpx.AsyncClient, call: Call, **kwargs: Any) -> httpx.Response:
    method, path, body = call
    if path.endswith("/watch"):
        # A stream that opens never ends: its status and headers are the answer; a refusal's
        # problem body is read whole.
        async with client.stream(method, path, **kwargs) as response:
            if response.status_code != 200:
                await response.aread()
            return response
    return await client.request(method, path, json=body, **kwargs)


async def test_another_projects_token_gets_404_on_every_project_endpoint(api: Scenario) -> None:
    tokens = await _world(api)
    async with api.as_token(tokens["other-admin"]) as stranger:
        for call in project_calls(tokens["victim-id"]):
            response = await _call(stranger, call)
            assert response.status_code == 404, (call[:2], response.text)
            assert response.json()["type"] == "https://aicp.dev/problems/not-found", call[:2]
            # Indistinguishable from a project that does not exist at all.
            ghost_call = (call[0], call[1].replace("/research", "/ghost"), call[2])
            ghost = await _call(stranger, ghost_call)
            assert ghost.status_code == 404
            assert response.text.replace("research", "ghost") == ghost.text, call[:2]
        listed = (await stranger.get("/api/v1/projects")).json()["items"]
        assert [p["name"] for p in listed] == ["other"]
    # Nothing changed for the real members.
    assert (await api.client.get(f"{P}/workloads/train-7b")).json()["generation"] == 1


async def test_roles_too_low_to_write_get_403_naming_the_role_and_reads_succeed(
    api: Scenario,
) -> None:
    tokens = await _world(api)
    for role in ("viewer", "editor"):
        async with api.as_token(tokens[role]) as member:
            for call in project_calls(tokens["victim-id"]) + GLOBAL_CALLS:
                method, path, _ = call
                needed = needed_role(method, path)
                if path.startswith("/api/v1/accelerator-bindings") or path == "/api/v1/projects":
                    needed = "platform-admin" if method != "GET" else None
                if path.startswith("/api/v1/role-bindings"):
                    needed = "platform-admin"  # even reading who has which role
                response = await _call(member, call)
                rank = {"viewer": 0, "editor": 1, "admin": 2, "platform-admin": 3}
                if needed is not None and rank[needed] > rank[role]:
                    assert response.status_code == 403, (role, call[:2], response.text)
                    assert response.json()["type"] == "https://aicp.dev/problems/forbidden"
                    assert response.json()["required_role"] == needed, (role, call[:2])
                elif method == "GET":
                    # The API under test runs without Kubernetes: no pods, so no logs (404).
                    expected = 404 if path.endswith("/logs") else 200
                    assert response.status_code == expected, (role, call[:2], response.text)


async def test_missing_malformed_unknown_expired_and_revoked_tokens_get_401_everywhere(
    api: Scenario, database_url: str
) -> None:
    tokens = await _world(api)
    expired = await api.create_token("research", role="admin", name="expired")
    revoked = await api.create_token("research", role="admin", name="revoked")
    async with connected(database_url) as conn:
        # Expiry is at least a day in the API; move this token's expiry into the past.
        await conn.execute(
            "UPDATE api_tokens SET expires_at = now() - interval '1 second' WHERE name = 'expired'"
        )
    listed = (await api.client.get(f"{P}/tokens")).json()["items"]
    revoked_id = next(t["id"] for t in listed if t["name"] == "revoked")
    assert (await api.client.delete(f"{P}/tokens/{revoked_id}")).status_code == 204

    credentials: dict[str, dict[str, str]] = {
        "none": {},
        "not bearer": {"Authorization": f"Basic {tokens['admin']}"},
        "empty bearer": {"Authorization": "Bearer"},
        "unknown": bearer("aicp_" + "x" * 43),
        "not an aicp token": bearer("hello"),
        "expired": bearer(expired),
        "revoked": bearer(revoked),
    }
    async with httpx.AsyncClient(base_url=api.client.base_url, timeout=30) as anonymous:
        for label, headers in credentials.items():
            for call in project_calls(tokens["victim-id"]) + GLOBAL_CALLS:
                response = await _call(anonymous, call, headers=headers)
                assert response.status_code == 401, (label, call[:2], response.text)
                assert response.headers["www-authenticate"].startswith("Bearer"), label
                assert response.json()["type"] == "https://aicp.dev/problems/unauthorized"


async def test_a_revocation_through_one_replica_holds_on_another_once_notified(
    api: Scenario, database_url: str
) -> None:
    # The other replica has the token cached; it drops it when the database's notification of
    # the change arrives (milliseconds), so the refusal is waited for with a short deadline.
    await api.setup_pool(wait=False)
    token = await api.create_token("research", role="viewer", name="laptop")
    second = Service(service_settings(database_url))
    await second.start()
    try:
        async with httpx.AsyncClient(base_url=second.url, headers=bearer(token)) as replica:
            assert (await replica.get(f"{P}/workloads")).status_code == 200
            listed = (await api.client.get(f"{P}/tokens")).json()["items"]
            token_id = next(t["id"] for t in listed if t["name"] == "laptop")
            assert (await api.client.delete(f"{P}/tokens/{token_id}")).status_code == 204

            async def refused_there() -> bool:
                return (await replica.get(f"{P}/workloads")).status_code == 401

            await wait_until(refused_there, timeout=5)
            refused = await replica.get(f"{P}/workloads")
            assert refused.status_code == 401
            assert refused.json()["type"] == "https://aicp.dev/problems/unauthorized"
    finally:
        await second.stop()


_PARAMETER_AFTER = {
    "projects": "{project}",
    "tokens": "{token_id}",
    "compute-pools": "{pool}",
    "workloads": "{name}",
    "services": "{name}",
    "accelerator-bindings": "{accelerator_class}",
    "role-bindings": "{binding_id}",
}


def _template(path: str) -> str:
    """`/api/v1/projects/research/workloads/train-7b` -> `/api/v1/projects/{project}/...`."""
    parts = path.split("/")
    return "/".join(
        _PARAMETER_AFTER.get(parts[i - 1], part) if i > 0 else part for i, part in enumerate(parts)
    )


async def test_the_matrix_covers_every_operation_the_api_documents(api: Scenario) -> None:
    document = (await api.client.get("/schema/openapi.json")).json()
    documented = {
        (method.upper(), path)
        for path, operations in document["paths"].items()
        if path.startswith("/api/")
        for method in operations
    }
    calls = project_calls("some-id") + GLOBAL_CALLS + PUBLIC_CALLS
    covered = {(m, _template(p)) for m, p, _ in calls}
    assert documented == covered
