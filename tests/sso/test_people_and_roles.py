"""People signed in through a real Keycloak use aicp with the roles their groups give them.

The development realm (idp/dev-realm.json): alice is in aicp-admins (platform admin through
AICP_OIDC_ADMIN_GROUPS), bob in vision-team, carol in vision-observers, dave in
language-team, erin in no group. Tokens come from the realm's password grant (development
realm only), as a script would get them.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from typing import Any

import httpx

from idp.keycloak import Keycloak
from tests.support.api_client import bearer
from tests.support.scenario import example_workload
from tests.support.waiting import wait_until

V = "/api/v1/projects/vision"
L = "/api/v1/projects/language"


def token(keycloak: Keycloak, user: str) -> str:
    access: str = keycloak.password_grant(user, f"{user}-password")["access_token"]
    return access


async def _as(http: httpx.AsyncClient, access: str, method: str, path: str, **kw: Any) -> Any:
    return await http.request(method, path, headers=bearer(access), **kw)


async def _world(http: httpx.AsyncClient, keycloak: Keycloak) -> None:
    """alice (platform admin by her group) sets up two projects, a pool each and bindings."""
    alice = token(keycloak, "alice")
    binding = {"resource_name": "nvidia.com/gpu", "flavor": "h100-80g", "node_labels": {}}
    put = await _as(http, alice, "PUT", "/api/v1/accelerator-bindings/h100-80g", json=binding)
    assert put.status_code == 201, put.text
    pool = {
        "name": "h100-pool",
        "accelerator_class": "h100-80g",
        "quota": {"accelerators": 16, "cpu": "256", "memory": "2Ti"},
    }
    for project in ("vision", "language"):
        made = await _as(http, alice, "POST", "/api/v1/projects", json={"name": project})
        assert made.status_code == 202, made.text
        made = await _as(
            http, alice, "POST", f"/api/v1/projects/{project}/compute-pools", json=pool
        )
        assert made.status_code == 202, made.text
    for group, role, project in (
        ("vision-team", "editor", "vision"),
        ("vision-observers", "viewer", "vision"),
        ("language-team", "admin", "language"),
    ):
        body = {"group": group, "role": role, "project": project}
        made = await _as(http, alice, "POST", "/api/v1/role-bindings", json=body)
        assert made.status_code == 201, made.text
        assert made.json()["created_by"].startswith("user:alice (")


async def test_a_member_reads_and_submits_in_its_project_and_another_is_404(
    http: httpx.AsyncClient, keycloak: Keycloak
) -> None:
    await _world(http, keycloak)
    bob = token(keycloak, "bob")
    submitted = await _as(http, bob, "POST", f"{V}/workloads", json=example_workload())
    assert submitted.status_code == 202, submitted.text
    workload = (await _as(http, bob, "GET", f"{V}/workloads/train-7b")).json()
    assert workload["created_by"].startswith("user:bob (")
    listed = (await _as(http, bob, "GET", "/api/v1/projects")).json()["items"]
    assert [p["name"] for p in listed] == ["vision"]
    for method, path in (("GET", L), ("GET", f"{L}/workloads"), ("POST", f"{L}/workloads")):
        other = await _as(http, bob, method, path, json=example_workload())
        assert other.status_code == 404, (method, path, other.text)
    # The event of the submission names the person: subject and username.
    alice = token(keycloak, "alice")
    events = (await _as(http, alice, "GET", f"{V}/workloads/train-7b/events")).json()["items"]
    actors = {event["actor"] for event in events}
    me = (await _as(http, bob, "GET", "/api/v1/whoami")).json()
    assert me["actor"] in actors and me["subject"] in me["actor"] and "bob" in me["actor"]
    assert me["roles"] == [{"project": "vision", "role": "editor", "groups": ["vision-team"]}]


async def test_a_viewer_reads_but_cannot_submit(
    http: httpx.AsyncClient, keycloak: Keycloak
) -> None:
    await _world(http, keycloak)
    carol = token(keycloak, "carol")
    assert (await _as(http, carol, "GET", f"{V}/workloads")).status_code == 200
    refused = await _as(http, carol, "POST", f"{V}/workloads", json=example_workload())
    assert refused.status_code == 403
    assert refused.json()["required_role"] == "editor"
    assert "your groups give you viewer" in refused.json()["detail"]


async def test_an_unmapped_person_gets_403_naming_the_groups_seen(
    http: httpx.AsyncClient, keycloak: Keycloak
) -> None:
    await _world(http, keycloak)
    erin = token(keycloak, "erin")
    refused = await _as(http, erin, "GET", "/api/v1/projects")
    assert refused.status_code == 403
    assert (
        "Signed in as erin, with no groups in the token: no role binding matches"
        in (refused.json()["detail"])
    )
    # A binding deleted: its group's members are refused from the next request on.
    alice = token(keycloak, "alice")
    bindings = (await _as(http, alice, "GET", "/api/v1/role-bindings")).json()["items"]
    language = next(b for b in bindings if b["group"] == "language-team")
    deleted = await _as(http, alice, "DELETE", f"/api/v1/role-bindings/{language['id']}")
    assert deleted.status_code == 204
    dave = await _as(http, token(keycloak, "dave"), "GET", L)
    assert dave.status_code == 403
    assert "with groups 'language-team': no role binding matches" in dave.json()["detail"]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(segment: str) -> bytes:
    return base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))


async def test_every_bad_token_is_a_401_problem(
    http: httpx.AsyncClient, keycloak: Keycloak
) -> None:
    good = token(keycloak, "alice")
    head, body, signature = good.split(".")
    header, claims = json.loads(_unb64(head)), json.loads(_unb64(body))
    realm_key = next(
        k
        for k in keycloak.admin("GET", f"/{keycloak.realm}/keys").json()["keys"]
        if k.get("algorithm") == "RS256" and k.get("status") == "ACTIVE"
    )
    public_pem = (
        "-----BEGIN PUBLIC KEY-----\n" + realm_key["publicKey"] + "\n-----END PUBLIC KEY-----\n"
    ).encode()

    def forged(new_header: dict[str, Any], new_claims: dict[str, Any], sig: str) -> str:
        return (
            f"{_b64(json.dumps(new_header).encode())}.{_b64(json.dumps(new_claims).encode())}.{sig}"
        )

    hs_input = forged({**header, "alg": "HS256"}, claims, "").rstrip(".")
    hs_sig = _b64(hmac.new(public_pem, hs_input.encode(), hashlib.sha256).digest())
    master = httpx.post(
        f"{keycloak.url}/realms/master/protocol/openid-connect/token",
        data={
            "grant_type": "password",
            "client_id": "admin-cli",
            "username": "aicp-bootstrap-admin",
            "password": keycloak.admin_password,
        },
        timeout=60,
    ).json()["access_token"]
    bad = {
        "tampered claims": forged(header, {**claims, "groups": ["aicp-admins"]}, signature),
        "alg none": forged({**header, "alg": "none"}, claims, signature),
        "HS256 keyed with the realm's public key": f"{hs_input}.{hs_sig}",
        "unknown kid": forged({**header, "kid": "no-such-key"}, claims, signature),
        "another issuer (the master realm)": master,
        "garbage": "eyJhbGciOi.garbage.here",
        "huge": good + "A" * 20000,
        "deeply nested": forged(
            header, {**claims, "x": json.loads("[" * 40 + "]" * 40)}, signature
        ),
    }
    for label, credential in bad.items():
        refused = await http.get("/api/v1/projects", headers=bearer(credential))
        assert refused.status_code == 401, (label, refused.text)
        assert refused.headers["content-type"] == "application/problem+json", label
        assert refused.headers["www-authenticate"].startswith("Bearer"), label
        assert refused.json()["type"] == "https://aicp.dev/problems/unauthorized", label
    assert (await http.get("/api/v1/whoami", headers=bearer(good))).status_code == 200


async def test_a_rotated_signing_key_is_used_without_restarting_aicp(
    http: httpx.AsyncClient, keycloak: Keycloak
) -> None:
    before = token(keycloak, "alice")
    assert (await http.get("/api/v1/whoami", headers=bearer(before))).status_code == 200
    new_kid = keycloak.rotate_signing_key()
    after = token(keycloak, "alice")
    assert json.loads(_unb64(after.split(".")[0]))["kid"] == new_kid

    async def new_key_accepted() -> bool:
        # aicp refetches the keys for the unknown kid once its refresh interval (1 s) allows.
        answer = await http.get("/api/v1/whoami", headers=bearer(after))
        return answer.status_code == 200

    await wait_until(new_key_accepted, timeout=30)

    # The old key is gone from the realm: a token it signed no longer verifies.
    async def old_key_refused() -> bool:
        return (await http.get("/api/v1/whoami", headers=bearer(before))).status_code == 401

    await wait_until(old_key_refused, timeout=30)
