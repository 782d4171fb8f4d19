"""Who hears about a new workload: the doorbell, or the accepting replica's own lease.

docs/DESIGN.md §5: the replica that accepts a create may lease the new resource in the same
transaction and queue it locally, skipping the NOTIFY (whose commit takes a cluster-wide lock).
Notifications are delivered in commit order, so "no doorbell for the create" is checked by
waiting for a later write's doorbell and looking at what arrived before it.
"""

from __future__ import annotations

import asyncio

import asyncpg

from app.main import Service
from tests.support.scenario import POOL, POOLS, QUOTA, WORKLOADS, Scenario, example_workload


async def _until(heard: asyncio.Queue[str], payload: str) -> list[str]:
    """The payloads heard up to and including `payload`."""
    seen: list[str] = []
    while not seen or seen[-1] != payload:
        seen.append(await asyncio.wait_for(heard.get(), timeout=10))
    return seen


async def test_without_a_local_reconciler_a_new_workload_rings_the_doorbell(
    api: Scenario, service: Service, doorbells: asyncio.Queue[str]
) -> None:
    assert service.app is not None
    service.app.state["reconciler"] = None  # an API served without an engine
    await api.setup_pool(wait=False)
    uid = (await api.client.post(WORKLOADS, json=example_workload())).json()["uid"]
    assert (await _until(doorbells, f"workload:{uid}"))[-1] == f"workload:{uid}"


async def test_the_accepting_replica_leases_a_new_workload_instead_of_ringing(
    api: Scenario, service: Service, sql: asyncpg.Connection, doorbells: asyncio.Queue[str]
) -> None:
    assert service.app is not None and service.reconciler is not None
    assert service.app.state["reconciler"] is service.reconciler  # wired by the service
    await api.setup_pool(wait=False)
    pool = (await api.client.get(f"{POOLS}/{POOL}")).json()["uid"]
    response = await api.client.post(WORKLOADS, json=example_workload())
    assert response.status_code == 202, response.text
    uid = response.json()["uid"]

    # Updates always ring: the PATCH's doorbell arrives after anything the creates rang.
    assert (await api.client.patch(f"{POOLS}/{POOL}", json={"quota": QUOTA})).status_code == 202
    heard = await _until(doorbells, f"pool:{pool}")
    assert f"workload:{uid}" not in heard
    assert heard.count(f"pool:{pool}") == 1  # the pool's create did not ring either

    owner = await sql.fetchval(
        "SELECT owner FROM leases WHERE kind = 'workload' AND resource_id = $1", uid
    )
    assert owner == service.reconciler.owner
