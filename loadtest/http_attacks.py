"""Hostile HTTP clients over raw sockets, and what each of them notices.

Each attack is a blocking function of the server's address (run it in a thread beside an
asyncio server): it writes its bytes as fast as the server takes them, or `pause` seconds apart
(a dribbling client), reads whatever comes back at the same time, and returns an `Outcome`: the
status the server answered with, and when it closed the connection.
"""

from __future__ import annotations

import contextlib
import itertools
import selectors
import socket
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

Address = tuple[str, int]
CHUNK = 64 * 1024


@dataclass(frozen=True)
class Outcome:
    """What a client noticed."""

    received: bytes
    closed_after: float | None  # seconds from connecting until the server closed; None: never
    reset: bool  # the connection was reset rather than closed

    @property
    def status(self) -> int | None:
        """The first response's status code; None when nothing came back."""
        if not self.received.startswith(b"HTTP/1."):
            return None
        return int(self.received.split(b" ", 2)[1])

    def statuses(self) -> list[int]:
        """Every response's status code, in order (pipelined requests)."""
        return [int(part.split(b" ", 1)[0]) for part in self.received.split(b"HTTP/1.1 ")[1:]]

    def header(self, name: str) -> str | None:
        head = self.received.split(b"\r\n\r\n", 1)[0].decode("latin-1")
        for line in head.split("\r\n")[1:]:
            key, _, value = line.partition(":")
            if key.strip().lower() == name.lower():
                return value.strip()
        return None


def converse(
    address: Address,
    chunks: Iterable[bytes],
    *,
    pause: float = 0.0,
    deadline: float = 30.0,
    until_responses: int | None = None,
) -> Outcome:
    """Send `chunks` (`pause` s apart) while reading; return once the server closed the
    connection, `until_responses` responses arrived, or `deadline` passed."""
    started = time.monotonic()
    sock = socket.create_connection(address)
    sock.setblocking(False)
    selector = selectors.DefaultSelector()
    selector.register(sock, selectors.EVENT_READ | selectors.EVENT_WRITE)
    source: Iterator[bytes] = iter(chunks)
    pending = memoryview(b"")
    sending = True
    next_send = started
    received = bytearray()
    closed_after: float | None = None
    reset = False
    try:
        while (now := time.monotonic()) - started < deadline:
            want_write = sending and now >= next_send
            mask = selectors.EVENT_READ | (selectors.EVENT_WRITE if want_write else 0)
            selector.modify(sock, mask)
            wait = max(0.0, min(next_send - now, 0.05)) if sending and not want_write else 0.05
            for _, ready in selector.select(wait):
                if ready & selectors.EVENT_READ:
                    try:
                        data = sock.recv(CHUNK)
                    except ConnectionResetError:
                        data, reset = b"", True
                    if not data:
                        closed_after = time.monotonic() - started
                        return Outcome(bytes(received), closed_after, reset)
                    received += data
                    if until_responses and received.count(b"HTTP/1.1 ") >= until_responses:
                        return Outcome(bytes(received), None, reset)
                if ready & selectors.EVENT_WRITE and sending:
                    if not pending:
                        pending = memoryview(next(source, b""))
                        if not pending:
                            sending = False
                            continue
                    try:
                        sent = sock.send(pending)
                    except (BrokenPipeError, ConnectionResetError):
                        sending = False
                        continue
                    pending = pending[sent:]
                    if not pending and pause:
                        next_send = time.monotonic() + pause
        return Outcome(bytes(received), closed_after, reset)
    finally:
        selector.close()
        sock.close()


