"""The watch endpoint: a chunked 200 with one compact JSON event per line.

No resourceVersion (or "0") → ADDED for every current match first; "N" → exactly the changes
after N; too old → an in-stream ERROR 410 `Expired`, then EOF. `allowWatchBookmarks` → a
BOOKMARK whenever the stream has been idle for `bookmark_interval`; `timeoutSeconds` → clean
EOF. A watcher that falls `watch_queue_size` events behind is cut off with the 410 ERROR, like
the real watch cache; the `watch_drop_after_*` faults end streams early (plain EOF).
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass
from typing import TYPE_CHECKING

import msgspec
from aiohttp import web

from kubesim.app_state import STATE, AppState
from kubesim.model import ResourceType, StoreError, status_body
from kubesim.watching import Expired, Watcher

if TYPE_CHECKING:
    from kubesim.tables import Stored

_FLUSH_BYTES = 256 * 1024
_FAULT_POLL = 0.5


def _error_line(code: int, reason: str, message: str) -> bytes:
    body = status_body(code, reason, message)
    body.pop("details")
    return b'{"type":"ERROR","object":' + msgspec.json.encode(body) + b"}\n"


def _bookmark_line(rt: ResourceType, rv: int, initial_end: bool = False) -> bytes:
    meta: dict[str, object] = {"resourceVersion": str(rv)}
    if initial_end:
        meta["annotations"] = {"k8s.io/initial-events-end": "true"}
    obj = {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": meta}
    return b'{"type":"BOOKMARK","object":' + msgspec.json.encode(obj) + b"}\n"


def _added_lines(initial: list[Stored]) -> list[bytes]:
    return [b'{"type":"ADDED","object":' + e.raw + b"}\n" for e in initial]


async def _write_all(resp: web.StreamResponse, lines: list[bytes]) -> None:
    chunk: list[bytes] = []
    size = 0
    for line in lines:
        chunk.append(line)
        size += len(line)
        if size >= _FLUSH_BYTES:
            await resp.write(b"".join(chunk))
            chunk, size = [], 0
    if chunk:
        await resp.write(b"".join(chunk))


@dataclass(frozen=True)
class WatchParams:
    resource_version: str | None
    label_selector: str | None
    field_selector: str | None
    timeout_seconds: float | None
    bookmarks: bool
    send_initial_events: bool


async def serve_watch(
    request: web.Request, rt: ResourceType, namespace: str | None, params: WatchParams
) -> web.StreamResponse:
    state = request.app[STATE]
    store = state.store
    try:
        initial, watcher = store.open_watch(
            rt,
            namespace,
            resource_version=None if params.send_initial_events else params.resource_version,
            label_selector=params.label_selector,
            field_selector=params.field_selector,
            maxsize=state.watch_queue_size,
        )
    except StoreError as err:
        if err.code != 410:
            raise
        # Like the cacher: a 200 stream whose only event is the 410, then EOF.
        resp = await _start(request)
        await resp.write(_error_line(410, "Expired", err.message))
        return resp
    resp = await _start(request)
    state.http_watchers.add(watcher)
    try:
        await _stream(resp, state, rt, params, initial, watcher)
    except ConnectionResetError:
        pass  # the client went away
    finally:
        store.hub.unsubscribe(watcher)
        state.http_watchers.discard(watcher)
    return resp


async def _start(request: web.Request) -> web.StreamResponse:
    resp = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
    resp.enable_chunked_encoding()
    await resp.prepare(request)
    return resp


def _dropped(state: AppState, started: float, now: float, sent: int) -> bool:
    """The `watch_drop_after_*` faults, read afresh so they reach streams already open."""
    faults = state.faults
    if faults.watch_drop_after_events is not None and sent >= faults.watch_drop_after_events:
        return True
    after = faults.watch_drop_after_seconds
    return after is not None and now - started >= after


async def _stream(
    resp: web.StreamResponse,
    state: AppState,
    rt: ResourceType,
    params: WatchParams,
    initial: list[Stored],
    watcher: Watcher,
) -> None:
    store = state.store
    loop = asyncio.get_running_loop()
    started = watcher.last_write = loop.time()
    # Without timeoutSeconds the real server picks 30-60 minutes.
    timeout = params.timeout_seconds
    deadline = started + (timeout if timeout is not None else random.uniform(1800, 3600))
    lines = _added_lines(initial)
    drop_after = state.faults.watch_drop_after_events
    if drop_after is not None and len(lines) >= drop_after:
        await _write_all(resp, lines[:drop_after])
        return
    sent = len(lines)
    if params.send_initial_events:
        lines.append(_bookmark_line(rt, store.resource_version, initial_end=True))
    await _write_all(resp, lines)
    while not _dropped(state, started, loop.time(), sent):
        remaining = deadline - loop.time()
        if remaining <= 0:
            return
        # Wake at least every _FAULT_POLL seconds to notice faults set while idle.
        wait = min(remaining, _FAULT_POLL)
        if params.bookmarks:
            wait = min(wait, state.bookmark_interval)
        try:
            first = await asyncio.wait_for(watcher.get(), wait)
        except TimeoutError:
            idle = loop.time() - watcher.last_write
            if params.bookmarks and idle >= state.bookmark_interval and loop.time() < deadline:
                # Nothing is queued, so every change up to the store's RV that concerns this
                # watcher has been written: the bookmark may claim that RV.
                await resp.write(_bookmark_line(rt, store.resource_version))
                watcher.last_write = loop.time()
            continue
        except Expired as exc:
            await resp.write(_error_line(410, "Expired", str(exc)))
            return
        except EOFError:
            return
        # Write what is already queued in one chunk (one flush for a burst of events).
        limit = state.faults.watch_drop_after_events
        room = 1000 if limit is None else max(0, limit - sent - 1)
        batch = [first, *watcher.take(room)]
        await resp.write(b"".join(change.line(event_type) for event_type, change in batch))
        watcher.last_write = loop.time()
        sent += len(batch)
