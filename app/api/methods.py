"""HTTP method semantics Litestar leaves out, for every route at once (an ASGI layer).

- ``HEAD`` is answered wherever ``GET`` is, with the same status and headers and no body
  (RFC 9110 §9.3.2): the request runs as ``GET`` and the body is dropped on the way out.
- ``OPTIONS`` answers ``204`` with ``Allow`` listing the methods the path really serves (every
  handler of the path, plus ``HEAD`` with ``GET``, plus ``OPTIONS``); it needs no token, as a
  CORS preflight carries none, and reveals only what the OpenAPI document already says.
- A ``405`` carries ``Allow`` (RFC 9110 §15.5.6).
- Under ``/schema``, Litestar answers unknown paths with an HTML page; they become a 404
  problem like every other unknown path.

The route table is read from the application once, on the first request.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, cast

import msgspec
from litestar.enums import ScopeType
from litestar.routes import HTTPRoute

if TYPE_CHECKING:
    from litestar import Litestar
    from litestar.types import (
        HTTPResponseBodyEvent,
        HTTPResponseStartEvent,
        Message,
        Receive,
        Scope,
        Send,
    )

#: The methods that only read: the viewer role may call them, and they spend the read rate limit.
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
#: Set in the scope of a HEAD answered as a GET (an event stream then sends no events).
HEAD_SCOPE_KEY = "aicp.head"
SCHEMA_PREFIX = "/schema"
_PARAMETER = re.compile(r"\{[^}]*\}")


def _allow_table(app: Litestar) -> list[tuple[re.Pattern[str], str]]:
    by_path: dict[str, set[str]] = {}
    for route in app.routes:
        if isinstance(route, HTTPRoute):
            methods = by_path.setdefault(route.path_format, {"OPTIONS"})
            methods.update(str(method) for method in route.methods)
    table: list[tuple[re.Pattern[str], str]] = []
    for path_format, methods in by_path.items():
        if "GET" in methods:
            methods.add("HEAD")
        parts = _PARAMETER.split(path_format)
        pattern = "^" + "[^/]+".join(re.escape(part) for part in parts) + "/?$"
        table.append((re.compile(pattern), ", ".join(sorted(methods))))
    return table


def _problem_404(path: str) -> bytes:
    return msgspec.json.encode(
        {
            "type": "https://aicp.dev/problems/not-found",
            "title": "Not found",
            "status": 404,
            "detail": "No such resource.",
            "instance": path,
        }
    )


async def _respond(
    send: Send, status: int, headers: list[tuple[bytes, bytes]], body: bytes
) -> None:
    start: HTTPResponseStartEvent = {
        "type": "http.response.start",
        "status": status,
        "headers": headers,
    }
    await send(start)
    end: HTTPResponseBodyEvent = {"type": "http.response.body", "body": body, "more_body": False}
    await send(end)


class MethodSemantics:
    """ASGI layer around the Litestar application; see the module docstring."""

    def __init__(self, app: Litestar) -> None:
        self.app = app
        self._table: list[tuple[re.Pattern[str], str]] | None = None

    def allowed(self, path: str) -> str | None:
        """The ``Allow`` value for ``path``, or None when no route serves it."""
        if self._table is None:
            self._table = _allow_table(self.app)
        for pattern, allow in self._table:
            if pattern.match(path):
                return allow
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != ScopeType.HTTP:
            await self.app(scope, receive, send)
            return
        http = scope
        path: str = http["path"]
        allow = self.allowed(path)
        method = http["method"]
        if method == "OPTIONS" and allow is not None:
            await _respond(send, 204, [(b"allow", allow.encode())], b"")
            return
        head = method == "HEAD" and allow is not None and "GET" in allow.split(", ")
        if head:
            # A copy: the server keeps its own scope saying HEAD, so it expects no body after
            # the GET's Content-Length (rewriting its scope made uvicorn wait for the body).
            scope = cast("Scope", {**http, "method": "GET", HEAD_SCOPE_KEY: True})
        await self.app(scope, receive, self._sender(send, path, allow, head=head))

    def _sender(self, send: Send, path: str, allow: str | None, *, head: bool) -> Send:
        replaced = False

        async def sender(message: Message) -> None:
            nonlocal replaced
            if message["type"] == "http.response.start":
                headers: list[Any] = list(message.get("headers", []))
                status = message["status"]
                if status == 405 and allow is not None:
                    headers.append((b"allow", allow.encode()))
                if (
                    status == 404
                    and path.startswith(SCHEMA_PREFIX)
                    and any(
                        name.lower() == b"content-type" and value.startswith(b"text/html")
                        for name, value in headers
                    )
                ):
                    replaced = True
                    body = _problem_404(path)
                    problem_headers = [
                        (b"content-type", b"application/problem+json"),
                        (b"content-length", str(len(body)).encode()),
                    ]
                    await _respond(send, 404, problem_headers, b"" if head else body)
                    return
                message["headers"] = headers
                await send(message)
                return
            if replaced:
                return
            if head and message["type"] == "http.response.body":
                message = {**message, "body": b""}
            await send(message)

        return sender
