"""The token cache against the real database: every change to any token drops it (the
migration's trigger notifies, whoever made the change), and a lookup that raced a change does
not store what it read."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest

from app.store import projects, tokens
from app.store.db import Database
from app.store.token_cache import TokenCache, TokenIdentity
from tests.support.listening import listening
from tests.support.waiting import wait_until


@pytest.fixture
async def cache(database_url: str) -> AsyncIterator[TokenCache]:
    async with listening(database_url) as listener:
        running = TokenCache(listener, max_entries=10_000)
        await running.open()
        await wait_until(running.listening.is_set, timeout=5)
        yield running
        running.close()


async def _valid_token(db: Database) -> str:
    async with db.transaction() as conn:
        project = await projects.create(
            conn, name=f"p-{uuid.uuid4().hex[:6]}", display_name=None, labels={}, actor="t"
        )
        created = await tokens.create(
            conn,
            project_id=uuid.UUID(project.uid),
            name="ci",
            role="viewer",
            expires_in_days=None,
            actor="t",
        )
    assert created.token is not None
    return created.token


async def test_any_statement_changing_a_token_drops_every_cached_token(
    db: Database, cache: TokenCache
) -> None:
    secret = await _valid_token(db)
    assert await tokens.authenticate_cached(db, cache, secret) is not None
    assert cache.get(tokens.digest(secret)) is not None

    # Not through the API: an operator's own statement on the table.
    async with db.connection() as conn:
        await conn.execute("UPDATE api_tokens SET revoked_at = now()")
    await wait_until(lambda: len(cache) == 0, timeout=5)
    found = await tokens.authenticate_cached(db, cache, secret)
    assert found is not None and found.revoked
    assert len(cache) == 0  # a revoked token is never cached


async def test_a_lookup_that_raced_a_change_does_not_store_its_answer(
    db: Database, cache: TokenCache
) -> None:
    token = TokenIdentity(uuid.uuid4(), uuid.uuid4(), "p", "viewer", False, False, None)
    read_at = cache.generation
    cache.drop_all()  # a notification arrived while the database read was under way
    cache.put(b"digest", token, read_at)
    assert cache.get(b"digest") is None
    cache.put(b"digest", token, cache.generation)
    assert cache.get(b"digest") == token
