"""Project tokens are cached on each replica, and a revocation still holds: on the next request
on the replica that revoked, as soon as the notification arrives on the other, and at once on a
replica whose cache is not listening (it reads the database instead, and starts empty again)."""

from __future__ import annotations

import httpx

from tests.support.api_client import bearer
from tests.support.pg_fixtures import connected
from tests.support.service import RunningService, TwoReplicas
from tests.support.waiting import wait_until

PROJECT = "vision"
LIST = f"/api/v1/projects/{PROJECT}/workloads"


async def _token(replica: RunningService, name: str) -> tuple[str, str]:
    """(id, secret) of a new viewer token of PROJECT."""
    response = await replica.client.post(
        f"/api/v1/projects/{PROJECT}/tokens", json={"name": name, "role": "viewer"}
    )
    assert response.status_code == 201, response.text
    body = response.json()
    return body["id"], body["token"]


async def _status(replica: RunningService, secret: str) -> int:
    async with httpx.AsyncClient(base_url=replica.url, headers=bearer(secret)) as client:
        return (await client.get(LIST)).status_code


async def _revoke(replica: RunningService, token_id: str) -> None:
    response = await replica.client.delete(f"/api/v1/projects/{PROJECT}/tokens/{token_id}")
    assert response.status_code == 204, response.text


async def test_a_revocation_holds_at_once_where_revoked_and_on_the_peer_once_notified(
    two_replicas: TwoReplicas,
) -> None:
    a, b = two_replicas.first, two_replicas.second
    await a.api.create_project(PROJECT)
    token_id, secret = await _token(a, "ci")
    for replica in (a, b):
        assert await _status(replica, secret) == 200
        assert await _status(replica, secret) == 200
    cache_a, cache_b = a.service.token_cache, b.service.token_cache
    assert cache_a is not None and cache_b is not None
    assert len(cache_a) == 1 and len(cache_b) == 1  # served from memory from now on

    drops = cache_b.drops
    await _revoke(a, token_id)
    assert await _status(a, secret) == 401  # the very next request, no waiting

    async def refused_on_b() -> bool:
        return await _status(b, secret) == 401

    await wait_until(refused_on_b, timeout=5)
    assert cache_b.drops > drops  # b heard the change, not a timeout


async def test_a_replica_whose_cache_stopped_listening_reads_every_token_from_the_database(
    two_replicas: TwoReplicas, database_url: str
) -> None:
    a, b = two_replicas.first, two_replicas.second
    await a.api.create_project(PROJECT)
    revoked_id, revoked = await _token(a, "ci")
    _, kept = await _token(a, "dashboard")
    cache = b.service.token_cache
    assert cache is not None
    assert await _status(b, revoked) == 200
    assert len(cache) == 1

    # b's listener is cut and cannot come back (its next connects are refused): whatever it
    # misses from now on, it must not answer from memory.
    listener = b.service.listener
    assert listener is not None
    listening_dsn, connects = listener.dsn, cache.connects
    listener.dsn = "postgresql://postgres@127.0.0.1:9/none"
    async with connected(database_url) as admin:
        await admin.execute("SELECT pg_terminate_backend($1)", listener.backend_pid)
    await wait_until(lambda: not cache.listening.is_set(), timeout=5)

    await _revoke(a, revoked_id)  # its notification reaches nobody on b
    assert await _status(b, revoked) == 401
    assert await _status(b, kept) == 200
    assert len(cache) == 0  # bypassed: nothing served from, or stored in, memory

    # Back: it listens again, empty, and caches again.
    listener.dsn = listening_dsn
    await wait_until(lambda: cache.connects > connects and cache.listening.is_set(), timeout=10)
    assert await _status(b, revoked) == 401
    assert await _status(b, kept) == 200
    assert len(cache) == 1
