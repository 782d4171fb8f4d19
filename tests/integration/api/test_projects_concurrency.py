"""Creates under contention, Idempotency-Key replays, and paging while rows are inserted."""

from __future__ import annotations

import asyncio

import asyncpg
import httpx

from tests.support.api_client import Api


async def test_fifty_concurrent_creates_of_one_name_make_one_project(
    app_client: httpx.AsyncClient, sql: asyncpg.Connection
) -> None:
    responses = await asyncio.gather(
        *(app_client.post("/api/v1/projects", json={"name": "contested"}) for _ in range(50))
    )
    statuses = sorted(response.status_code for response in responses)
    assert statuses.count(202) == 1
    assert statuses.count(409) == 49
    assert await sql.fetchval("SELECT count(*) FROM projects") == 1
    assert await sql.fetchval("SELECT count(*) FROM events WHERE type = 'Accepted'") == 1


async def test_an_idempotent_replay_returns_the_first_response(api: Api) -> None:
    headers = {"Idempotency-Key": "create-research-1"}
    first = await api.client.post("/api/v1/projects", json={"name": "research"}, headers=headers)
    assert first.status_code == 202
    assert "idempotent-replayed" not in first.headers
    again = await api.client.post("/api/v1/projects", json={"name": "research"}, headers=headers)
    assert again.status_code == 202
    assert again.headers["idempotent-replayed"] == "true"
    assert again.headers["location"] == first.headers["location"]
    assert again.json() == first.json()


async def test_the_same_key_with_a_different_body_is_422_idempotency_key_reused(
    api: Api,
) -> None:
    headers = {"Idempotency-Key": "k1"}
    await api.client.post("/api/v1/projects", json={"name": "research"}, headers=headers)
    response = await api.client.post("/api/v1/projects", json={"name": "other"}, headers=headers)
    assert response.status_code == 422
    assert response.json()["type"].endswith("/idempotency-key-reused")


async def test_concurrent_requests_with_one_key_create_once_and_all_see_the_result(
    api: Api,
) -> None:
    headers = {"Idempotency-Key": "burst"}
    responses = await asyncio.gather(
        *(
            api.client.post("/api/v1/projects", json={"name": "burst"}, headers=headers)
            for _ in range(10)
        )
    )
    assert {response.status_code for response in responses} == {202}
    assert len({response.json()["uid"] for response in responses}) == 1
    replayed = [r for r in responses if r.headers.get("idempotent-replayed") == "true"]
    assert len(replayed) == 9


async def test_idempotency_keys_are_scoped_to_the_caller(api: Api) -> None:
    await api.create_project("research")
    owner = await api.create_token("research", role="admin", name="owner")
    headers = {"Idempotency-Key": "same-key"}
    made = await api.client.post(
        "/api/v1/projects/research/tokens", json={"name": "a", "role": "viewer"}, headers=headers
    )
    assert made.status_code == 201
    async with api.as_token(owner) as project_admin:
        other = await project_admin.post(
            "/api/v1/projects/research/tokens",
            json={"name": "b", "role": "viewer", "expires_in_days": 1},
            headers=headers,
        )
    assert other.status_code == 201
    assert "idempotent-replayed" not in other.headers


async def test_a_replayed_token_create_does_not_reveal_the_secret_again(api: Api) -> None:
    await api.create_project("research")
    headers = {"Idempotency-Key": "tok"}
    body = {"name": "ci", "role": "viewer"}
    first = await api.client.post("/api/v1/projects/research/tokens", json=body, headers=headers)
    again = await api.client.post("/api/v1/projects/research/tokens", json=body, headers=headers)
    assert first.json()["token"].startswith("aicp_")
    assert again.status_code == 201
    assert again.headers["idempotent-replayed"] == "true"
    assert again.json() == {**first.json(), "token": None}


async def test_paging_returns_every_row_once_while_rows_are_inserted(api: Api) -> None:
    existing = {f"p{i:03d}" for i in range(60)}
    for name in sorted(existing):
        await api.create_project(name)

    async def insert_more() -> None:
        for i in range(40):
            await api.create_project(f"new{i:03d}")

    async def page_through() -> list[str]:
        seen: list[str] = []
        cursor: str | None = None
        while True:
            params: dict[str, str | int] = {"limit": 7}
            if cursor:
                params["cursor"] = cursor
            page = (await api.client.get("/api/v1/projects", params=params)).json()
            seen.extend(item["name"] for item in page["items"])
            cursor = page["next_cursor"]
            if cursor is None:
                return seen

    _, seen = await asyncio.gather(insert_more(), page_through())
    assert len(seen) == len(set(seen)), "a row was returned twice"
    assert existing <= set(seen), f"missing: {sorted(existing - set(seen))}"


async def test_pages_are_newest_first_and_end_with_a_null_cursor(api: Api) -> None:
    for name in ("a1", "a2", "a3"):
        await api.create_project(name)
    first = (await api.client.get("/api/v1/projects", params={"limit": 2})).json()
    assert [p["name"] for p in first["items"]] == ["a3", "a2"]
    second = (
        await api.client.get(
            "/api/v1/projects", params={"limit": 2, "cursor": first["next_cursor"]}
        )
    ).json()
    assert [p["name"] for p in second["items"]] == ["a1"]
    assert second["next_cursor"] is None
