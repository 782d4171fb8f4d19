"""What one HTTP client may cost a replica: the limits enforced before a request reaches the app.

uvicorn's h11 protocol (not httptools: it has no bound on a header's size, and buffers every
pipelined request of a read) with these additions, each answered with a problem document and
``Connection: close``:

- the request head (request line and headers) is at most `HttpLimits.max_head_bytes`: h11
  refuses to buffer more, and the answer is 431, or 414 when the request line alone is that
  long or longer than `HttpLimits.max_request_line_bytes`;
- at most `HttpLimits.max_headers` header fields (431);
- the head must be complete within `HttpLimits.head_timeout_seconds` of the connection opening
  or the previous response ending, and a body within `HttpLimits.body_timeout_seconds` of its
  head (408, or a plain close when nothing of a new request arrived: idle connections are
  closed sooner by uvicorn's keep-alive timeout);
- beyond `HttpLimits.max_connections` open connections a request is answered 503 with
  ``Retry-After`` (live streams are connections too: the cap must exceed ``AICP_STREAMS_MAX``).

Pipelining needs no setting: h11 hands over one request at a time and reading from the socket
stops until its response is sent, so the requests queued behind it stay in the kernel's buffer.

A rejected connection is half-closed after the answer and what the client still sends is read
and dropped for `LINGER_SECONDS` before the socket closes: closing at once with unread data
would reset the connection and the client could lose the answer.
"""

from __future__ import annotations

import http
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import h11
import msgspec
from uvicorn.protocols.http.h11_impl import H11Protocol

from app.api.problems import PROBLEM_BASE, PROBLEM_MEDIA_TYPE

if TYPE_CHECKING:
    import asyncio

    from uvicorn.config import Config
    from uvicorn.server import ServerState

log = logging.getLogger("aicp.http")

#: How long a rejected connection keeps reading (and dropping) what its client still sends.
LINGER_SECONDS = 1.0
#: Retry-After of the 503 beyond the connection cap.
BUSY_RETRY_AFTER_SECONDS = 1


@dataclass(frozen=True)
class HttpLimits:
    """The per-connection limits (settings `AICP_HTTP_*`, defaults in `app.config`)."""

    max_head_bytes: int
    max_request_line_bytes: int
    max_headers: int
    head_timeout_seconds: float
    body_timeout_seconds: float
    max_connections: int


@dataclass(frozen=True)
class _Rejection:
    status: int
    slug: str
    detail: str
    headers: tuple[tuple[str, str], ...] = ()


def problem_bytes(rejection: _Rejection) -> bytes:
    """A complete HTTP/1.1 response carrying `rejection` as a problem document."""
    reason = http.HTTPStatus(rejection.status).phrase
    body = msgspec.json.encode(
        {
            "type": PROBLEM_BASE + rejection.slug,
            "title": reason,
            "status": rejection.status,
            "detail": rejection.detail,
        }
    )
    headers = [
        ("content-type", PROBLEM_MEDIA_TYPE),
        ("content-length", str(len(body))),
        ("connection", "close"),
        *rejection.headers,
    ]
    head = f"HTTP/1.1 {rejection.status} {reason}\r\n" + "".join(
        f"{name}: {value}\r\n" for name, value in headers
    )
    return head.encode("latin-1") + b"\r\n" + body


class _CheckedConnection(h11.Connection):
    """h11's server side, asking `LimitedH11Protocol` about each request head it parses."""

    def __init__(self, protocol: LimitedH11Protocol, max_incomplete_event_size: int) -> None:
        super().__init__(h11.SERVER, max_incomplete_event_size=max_incomplete_event_size)
        self._protocol = protocol

    def next_event(self) -> Any:
        event = super().next_event()
        if isinstance(event, h11.Request | h11.EndOfMessage):
            self._protocol.parsed(event)  # raises RemoteProtocolError to refuse the request
        return event


class LimitedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol under `limits` (bound by `limited_protocol`)."""

    limits: ClassVar[HttpLimits]

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self.logger = log
        self.conn = _CheckedConnection(self, self.limits.max_head_bytes)
        self._rejection: _Rejection | None = None
        self._head_timer: asyncio.TimerHandle | None = None
        self._body_timer: asyncio.TimerHandle | None = None
        self._lingering = False

    # --- the protocol interface ---------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_timers()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._lingering:
            return  # answered and half-closed: what still arrives is dropped
        super().data_received(data)

    def on_response_complete(self) -> None:
        # Armed first: a pipelined request that uvicorn parses next cancels it at once.
        self._arm_head_timer()
        super().on_response_complete()

    def send_400_response(self, msg: str) -> None:
        """uvicorn's answer to anything h11 refused; here, the problem that says why."""
        rejection, self._rejection = self._rejection, None
        self._reject(rejection or self._malformed())

    # --- checks -------------------------------------------------------------------------------

    def parsed(self, event: h11.Request | h11.EndOfMessage) -> None:
        """Called by h11 for each request head and end of body, before uvicorn sees them."""
        if isinstance(event, h11.EndOfMessage):
            self._cancel(self._body_timer)
            self._body_timer = None
            return
        self._cancel(self._head_timer)
        self._head_timer = None
        limits = self.limits
        request_line = len(event.method) + len(event.target) + len(b" HTTP/1.1")
        if request_line > limits.max_request_line_bytes:
            self._refuse(_too_long_uri(limits))
        head = request_line + sum(len(name) + len(value) + 4 for name, value in event.headers)
        if head > limits.max_head_bytes:  # it arrived whole, in one read larger than the limit
            self._refuse(_too_large_head(limits))
        if len(event.headers) > limits.max_headers:
            detail = f"A request may carry at most {limits.max_headers} header fields."
            self._refuse(_Rejection(431, "request-header-fields-too-large", detail))
        if len(self.connections) > limits.max_connections:
            detail = "The replica has too many open connections; retry shortly."
            retry = (("retry-after", str(BUSY_RETRY_AFTER_SECONDS)),)
            self._refuse(_Rejection(503, "service-unavailable", detail, retry))
        if self.conn.their_state is h11.SEND_BODY:
            self._body_timer = self.loop.call_later(limits.body_timeout_seconds, self._body_late)

    def _refuse(self, rejection: _Rejection) -> None:
        self._rejection = rejection
        raise h11.RemoteProtocolError(rejection.detail)

    def _malformed(self) -> _Rejection:
        """What h11 refused: a head past the size limit (414 or 431), else a malformed one."""
        limits = self.limits
        buffered = self.conn.trailing_data[0]
        if len(buffered) > limits.max_head_bytes:
            line_end = buffered.find(b"\n", 0, limits.max_request_line_bytes + 1)
            if line_end < 0:
                return _too_long_uri(limits)
            return _too_large_head(limits)
        return _Rejection(400, "bad-request", "The request is not valid HTTP/1.1.")

    # --- timers -------------------------------------------------------------------------------

    def _arm_head_timer(self) -> None:
        self._cancel(self._head_timer)
        self._head_timer = self.loop.call_later(self.limits.head_timeout_seconds, self._head_late)

    def _head_late(self) -> None:
        self._head_timer = None
        if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
            return  # closed, or a request (whose head did arrive) is being served
        if not self.conn.trailing_data[0]:
            self.transport.close()  # nothing of a request arrived: just close
            return
        detail = f"The request's head did not arrive within {self.limits.head_timeout_seconds:g} s."
        self._reject(_Rejection(408, "request-timeout", detail))

    def _body_late(self) -> None:
        self._body_timer = None
        if self.transport.is_closing():
            return
        detail = f"The request's body did not arrive within {self.limits.body_timeout_seconds:g} s."
        if self.cycle is not None and self.cycle.response_started:
            self.transport.close()
            return
        self._reject(_Rejection(408, "request-timeout", detail))

    def _cancel_timers(self) -> None:
        for timer in (self._head_timer, self._body_timer):
            self._cancel(timer)
        self._head_timer = self._body_timer = None

    @staticmethod
    def _cancel(timer: asyncio.TimerHandle | None) -> None:
        if timer is not None:
            timer.cancel()

    # --- answering and closing ----------------------------------------------------------------

    def _reject(self, rejection: _Rejection) -> None:
        """Answer `rejection`, stop reading requests, and close after `LINGER_SECONDS`."""
        log.debug("refused a request: %s %s", rejection.status, rejection.detail)
        self._cancel_timers()
        self._unset_keepalive_if_required()
        if self.cycle is not None and not self.cycle.response_complete:
            self.cycle.disconnected = True  # the app (if it runs) sees the client gone
            self.cycle.message_event.set()
        transport = self.transport
        if transport.is_closing():
            return
        transport.write(problem_bytes(rejection))
        self._lingering = True
        self.flow.resume_reading()
        if transport.can_write_eof():
            transport.write_eof()
        self.loop.call_later(LINGER_SECONDS, transport.close)


def _too_large_head(limits: HttpLimits) -> _Rejection:
    detail = f"The request's head is larger than {limits.max_head_bytes} bytes."
    return _Rejection(431, "request-header-fields-too-large", detail)


def _too_long_uri(limits: HttpLimits) -> _Rejection:
    detail = f"The request line is longer than {limits.max_request_line_bytes} bytes."
    return _Rejection(414, "uri-too-long", detail)


def limited_protocol(bound: HttpLimits) -> type[LimitedH11Protocol]:
    """The protocol class uvicorn instantiates per connection, bound to `bound`."""

    class Bound(LimitedH11Protocol):
        limits = bound

    return Bound
