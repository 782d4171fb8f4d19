"""The asyncpg connection pool and the translation of database failures into domain errors.

``Database.transaction()`` is the one way request code reaches PostgreSQL: it acquires a
connection from a pool of a stated size, opens a transaction, and converts connection-level
failures into ``StoreUnavailable`` (the API answers 503 with Retry-After). Constraint violations
are the callers' business: store modules catch the specific asyncpg error they expect
(``UniqueViolationError`` → ``AlreadyExists``) because only they know what the constraint means.
Statements go through asyncpg's per-connection prepared-statement cache.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any, TypeAlias

import asyncpg
import msgspec

from app.domain.errors import StoreUnavailable, UnstorableText
from app.store.queries import QUERIES

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from asyncpg.pool import PoolConnectionProxy

    # Request code gets pooled connections (proxies); dedicated ones (LISTEN) are plain.
    Connection: TypeAlias = PoolConnectionProxy[asyncpg.Record] | asyncpg.Connection[asyncpg.Record]
    Pool: TypeAlias = asyncpg.Pool[asyncpg.Record]
else:  # asyncpg's classes are not subscriptable at runtime
    Connection = asyncpg.Connection
    Pool = asyncpg.Pool

# Errors that mean "the database is not there" rather than "the statement is wrong".
UNAVAILABLE_ERRORS: tuple[type[BaseException], ...] = (
    OSError,
    asyncio.TimeoutError,
    asyncpg.PostgresConnectionError,
    asyncpg.CannotConnectNowError,
    asyncpg.TooManyConnectionsError,
    asyncpg.ConnectionDoesNotExistError,
    asyncpg.AdminShutdownError,
)

# While connecting, a server error (database does not exist, auth failed, too many clients)
# also means "unavailable": no statement of ours has run yet.
_CONNECT_ERRORS: tuple[type[BaseException], ...] = (*UNAVAILABLE_ERRORS, asyncpg.PostgresError)

# Text PostgreSQL cannot store (NUL, invalid for the encoding): the caller's input, not a bug.
_UNSTORABLE_TEXT_ERRORS: tuple[type[BaseException], ...] = (
    asyncpg.CharacterNotInRepertoireError,
    asyncpg.UntranslatableCharacterError,
)

ACQUIRE_TIMEOUT_SECONDS = 5.0
CONNECT_TIMEOUT_SECONDS = 5.0


async def _init_connection(conn: Connection) -> None:
    """jsonb columns in and out as Python values, encoded by msgspec."""
    await conn.set_type_codec(
        "jsonb",
        encoder=lambda value: msgspec.json.encode(value).decode(),
        decoder=msgspec.json.decode,
        schema="pg_catalog",
    )
    await conn.set_type_codec(
        "json",
        encoder=lambda value: msgspec.json.encode(value).decode(),
        decoder=msgspec.json.decode,
        schema="pg_catalog",
    )


async def _keep_session(conn: Connection) -> None:
    """Pool ``reset`` hook: skip asyncpg's per-release reset query (one round trip).

    asyncpg still rolls back any open transaction on release. Nothing aicp runs on a pooled
    connection changes session state (no SET, no LISTEN, advisory locks released explicitly);
    a component that needs session state takes a dedicated connection instead.
    """


class Database:
    """A pool of ``size`` connections to one PostgreSQL database."""

    def __init__(self, pool: Pool, url: str, size: int) -> None:
        self.pool = pool
        self.url = url
        self.size = size

    @classmethod
    async def connect(cls, url: str, *, size: int = 10) -> Database:
        """Open the pool; raise ``StoreUnavailable`` when the server does not answer."""
        try:
            pool = await asyncpg.create_pool(
                url,
                min_size=min(2, size),
                max_size=size,
                init=_init_connection,
                reset=_keep_session,
                timeout=CONNECT_TIMEOUT_SECONDS,
                command_timeout=30,
            )
        except UNAVAILABLE_ERRORS as exc:
            raise StoreUnavailable(f"cannot connect to the database: {exc}") from exc
        return cls(pool, url, size)

    async def close(self) -> None:
        await self.pool.close()

    async def _acquire(self) -> PoolConnectionProxy[asyncpg.Record]:
        """A pooled connection; any failure to get one means the database is unavailable
        (refused, gone, wrong database, out of connections, acquire timeout)."""
        try:
            return await self.pool.acquire(timeout=ACQUIRE_TIMEOUT_SECONDS)
        except _CONNECT_ERRORS as exc:
            raise StoreUnavailable() from exc

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[Connection]:
        """One connection, in one transaction, committed when the block exits normally."""
        conn = await self._acquire()
        try:
            async with conn.transaction():
                yield conn
        except UNAVAILABLE_ERRORS as exc:
            raise StoreUnavailable() from exc
        except _UNSTORABLE_TEXT_ERRORS as exc:
            raise UnstorableText() from exc
        finally:
            await self.pool.release(conn)

    @contextlib.asynccontextmanager
    async def connection(self) -> AsyncIterator[Connection]:
        """One connection in autocommit mode, for single-statement reads."""
        conn = await self._acquire()
        try:
            yield conn
        except UNAVAILABLE_ERRORS as exc:
            raise StoreUnavailable() from exc
        except _UNSTORABLE_TEXT_ERRORS as exc:
            raise UnstorableText() from exc
        finally:
            await self.pool.release(conn)

    async def ping(self) -> bool:
        """True when the database answers a trivial query within a second."""
        try:
            async with self.pool.acquire(timeout=1.0) as conn:
                return bool(await conn.fetchval(QUERIES["ping"], timeout=1.0))
        except _CONNECT_ERRORS:
            return False


def record_to_dict(record: asyncpg.Record) -> dict[str, Any]:
    return dict(record.items())
