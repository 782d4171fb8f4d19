"""The doorbell: a dedicated connection LISTENing on `aicp_work` (docs/DESIGN.md §2, §5).

NOTIFY only wakes; it never carries state. A payload is `kind:uuid`; the key goes to
`on_key` (which claims the lease and, if won, queues the key), and the worker re-reads the row.

The connection is not from the pool: a pooled connection could be handed to a request, and a
listener only hears notifications between its own transactions. It is watched two ways: a
termination callback (the server closed it, e.g. `pg_terminate_backend`) and a probe query every
`probe_interval` seconds (a silently dead network path). When it is lost, the loop reconnects
with jittered exponential backoff, whatever the error was. Notifications sent while no
connection was listening are gone for good, so every (re)connect calls `on_connected`: the
engine sweeps for unleased work and replays the resources it holds that changed meanwhile.

Other components hear their own channels on this connection (`also_listen`, before `run`), e.g.
the change feed of the live streams on `aicp_watch`; only the token cache keeps its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING, Any
from uuid import UUID

import asyncpg

from app.backoff import Backoff
from app.domain.kinds import KINDS
from app.store.leases import ResourceKey
from app.store.queries import QUERIES

if TYPE_CHECKING:
    from collections.abc import Callable

log = logging.getLogger(__name__)

CHANNEL = "aicp_work"


def parse_payload(payload: str) -> ResourceKey | None:
    """`workload:6f1c…` → ResourceKey; None (logged by the caller) for anything else."""
    kind, sep, raw_id = payload.partition(":")
    if not sep or kind not in KINDS:
        return None
    try:
        return ResourceKey(kind, UUID(raw_id))
    except ValueError:
        return None


def _relay(on_payload: Callable[[str], None]) -> Callable[[object, int, str, object], None]:
    def listener(_conn: object, _pid: int, _channel: str, payload: object) -> None:
        on_payload(str(payload))

    return listener


class Doorbell:
    """Keeps one LISTEN connection alive and turns notifications into keys."""

    def __init__(
        self,
        dsn: str,
        on_key: Callable[[ResourceKey], None],
        on_connected: Callable[[], None],
        *,
        channel: str = CHANNEL,
        probe_interval: float = 5.0,
        probe_timeout: float = 2.0,
        backoff: Backoff | None = None,
        application_name: str = "aicp doorbell",
    ) -> None:
        self._dsn = dsn
        self._on_key = on_key
        self._on_connected = on_connected
        self.channel = channel
        self.probe_interval = probe_interval
        self.probe_timeout = probe_timeout
        # Capped low: while the connection is down, doorbells of held resources go unheard.
        self._backoff = backoff or Backoff(0.1, 2.0)
        self.application_name = application_name  # how pg_stat_activity names the listener
        self.listening = asyncio.Event()
        self.connects = 0
        self.failures = 0  # consecutive, reset once a connection listens
        self.backend_pid: int | None = None
        self._others: dict[str, Callable[[str], None]] = {}
        self._reconnected: list[Callable[[], None]] = []

    def also_listen(
        self, channel: str, on_payload: Callable[[str], None], on_connected: Callable[[], None]
    ) -> None:
        """Hear `channel` on this connection too: `on_payload(payload)` per notification, and
        `on_connected()` after every (re)connect (what was sent meanwhile is lost)."""
        self._others[channel] = on_payload
        self._reconnected.append(on_connected)

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
                    self._dsn,
                    timeout=self.probe_timeout * 2,
                    server_settings={"application_name": self.application_name},
                )
                await self._listen(conn)
                cause = "closed by the server"
            except Exception as exc:
                cause = f"{type(exc).__name__}: {exc}"
            finally:
                self.listening.clear()
                self.backend_pid = None
                if conn is not None:
                    await self._close(conn)
            self.failures += 1
            delay = self._backoff.delay(self.failures)
            log.warning(
                "doorbell connection lost or refused (%s); reconnecting in %.2fs "
                "(%d consecutive failures)",
                cause,
                delay,
                self.failures,
            )
            await asyncio.sleep(delay)

    async def _listen(self, conn: asyncpg.Connection[Any]) -> None:
        """LISTEN on `conn` until it is terminated or a probe fails."""
        lost = asyncio.Event()
        conn.add_termination_listener(lambda _conn: lost.set())
        await conn.add_listener(self.channel, self._notified)
        for channel, on_payload in self._others.items():
            await conn.add_listener(channel, _relay(on_payload))
        self.backend_pid = conn.get_server_pid()
        self.connects += 1
        self.failures = 0
        self.listening.set()
        log.info("doorbell listening on %s (connect #%d)", self.channel, self.connects)
        # Anything rung while nobody listened is lost: let the sweep look now.
        self._on_connected()
        for reconnected in self._reconnected:
            reconnected()
        while not lost.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(lost.wait(), self.probe_interval)
                break
            await conn.fetchval(QUERIES["ping"], timeout=self.probe_timeout)

    def _notified(self, _conn: object, _pid: int, _channel: str, payload: object) -> None:
        key = parse_payload(str(payload))
        if key is None:
            log.warning("ignoring doorbell with malformed payload %r", payload)
            return
        self._on_key(key)

    @staticmethod
    async def _close(conn: asyncpg.Connection[Any]) -> None:
        if conn.is_closed():
            return
        try:
            await asyncio.wait_for(conn.close(), 2.0)
        except Exception:  # already broken: drop it without the goodbye
            conn.terminate()
