"""`?dry_run=true` on every create and replace, over real HTTP against PostgreSQL.

A dry run answers 200 with the object as the real request would store it, the status the real
request would answer and the fields it would change; it writes nothing (every table is the
same after it, and no NOTIFY is sent), and it fails exactly as the real request fails.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import asyncpg
import httpx
import pytest

from app.main import Service
from tests.support.api_client import Api
from tests.support.pg_fixtures import serving
from tests.support.scenario import (
    API_EXAMPLE,
    CLASS,
    POOL,
    POOLS,
    PROJECT,
    QUOTA,
    WORKLOADS,
    Scenario,
)
from tests.support.scenario import example_workload as workload
from tests.support.waiting import wait_until


# The scenario API's setup, in the shape the refusal table passes around (a step on `api`).
async def project_with_pool(api: Api) -> None:
    await Scenario(api.client).setup_pool(wait=False)


async def create_pool(api: Api, name: str = POOL) -> dict[str, Any]:
    return await Scenario(api.client).create_pool(name)


async def create_workload(api: Api, name: str = "train-7b", **changes: Any) -> dict[str, Any]:
    return await Scenario(api.client, defaults=API_EXAMPLE).submit(name, **changes)


TABLES = (
    "projects",
    "api_tokens",
    "accelerator_bindings",
    "compute_pools",
    "workloads",
    "events",
    "tombstones",
    "idempotency_keys",
    "workload_changes",
    "stream_interest",
)
CHANNELS = ("aicp_work", "aicp_watch", "aicp_tokens")
#: The test's own channel: notifications reach a listener in commit order, whatever the channel.
MARKER = "dry_run_test"
#: Leases of resources that are not stored: the service's engine claims those of stored ones
#: (and renews them) on its own, but a lease of anything else would be the dry run's.
STRAY_LEASES = (
    "SELECT resource_id::text AS row FROM leases WHERE resource_id NOT IN "
    "(SELECT id FROM projects UNION SELECT id FROM compute_pools UNION SELECT id FROM workloads)"
    " ORDER BY 1"
)
#: What differs between two answers for the same input: ids, times, the secret.
VOLATILE = {"uid", "id", "created_at", "updated_at", "token", "expires_at"}
BINDING = {
    "resource_name": "nvidia.com/gpu",
    "flavor": CLASS,
    "node_labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
}
BINDINGS = "/api/v1/accelerator-bindings"
PROJECTS = "/api/v1/projects"
TOKENS = f"/api/v1/projects/{PROJECT}/tokens"
DRY = {"dry_run": "true"}


def comparable(value: Any) -> Any:
    """An answer without what two runs of the same request never share (ids, times)."""
    if isinstance(value, dict):
        return {k: comparable(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [comparable(item) for item in value]
    return value


async def snapshot(conn: asyncpg.Connection[Any]) -> dict[str, list[str]]:
    """Every row of every table a write may touch, as text, and the stray leases."""
    found = {}
    for table in TABLES:
        rows = await conn.fetch(f"SELECT to_jsonb(t)::text AS row FROM {table} t ORDER BY 1")
        found[table] = [row["row"] for row in rows]
    found["leases"] = [row["row"] for row in await conn.fetch(STRAY_LEASES)]
    return found


@dataclass
class Watched:
    """The test's database: its rows now, and every NOTIFY sent on aicp's channels."""

    conn: asyncpg.Connection[Any]
    notified: list[tuple[str, str]]

    async def unchanged_by(self, call: Awaitable[httpx.Response]) -> httpx.Response:
        """`call`'s answer, once it changed no row and sent no NOTIFY: between a marker
        notification sent before it and one sent after it, nothing else is heard."""
        await self._heard_marker("before")
        before = await snapshot(self.conn)
        response = await call
        assert await snapshot(self.conn) == before
        assert await self._heard_marker("after") == [], "the call sent a NOTIFY"
        return response

    async def _heard_marker(self, payload: str) -> list[tuple[str, str]]:
        """Send a marker NOTIFY and wait for it; what was heard before it (then forgotten)."""
        await self.conn.execute("SELECT pg_notify($1, $2)", MARKER, payload)
        marker = (MARKER, payload)
        await wait_until(lambda: marker in self.notified, message="the marker NOTIFY")
        heard = self.notified[: self.notified.index(marker)]
        self.notified.clear()
        return heard


@pytest.fixture
async def watched(service: Service, database_url: str) -> AsyncIterator[Watched]:
    conn = await asyncpg.connect(database_url)
    notified: list[tuple[str, str]] = []

    def heard(_conn: object, _pid: int, channel: str, payload: str) -> None:
        notified.append((channel, payload))

    for channel in (*CHANNELS, MARKER):
        await conn.add_listener(channel, heard)
    try:
        yield Watched(conn, notified)
    finally:
        with contextlib.suppress(Exception):
            await conn.close()


@dataclass(frozen=True)
class Case:
    """One create or replace: how to set up for it, and the request."""

    id: str
    setup: Callable[[Api], Awaitable[Any]]
    method: str
    path: str
    body: dict[str, Any]
    status: int


async def _nothing(api: Api) -> None:
    return None


async def _binding(api: Api) -> None:
    await api.put_binding(CLASS)


async def _project(api: Api) -> None:
    await api.put_binding(CLASS)
    await api.create_project(PROJECT)


async def _workload(api: Api) -> None:
    await project_with_pool(api)
    await create_workload(api)


async def _limited_pool(api: Api) -> None:
    await api.put_binding(CLASS)
    await api.create_project(PROJECT, limits={"accelerators": {CLASS: 16}})
    await create_pool(api)


CASES = [
    Case("create-binding", _nothing, "PUT", f"{BINDINGS}/{CLASS}", BINDING, 201),
    Case(
        "replace-binding",
        _binding,
        "PUT",
        f"{BINDINGS}/{CLASS}",
        {**BINDING, "description": "H100 nodes"},
        200,
    ),
    Case(
        "create-project",
        _nothing,
        "POST",
        PROJECTS,
        {"name": PROJECT, "display_name": "Research", "limits": {"cpu": "512"}},
        202,
    ),
    Case(
        "change-limits",
        _project,
        "PATCH",
        f"{PROJECTS}/{PROJECT}",
        {"limits": {"accelerators": {CLASS: 16}}},
        202,
    ),
    Case("create-token", _project, "POST", TOKENS, {"name": "ci", "role": "editor"}, 201),
    Case(
        "create-pool",
        _project,
        "POST",
        POOLS,
        {"name": POOL, "accelerator_class": CLASS, "quota": QUOTA},
        202,
    ),
    Case(
        "change-quota",
        project_with_pool,
        "PATCH",
        f"{POOLS}/{POOL}",
        {"quota": {**QUOTA, "cpu": "128"}},
        202,
    ),
    Case(
        "create-workload",
        project_with_pool,
        "POST",
        WORKLOADS,
        {"name": "w", "compute_pool": POOL, "image": "ghcr.io/acme/train:1.4"},
        202,
    ),
    Case(
        "replace-workload",
        _workload,
        "PUT",
        f"{WORKLOADS}/train-7b",
        workload(image="ghcr.io/acme/train:1.5"),
        202,
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
async def test_a_dry_run_answers_what_the_real_call_stores_and_writes_nothing(
    api: Api, watched: Watched, case: Case
) -> None:
    await case.setup(api)
    stored_before = (await api.client.get(case.path)).json() if case.status != 201 else None
    dry = await watched.unchanged_by(
        api.client.request(case.method, case.path, json=case.body, params=DRY)
    )
    assert dry.status_code == 200, dry.text
    answer = dry.json()
    assert answer["dry_run"] is True and answer["status_code"] == case.status
    assert answer["changes"], answer  # every case changes something
    real = await api.client.request(case.method, case.path, json=case.body)
    assert real.status_code == case.status, real.text
    assert comparable(answer["object"]) == comparable(real.json())
    if case.id == "create-token":
        assert answer["object"]["token"] is None  # no secret was made
    if stored_before is not None and "items" not in stored_before:
        for change in answer["changes"]:
            assert _at(stored_before, change["field"]) == change["before"], change
    for change in answer["changes"]:
        assert _at(real.json(), change["field"]) == change["after"], change


def _at(obj: Any, path: str) -> Any:
    for key in path.split("."):
        obj = obj.get(key) if isinstance(obj, dict) else None
    return obj


async def test_a_dry_run_replace_of_what_is_stored_has_no_changes(api: Api) -> None:
    await project_with_pool(api)
    created = await create_workload(api)
    same = [
        ("PUT", f"{WORKLOADS}/train-7b", created["spec"]),
        ("PATCH", f"{POOLS}/{POOL}", {"quota": QUOTA}),
        ("PUT", f"{BINDINGS}/{CLASS}", {**BINDING, "tolerations": []}),
        ("PATCH", f"{PROJECTS}/{PROJECT}", {"limits": None}),
    ]
    for method, path, body in same:
        dry = await api.client.request(method, path, json=body, params=DRY)
        assert dry.status_code == 200, dry.text
        assert dry.json()["changes"] == [], (path, dry.json()["changes"])


async def test_a_dry_run_create_lists_every_field_with_defaults_filled(api: Api) -> None:
    await project_with_pool(api)
    body = {"name": "w", "compute_pool": POOL, "image": "ghcr.io/acme/train:1.4"}
    dry = (await api.client.post(WORKLOADS, json=body, params=DRY)).json()
    changes = {change["field"]: change for change in dry["changes"]}
    assert changes["spec.image"] == {"field": "spec.image", "before": None, "after": body["image"]}
    assert changes["spec.cpu"]["after"] == "1" and changes["spec.memory"]["after"] == "1Gi"
    assert changes["spec.replicas"]["after"] == 1
    assert dry["object"]["status"]["state"] == "PENDING" and dry["object"]["generation"] == 1
    assert (await api.client.get(f"{WORKLOADS}/w")).status_code == 404


@dataclass(frozen=True)
class Refused:
    id: str
    setup: Callable[[Api], Awaitable[Any]]
    method: str
    path: str
    body: dict[str, Any]
    headers: dict[str, str]
    status: int


REFUSED = [
    Refused(
        "unknown-field", project_with_pool, "POST", WORKLOADS, {**workload(), "replica": 3}, {}, 422
    ),
    Refused(
        "exceeds-pool",
        project_with_pool,
        "POST",
        WORKLOADS,
        workload(accelerators=64, replicas=2),
        {},
        422,
    ),
    Refused(
        "no-such-pool", project_with_pool, "POST", WORKLOADS, workload(compute_pool="nope"), {}, 422
    ),
    Refused("already-exists", _workload, "POST", WORKLOADS, workload(), {}, 409),
    Refused(
        "if-match",
        _workload,
        "PUT",
        f"{WORKLOADS}/train-7b",
        workload(image="ghcr.io/acme/train:2"),
        {"If-Match": '"7"'},
        412,
    ),
    Refused(
        "missing-workload",
        project_with_pool,
        "PUT",
        f"{WORKLOADS}/ghost",
        workload("ghost"),
        {},
        404,
    ),
    Refused(
        "project-limit",
        project_with_pool,
        "PATCH",
        f"{PROJECTS}/{PROJECT}",
        {"limits": {"cpu": "8"}},
        {},
        409,
    ),
    Refused(
        "exceeds-project-limit",
        _limited_pool,
        "PATCH",
        f"{POOLS}/{POOL}",
        {"quota": {**QUOTA, "accelerators": 32}},
        {},
        422,
    ),
    Refused(
        "pool-class-unknown",
        _project,
        "POST",
        POOLS,
        {"name": "p2", "accelerator_class": "a100", "quota": QUOTA},
        {},
        422,
    ),
    Refused(
        "binding-bad",
        _nothing,
        "PUT",
        f"{BINDINGS}/{CLASS}",
        {**BINDING, "resource_name": "cpu"},
        {},
        422,
    ),
    Refused("project-reserved", _nothing, "POST", PROJECTS, {"name": "default"}, {}, 422),
    Refused("token-role", _project, "POST", TOKENS, {"name": "x", "role": "owner"}, {}, 422),
    Refused(
        "bad-idempotency-key",
        _project,
        "POST",
        TOKENS,
        {"name": "x", "role": "viewer"},
        {"Idempotency-Key": "a\x7fb"},
        422,
    ),
]


@pytest.mark.parametrize("case", REFUSED, ids=[case.id for case in REFUSED])
async def test_a_dry_run_is_refused_with_the_real_calls_problem(
    api: Api, watched: Watched, case: Refused
) -> None:
    await case.setup(api)
    dry = await watched.unchanged_by(
        api.client.request(case.method, case.path, json=case.body, headers=case.headers, params=DRY)
    )
    real = await api.client.request(case.method, case.path, json=case.body, headers=case.headers)
    assert real.status_code == case.status, real.text
    assert dry.status_code == real.status_code
    assert dry.headers["content-type"] == real.headers["content-type"]
    assert dry.json() == real.json()


async def test_a_dry_run_neither_replays_nor_records_an_idempotency_key(api: Api) -> None:
    await _project(api)
    key = {"Idempotency-Key": "ci-token"}
    dry = await api.client.post(
        TOKENS, json={"name": "a", "role": "viewer"}, headers=key, params=DRY
    )
    assert dry.status_code == 200 and "idempotent-replayed" not in dry.headers
    real = await api.client.post(TOKENS, json={"name": "b", "role": "viewer"}, headers=key)
    assert real.status_code == 201 and real.json()["name"] == "b"  # the key was still free
    again = await api.client.post(
        TOKENS, json={"name": "c", "role": "viewer"}, headers=key, params=DRY
    )
    assert again.status_code == 200 and "idempotent-replayed" not in again.headers
    assert again.json()["object"]["name"] == "c" and again.json()["object"]["token"] is None
    reused = await api.client.post(TOKENS, json={"name": "c", "role": "viewer"}, headers=key)
    assert reused.status_code == 422  # idempotency-key-reused: the real call does check it
    listed = (await api.client.get(TOKENS)).json()["items"]
    assert [token["name"] for token in listed] == ["b"]


async def test_a_dry_run_needs_the_real_calls_role(api: Api) -> None:
    await project_with_pool(api)
    viewer = await api.create_token(PROJECT, "viewer", name="looker")
    async with api.as_token(viewer) as client:
        dry = await client.post(WORKLOADS, json=workload(), params=DRY)
        real = await client.post(WORKLOADS, json=workload())
    assert dry.status_code == real.status_code == 403
    assert dry.json() == real.json()


async def test_a_bad_dry_run_flag_is_422_naming_it(api: Api) -> None:
    await project_with_pool(api)
    response = await api.client.post(WORKLOADS, json=workload(), params={"dry_run": "maybe"})
    assert response.status_code == 422, response.text
    assert response.json()["errors"][0]["field"] == "dry_run"
    assert (await api.client.get(f"{WORKLOADS}/train-7b")).status_code == 404


async def test_dry_runs_spend_the_tokens_write_rate_as_the_writes_they_stand_for(
    database_url: str,
) -> None:
    async with serving(database_url, rate_writes_per_token=0.2, rate_burst_seconds=25.0) as api:
        await project_with_pool(api)
        editor = await api.create_token(PROJECT, "editor")
        async with api.as_token(editor) as client:
            dry = [await client.post(WORKLOADS, json=workload(), params=DRY) for _ in range(7)]
            real = await client.post(WORKLOADS, json=workload())
    statuses = [response.status_code for response in dry]
    assert statuses[:5] == [200] * 5 and statuses[5:] == [429, 429]  # a burst of 5 writes
    assert real.status_code == 429 and real.json()["limit"] == "token-writes"
