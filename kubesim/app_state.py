"""What the HTTP handlers share: the store, the clock, fault settings, counters and knobs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from aiohttp import web

from kubesim.faults import Faults
from kubesim.stats import Stats

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from kubesim.clock import Clock
    from kubesim.controllers.quota import QuotaBook
    from kubesim.store import Store
    from kubesim.watching import Watcher


@dataclass
class AppState:
    store: Store
    clock: Clock
    faults: Faults = field(default_factory=Faults)
    stats: Stats = field(default_factory=Stats)
    bookmark_interval: float = 10.0  # seconds between BOOKMARKs (real cacher: about 60)
    watch_queue_size: int = 10_000  # events a watcher may fall behind before its 410
    # Set by the Cluster: close every connection, refuse for T seconds, listen again.
    restart: Callable[[float], Awaitable[None]] | None = None
    http_watchers: set[Watcher] = field(default_factory=set)
    # Kueue's queues while the controllers run (the visibility API reads them); else None.
    queues: QuotaBook | None = None


STATE: web.AppKey[AppState] = web.AppKey("kubesim_state", AppState)
