"""The reconcile engine starting while PostgreSQL refuses connections: it waits (bounded by
its start timeout) instead of failing at the first refusal, and gives up with an error past
the bound so the process supervisor can end the process."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
import urllib.parse
from collections.abc import AsyncIterator

import asyncpg
import pytest

from app.reconcile.engine import EngineConfig, Reconciler
from app.store.db import Database
from tests.faults.processes import PgProxy
from tests.support.listening import listening
from tests.support.waiting import wait_until


async def test_an_engine_that_cannot_reach_the_database_in_time_fails_its_start(
    proxy: PgProxy, database_url: str
) -> None:
    db = await Database.connect(proxy.url_for(database_url), size=2)
    async with listening(proxy.url_for(database_url)) as listener:
        engine = Reconciler(
            db,
            EngineConfig(
                "replica-a", lease_ttl=15.0, sweep_interval=1.0, workers=4, start_timeout=2.0
            ),
            listener,
        )
        try:
            await proxy.refuse()
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(engine.start(), 10)
        finally:
            await engine.halt()
            await db.close()


# --- Every refusal, at the TCP level or answered by the server -------------------------------
# No server listening, or one that answers the startup packet with a FATAL ErrorResponse: a
# replica that starts (or stops), a database closed to connections, a role or server out of
# connection slots. Each is "not now", so the start waits for it. 55000 and 53300 are
# the real server's answers; 57P03 needs a server that is starting or stopping, which a test
# cannot hold in that state, so the proxy answers it the way PostgreSQL does.


class Refusal:
    """Makes the database refuse new connections with one SQLSTATE, then accept them again."""

    sqlstate = ""

    def __init__(self, server_url: str, database_url: str, proxy: PgProxy) -> None:
        self.server_url = server_url
        self.database_url = database_url
        self.proxy = proxy
        self.database = urllib.parse.urlsplit(database_url).path.lstrip("/")

    async def setup(self) -> str:
        """The URL the service under test connects with."""
        return self.database_url

    async def refuse(self) -> None:
        raise NotImplementedError

    async def accept(self) -> None:
        raise NotImplementedError

    async def teardown(self) -> None:
        await self.accept()

    async def admin(self, *statements: str) -> None:
        conn = await asyncpg.connect(self.server_url)
        try:
            for statement in statements:
                await conn.execute(statement)
        finally:
            await conn.close()


class DatabaseClosed(Refusal):
    """55000: `database "…" is not currently accepting connections` (as while a replica is
    promoted or a maintenance window closes it)."""

    sqlstate = "55000"

    async def refuse(self) -> None:
        await self.admin(
            f'ALTER DATABASE "{self.database}" ALLOW_CONNECTIONS false',
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            f"WHERE datname = '{self.database}' AND pid <> pg_backend_pid()",
        )

    async def accept(self) -> None:
        await self.admin(f'ALTER DATABASE "{self.database}" ALLOW_CONNECTIONS true')


class RoleOutOfConnections(Refusal):
    """53300: `too many connections for role "…"` (the role's CONNECTION LIMIT is reached)."""

    sqlstate = "53300"

    async def setup(self) -> str:
        self.role = f"aicp_limited_{secrets.token_hex(3)}"
        await self.admin(f"CREATE ROLE {self.role} LOGIN PASSWORD 'limited' IN ROLE postgres")
        parts = urllib.parse.urlsplit(self.database_url)
        host = parts.netloc.rsplit("@", 1)[-1]
        return urllib.parse.urlunsplit(parts._replace(netloc=f"{self.role}:limited@{host}"))

    async def refuse(self) -> None:
        await self.admin(
            f"ALTER ROLE {self.role} CONNECTION LIMIT 0",
            f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '{self.role}'",
        )

    async def accept(self) -> None:
        await self.admin(f"ALTER ROLE {self.role} CONNECTION LIMIT -1")

    async def teardown(self) -> None:
        await self.accept()
        await self.admin(
            f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '{self.role}'",
        )
        with contextlib.suppress(asyncpg.PostgresError):
            await self.admin(f"DROP ROLE {self.role}")


class ConnectionRefused(Refusal):
    """No listener at all (the server is down): TCP refuses, and the open connections are cut."""

    async def setup(self) -> str:
        return self.proxy.url_for(self.database_url)

    async def refuse(self) -> None:
        await self.proxy.refuse()

    async def accept(self) -> None:
        if self.proxy.listening:
            return
        await self.proxy.start()


class ServerStarting(Refusal):
    """57P03: `the database system is starting up` (a replica not yet consistent)."""

    sqlstate = "57P03"
    message = "the database system is starting up"

    async def setup(self) -> str:
        return self.proxy.url_for(self.database_url)

    async def refuse(self) -> None:
        self.proxy.answer_refusal(self.sqlstate, self.message)

    async def accept(self) -> None:
        self.proxy.forward()


class ServerShuttingDown(ServerStarting):
    """57P03: `the database system is shutting down` (a fast shutdown under way)."""

    message = "the database system is shutting down"


REFUSALS = [
    ConnectionRefused,
    DatabaseClosed,
    RoleOutOfConnections,
    ServerStarting,
    ServerShuttingDown,
]


@pytest.fixture(params=REFUSALS, ids=lambda kind: f"{kind.sqlstate or 'tcp'}-{kind.__name__}")
async def refusal(
    request: pytest.FixtureRequest, pg_server_url: str, database_url: str, proxy: PgProxy
) -> AsyncIterator[tuple[Refusal, str]]:
    made: Refusal = request.param(pg_server_url, database_url, proxy)
    url = await made.setup()
    try:
        yield made, url
    finally:
        await made.teardown()


async def _refused_sqlstate(url: str) -> str | None:
    """The SQLSTATE a new connection is refused with ("" when TCP refuses it)."""
    try:
        conn = await asyncpg.connect(url, timeout=5)
    except asyncpg.PostgresError as exc:
        return exc.sqlstate
    except OSError:
        return ""
    await conn.close()
    return None


async def test_an_engine_starting_while_the_database_refuses_waits_for_it(
    refusal: tuple[Refusal, str], caplog: pytest.LogCaptureFixture
) -> None:
    made, url = refusal
    db = await Database.connect(url, size=2)
    async with listening(url) as listener:
        engine = Reconciler(
            db, EngineConfig("replica-a", lease_ttl=15.0, sweep_interval=1.0, workers=4), listener
        )
        try:
            await made.refuse()
            assert await _refused_sqlstate(url) == made.sqlstate  # the server's own answer
            starting = asyncio.create_task(engine.start())
            await wait_until(
                lambda: "database unavailable" in caplog.text or starting.done(), timeout=10
            )
            assert not starting.done()  # refused, and still trying
            await made.accept()
            reopened = time.monotonic()
            await asyncio.wait_for(starting, 30)
            assert await engine.readiness() is None
            assert time.monotonic() - reopened < 5.0
        finally:
            await made.accept()
            await engine.stop(grace=1.0)
            await db.close()


async def test_the_pool_opening_while_the_database_refuses_waits_for_it(
    refusal: tuple[Refusal, str], caplog: pytest.LogCaptureFixture
) -> None:
    made, url = refusal
    await made.refuse()
    opening = asyncio.create_task(Database.connect(url, size=2, retry_for=30))
    await wait_until(
        lambda: "cannot connect to the database" in caplog.text or opening.done(), timeout=10
    )
    assert not opening.done()
    await made.accept()
    db = await asyncio.wait_for(opening, 30)
    try:
        assert await db.ping()
    finally:
        await db.close()
