"""PostgreSQL fixtures: a migrated template per session, a fresh database per test.

``AICP_TEST_DATABASE_URL`` (default ``postgresql://postgres@127.0.0.1:5432/postgres``) names a
server and a maintenance database on it. When nothing answers there, an embedded server
(pgserver) is started in a temporary directory for the session, so the suite runs on a
machine without PostgreSQL.

- ``pg_server_url`` (session): the maintenance URL of the server in use.
- ``pg_template`` (session): a database migrated to the latest schema, used as a template.
- ``database_url`` (function): ``CREATE DATABASE t_<random> TEMPLATE <template>``; dropped
  ``WITH (FORCE)`` after the test.
- ``service`` / ``app_client`` (function): aicp running in-process on a real uvicorn bound to
  127.0.0.1:0 against ``database_url``, and an httpx client for it holding the admin token.
- ``started_service`` / ``admin_client`` / ``serving``: the same as context managers, for a
  test whose service needs other settings (``serving`` yields the scenario API over it).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import secrets
import tempfile
import threading
import urllib.parse
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
import pytest_asyncio

from app.config import Settings
from app.main import Service
from app.store.db import Database
from app.store.migrations import migrate
from tests.support.api_client import ADMIN_TOKEN
from tests.support.scenario import API_EXAMPLE, Scenario

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/postgres"


def with_database(url: str, database: str) -> str:
    """``url`` pointing at another database on the same server."""
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit(parts._replace(path="/" + database))


async def answers(url: str) -> bool:
    """Whether a PostgreSQL server accepts a connection to `url` now (within 2 s)."""
    try:
        conn = await asyncpg.connect(url, timeout=2)
    except (OSError, asyncpg.PostgresError, TimeoutError):
        return False
    await conn.close()
    return True


@pytest.fixture(scope="session")
def pg_server_url() -> Iterator[str]:
    url = os.environ.get("AICP_TEST_DATABASE_URL", DEFAULT_URL)
    if asyncio.run(answers(url)):
        yield url
        return
    import pgserver

    with tempfile.TemporaryDirectory(prefix="aicp-test-pg-") as directory:
        server = pgserver.get_server(Path(directory) / "pg", cleanup_mode="delete")
        yield server.get_uri("postgres")
        server.cleanup()


async def _admin_execute(server_url: str, *statements: str) -> None:
    conn = await asyncpg.connect(server_url, timeout=10)
    try:
        for statement in statements:
            await conn.execute(statement)
    finally:
        await conn.close()


async def _build_template(server_url: str, name: str) -> None:
    await _admin_execute(server_url, f'CREATE DATABASE "{name}"')
    db = await Database.connect(with_database(server_url, name), size=2)
    try:
        await migrate(db)
    finally:
        await db.close()


@pytest.fixture(scope="session")
def pg_template(pg_server_url: str) -> Iterator[str]:
    """Name of a database holding the migrated schema and nothing else."""
    name = f"aicp_tmpl_{os.getpid()}_{secrets.token_hex(3)}"
    asyncio.run(_build_template(pg_server_url, name))
    yield name
    asyncio.run(_admin_execute(pg_server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


class _Dropper:
    """Drops test databases on a background thread, so a test does not wait for its drop."""

    def __init__(self, server_url: str) -> None:
        self.server_url = server_url
        self.names: queue.Queue[str | None] = queue.Queue()
        self.thread = threading.Thread(target=self._run, name="drop-test-databases", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while (name := self.names.get()) is not None:
            asyncio.run(
                _admin_execute(self.server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            )

    def drop(self, name: str) -> None:
        self.names.put(name)

    def finish(self) -> None:
        self.names.put(None)
        self.thread.join()


@pytest.fixture(scope="session")
def pg_dropper(pg_server_url: str) -> Iterator[_Dropper]:
    dropper = _Dropper(pg_server_url)
    yield dropper
    dropper.finish()


async def _clone(pg_server_url: str, pg_template: str) -> str:
    name = f"t_{secrets.token_hex(6)}"
    await _admin_execute(pg_server_url, f'CREATE DATABASE "{name}" TEMPLATE "{pg_template}"')
    return name


@pytest.fixture
async def database_url(
    pg_server_url: str, pg_template: str, pg_dropper: _Dropper
) -> AsyncIterator[str]:
    """A private, migrated database for one test."""
    name = await _clone(pg_server_url, pg_template)
    try:
        yield with_database(pg_server_url, name)
    finally:
        pg_dropper.drop(name)


@contextlib.asynccontextmanager
async def connected(database_url: str) -> AsyncIterator[asyncpg.Connection]:
    """A connection of its own to `database_url`, closed on leaving."""
    conn = await asyncpg.connect(database_url)
    try:
        yield conn
    finally:
        await conn.close()


@pytest.fixture
async def sql(database_url: str) -> AsyncIterator[asyncpg.Connection]:
    """A connection of its own to the test's database, for what no API shows."""
    async with connected(database_url) as conn:
        yield conn


