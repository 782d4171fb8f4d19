"""The live streams against a real PostgreSQL: order, resumption, filters, tenancy, limits.

The service runs without Kubernetes; the controller's writes are made by hand in SQL, the way
a reconcile step makes them (one UPDATE of the row per observation), so every change the
trigger records is one the test chose. End-to-end streams on kubesim: tests/e2e/.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest

from tests.support.pg_fixtures import admin_client, connected, serving, started_service
from tests.support.scenario import API_EXAMPLE, PROJECT, WORKLOADS, Scenario
from tests.support.sse import open_stream, status_of

pytestmark = pytest.mark.timeout(30)


async def observe(
    sql: asyncpg.Connection, name: str, state: str, reason: str | None = None, **observed: Any
) -> None:
    """What a reconcile step's status write does to the row."""
    await sql.execute(
        "UPDATE workloads SET state = $2, state_reason = $3, observed = $4::jsonb, "
        "observed_generation = generation, updated_at = now() WHERE name = $1",
        name,
        state,
        reason or f"The workload is {state.lower()}.",
        json.dumps(observed),
    )


async def test_a_watch_sends_the_workload_then_each_change_in_order_then_its_deletion(
    api: Scenario, sql: asyncpg.Connection
) -> None:
    await api.setup_pool(wait=False)
    await api.submit("train-7b")
    async with open_stream(api.client, f"{WORKLOADS}/train-7b/watch") as stream:
        first = await stream.next()
        assert (first.type, first.state, first.id) == ("ADDED", "PENDING", None)
        for state in ("QUEUED", "ADMITTED", "RUNNING", "SUCCEEDED"):
            await observe(sql, "train-7b", state, nodes=["gpu-node-1"])
        changes = [await stream.next() for _ in range(4)]
        assert [e.state for e in changes] == ["QUEUED", "ADMITTED", "RUNNING", "SUCCEEDED"]
        assert {e.type for e in changes} == {"MODIFIED"}
        ids = [int(e.id or 0) for e in changes]
        assert ids == sorted(ids) and len(set(ids)) == 4
        assert changes[-1].object["status"]["nodes"] == ["gpu-node-1"]
        await sql.execute("DELETE FROM workloads WHERE name = 'train-7b'")
        gone = await stream.next()
        assert (gone.type, gone.object["name"]) == ("DELETED", "train-7b")
        await stream.end()


async def test_resuming_with_last_event_id_misses_nothing_and_repeats_nothing(
    api: Scenario, sql: asyncpg.Connection
) -> None:
    await api.setup_pool(wait=False)
    await api.submit("train-7b")
    async with open_stream(api.client, f"{WORKLOADS}/train-7b/watch") as stream:
        await stream.next()
        await observe(sql, "train-7b", "QUEUED")
        queued = await stream.next()
        last = stream.last_id
    assert last == queued.id
    # Dropped: meanwhile the workload moves on twice.
    await observe(sql, "train-7b", "ADMITTED")
    await observe(sql, "train-7b", "RUNNING")
    async with open_stream(
        api.client, f"{WORKLOADS}/train-7b/watch", last_event_id=last
    ) as resumed:
        assert [(await resumed.next()).state for _ in range(2)] == ["ADMITTED", "RUNNING"]
        await observe(sql, "train-7b", "SUCCEEDED")
        assert (await resumed.next()).state == "SUCCEEDED"


async def test_a_resume_over_many_large_changes_replays_each_once_in_order(
    api: Scenario, sql: asyncpg.Connection
) -> None:
    await api.setup_pool(wait=False)
    big = {f"BLOB_{i}": "x" * 32000 for i in range(7)}  # near the 256 KiB body limit
    async with open_stream(api.client, WORKLOADS, params={"watch": "true"}) as stream:
        await api.submit("w0", accelerators=0, env=big)
        last = (await stream.next()).id
    names = [f"w{i}" for i in range(1, 25)]
    for name in names:
        await api.submit(name, accelerators=0, env=big)
    async with open_stream(
        api.client, WORKLOADS, params={"watch": "true"}, last_event_id=last
    ) as resumed:
        replayed = [await resumed.next() for _ in names]
        assert [(e.type, e.object["name"]) for e in replayed] == [("ADDED", n) for n in names]
        assert replayed[-1].object["spec"]["env"] == big
        await observe(sql, "w0", "RUNNING")
        assert (await resumed.next()).object["name"] == "w0"  # then live