def request_head(target: str = "/readyz", headers: Iterable[tuple[str, str]] = ()) -> bytes:
    lines = [f"GET {target} HTTP/1.1", "Host: aicp", *(f"{k}: {v}" for k, v in headers)]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def huge_header(address: Address, size: int, deadline: float = 30.0) -> Outcome:
    """One header field of `size` bytes, sent as fast as the server reads it."""
    start = b"GET /readyz HTTP/1.1\r\nHost: aicp\r\nX-Filler: "
    body = itertools.chain(itertools.repeat(b"a" * CHUNK, size // CHUNK), [b"a" * (size % CHUNK)])
    return converse(address, itertools.chain([start], body, [b"\r\n\r\n"]), deadline=deadline)


def many_headers(address: Address, count: int) -> Outcome:
    """`count` small header fields."""
    return converse(address, [request_head(headers=[(f"X-H{i}", "1") for i in range(count)])])


def long_request_line(address: Address, size: int, deadline: float = 30.0) -> Outcome:
    """A request line of about `size` bytes (its path), never ended when `size` is large."""
    path = itertools.chain(itertools.repeat(b"a" * CHUNK, size // CHUNK), [b"a" * (size % CHUNK)])
    end = b" HTTP/1.1\r\nHost: aicp\r\n\r\n"
    return converse(address, itertools.chain([b"GET /"], path, [end]), deadline=deadline)


def dribbled_head(address: Address, pause: float, deadline: float = 30.0) -> Outcome:
    """A request head sent one byte every `pause` seconds, never finished."""
    return converse(
        address,
        (bytes([b]) for b in itertools.cycle(b"X-Slow: 1\r\n")),
        pause=pause,
        deadline=deadline,
    )


def dribbled_body(address: Address, token: str, pause: float, deadline: float = 30.0) -> Outcome:
    """A POST (with `token`) announcing 100 kB of body, then one byte every `pause` seconds."""
    head = (
        "POST /api/v1/projects HTTP/1.1\r\nHost: aicp\r\nContent-Type: application/json\r\n"
        f"Authorization: Bearer {token}\r\nContent-Length: 100000\r\n\r\n"
    ).encode()
    return converse(
        address, itertools.chain([head], itertools.repeat(b" ")), pause=pause, deadline=deadline
    )


def silent(address: Address, deadline: float = 30.0) -> Outcome:
    """A connection that never sends anything."""
    return converse(address, [], deadline=deadline)


def pipelined(address: Address, count: int, target: str = "/healthz") -> Outcome:
    """`count` requests in one write; waits for their `count` answers."""
    return converse(address, [request_head(target) * count], until_responses=count)


@dataclass(frozen=True)
class SwarmOutcome:
    """What `count` connections of a swarm noticed."""

    statuses: dict[int | None, int]  # first status answered → connections (None: no answer)
    closed_after: list[float]  # of each connection the server closed, seconds after opening
    still_open: int  # connections the server left open until the end

    @property
    def worst_close(self) -> float | None:
        return max(self.closed_after, default=None)


def swarm(
    address: Address,
    count: int,
    duration: float,
    *,
    opening: bytes = b"",
    dribble: bytes = b"",
    pause: float = 1.0,
) -> SwarmOutcome:
    """Open `count` connections, send `opening` on each, then `dribble` every `pause` s, for
    `duration` s (one thread, one selector); report what each one got back and when it closed."""
    selector = selectors.DefaultSelector()
    started: dict[socket.socket, float] = {}
    received: dict[socket.socket, bytearray] = {}
    closed: list[float] = []
    for _ in range(count):
        sock = socket.create_connection(address)
        if opening:
            sock.sendall(opening)
        sock.setblocking(False)
        selector.register(sock, selectors.EVENT_READ)
        started[sock] = time.monotonic()
        received[sock] = bytearray()
    end = time.monotonic() + duration
    next_dribble = time.monotonic() + pause
    try:
        while (now := time.monotonic()) < end and len(closed) < count:
            if dribble and now >= next_dribble:
                for sock in list(started):
                    if sock.fileno() >= 0:
                        with contextlib.suppress(OSError):
                            sock.send(dribble)
                next_dribble = now + pause
            for key, _ in selector.select(min(0.05, max(0.0, next_dribble - now))):
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                try:
                    data = sock.recv(CHUNK)
                except OSError:
                    data = b""
                if data:
                    received[sock] += data
                    continue
                closed.append(time.monotonic() - started[sock])
                selector.unregister(sock)
                sock.close()
    finally:
        still_open = 0
        for sock in started:
            if sock.fileno() >= 0:
                still_open += 1
                sock.close()
        selector.close()
    statuses: dict[int | None, int] = {}
    for data in received.values():
        status = Outcome(bytes(data), None, False).status
        statuses[status] = statuses.get(status, 0) + 1
    return SwarmOutcome(statuses, closed, still_open)