@pytest.fixture
async def doorbells(database_url: str) -> AsyncIterator[asyncio.Queue[str]]:
    """Every `aicp_work` payload (a `kind:id` doorbell) committed from now on, in commit order."""
    heard: asyncio.Queue[str] = asyncio.Queue()
    async with connected(database_url) as conn:
        await conn.add_listener("aicp_work", lambda *args: heard.put_nowait(args[3]))
        yield heard


@pytest.fixture
async def empty_database_url(pg_server_url: str) -> AsyncIterator[str]:
    """A private database with no schema at all (for migration tests)."""
    name = f"t_{secrets.token_hex(6)}"
    await _admin_execute(pg_server_url, f'CREATE DATABASE "{name}"')
    try:
        yield with_database(pg_server_url, name)
    finally:
        await _admin_execute(pg_server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def service_settings(database_url: str, **overrides: Any) -> Settings:
    """Settings for an in-process test service on an ephemeral port."""
    values: dict[str, Any] = {
        "database_url": database_url,
        "kubeconfig": None,
        "instance_id": f"test-{secrets.token_hex(3)}",
        "http_host": "127.0.0.1",
        "http_port": 0,
        "admin_token": ADMIN_TOKEN,
        "lease_ttl_seconds": 15.0,
        "sweep_interval_seconds": 1.0,
        "workers": 2,
        "db_pool_size": 10,
        "log_format": "console",
    }
    values.update(overrides)
    return Settings(**values)


@contextlib.asynccontextmanager
async def started_service(database_url: str, **settings: Any) -> AsyncIterator[Service]:
    """aicp serving HTTP on 127.0.0.1:<ephemeral> against `database_url` with `settings`
    (`service_settings`'), stopped when the block ends."""
    running = Service(service_settings(database_url, **settings))
    await running.start()
    try:
        yield running
    finally:
        await running.stop()


@contextlib.asynccontextmanager
async def admin_client(service: Service) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client for `service` that sends its platform admin token."""
    token = service.settings.admin_token or ADMIN_TOKEN
    async with httpx.AsyncClient(
        base_url=service.url, headers={"Authorization": f"Bearer {token}"}, timeout=30
    ) as client:
        yield client


@contextlib.asynccontextmanager
async def serving(database_url: str, **settings: Any) -> AsyncIterator[Scenario]:
    """The scenario API (docs/API.md's example workload) over a service with `settings`."""
    async with (
        started_service(database_url, **settings) as service,
        admin_client(service) as client,
    ):
        yield Scenario(client, defaults=API_EXAMPLE)


@pytest.fixture
async def service(database_url: str) -> AsyncIterator[Service]:
    """aicp serving HTTP on 127.0.0.1:<ephemeral> against this test's database."""
    async with started_service(database_url) as running:
        yield running


@pytest.fixture
async def app_client(service: Service) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client for ``service`` that sends the platform admin token."""
    async with admin_client(service) as client:
        yield client


@pytest.fixture
async def api(app_client: httpx.AsyncClient) -> Scenario:
    """The scenario API over HTTP (tests/support/scenario.py): project `research`, pool
    `h100-pool`, docs/API.md's example workload."""
    return Scenario(app_client, defaults=API_EXAMPLE)


# --- One service per test module, for tables of requests that change nothing -----------------
# Tests using these must run on the module's event loop:
#     pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def shared_service(
    pg_server_url: str, pg_template: str, pg_dropper: _Dropper
) -> AsyncIterator[Service]:
    """aicp on its own database, shared by the tests of one module."""
    name = await _clone(pg_server_url, pg_template)
    try:
        async with started_service(with_database(pg_server_url, name)) as running:
            yield running
    finally:
        pg_dropper.drop(name)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def shared_client(shared_service: Service) -> AsyncIterator[httpx.AsyncClient]:
    """An admin HTTP client for ``shared_service``."""
    async with admin_client(shared_service) as client:
        yield client
