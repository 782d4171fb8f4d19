"""Projects over HTTP: create, read, list, delete, as a platform admin and a project member."""

from __future__ import annotations

import httpx

from tests.support.api_client import Api


async def test_creating_a_project_answers_202_with_location_and_a_pending_project(
    app_client: httpx.AsyncClient,
) -> None:
    response = await app_client.post(
        "/api/v1/projects",
        json={"name": "research", "display_name": "Research", "labels": {"team": "nlp"}},
    )
    assert response.status_code == 202, response.text
    assert response.headers["location"] == "/api/v1/projects/research"
    body = response.json()
    assert body["name"] == "research"
    assert body["namespace"] == "aicp-research"
    assert body["display_name"] == "Research"
    assert body["labels"] == {"team": "nlp"}
    assert body["generation"] == 1
    assert body["created_by"] == "admin"
    assert body["status"]["state"] == "PENDING"
    assert body["status"]["observed_generation"] == 0
    assert body["status"]["reason"].endswith(".")

    fetched = await app_client.get("/api/v1/projects/research")
    assert fetched.status_code == 200
    assert fetched.json() == body


async def test_listing_projects_as_admin_shows_all_newest_first(api: Api) -> None:
    for name in ("alpha", "beta", "gamma"):
        await api.create_project(name)
    response = await api.client.get("/api/v1/projects")
    assert response.status_code == 200
    assert [p["name"] for p in response.json()["items"]] == ["gamma", "beta", "alpha"]
    assert response.json()["next_cursor"] is None


async def test_a_project_token_lists_only_its_own_project(api: Api) -> None:
    await api.create_project("alpha")
    await api.create_project("beta")
    token = await api.create_token("beta", role="viewer")
    async with api.as_token(token) as member:
        response = await member.get("/api/v1/projects")
        assert [p["name"] for p in response.json()["items"]] == ["beta"]
        assert (await member.get("/api/v1/projects/beta")).status_code == 200


async def test_deleting_an_empty_project_marks_it_deleting_and_keeps_it_readable(api: Api) -> None:
    await api.create_project("research")
    response = await api.client.delete("/api/v1/projects/research")
    assert response.status_code == 202, response.text
    assert response.json()["status"]["state"] == "DELETING"
    again = await api.client.get("/api/v1/projects/research")
    assert again.json()["status"]["state"] == "DELETING"
    assert (await api.client.delete("/api/v1/projects/research")).status_code == 202


async def test_creating_a_name_that_exists_is_409_already_exists(api: Api) -> None:
    await api.create_project("research")
    response = await api.client.post("/api/v1/projects", json={"name": "research"})
    assert response.status_code == 409
    assert response.json()["type"] == "https://aicp.dev/problems/already-exists"


async def test_creating_a_name_being_deleted_is_409_being_deleted(api: Api) -> None:
    await api.create_project("research")
    await api.client.delete("/api/v1/projects/research")
    response = await api.client.post("/api/v1/projects", json={"name": "research"})
    assert response.status_code == 409
    assert response.json()["type"] == "https://aicp.dev/problems/being-deleted"


async def test_delete_honours_if_match_against_the_generation(api: Api) -> None:
    await api.create_project("research")
    fetched = await api.client.get("/api/v1/projects/research")
    assert fetched.headers["etag"] == '"1"'
    stale = await api.client.delete("/api/v1/projects/research", headers={"If-Match": '"7"'})
    assert stale.status_code == 412
    assert stale.json()["type"].endswith("/generation-mismatch")
    assert stale.json()["current_generation"] == 1
    bad = await api.client.delete("/api/v1/projects/research", headers={"If-Match": "soon"})
    assert bad.status_code == 422
    fresh = await api.client.delete("/api/v1/projects/research", headers={"If-Match": '"1"'})
    assert fresh.status_code == 202


async def test_a_new_project_is_never_updated_before_it_was_created(api: Api) -> None:
    project = await api.create_project("research")
    assert project["updated_at"] == project["created_at"]
    binding = await api.put_binding("h100-80g")
    assert binding["updated_at"] == binding["created_at"]
