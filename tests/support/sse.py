"""Reading aicp's Server-Sent Event streams in tests: events in order, with deadlines."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
from httpx_sse import EventSource, ServerSentEvent


@dataclass
class Event:
    id: str | None
    type: str
    object: dict[str, Any]

    @property
    def state(self) -> str:
        state: str = self.object["status"]["state"]
        return state


class Stream:
    """An open stream, read in the background: `next()` returns its next event (heartbeats
    only move `last_id`), waiting at most `timeout`; a timeout leaves the stream usable."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self.last_id: str | None = None
        self.heartbeats = 0
        self.ended = False
        self.seen: list[Event] = []
        self._items: asyncio.Queue[ServerSentEvent | None] = asyncio.Queue()
        self._pump = asyncio.create_task(self._read())

    async def _read(self) -> None:
        try:
            async for sse in EventSource(self.response).aiter_sse():
                await self._items.put(sse)
        except httpx.HTTPError:
            return  # the connection broke: the stream has ended (the finally says so)
        finally:
            await self._items.put(None)

    async def close(self) -> None:
        self._pump.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._pump

    async def _next_sse(self, timeout: float) -> ServerSentEvent | None:
        sse = await asyncio.wait_for(self._items.get(), timeout)
        if sse is None:
            self.ended = True
            await self._items.put(None)  # stays ended
            return None
        if sse.id:
            self.last_id = sse.id
        return sse

    def _keep(self, sse: ServerSentEvent, *, checked: bool = False) -> Event:
        """The event `sse` carries, kept in `seen` (if `checked`, its body's `type` must be
        the SSE event's name)."""
        body = json.loads(sse.data)
        assert not checked or body["type"] == sse.event
        event = Event(sse.id or None, sse.event, body["object"])
        self.seen.append(event)
        return event

    async def _event_or_heartbeat(self, timeout: float, *, checked: bool = False) -> Event | None:
        """The next event (kept in `seen`), or None for a heartbeat (counted); EOFError once
        the stream has ended."""
        sse = await self._next_sse(timeout)
        if sse is None:
            raise EOFError("the stream ended")
        if not sse.data:
            self.heartbeats += 1
            return None
        return self._keep(sse, checked=checked)

    async def next(self, timeout: float = 10.0) -> Event:
        async with asyncio.timeout(timeout):
            while True:
                event = await self._event_or_heartbeat(timeout, checked=True)
                if event is not None:
                    return event

    async def until(self, predicate: Any, timeout: float = 20.0) -> list[Event]:
        """Events until (and including) the first for which `predicate(event)` holds."""
        got: list[Event] = []
        async with asyncio.timeout(timeout):
            while True:
                event = await self.next(timeout)
                got.append(event)
                if predicate(event):
                    return got

    async def heartbeat(self, timeout: float = 10.0) -> None:
        """Wait for the next heartbeat (comment block); events meanwhile go to `seen`."""
        async with asyncio.timeout(timeout):
            while True:
                if await self._event_or_heartbeat(timeout) is None:
                    return

    async def end(self, timeout: float = 5.0) -> None:
        """Read until the server ends the stream (events meanwhile are kept in `seen`)."""
        async with asyncio.timeout(timeout):
            while (sse := await self._next_sse(timeout)) is not None:
                if sse.data:
                    self._keep(sse)


@contextlib.asynccontextmanager
async def open_stream(
    client: httpx.AsyncClient,
    path: str,
    *,
    last_event_id: str | None = None,
    params: dict[str, Any] | None = None,
) -> AsyncIterator[Stream]:
    headers = {"Accept": "text/event-stream"}
    if last_event_id is not None:
        headers["Last-Event-ID"] = last_event_id
    async with client.stream(
        "GET", path, headers=headers, params=params, timeout=httpx.Timeout(30, read=None)
    ) as response:
        if response.status_code != 200:
            await response.aread()
            raise AssertionError(f"{response.status_code}: {response.text}")
        assert response.headers["content-type"].startswith("text/event-stream")
        stream = Stream(response)
        try:
            yield stream
        finally:
            await stream.close()


async def status_of(
    client: httpx.AsyncClient, path: str, *, last_event_id: str | None = None
) -> httpx.Response:
    """The answer to opening a stream that is expected to be refused (read whole)."""
    headers = {"Last-Event-ID": last_event_id} if last_event_id is not None else {}
    async with client.stream("GET", path, headers=headers) as response:
        await response.aread()
        return response
