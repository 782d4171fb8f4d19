"""The doorbell: the engine's channel `aicp_work` on the process's LISTEN connection
(`app.store.listener`; docs/DESIGN.md §2, §5).

NOTIFY only wakes; it never carries state. A payload is `kind:uuid`; the key goes to
`on_key` (which claims the lease and, if won, queues the key), and the worker re-reads the row.

Notifications sent while no connection was listening are gone for good, so every (re)connect
calls `on_connected`: the engine sweeps for unleased work and replays the resources it holds
that changed meanwhile. `listening` is set while the channel is heard (the engine's start waits
for it; the process supervisor bounds how long it may stay unset).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING
from uuid import UUID

from app.domain.kinds import KINDS
from app.store.leases import ResourceKey

if TYPE_CHECKING:
    from collections.abc import Callable

    from app.store.listener import Channel, Listener

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
    """Turns notifications on `aicp_work` into keys, from `open()` to `close()`."""

    def __init__(
        self,
        listener: Listener,
        on_key: Callable[[ResourceKey], None],
        on_connected: Callable[[], None],
        *,
        channel: str = CHANNEL,
    ) -> None:
        self.listener = listener
        self._on_key = on_key
        self._on_connected = on_connected
        self.channel = channel
        self.listening = asyncio.Event()
        self.connects = 0  # how often the channel was (re)LISTENed on since `open()`
        self._interest: Channel | None = None

    @property
    def backend_pid(self) -> int | None:
        """The LISTEN connection's server process (None while it is down)."""
        return self.listener.backend_pid if self.listening.is_set() else None

    @property
    def failures(self) -> int:
        """The LISTEN connection's consecutive failed attempts."""
        return self.listener.failures

    async def open(self) -> None:
        """Start hearing the channel (`listening` is set once it is LISTENed on)."""
        if self._interest is None:
            self._interest = await self.listener.listen(
                self.channel, self._notified, on_connected=self._connected, on_lost=self._lost
            )

    def close(self) -> None:
        """Stop hearing the channel; safe to call more than once."""
        if self._interest is not None:
            self._interest.close()
            self._interest = None
        self.listening.clear()

    def _connected(self) -> None:
        self.connects += 1
        self.listening.set()
        log.info("doorbell listening on %s (connect #%d)", self.channel, self.connects)
        # Anything rung while nobody listened is lost: let the sweep look now.
        self._on_connected()

    def _lost(self) -> None:
        self.listening.clear()

    def _notified(self, payload: str) -> None:
        key = parse_payload(payload)
        if key is None:
            log.warning("ignoring doorbell with malformed payload %r", payload)
            return
        self._on_key(key)
