"""The doorbell: a dedicated connection LISTENing on `aicp_work` (docs/DESIGN.md §2, §5).

NOTIFY only wakes; it never carries state. A payload is `kind:uuid`; the key goes to
`on_key` (which claims the lease and, if won, queues the key), and the worker re-reads the row.

The connection is not from the pool: a pooled connection could be handed to a request, and a
listener only hears notifications between its own transactions. It is watched two ways: a
termination callback (the server closed it, e.g. `pg_terminate_backend`) and a probe query every
`probe_interval` seconds (a silently dead network path). When it is lost, the loop reconnects
with jittered exponential backoff. Notifications sent while no connection was listening are gone
for good, so every (re)connect calls `on_connected`, which runs a sweep.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING, Any
from uuid import UUID

import asyncpg

from app.domain.kinds import KINDS
from app.reconcile.queue import Backoff
from app.store.leases import ResourceKey

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
    ) -> None:
        self._dsn = dsn
        self._on_key = on_key
        self._on_connected = on_connected
        self.channel = channel
        self.probe_interval = probe_interval
        self.probe_timeout = probe_timeout
        self._backoff = backoff or Backoff(base=0.1, cap=5.0)
        self.listening = asyncio.Event()
        self.connects = 0
        self.backend_pid: int | None = None

    async def run(self) -> None:
        """Listen forever, reconnecting after every loss."""
        failures = 0
        while True:
            try:
                conn = await asyncpg.connect(self._dsn, timeout=self.probe_timeout * 2)
            except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
                failures += 1
                delay = self._backoff.delay(failures)
                log.warning("doorbell cannot connect (%s); retrying in %.2fs", exc, delay)
                await asyncio.sleep(delay)
                continue
            try:
                await self._listen(conn)
                failures = 0
            except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
                log.warning("doorbell connection lost: %s", exc)
            finally:
                self.listening.clear()
                self.backend_pid = None
                await self._close(conn)
            failures += 1
            await asyncio.sleep(self._backoff.delay(failures))

    async def _listen(self, conn: asyncpg.Connection[Any]) -> None:
        """LISTEN on `conn` until it is terminated or a probe fails."""
        lost = asyncio.Event()
        conn.add_termination_listener(lambda _conn: lost.set())
        await conn.add_listener(self.channel, self._notified)
        self.backend_pid = conn.get_server_pid()
        self.connects += 1
        self.listening.set()
        log.info("doorbell listening on %s (connect #%d)", self.channel, self.connects)
        # Anything rung while nobody listened is lost: let the sweep look now.
        self._on_connected()
        while not lost.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(lost.wait(), self.probe_interval)
                break
            await conn.fetchval("SELECT 1", timeout=self.probe_timeout)
        log.warning("doorbell connection closed by the server")

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
        except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError):
            conn.terminate()
