"""The process's one LISTEN connection: every component hears its channels on it.

NOTIFY only wakes; it never carries state. The doorbell (`aicp_work`, `app.reconcile.doorbell`),
the token cache (`aicp_tokens`, `app.store.token_cache`) and the change feed of the live streams
(`aicp_watch` and `aicp_tokens`, `app.streams.changefeed`) each `listen` to their channels on the
one `Listener` the composition root (`app.main`) starts first; none opens a connection of its own
and none knows of another.

The connection is not from the pool: a pooled connection could be handed to a request, and a
listener only hears notifications between its own transactions. It is watched two ways: a
termination callback (the server closed it, e.g. `pg_terminate_backend`) and a probe query every
`probe_interval` seconds (a silently dead network path: a notification may then go unheard for
up to `probe_interval + probe_timeout`, 2 s by default, before the loss is noticed). When it is
lost, every channel's `on_lost` is called at once and the loop reconnects with the backoff
(`app.backoff`), whatever the error was. Notifications sent while no connection was listening
are gone for good, so after every (re)connect, once every channel is LISTENed on, each
channel's `on_connected` is called: the doorbell sweeps and replays what it holds, the token
cache starts empty, the change feed reads the log.

A channel listened to while the connection is up is LISTENed on at once (its `on_connected`
follows); one listened to while it is down, at the next connect. `Channel.close()` stops the
calls (the LISTEN itself ends with the connection).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import asyncpg

from app.backoff import Backoff
from app.store.queries import QUERIES

if TYPE_CHECKING:
    from collections.abc import Callable

log = logging.getLogger(__name__)

#: What the connection's server process is called in `pg_stat_activity` (and the instance id).
APPLICATION_NAME = "aicp listener"


def _nothing() -> None:
    return None


@dataclass(eq=False)
class Channel:
    """One component's interest in one channel (see `Listener.listen`)."""

    listener: Listener
    name: str
    on_payload: Callable[[str], None]
    on_connected: Callable[[], None]
    on_lost: Callable[[], None]

    def close(self) -> None:
        """No more calls for this interest; safe to call more than once."""
        self.listener.forget(self)


