"""A stream filtered by compute pool: its first page, its live changes and a resume all go by
the pool a workload is in (its id), as the list does, not by a name in the spec's JSON."""

from __future__ import annotations

import asyncpg
import pytest

from tests.support.scenario import WORKLOADS, Scenario
from tests.support.sse import open_stream

pytestmark = pytest.mark.timeout(30)

OTHER_POOL = "a100-pool"


async def test_a_pool_filtered_list_watch_and_list_show_the_same_workloads(api: Scenario) -> None:
    await api.setup_pool(wait=False)
    await api.create_pool(OTHER_POOL)
    await api.submit("in-h100")
    await api.submit("in-a100", compute_pool=OTHER_POOL)
    listed = await api.client.get(WORKLOADS, params={"compute_pool": OTHER_POOL})
    assert [w["name"] for w in listed.json()["items"]] == ["in-a100"]
    params = {"watch": "true", "compute_pool": OTHER_POOL}
    async with open_stream(api.client, WORKLOADS, params=params) as stream:
        first = await stream.next()
        assert (first.type, first.object["name"]) == ("ADDED", "in-a100")
        await api.submit("later-h100")
        await api.submit("later-a100", compute_pool=OTHER_POOL)
        live = await stream.next()
        assert (live.type, live.object["name"]) == ("ADDED", "later-a100")


async def test_every_change_in_the_log_names_its_pool_by_id(
    api: Scenario, sql: asyncpg.Connection
) -> None:
    await api.setup_pool(wait=False)
    await api.submit("a")
    rows = await sql.fetch(
        "SELECT c.pool_id, w.pool_id AS current FROM workload_changes c"
        " JOIN workloads w ON w.id = c.id"
    )
    assert rows and all(r["pool_id"] == r["current"] is not None for r in rows)
