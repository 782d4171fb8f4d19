"""The service runs the engine: what the API accepts gets leased and reconciled by this replica."""

from __future__ import annotations

import time
import uuid

import httpx

from app.main import Service
from app.observability.metrics import REGISTRY
from tests.support.api_client import Api
from tests.support.pg_fixtures import connected
from tests.support.waiting import wait_until


async def test_a_project_created_through_the_api_is_leased_by_the_serving_replica(
    service: Service, api: Api, app_client: httpx.AsyncClient, database_url: str
) -> None:
    assert service.reconciler is not None
    project = await api.create_project("vision")

    async with connected(database_url) as conn:
        owner = await wait_until(
            lambda: conn.fetchval(
                "SELECT owner FROM leases WHERE kind = 'project' AND resource_id = $1",
                uuid.UUID(project["uid"]),
            ),
            timeout=5,
        )
    assert owner == service.settings.instance_id
    ready = await app_client.get("/readyz")
    assert ready.status_code == 200, ready.text


async def test_steps_and_leases_show_up_in_the_metrics(service: Service, api: Api) -> None:
    def done_steps() -> float:
        value = REGISTRY.get_sample_value(
            "aicp_reconcile_total", {"kind": "project", "result": "done"}
        )
        return value or 0.0

    before = done_steps()
    await api.create_project("metrics")

    await wait_until(lambda: done_steps() >= before + 1, timeout=5)
    held = REGISTRY.get_sample_value("aicp_leases_held", {"kind": "project"})
    assert held is not None and held >= 1
    assert REGISTRY.get_sample_value("aicp_reconcile_lag_seconds", {"kind": "workload"}) is not None


async def test_requests_are_answered_while_every_reconcile_connection_is_busy(
    service: Service, api: Api, app_client: httpx.AsyncClient
) -> None:
    """The reconcile workers have a pool of their own: with every one of its connections
    taken (as in a burst of steps), the API still reads and writes without waiting."""
    project = await api.create_project("busy")
    assert service.reconcile_db is not None and service.db is not None
    assert service.reconcile_db.pool is not service.db.pool
    pool = service.reconcile_db.pool
    held = [await pool.acquire(timeout=5) for _ in range(pool.get_max_size())]
    try:
        started = time.monotonic()
        found = await app_client.get(f"/api/v1/projects/{project['name']}")
        created = await api.create_project("beside-busy")
        elapsed = time.monotonic() - started
    finally:
        for conn in held:
            await pool.release(conn)
    assert found.status_code == 200, found.text
    assert created["name"] == "beside-busy"
    # Well below the 5 s a request would wait for a pooled connection before answering 503.
    assert elapsed < 2.0, elapsed