async def test_a_list_watch_follows_the_filters_and_new_workloads(
    api: Scenario, sql: asyncpg.Connection
) -> None:
    await api.setup_pool(wait=False)
    await api.submit("a")
    watch_all = open_stream(api.client, WORKLOADS, params={"watch": "true"})
    watch_running = open_stream(api.client, WORKLOADS, params={"watch": "true", "state": "RUNNING"})
    async with watch_all as everything, watch_running as running:
        added = await everything.next()
        assert (added.type, added.object["name"]) == ("ADDED", "a")
        await api.submit("b")
        new = await everything.next()
        assert (new.type, new.object["name"]) == ("ADDED", "b")
        await observe(sql, "a", "RUNNING")
        joined = await running.next()
        assert (joined.type, joined.object["name"]) == ("ADDED", "a")
        await observe(sql, "a", "SUCCEEDED")
        left = await running.next()
        assert (left.type, left.object["name"], left.state) == ("DELETED", "a", "SUCCEEDED")
        seen = [await everything.next() for _ in range(2)]
        assert [(e.type, e.state) for e in seen] == [
            ("MODIFIED", "RUNNING"),
            ("MODIFIED", "SUCCEEDED"),
        ]


async def test_another_projects_workload_is_not_found_and_an_unknown_one_neither(
    api: Scenario,
) -> None:
    await api.setup_pool(wait=False)
    await api.submit("train-7b")
    await api.for_project("other").setup_pool(wait=False)
    outsider = api.as_token(await api.create_token("other", "viewer"))
    async with outsider:
        refused = await status_of(outsider, f"{WORKLOADS}/train-7b/watch")
        assert refused.status_code == 404
        listing = await status_of(outsider, f"{WORKLOADS}?watch=true")
        assert listing.status_code == 404
    missing = await status_of(api.client, f"{WORKLOADS}/nope/watch")
    assert missing.status_code == 404


async def test_a_revoked_tokens_streams_close_within_a_second(api: Scenario) -> None:
    await api.setup_pool(wait=False)
    await api.submit("train-7b")
    created = await api.client.post(
        f"/api/v1/projects/{PROJECT}/tokens", json={"name": "watcher", "role": "viewer"}
    )
    token, token_id = created.json()["token"], created.json()["id"]
    async with api.as_token(token) as viewer:
        async with open_stream(viewer, f"{WORKLOADS}/train-7b/watch") as stream:
            await stream.next()
            revoked = await api.client.delete(f"/api/v1/projects/{PROJECT}/tokens/{token_id}")
            assert revoked.status_code == 204
            started = time.monotonic()
            await stream.end(timeout=1.0)
            assert time.monotonic() - started < 1.0
        refused = await status_of(viewer, f"{WORKLOADS}/train-7b/watch")
        assert refused.status_code == 401


async def test_too_many_streams_for_one_token_is_a_429_problem(database_url: str) -> None:
    async with serving(database_url, streams_per_token=2) as api:
        await api.setup_pool(wait=False)
        await api.submit("train-7b")
        path = f"{WORKLOADS}/train-7b/watch"
        async with open_stream(api.client, path) as one, open_stream(api.client, path) as two:
            await one.next()
            await two.next()
            third = await status_of(api.client, path)
            assert third.status_code == 429
            assert third.json()["type"].endswith("/too-many-streams")
            assert third.json()["limit"] == 2
            assert third.headers["Retry-After"]
        async with open_stream(api.client, path) as again:  # closed ones no longer count
            await again.next()


async def test_a_heartbeat_comes_when_nothing_happens_and_carries_the_position(
    database_url: str,
) -> None:
    async with serving(database_url, stream_heartbeat_seconds=0.2) as api:
        await api.setup_pool(wait=False)
        await api.submit("train-7b")
        async with open_stream(api.client, f"{WORKLOADS}/train-7b/watch") as stream:
            await stream.next()
            await stream.heartbeat(timeout=2)
            assert stream.last_id is not None
            # Resuming from a heartbeat's position repeats nothing.
            position = stream.last_id
        async with open_stream(
            api.client, f"{WORKLOADS}/train-7b/watch", last_event_id=position
        ) as resumed:
            await resumed.heartbeat(timeout=2)
            assert resumed.seen == []


async def test_a_resume_point_older_than_the_history_is_410_and_nonsense_is_422(
    api: Scenario, sql: asyncpg.Connection
) -> None:
    await api.setup_pool(wait=False)
    await api.submit("train-7b")
    await observe(sql, "train-7b", "QUEUED")
    await sql.execute("DELETE FROM workload_changes")
    expired = await status_of(api.client, f"{WORKLOADS}/train-7b/watch", last_event_id="0")
    assert expired.status_code == 410
    assert expired.json()["type"].endswith("/resume-expired")
    bad = await status_of(api.client, f"{WORKLOADS}/train-7b/watch", last_event_id="x")
    assert bad.status_code == 422
    assert bad.json()["errors"][0]["field"] == "Last-Event-ID"
    superscript = await api.client.get(
        f"{WORKLOADS}/train-7b/watch", headers={"Last-Event-ID": "²".encode("latin-1")}
    )
    assert superscript.status_code == 422, superscript.text
    assert superscript.json()["errors"][0]["field"] == "Last-Event-ID"


