"""Live streams of services against a real PostgreSQL: a scale and a finalization as events,
the list's filters, resumption, tenancy, shared limits, and one change log for both kinds.

As in tests/integration/api/test_streams.py, the service runs without Kubernetes and the
controller's status writes are made by hand in SQL, one UPDATE of the row per observation.
"""

from __future__ import annotations

import json
import time
from contextlib import AbstractAsyncContextManager
from typing import Any

import asyncpg
import httpx
import pytest

from app.store import changes
from tests.support.pg_fixtures import admin_client, serving, started_service
from tests.support.scenario import PROJECT, WORKLOADS, Scenario
from tests.support.sse import Stream, open_stream, status_of

pytestmark = pytest.mark.timeout(30)

SERVICES = f"/api/v1/projects/{PROJECT}/services"
VIEWER = {"name": "watcher", "role": "viewer"}


async def observe(
    sql: asyncpg.Connection, name: str, state: str, reason: str | None = None, **observed: Any
) -> None:
    """What the service step's status write does to the row."""
    await sql.execute(
        "UPDATE services SET state = $2, state_reason = $3, observed = $4::jsonb, "
        "observed_generation = generation, updated_at = now() WHERE name = $1",
        name,
        state,
        reason or f"The service is {state.lower()}.",
        json.dumps(observed),
    )


def watching(
    client: httpx.AsyncClient,
    path: str = SERVICES,
    last_event_id: str | None = None,
    **filters: str,
) -> AbstractAsyncContextManager[Stream]:
    """The list stream of `path` (the services unless told) with the list's `filters`,
    resumed after `last_event_id` if given."""
    params = {"watch": "true", **filters}
    return open_stream(client, path, params=params, last_event_id=last_event_id)


async def scale(api: Scenario, name: str, replicas: int) -> None:
    response = await api.client.patch(f"{SERVICES}/{name}", json={"replicas": replicas})
    assert response.status_code == 202, response.text


async def finalize(sql: asyncpg.Connection, name: str) -> None:
    """What the service step does once the Deployment and the rest are gone."""
    await sql.execute("DELETE FROM services WHERE name = $1", name)


@pytest.fixture
async def chat(api: Scenario) -> None:
    """The project with its pool and one service, `chat` (PENDING: no controller runs)."""
    await api.setup_pool(wait=False)
    await api.create_service("chat")


@pytest.mark.usefixtures("chat")
async def test_a_watch_sends_the_service_then_its_scale_and_states_then_its_deletion(
    api: Scenario, sql: asyncpg.Connection
) -> None:
    async with open_stream(api.client, f"{SERVICES}/chat/watch") as stream:
        first = await stream.next()
        assert (first.type, first.state, first.id) == ("ADDED", "PENDING", None)
        assert first.object == await api.read_service("chat")  # as GET shows it
        await scale(api, "chat", 2)
        scaled = await stream.next()
        assert (scaled.type, scaled.object["generation"]) == ("MODIFIED", 2)
        assert scaled.object["spec"]["replicas"] == 2
        await observe(sql, "chat", "READY", replicas={"desired": 2, "ready": 2})
        ready = await stream.next()
        assert (ready.type, ready.state) == ("MODIFIED", "READY")
        assert ready.object["status"]["replicas"]["ready"] == 2
        assert int(scaled.id or 0) < int(ready.id or 0)
        deleting = await api.client.delete(f"{SERVICES}/chat")
        assert deleting.status_code == 202, deleting.text
        assert (await stream.next()).state == "DELETING"
        await finalize(sql, "chat")
        gone = await stream.next()
        assert (gone.type, gone.object["name"]) == ("DELETED", "chat")
        await stream.end()  # the stream of one service ends with its deletion


