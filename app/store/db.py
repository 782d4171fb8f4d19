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
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeAlias

import asyncpg
import msgspec

from app.backoff import Backoff
from app.domain.errors import StoreUnavailable, UnstorableText
from app.store.queries import QUERIES

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator

    from asyncpg.pool import PoolConnectionProxy

    # Request code gets pooled connections (proxies); dedicated ones (LISTEN) are plain.
    Connection: TypeAlias = PoolConnectionProxy[asyncpg.Record] | asyncpg.Connection[asyncpg.Record]
    Pool: TypeAlias = asyncpg.Pool[asyncpg.Record]
else:  # asyncpg's classes are not subscriptable at runtime
    Connection = asyncpg.Connection
    Pool = asyncpg.Pool

#: A row as a query returns it; outside `app.store` code names it so, never asyncpg (the
#: import-linter contract "Only the store speaks to PostgreSQL").
Row: TypeAlias = asyncpg.Record

# Errors that mean "the database is not there (or not now)" rather than "the statement is
# wrong": the connection was refused or cut (asyncpg's `InternalClientError` when the protocol
# broke mid-message), or a bound below (lock wait, statement, idle transaction) was reached.
# asyncpg's `InterfaceError` is one too when a connection was closed under a transaction — but
# it also means caller bugs (a wrong argument count), so `is_unavailable` looks at its message.
# Every refusal the server answers to a new connection is here: 57P03 (`CannotConnectNowError`:
# "the database system is starting up" / "is shutting down"), 53300 (`TooManyConnectionsError`:
# the server's or the role's connection limit) and 55000 (`ObjectNotInPrerequisiteStateError`:
# 'database "…" is not currently accepting connections', as while a replica is promoted). None
# of aicp's statements raises 55000 (no sequence `currval`, no concurrent refresh), so wherever
# it comes from it means "not now".
UNAVAILABLE_ERRORS: tuple[type[BaseException], ...] = (
    OSError,
    asyncio.TimeoutError,
    asyncpg.PostgresConnectionError,
    asyncpg.CannotConnectNowError,
    asyncpg.TooManyConnectionsError,
    asyncpg.ObjectNotInPrerequisiteStateError,
    asyncpg.ConnectionDoesNotExistError,
    asyncpg.AdminShutdownError,
    asyncpg.InternalClientError,
    asyncpg.LockNotAvailableError,
    asyncpg.QueryCanceledError,
    asyncpg.IdleInTransactionSessionTimeoutError,
)

_MAYBE_UNAVAILABLE: tuple[type[BaseException], ...] = (*UNAVAILABLE_ERRORS, asyncpg.InterfaceError)
_CLOSED_MESSAGES = ("connection is closed", "connection was closed", "pool is closing")


def is_unavailable(exc: BaseException) -> bool:
    """True when `exc` says the database is unavailable (see `UNAVAILABLE_ERRORS`)."""
    if isinstance(exc, UNAVAILABLE_ERRORS):
        return True
    return isinstance(exc, asyncpg.InterfaceError) and any(
        text in str(exc) for text in _CLOSED_MESSAGES
    )


# While connecting, a server error (database does not exist, auth failed, too many clients)
# also means "unavailable": no statement of ours has run yet.
_CONNECT_ERRORS: tuple[type[BaseException], ...] = (*UNAVAILABLE_ERRORS, asyncpg.PostgresError)

# Text PostgreSQL cannot store (NUL, invalid for the encoding): the caller's input, not a bug.
_UNSTORABLE_TEXT_ERRORS: tuple[type[BaseException], ...] = (
    asyncpg.CharacterNotInRepertoireError,
    asyncpg.UntranslatableCharacterError,
)


@contextlib.contextmanager
def _store_errors() -> Iterator[None]:
    """A statement's failure as the caller should see it: `StoreUnavailable` when the database
    is unavailable, `UnstorableText` for text it cannot store; anything else as raised."""
    try:
        yield
    except _MAYBE_UNAVAILABLE as exc:
        if not is_unavailable(exc):
            raise
        raise StoreUnavailable() from exc
    except _UNSTORABLE_TEXT_ERRORS as exc:
        raise UnstorableText() from exc


log = logging.getLogger(__name__)

ACQUIRE_TIMEOUT_SECONDS = 5.0
CONNECT_TIMEOUT_SECONDS = 5.0


@dataclass(frozen=True, slots=True)
class SessionBounds:
    """How long any one session may wait or sit (set on every connection as server settings).

    A replica frozen inside a transaction (a long GC pause, a stopped VM, SIGSTOP) keeps its row
    locks until the server ends its session: `idle_in_transaction` bounds that, and must stay
    well below the lease TTL so a frozen owner's transaction is rolled back before a peer could
    take its leases over. `lock` bounds how long a healthy replica (or an API request) queues
    behind such locks: past it the statement fails (503 for a request, a retry for a step).
    TCP keepalives let the server notice a client whose host vanished.
    """

    idle_in_transaction: float = 5.0
    lock: float = 3.0
    statement: float = 30.0
    keepalive_idle: int = 10
    keepalive_interval: int = 5
    keepalive_count: int = 3

    def server_settings(self) -> dict[str, str]:
        return {
            "idle_in_transaction_session_timeout": str(int(self.idle_in_transaction * 1000)),
            "lock_timeout": str(int(self.lock * 1000)),
            "statement_timeout": str(int(self.statement * 1000)),
            "tcp_keepalives_idle": str(self.keepalive_idle),
            "tcp_keepalives_interval": str(self.keepalive_interval),
            "tcp_keepalives_count": str(self.keepalive_count),
        }