class Listener:
    """Keeps one LISTEN connection alive and hands each notification to its channel's
    listeners (see the module docstring)."""

    def __init__(
        self,
        dsn: str,
        *,
        application_name: str = APPLICATION_NAME,
        probe_interval: float = 1.0,
        probe_timeout: float = 1.0,
        connect_timeout: float = 4.0,
        backoff: Backoff | None = None,
    ) -> None:
        self.dsn = dsn  # read at every (re)connect
        self.application_name = application_name[:63]
        self.probe_interval = probe_interval
        self.probe_timeout = probe_timeout
        self.connect_timeout = connect_timeout
        # Capped low: while the connection is down, doorbells of held resources go unheard and
        # every project token is read from the database.
        self._backoff = backoff or Backoff(0.1, 2.0)
        self.listening = asyncio.Event()
        self.connects = 0
        self.failures = 0  # consecutive, reset once a connection listens
        self.backend_pid: int | None = None
        self._channels: dict[str, list[Channel]] = {}
        self._conn: asyncpg.Connection[Any] | None = None
        self._lost: asyncio.Event | None = None
        self._setup = asyncio.Lock()  # one LISTEN set-up at a time: the loop's or a listen's
        self.task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Run the loop (`run`) in a task of its own; it connects in the background."""
        self.task = asyncio.create_task(self.run(), name="listener")

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task

    async def listen(
        self,
        channel: str,
        on_payload: Callable[[str], None],
        *,
        on_connected: Callable[[], None] = _nothing,
        on_lost: Callable[[], None] = _nothing,
    ) -> Channel:
        """Hear `channel`: `on_payload(payload)` per notification, `on_connected()` once it is
        LISTENed on (after every (re)connect: what was sent meanwhile is lost), `on_lost()`
        when the connection is lost."""
        interest = Channel(self, channel, on_payload, on_connected, on_lost)
        async with self._setup:
            known = channel in self._channels
            self._channels.setdefault(channel, []).append(interest)
            conn = self._conn
            if conn is None or not self.listening.is_set():
                return interest  # the next connect LISTENs on it
            if not known:
                try:
                    await asyncio.wait_for(
                        conn.add_listener(channel, self._notified), self.connect_timeout
                    )
                except Exception:  # the connection is going: the loop reconnects
                    log.warning("LISTEN %s failed; reconnecting", channel, exc_info=True)
                    self._drop_connection()
                    return interest
        on_connected()
        return interest

    def forget(self, interest: Channel) -> None:
        listeners = self._channels.get(interest.name, [])
        if interest in listeners:
            listeners.remove(interest)

    async def run(self) -> None:
        """Listen forever, reconnecting after every loss.

        Every failure of a connection attempt or of a live connection ends in the same place,
        whatever its class (OSError, TimeoutError, any asyncpg error, including the ones a
        connection cut again right after it reconnected raises from `add_listener`): a warning
        with the count of consecutive failures, and a jittered backoff before the next try.
        Only cancellation ends the loop.
        """
        self.failures = 0
        while True:
            conn: asyncpg.Connection[Any] | None = None
            try:
                conn = await asyncpg.connect(
                    self.dsn,
                    timeout=self.connect_timeout,
                    server_settings={"application_name": self.application_name},
                )
                await self._listen(conn)
                cause = "closed by the server"
            except Exception as exc:
                cause = f"{type(exc).__name__}: {exc}"
            finally:
                self._lose()
                if conn is not None:
                    await _close(conn)
            self.failures += 1
            delay = self._backoff.delay(self.failures)
            log.warning(
                "LISTEN connection lost or refused (%s); reconnecting in %.2fs "
                "(%d consecutive failures)",
                cause,
                delay,
                self.failures,
            )
            await asyncio.sleep(delay)

    async def _listen(self, conn: asyncpg.Connection[Any]) -> None:
        """LISTEN on every channel on `conn`, then watch it until it is terminated or a probe
        fails."""
        lost = self._lost = asyncio.Event()
        conn.add_termination_listener(lambda _conn: lost.set())
        async with self._setup:
            for channel in list(self._channels):
                # Bounded: a listen() waiting on the set-up never waits for long.
                await asyncio.wait_for(
                    conn.add_listener(channel, self._notified), self.connect_timeout
                )
            self._conn = conn
            self.backend_pid = conn.get_server_pid()
            self.connects += 1
            self.failures = 0
            self.listening.set()
            interests = [i for listeners in self._channels.values() for i in listeners]
        log.info("listening on %s (connect #%d)", ", ".join(sorted(self._channels)), self.connects)
        for interest in interests:
            interest.on_connected()
        while not lost.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(lost.wait(), self.probe_interval)
                break
            await conn.fetchval(QUERIES["ping"], timeout=self.probe_timeout)

    def _lose(self) -> None:
        """The connection is gone (or never came): tell every channel's listeners."""
        was_listening = self.listening.is_set()
        self.listening.clear()
        self.backend_pid = None
        self._conn = None
        if was_listening:
            for listeners in list(self._channels.values()):
                for interest in list(listeners):
                    interest.on_lost()

    def _drop_connection(self) -> None:
        if self._lost is not None:
            self._lost.set()

    def _notified(self, _conn: object, _pid: int, channel: str, payload: object) -> None:
        for interest in list(self._channels.get(channel, ())):
            interest.on_payload(str(payload))


async def _close(conn: asyncpg.Connection[Any]) -> None:
    if conn.is_closed():
        return
    try:
        await asyncio.wait_for(conn.close(), 2.0)
    except Exception:  # already broken: drop it without the goodbye
        conn.terminate()