@pytest.mark.usefixtures("chat")
async def test_a_list_watch_follows_the_filters_and_new_services(
    api: Scenario, sql: asyncpg.Connection
) -> None:
    await api.create_pool("a100-pool")
    watch_all = watching(api.client)
    watch_ready = watching(api.client, state="READY")
    watch_a100 = watching(api.client, compute_pool="a100-pool", name_contains="EMBED")
    async with watch_all as everything, watch_ready as ready, watch_a100 as a100:
        added = await everything.next()
        assert (added.type, added.object["name"]) == ("ADDED", "chat")
        await api.create_service("embed-a100", compute_pool="a100-pool")
        await api.create_service("other-a100", compute_pool="a100-pool")
        joined_pool = await a100.next()
        assert (joined_pool.type, joined_pool.object["name"]) == ("ADDED", "embed-a100")
        await observe(sql, "chat", "READY")
        joined = await ready.next()
        assert (joined.type, joined.object["name"]) == ("ADDED", "chat")
        await observe(sql, "chat", "DEGRADED", "1 of 1 replicas failing.")
        left = await ready.next()
        assert (left.type, left.object["name"], left.state) == ("DELETED", "chat", "DEGRADED")
        seen = [await everything.next() for _ in range(4)]
        assert [(e.type, e.object["name"], e.state) for e in seen] == [
            ("ADDED", "embed-a100", "PENDING"),
            ("ADDED", "other-a100", "PENDING"),
            ("MODIFIED", "chat", "READY"),
            ("MODIFIED", "chat", "DEGRADED"),
        ]
        assert a100.seen == [joined_pool]


@pytest.mark.usefixtures("chat")
async def test_resuming_with_last_event_id_misses_nothing_and_repeats_nothing(
    api: Scenario, sql: asyncpg.Connection
) -> None:
    async with open_stream(api.client, f"{SERVICES}/chat/watch") as stream:
        await stream.next()
        await scale(api, "chat", 2)
        last = (await stream.next()).id
    assert last is not None
    # Dropped: meanwhile the service is scaled twice, and a workload changes in between.
    await scale(api, "chat", 3)
    await api.submit("train-7b")
    await scale(api, "chat", 4)
    path = f"{SERVICES}/chat/watch"
    async with open_stream(api.client, path, last_event_id=last) as resumed:
        replayed = [await resumed.next() for _ in range(2)]
        assert [(e.type, e.object["spec"]["replicas"]) for e in replayed] == [
            ("MODIFIED", 3),
            ("MODIFIED", 4),
        ]
        await observe(sql, "chat", "READY")
        assert (await resumed.next()).state == "READY"  # then live
    async with watching(api.client, last_event_id=last) as listed:
        again = [await listed.next() for _ in range(3)]
        assert [e.object["spec"]["replicas"] for e in again] == [3, 4, 4]
        assert again[-1].state == "READY"
        assert {e.object["name"] for e in again} == {"chat"}  # no workload on it


@pytest.mark.usefixtures("chat")
async def test_a_resume_point_whose_changes_were_purged_is_410(
    api: Scenario, sql: asyncpg.Connection
) -> None:
    await scale(api, "chat", 2)
    assert await sql.fetchval("SELECT count(*) FROM workload_changes WHERE kind = 'service'") == 2
    assert await changes.purge(sql, 0) > 0  # the feed's purge, an hour early
    assert await sql.fetchval("SELECT count(*) FROM workload_changes WHERE kind = 'service'") == 0
    for path in (f"{SERVICES}/chat/watch", f"{SERVICES}?watch=true"):
        expired = await status_of(api.client, path, last_event_id="1")
        assert expired.status_code == 410, path
        assert expired.json()["type"].endswith("/resume-expired")


@pytest.mark.usefixtures("chat")
async def test_a_viewer_watches_until_revoked_and_another_projects_viewer_never_does(
    api: Scenario,
) -> None:
    await api.for_project("other").setup_pool(wait=False)
    paths = (f"{SERVICES}/chat/watch", f"{SERVICES}?watch=true")
    async with api.as_token(await api.create_token("other", "viewer")) as outsider:
        assert [(await status_of(outsider, path)).status_code for path in paths] == [404, 404]
    made = (await api.client.post(f"/api/v1/projects/{PROJECT}/tokens", json=VIEWER)).json()
    async with (
        api.as_token(made["token"]) as viewer,
        open_stream(viewer, paths[0]) as one,
        watching(viewer) as listed,
    ):
        assert [(await s.next()).object["name"] for s in (one, listed)] == ["chat", "chat"]
        revoked = await api.client.delete(f"/api/v1/projects/{PROJECT}/tokens/{made['id']}")
        assert revoked.status_code == 204
        started = time.monotonic()
        await one.end(timeout=1.0)
        await listed.end(timeout=1.0)
        assert time.monotonic() - started < 1.0
        assert (await status_of(viewer, paths[0])).status_code == 401