DEFAULT_BOUNDS = SessionBounds()


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
    async def connect(
        cls,
        url: str,
        *,
        size: int = 10,
        bounds: SessionBounds = DEFAULT_BOUNDS,
        retry_for: float = 0.0,
    ) -> Database:
        """Open the pool; raise ``StoreUnavailable`` when the server does not answer — at once,
        or after retrying with backoff for up to ``retry_for`` seconds (a process starting
        while the database restarts should wait for it, not exit)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + retry_for
        attempt = 0
        backoff = Backoff(0.2, 2.0)
        while True:
            try:
                pool = await asyncpg.create_pool(
                    url,
                    min_size=min(2, size),
                    max_size=size,
                    init=_init_connection,
                    reset=_keep_session,
                    timeout=CONNECT_TIMEOUT_SECONDS,
                    command_timeout=bounds.statement + 5,
                    server_settings=bounds.server_settings(),
                )
            except UNAVAILABLE_ERRORS as exc:
                attempt += 1
                delay = backoff.delay(attempt)
                if loop.time() + delay > deadline:
                    raise StoreUnavailable(f"cannot connect to the database: {exc}") from exc
                log.warning(
                    "cannot connect to the database (%s: %s; attempt %d); retrying in %.1fs",
                    type(exc).__name__,
                    exc,
                    attempt,
                    delay,
                )
                await asyncio.sleep(delay)
                continue
            return cls(pool, url, size)

    async def close(self) -> None:
        await self.pool.close()

    async def _acquire(self) -> PoolConnectionProxy[asyncpg.Record]:
        """A pooled connection; any failure to get one means the database is unavailable
        (refused, gone, wrong database, out of connections, acquire timeout)."""
        try:
            return await self.pool.acquire(timeout=ACQUIRE_TIMEOUT_SECONDS)
        except TimeoutError as exc:
            if self.pool.get_size() >= self.pool.get_max_size():
                # every connection was open and stayed in use: overload, not an outage
                raise StoreUnavailable(
                    f"Every database connection of this replica stayed busy for "
                    f"{ACQUIRE_TIMEOUT_SECONDS:g}s (it is overloaded); retry shortly."
                ) from exc
            raise StoreUnavailable() from exc
        except _CONNECT_ERRORS as exc:
            raise StoreUnavailable() from exc

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[Connection]:
        """One connection, in one transaction, committed when the block exits normally."""
        conn = await self._acquire()
        try:
            with _store_errors():
                async with conn.transaction():
                    yield conn
        finally:
            await self._release(conn)

    @contextlib.asynccontextmanager
    async def connection(self) -> AsyncIterator[Connection]:
        """One connection in autocommit mode, for single-statement reads."""
        conn = await self._acquire()
        try:
            with _store_errors():
                yield conn
        finally:
            await self._release(conn)

    async def _release(self, conn: PoolConnectionProxy[asyncpg.Record]) -> None:
        """Back to the pool; a connection that broke is discarded by asyncpg, whatever it raises."""
        try:
            await self.pool.release(conn)
        except Exception as exc:
            if not is_unavailable(exc):
                raise

    async def ping(self) -> bool:
        """True when the database answers a trivial query within a second."""
        try:
            async with self.pool.acquire(timeout=1.0) as conn:
                return bool(await conn.fetchval(QUERIES["ping"], timeout=1.0))
        except _CONNECT_ERRORS:
            return False


class ReservedPool:
    """A few connections of their own for the tasks whose lateness costs leases (renewal,
    claims, the sweep), beside the shared pool that API requests and steps queue for.

    Under load the shared pool is always busy: a renewal queued behind it can arrive after the
    leases' local deadlines (the replica then stops working on all it holds), and a sweep
    queued behind it takes a dead peer's leases over late. Size it to the number of tasks that
    use it, each with one statement in flight at most, so none of them ever waits. Opened on
    first use; while it cannot be opened, `get` hands out the shared pool (and tries again
    next time).
    """

    def __init__(self, shared: Database, size: int) -> None:
        self._shared = shared
        self._size = size
        self._own: Database | None = None
        self._closed = False

    @property
    def shared(self) -> Database:
        """The shared pool: for statements of these tasks' callers (a worker releasing a lease),
        which must not take the reserved connections from the tasks they are sized for."""
        return self._shared

    async def get(self) -> Database:
        if self._own is None and not self._closed:
            try:
                own = await Database.connect(self._shared.url, size=self._size)
            except StoreUnavailable as exc:
                log.warning("reserved connections not open, using the shared pool: %s", exc)
                return self._shared
            if self._own is None and not self._closed:
                self._own = own
            else:  # opened by another task meanwhile, or closed
                await own.close()
        return self._own or self._shared

    async def close(self) -> None:
        self._closed = True
        if self._own is not None:
            own, self._own = self._own, None
            await own.close()
