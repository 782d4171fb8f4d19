"""The REST client: httpx, the bearer token, problems turned into `ApiError`, and the live
streams (Server-Sent Events via httpx-sse) followed across dropped connections.

Only the public API is used (`/api/v1/...`); nothing here knows the server's code.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import httpx
from httpx_sse import EventSource

from aicp_cli.errors import ApiError, CliError, Unreachable

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from aicp_cli.config import Context

API = "/api/v1"
#: The server sends a heartbeat every 15 s: a stream silent for this long is dead.
STREAM_READ_TIMEOUT = 45.0
#: A stream that cannot be resumed is retried for this long (a rolling restart of the
#: server, a load balancer finding the next replica) before the watch gives up.
RECONNECT_FOR = 90.0
#: The longest pause between two attempts (the backoff doubles from 0.4 s up to it).
RECONNECT_BACKOFF_MAX = 5.0
#: Answers that mean "not now" (a replica draining, a proxy without a backend): retried.
RETRIED_STATUSES = (502, 503, 504)


@dataclass
class Event:
    """One change on a stream: ADDED, MODIFIED or DELETED, and the workload as GET shows it."""

    type: str
    object: dict[str, Any]
    id: str | None


class Client:
    def __init__(self, context: Context, *, timeout: float = 30.0) -> None:
        self.context = context
        self.http = httpx.Client(
            base_url=context.url,
            headers={
                "Authorization": f"Bearer {context.token}",
                "User-Agent": "aicp-cli",
            },
            timeout=timeout,
        )

    def close(self) -> None:
        self.http.close()

    # -- plain requests ---------------------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        allow: tuple[int, ...] = (),
    ) -> httpx.Response:
        """One call; a problem answer raises `ApiError` unless its status is in `allow`."""
        try:
            response = self.http.request(
                method,
                API + path,
                json=body,
                params={k: v for k, v in (params or {}).items() if v is not None},
                headers=headers,
            )
        except httpx.HTTPError as exc:
            raise self._unreachable(exc) from exc
        if response.status_code >= 400 and response.status_code not in allow:
            raise problem_of(response)
        return response

    def get(self, path: str, **params: Any) -> Any:
        return self.request("GET", path, params=params).json()

    def items(self, path: str, **params: Any) -> list[dict[str, Any]]:
        """Every item of a paged list (following `next_cursor`)."""
        found: list[dict[str, Any]] = []
        cursor = None
        while True:
            page = self.get(path, limit=500, cursor=cursor, **params)
            found.extend(page["items"])
            cursor = page.get("next_cursor")
            if not cursor:
                return found

    def exists(self, path: str) -> dict[str, Any] | None:
        response = self.request("GET", path, allow=(404,))
        return None if response.status_code == 404 else response.json()

    def _unreachable(self, exc: httpx.HTTPError) -> Unreachable:
        reason = str(exc) or type(exc).__name__
        if isinstance(exc, httpx.ConnectError):
            reason = f"connection failed ({_root_cause(exc)})"
        elif isinstance(exc, httpx.TimeoutException):
            reason = "no answer in time"
        return Unreachable(f"cannot reach aicp at {self.context.url}: {reason}")

    # -- streams ------------------------------------------------------------------------------

    def stream_text(self, path: str, params: dict[str, Any]) -> Iterator[str]:
        """A `text/plain` streaming answer (followed logs), chunk by chunk."""
        timeout = httpx.Timeout(30.0, read=None)
        try:
            with self.http.stream(
                "GET", API + path, params=_clean(params), timeout=timeout
            ) as response:
                if response.status_code >= 400:
                    response.read()
                    raise problem_of(response)
                yield from response.iter_text()
        except httpx.HTTPError as exc:
            raise self._unreachable(exc) from exc

    def watch(
        self,
        path: str,
        params: dict[str, Any] | None = None,
        *,
        on_reconnect: Callable[[str], None] | None = None,
    ) -> Iterator[Event]:
        """Every event of a stream, resuming with Last-Event-ID after a dropped connection
        (nothing missed, nothing repeated); from scratch when the server no longer has the
        changes after it (410). Ends when the server ends the stream cleanly after DELETED
        (a watch of one resource); any other end is a dropped connection and is resumed, with a
        backoff, for up to `RECONNECT_FOR` seconds of failing attempts."""
        last_id: str | None = None
        outage = Outage(on_reconnect)
        while True:
            headers = {"Accept": "text/event-stream"}
            if last_id is not None:
                headers["Last-Event-ID"] = last_id
            ended_by_delete = False
            failure: CliError | None = None
            try:
                with self.http.stream(
                    "GET",
                    API + path,
                    params=_clean(params or {}),
                    headers=headers,
                    timeout=httpx.Timeout(30.0, read=STREAM_READ_TIMEOUT),
                ) as response:
                    if response.status_code == 410 and last_id is not None:
                        last_id = None
                        outage.say("the server's history is gone; starting again")
                        continue
                    if response.status_code >= 400:
                        response.read()
                        if response.status_code not in RETRIED_STATUSES:
                            raise problem_of(response)
                        failure = problem_of(response)
                    else:
                        outage.over()
                        for sse in EventSource(response).iter_sse():
                            if sse.id:
                                last_id = sse.id
                            if not sse.data:
                                continue  # a heartbeat
                            body = json.loads(sse.data)
                            event = Event(sse.event, body["object"], sse.id or None)
                            ended_by_delete = event.type == "DELETED"
                            yield event
                if ended_by_delete and "/watch" in path:
                    return
            except httpx.HTTPError as exc:
                failure = self._unreachable(exc)
            outage.wait(failure)


class Outage:
    """A stream's time without a server: how long to wait before the next attempt (a doubling
    backoff), when to give up (`RECONNECT_FOR` of failed attempts; at once if the server never
    answered), and one note when it starts and one when it is over."""

    def __init__(self, on_reconnect: Callable[[str], None] | None) -> None:
        self.on_reconnect = on_reconnect
        self.since: float | None = None  # the first failed attempt of this outage
        self.failures = 0
        self.connected = False
        self.noted = False

    def say(self, message: str) -> None:
        if self.on_reconnect:
            self.on_reconnect(message)

    def over(self) -> None:
        if self.noted:
            self.say("resumed")
        self.since, self.failures, self.connected, self.noted = None, 0, True, False

    def wait(self, failure: CliError | None) -> None:
        """Before the next attempt; `failure` (None: the stream just ended) is raised when it
        is time to give up."""
        now = time.monotonic()
        if failure is not None:
            self.failures += 1
            self.since = now if self.since is None else self.since
            if not self.connected or now - self.since >= RECONNECT_FOR:
                raise failure
        if not self.noted:
            self.say("the connection dropped; resuming")
            self.noted = True
        time.sleep(min(RECONNECT_BACKOFF_MAX, 0.2 * 2**self.failures))


def _clean(params: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in params.items() if v is not None}


def _root_cause(exc: BaseException) -> str:
    while exc.__cause__ is not None or exc.__context__ is not None:
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
    return str(exc) or type(exc).__name__


def problem_of(response: httpx.Response) -> ApiError:
    try:
        body = response.json()
    except ValueError:
        body = None
    if not isinstance(body, dict):
        text = response.text.strip().splitlines()[0][:200] if response.text.strip() else ""
        body = {"title": f"HTTP {response.status_code}", "detail": text}
    return ApiError(response.status_code, body)


def require_project(context: Context) -> str:
    if not context.project:
        raise CliError(
            "no project: pass --project NAME (or set AICP_PROJECT, or log in with --project)"
        )
    return context.project
