"""Rows stored under names with a trailing newline, before names were matched as whole
strings, are removed by migration 0013: the reconciler finalizes them without a retry loop."""

from __future__ import annotations

import uuid

from app.store.migrations import MIGRATIONS_DIR
from tests.integration.steps.stack import Stack
from tests.support.scenario import CLASS, QUOTA
from tests.support.waiting import wait_until

REPAIR = MIGRATIONS_DIR / "0013_names_match_whole_strings.sql"


async def test_rows_named_with_a_trailing_newline_are_finalized(stack: Stack) -> None:
    await stack.put_binding(CLASS, flavor=CLASS)
    project_id, pool_id = uuid.uuid4(), uuid.uuid4()
    db = stack.service.db
    assert db is not None
    async with db.transaction() as conn:
        # What an earlier version stored for {"name": "nlproj\n"} and a pool "gpu\n" in it.
        await conn.execute(
            "INSERT INTO projects (id, name, created_by) VALUES ($1, $2, 'admin')",
            project_id,
            "nlproj\n",
        )
        await conn.execute(
            "INSERT INTO compute_pools (id, project_id, name, accelerator_class, spec, created_by)"
            " VALUES ($1, $2, $3, $4, $5, 'admin')",
            pool_id,
            project_id,
            "gpu\n",
            CLASS,
            {"quota": QUOTA},
        )
    async with db.connection() as conn:
        await conn.execute(REPAIR.read_text())

    async def finalized() -> bool:
        async with db.connection() as conn:
            left = await conn.fetchval(
                "SELECT count(*) FROM projects WHERE id = $1", project_id
            ) + await conn.fetchval("SELECT count(*) FROM compute_pools WHERE id = $1", pool_id)
        return left == 0

    await wait_until(finalized, timeout=20, message="rows with invalid names finalized")
    async with db.connection() as conn:
        kinds = await conn.fetch(
            "SELECT kind FROM tombstones WHERE resource_id = ANY($1::uuid[]) ORDER BY kind",
            [project_id, pool_id],
        )
    assert [row["kind"] for row in kinds] == ["pool", "project"]
    listed = (await stack.http.get("/api/v1/projects")).json()["items"]
    assert all(item["name"] != "nlproj\n" for item in listed)