@pytest.mark.usefixtures("chat")
async def test_an_unknown_service_is_not_found_and_head_answers_the_headers(
    api: Scenario,
) -> None:
    missing = await status_of(api.client, f"{SERVICES}/nope/watch")
    assert (missing.status_code, missing.json()["detail"]) == (404, "Service 'nope' not found.")
    head = await api.client.head(f"{SERVICES}/chat/watch", timeout=5)
    assert head.status_code == 200
    assert head.headers["content-type"].startswith("text/event-stream")
    assert (await api.client.head(f"{SERVICES}/nope/watch", timeout=5)).status_code == 404


async def test_streams_of_both_kinds_count_against_one_tokens_limit(database_url: str) -> None:
    async with serving(database_url, streams_per_token=2) as api:
        await api.setup_pool(wait=False)
        await api.submit("train-7b")
        await api.create_service("chat")
        workload = open_stream(api.client, f"{WORKLOADS}/train-7b/watch")
        service = open_stream(api.client, f"{SERVICES}/chat/watch")
        async with workload as one, service as two:
            await one.next()
            await two.next()
            third = await status_of(api.client, f"{SERVICES}?watch=true")
            assert third.status_code == 429
            assert third.json()["limit"] == 2


@pytest.mark.usefixtures("chat")
async def test_each_kinds_stream_shows_only_its_kind_and_ids_keep_one_order(
    api: Scenario, sql: asyncpg.Connection
) -> None:
    await api.submit("train-7b")
    async with (
        watching(api.client, WORKLOADS) as workload_stream,
        watching(api.client) as service_stream,
    ):
        assert (await workload_stream.next()).object["name"] == "train-7b"
        assert (await service_stream.next()).object["name"] == "chat"
        async with sql.transaction():
            # The service's change takes its number first and commits last: the workload's,
            # numbered after it, waits at that gap although its stream never shows services.
            await observe(sql, "chat", "READY")
            body = api.workload_body("train-7b", cpu="2")
            replaced = await api.client.put(f"{WORKLOADS}/train-7b", json=body)
            assert replaced.status_code == 202, replaced.text
            with pytest.raises(TimeoutError):
                await workload_stream.next(timeout=0.3)
        modified = await workload_stream.next()
        ready = await service_stream.next()
    assert (modified.type, modified.object["generation"]) == ("MODIFIED", 2)
    assert (ready.type, ready.state) == ("MODIFIED", "READY")
    assert int(ready.id or 0) < int(modified.id or 0)
    assert {e.object["name"] for e in workload_stream.seen} == {"train-7b"}
    assert {e.object["name"] for e in service_stream.seen} == {"chat"}


@pytest.mark.usefixtures("chat")
async def test_a_stream_on_another_replica_sees_what_this_one_writes(
    api: Scenario, database_url: str
) -> None:
    async with started_service(database_url) as other, admin_client(other) as elsewhere:
        async with open_stream(elsewhere, f"{SERVICES}/chat/watch") as stream:
            assert (await stream.next()).type == "ADDED"
            await scale(api, "chat", 3)
            scaled = await stream.next()
            assert (scaled.type, scaled.object["spec"]["replicas"]) == ("MODIFIED", 3)
            last = scaled.id
        await scale(api, "chat", 5)
    path = f"{SERVICES}/chat/watch"
    async with open_stream(api.client, path, last_event_id=last) as resumed:
        assert (await resumed.next()).object["spec"]["replicas"] == 5


async def test_openapi_documents_both_streams_as_events_of_service_watch_events(
    api: Scenario,
) -> None:
    document = (await api.client.get("/schema/openapi.json")).json()
    paths = document["paths"]
    listed = paths["/api/v1/projects/{project}/services"]["get"]
    watched = paths["/api/v1/projects/{project}/services/{name}/watch"]["get"]
    assert watched["operationId"] == "watchService"
    for operation in (listed, watched):
        stream = operation["responses"]["200"]["content"]["text/event-stream"]["schema"]
        assert stream["type"] == "string"
        assert "#/components/schemas/ServiceWatchEvent" in stream["description"]
        assert "410" in operation["responses"]
    assert "application/json" in listed["responses"]["200"]["content"]  # the page, unwatched
    event = document["components"]["schemas"]["ServiceWatchEvent"]
    assert event["properties"]["object"] == {"$ref": "#/components/schemas/ServiceResource"}