async def test_a_client_that_reads_too_slowly_is_dropped_not_buffered(
    database_url: str, sql: asyncpg.Connection
) -> None:
    async with (
        started_service(database_url, stream_buffer_bytes=4096) as service,
        admin_client(service) as client,
    ):
        api = Scenario(client, defaults=API_EXAMPLE)
        await api.setup_pool(wait=False)
        await api.submit("train-7b")
        async with open_stream(client, f"{WORKLOADS}/train-7b/watch") as stream:
            await stream.next()
            # The client reads nothing while far more than its buffer is produced.
            for n in range(300):
                await observe(sql, "train-7b", "RUNNING", f"Running, round {n}. " * 500)
            feed = service.feed
            assert feed is not None
            await asyncio.wait_for(_until_dropped(feed), 10)


async def _until_dropped(feed: Any) -> None:
    while feed.open_streams:
        await asyncio.sleep(0.01)


@pytest.fixture
async def slow(database_url: str) -> AsyncIterator[asyncpg.Connection]:
    """A second connection, whose transaction a test holds open (or rolls back) while `sql`
    commits around it."""
    async with connected(database_url) as conn:
        yield conn


async def _two_workloads(api: Scenario) -> None:
    await api.setup_pool(wait=False)
    await api.submit("a")
    await api.submit("b")


async def test_a_change_committed_out_of_order_waits_for_the_earlier_number_then_both_in_order(
    api: Scenario, sql: asyncpg.Connection, slow: asyncpg.Connection
) -> None:
    await _two_workloads(api)
    async with open_stream(api.client, WORKLOADS, params={"watch": "true"}) as stream:
        assert {(await stream.next()).object["name"] for _ in range(2)} == {"a", "b"}
        async with slow.transaction():
            # `a`'s change takes its number first, and commits last.
            await observe(slow, "a", "QUEUED")
            await observe(sql, "b", "QUEUED")
            with pytest.raises(TimeoutError):
                await stream.next(timeout=0.3)  # b's number is above a gap that may fill
        first, second = await stream.next(), await stream.next()
    assert [first.object["name"], second.object["name"]] == ["a", "b"]
    assert int(first.id or 0) < int(second.id or 0)


async def test_a_number_taken_by_a_rolled_back_transaction_does_not_hold_the_stream(
    api: Scenario, sql: asyncpg.Connection, slow: asyncpg.Connection
) -> None:
    await _two_workloads(api)
    async with open_stream(api.client, WORKLOADS, params={"watch": "true"}) as stream:
        await stream.next()
        await stream.next()
        transaction = slow.transaction()
        await transaction.start()
        await observe(slow, "a", "QUEUED")  # takes a number, then rolls back
        await observe(sql, "b", "QUEUED")
        await transaction.rollback()
        changed = await stream.next(timeout=5)
        assert (changed.object["name"], changed.state) == ("b", "QUEUED")


async def test_head_on_a_stream_answers_its_headers_and_ends(api: Scenario) -> None:
    await api.setup_pool(wait=False)
    await api.submit("train-7b")
    head = await api.client.head(f"{WORKLOADS}/train-7b/watch", timeout=5)
    assert head.status_code == 200
    assert head.headers["content-type"].startswith("text/event-stream")
    missing = await api.client.head(f"{WORKLOADS}/nope/watch", timeout=5)
    assert missing.status_code == 404
    listing = await api.client.head(f"{WORKLOADS}?watch=true", timeout=5)
    assert listing.status_code == 200


async def test_a_platform_admins_stream_ends_once_its_project_is_being_deleted(
    api: Scenario,
) -> None:
    await api.create_project("doomed")
    async with open_stream(api.client, "/api/v1/projects/doomed/workloads?watch=true") as stream:
        deleted = await api.client.delete("/api/v1/projects/doomed")
        assert deleted.status_code == 202, deleted.text
        started = time.monotonic()
        await stream.end(timeout=10.0)  # the feed checks its projects every 5 s
        assert time.monotonic() - started < 10.0
        assert stream.seen == []


async def test_the_timing_log_tells_when_the_feed_read_a_change_and_when_its_stream_wrote_it(
    api: Scenario, sql: asyncpg.Connection, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="aicp.streams.timing")
    await api.setup_pool(wait=False)
    await api.submit("timed")
    async with open_stream(api.client, f"{WORKLOADS}/timed/watch") as stream:
        await stream.next()
        before = time.time()
        await observe(sql, "timed", "QUEUED")
        number = int((await stream.next()).id or 0)
        lines: dict[str, float] = {}
        deadline = time.monotonic() + 5
        while len(lines) < 2 and time.monotonic() < deadline:
            for record in caplog.records:
                parts = record.getMessage().split()
                if record.name == "aicp.streams.timing" and parts[1] == str(number):
                    lines[parts[2]] = float(parts[3])
            await asyncio.sleep(0.01)
        assert set(lines) == {"read", "written"}
        assert before - 1 <= lines["read"] <= lines["written"] <= time.time()
