"""The HTTP side of a shutdown: `/readyz` turns 503 and open streams that are not change-feed
watches (`logs?follow=true`) end with a last line saying why, so the server's drain is not held
for its whole grace period and no stream is cut mid-line.

`Service.stop` calls `begin` once, before telling the HTTP server to exit; a handler that
streams waits on `stopping(app)` beside its source.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from litestar import Litestar

STATE_KEY = "stopping"
_EVENT_KEY = "stopping_event"
#: The last line of a log stream the shutdown ended.
LOG_STREAM_END = (
    "[aicp] the server is shutting down; this stream ends here (follow again to resume)"
)


def install(app: Litestar) -> None:
    app.state[STATE_KEY] = False
    app.state[_EVENT_KEY] = asyncio.Event()


def begin(app: Litestar) -> None:
    """From now on the server is going away: readiness fails, streams end."""
    app.state[STATE_KEY] = True
    event: asyncio.Event = app.state[_EVENT_KEY]
    event.set()


def is_stopping(app: Litestar) -> bool:
    return bool(app.state.get(STATE_KEY))


def stopping(app: Litestar) -> asyncio.Event:
    """Set once `begin` was called."""
    event: asyncio.Event = app.state[_EVENT_KEY]
    return event
