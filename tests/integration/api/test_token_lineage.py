"""Token lineage: a token never mints a longer-lived or higher-role token, nor one that never
expires (only the platform admin does); revoking a token revokes every token it minted, on
every request and stream at once; a project holds at most AICP_TOKENS_PER_PROJECT live tokens."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import httpx

from tests.support.pg_fixtures import serving
from tests.support.scenario import PROJECT, WORKLOADS, Scenario
from tests.support.sse import open_stream

TOKENS = f"/api/v1/projects/{PROJECT}/tokens"


async def mint(client: httpx.AsyncClient, name: str, role: str, days: int | None) -> Any:
    body: dict[str, Any] = {"name": name, "role": role}
    if days is not None:
        body["expires_in_days"] = days
    return await client.post(TOKENS, json=body)


async def test_a_token_cannot_mint_a_higher_role(api: Scenario) -> None:
    await api.create_project(PROJECT)
    created = await mint(api.client, "lead", "admin", 30)
    async with api.as_token(created.json()["token"]) as lead:
        ok = await mint(lead, "editor", "editor", 7)
        assert ok.status_code == 201, ok.text
    # An editor cannot create tokens at all (403 by role); the lineage rule is checked on
    # what an admin token may ask, and an admin is the highest role: what it asks is allowed.
    async with api.as_token(ok.json()["token"]) as editor:
        denied = await mint(editor, "sneaky", "admin", 1)
        assert denied.status_code == 403
        assert denied.json()["required_role"] == "admin"


async def test_a_token_cannot_mint_one_that_outlives_it(api: Scenario) -> None:
    await api.create_project(PROJECT)
    lead = (await mint(api.client, "lead", "admin", 10)).json()
    async with api.as_token(lead["token"]) as client:
        longer = await mint(client, "longer", "viewer", 11)
        assert longer.status_code == 422, longer.text
        [error] = longer.json()["errors"]
        assert error["field"] == "expires_in_days"
        assert "cannot outlive the token that creates it" in error["message"]
        assert "at most 9" in error["message"]  # 10 days minus the seconds since
        within = await mint(client, "within", "viewer", 9)
        assert within.status_code == 201, within.text
        expires = datetime.fromisoformat(within.json()["expires_at"])
        assert expires <= datetime.fromisoformat(lead["expires_at"])


async def test_only_the_platform_admin_mints_a_token_that_never_expires(api: Scenario) -> None:
    await api.create_project(PROJECT)
    forever = await mint(api.client, "forever", "admin", None)
    assert forever.status_code == 201
    assert forever.json()["expires_at"] is None
    async with api.as_token(forever.json()["token"]) as client:
        refused = await mint(client, "also-forever", "viewer", None)
        assert refused.status_code == 403, refused.text
        assert refused.json()["required_role"] == "platform-admin"
        assert "never expire" in refused.json()["detail"]
        # A token that never expires mints tokens with any lifetime.
        assert (await mint(client, "long", "viewer", 3650)).status_code == 201


async def test_revoking_a_token_revokes_what_it_minted_recursively_and_their_streams(
    api: Scenario, sql: asyncpg.Connection
) -> None:
    await api.setup_pool(wait=False)
    lead = (await mint(api.client, "lead", "admin", 30)).json()
    async with api.as_token(lead["token"]) as lead_client:
        child = (await mint(lead_client, "child", "admin", 20)).json()
        async with api.as_token(child["token"]) as child_client:
            grandchild = (await mint(child_client, "grandchild", "viewer", 10)).json()
    sibling = (await mint(api.client, "sibling", "viewer", 30)).json()  # the admin's own
    listed = {t["name"]: t for t in (await api.client.get(TOKENS)).json()["items"]}
    assert listed["child"]["minted_by"] == lead["id"]
    assert listed["grandchild"]["minted_by"] == child["id"]
    assert listed["lead"]["minted_by"] is None

    async with api.as_token(grandchild["token"]) as watcher:
        async with open_stream(watcher, f"{WORKLOADS}?watch=true") as stream:
            revoked = await api.client.delete(f"{TOKENS}/{lead['id']}")
            assert revoked.status_code == 204
            started = time.monotonic()
            await stream.end(timeout=2.0)  # closed on the notification, not the 5 s recheck
            assert time.monotonic() - started < 2.0
        assert (await watcher.get(f"/api/v1/projects/{PROJECT}")).status_code == 401
    for secret in (lead["token"], child["token"]):
        async with api.as_token(secret) as client:
            assert (await client.get(f"/api/v1/projects/{PROJECT}")).status_code == 401
    async with api.as_token(sibling["token"]) as client:
        assert (await client.get(f"/api/v1/projects/{PROJECT}")).status_code == 200

    listed = {t["name"]: t for t in (await api.client.get(TOKENS)).json()["items"]}
    assert {n for n, t in listed.items() if t["revoked_at"]} == {"lead", "child", "grandchild"}
    messages = {
        row["resource_name"]: row["message"]
        for row in await sql.fetch(
            "SELECT resource_name, message FROM events WHERE type = 'Revoked'"
        )
    }
    assert messages["lead"] == "Token lead revoked."
    assert messages["grandchild"] == "Token grandchild revoked with lead, which it descends from."


async def test_a_project_holds_at_most_its_cap_of_live_tokens_even_when_minted_at_once(
    database_url: str,
    sql: asyncpg.Connection,
) -> None:
    async with serving(database_url, tokens_per_project=5) as api:
        await api.create_project(PROJECT)
        answers = await asyncio.gather(
            *(mint(api.client, f"t-{n}", "viewer", 1) for n in range(12))
        )
        statuses = sorted(a.status_code for a in answers)
        assert statuses == [201] * 5 + [409] * 7, statuses
        refused = next(a for a in answers if a.status_code == 409).json()
        assert refused["type"].endswith("/token-limit-reached")
        assert refused["limit"] == 5
        assert "revoke one" in refused["detail"]
        # A revoked (or expired) token no longer counts.
        first = next(a for a in answers if a.status_code == 201).json()
        assert (await api.client.delete(f"{TOKENS}/{first['id']}")).status_code == 204
        assert (await mint(api.client, "after-revoke", "viewer", 1)).status_code == 201
        await sql.execute(
            "UPDATE api_tokens SET expires_at = $1 WHERE name = 'after-revoke'",
            datetime.now(UTC) - timedelta(seconds=1),
        )
        assert (await mint(api.client, "after-expiry", "viewer", 1)).status_code == 201
