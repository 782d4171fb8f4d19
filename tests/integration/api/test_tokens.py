"""Project tokens: shown once, stored hashed, listed without secrets, revoked at once."""

from __future__ import annotations

import asyncpg
import httpx

from tests.support.api_client import Api


async def test_a_new_token_is_shown_once_and_then_listed_without_its_secret(api: Api) -> None:
    await api.create_project("research")
    response = await api.client.post(
        "/api/v1/projects/research/tokens",
        json={"name": "ci", "role": "editor", "expires_in_days": 30},
    )
    assert response.status_code == 201, response.text
    created = response.json()
    assert created["token"].startswith("aicp_")
    assert len(created["token"]) == len("aicp_") + 43
    assert created["role"] == "editor"
    assert created["expires_at"] is not None

    listed = await api.client.get("/api/v1/projects/research/tokens")
    assert listed.status_code == 200
    [item] = listed.json()["items"]
    assert item["id"] == created["id"]
    assert item["name"] == "ci"
    assert item["revoked_at"] is None
    assert "token" not in item
    assert created["token"] not in listed.text


async def test_the_database_holds_only_the_sha256_of_a_token(
    api: Api, sql: asyncpg.Connection
) -> None:
    await api.create_project("research")
    secret = await api.create_token("research", role="viewer")
    rows = await sql.fetch("SELECT * FROM api_tokens")
    dump = repr([dict(row) for row in rows])
    assert secret not in dump
    assert secret[5:] not in dump
    assert len(rows[0]["secret_sha256"]) == 32


async def test_a_token_works_until_it_is_revoked_then_401(api: Api) -> None:
    await api.create_project("research")
    created = (
        await api.client.post(
            "/api/v1/projects/research/tokens", json={"name": "laptop", "role": "viewer"}
        )
    ).json()
    async with api.as_token(created["token"]) as member:
        assert (await member.get("/api/v1/projects/research")).status_code == 200
        revoke = await api.client.delete(f"/api/v1/projects/research/tokens/{created['id']}")
        assert revoke.status_code == 204
        after = await member.get("/api/v1/projects/research")
        assert after.status_code == 401
        assert after.headers["www-authenticate"].startswith("Bearer")
        assert "revoked" in after.json()["detail"]
    listed = (await api.client.get("/api/v1/projects/research/tokens")).json()["items"]
    assert listed[0]["revoked_at"] is not None
    again = await api.client.delete(f"/api/v1/projects/research/tokens/{created['id']}")
    assert again.status_code == 204


async def test_a_project_admin_token_manages_tokens_and_an_editor_cannot(api: Api) -> None:
    await api.create_project("research")
    admin = await api.create_token("research", role="admin", name="owner")
    editor = await api.create_token("research", role="editor", name="dev")
    async with api.as_token(admin) as owner:
        made = await owner.post(
            "/api/v1/projects/research/tokens",
            json={"name": "bot", "role": "viewer", "expires_in_days": 7},
        )
        assert made.status_code == 201
        assert made.json()["token"].startswith("aicp_")
    async with api.as_token(editor) as dev:
        denied = await dev.post(
            "/api/v1/projects/research/tokens", json={"name": "sneaky", "role": "admin"}
        )
        assert denied.status_code == 403
        assert denied.json()["required_role"] == "admin"
        assert (await dev.get("/api/v1/projects/research/tokens")).status_code == 403


async def test_two_tokens_with_one_name_in_a_project_are_409(api: Api) -> None:
    await api.create_project("research")
    await api.create_token("research", role="viewer", name="ci")
    response = await api.client.post(
        "/api/v1/projects/research/tokens", json={"name": "ci", "role": "viewer"}
    )
    assert response.status_code == 409
    assert response.json()["type"].endswith("/already-exists")


async def test_an_expired_token_is_401(api: Api, sql: asyncpg.Connection) -> None:
    await api.create_project("research")
    secret = await api.create_token("research", role="viewer", expires_in_days=1)
    await sql.execute("UPDATE api_tokens SET expires_at = now() - interval '1 second'")
    async with api.as_token(secret) as member:
        response = await member.get("/api/v1/projects/research")
    assert response.status_code == 401
    assert "expired" in response.json()["detail"]


async def test_revoking_an_unknown_or_foreign_token_is_404(api: Api) -> None:
    await api.create_project("alpha")
    await api.create_project("beta")
    foreign = (
        await api.client.post("/api/v1/projects/beta/tokens", json={"name": "b", "role": "viewer"})
    ).json()
    missing = await api.client.delete(
        "/api/v1/projects/alpha/tokens/00000000-0000-0000-0000-000000000000"
    )
    assert missing.status_code == 404
    assert (await api.client.delete("/api/v1/projects/alpha/tokens/nonsense")).status_code == 404
    cross = await api.client.delete(f"/api/v1/projects/alpha/tokens/{foreign['id']}")
    assert cross.status_code == 404


async def test_token_creation_and_revocation_are_audited(
    api: Api, sql: asyncpg.Connection, app_client: httpx.AsyncClient
) -> None:
    await api.create_project("research")
    created = (
        await app_client.post(
            "/api/v1/projects/research/tokens", json={"name": "ci", "role": "viewer"}
        )
    ).json()
    await app_client.delete(f"/api/v1/projects/research/tokens/{created['id']}")
    rows = await sql.fetch("SELECT type, actor FROM events WHERE kind = 'token' ORDER BY id")
    assert [(row["type"], row["actor"]) for row in rows] == [
        ("Created", "admin"),
        ("Revoked", "admin"),
    ]
