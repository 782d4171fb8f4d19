"""The outermost ASGI layer: request ids, request metrics and the access log.

It wraps the whole Litestar application (not one route), so 404s for unknown paths and
errors raised anywhere are counted too. The route label is Litestar's path template
(``/api/v1/projects/{project}``), never the raw path, to keep label values bounded.
"""

from __future__ import annotations

import logging
import secrets
import time
from typing import TYPE_CHECKING, Any

from litestar.enums import ScopeType

from app.observability.logs import request_id_var
from app.observability.metrics import HTTP_LATENCY, HTTP_REQUESTS

if TYPE_CHECKING:
    from litestar.types import ASGIApp, Message, Receive, Scope, Send
    from prometheus_client import Counter, Histogram

log = logging.getLogger("aicp.access")

_MAX_INCOMING_ID = 128
# Any token is a valid HTTP method; only these are label values, the rest count as OTHER.
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


def _incoming_request_id(scope: Scope) -> str | None:
    for name, value in scope.get("headers", ()):
        if name == b"x-request-id" and 0 < len(value) <= _MAX_INCOMING_ID:
            text: str = value.decode("latin-1")
            return text if text.isprintable() else None
    return None


class Observed:
    """ASGI middleware: ``X-Request-Id`` in and out, metrics and a debug access line."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        # The metrics' children by (route, method, status), looked up once each: the label
        # values are bounded (templates, methods, statuses), and prometheus_client's own
        # lookup validates and locks on every call.
        self._children: dict[tuple[str, str, int], tuple[Counter, Histogram]] = {}

    def _metrics(self, route: str, method: str, status: int) -> tuple[Counter, Histogram]:
        key = (route, method, status)
        found = self._children.get(key)
        if found is None:
            labels = (route, method, str(status))
            found = (HTTP_REQUESTS.labels(*labels), HTTP_LATENCY.labels(*labels))
            self._children[key] = found
        return found

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != ScopeType.HTTP:
            await self.app(scope, receive, send)
            return
        request_id = _incoming_request_id(scope) or secrets.token_hex(8)
        token = request_id_var.set(request_id)
        started = time.perf_counter()
        status = 500
        method = scope["method"] if scope["method"] in _METHODS else "OTHER"  # HEAD runs as GET

        streaming = False

        async def send_with_id(message: Message) -> None:
            nonlocal status, streaming
            if message["type"] == "http.response.start":
                status = message["status"]
                headers: list[Any] = list(message.get("headers", []))
                streaming = any(
                    name.lower() == b"content-type" and value.startswith(b"text/event-stream")
                    for name, value in headers
                )
                headers.append((b"x-request-id", request_id.encode("latin-1")))
                message["headers"] = headers
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            elapsed = time.perf_counter() - started
            route = scope.get("path_template") or "(unmatched)"
            requests, latency = self._metrics(route, method, status)
            requests.inc()
            if not streaming:  # a stream's duration is its client's choice, not latency
                latency.observe(elapsed)
            if log.isEnabledFor(logging.DEBUG):
                log.debug("%s %s %d %.1fms", method, scope["path"], status, elapsed * 1000)
            request_id_var.reset(token)
