"""Progress on long waits, on standard error: a spinner with the state and its reason on a
terminal, one line per change otherwise (CI logs); and a deadline around a blocking stream."""

from __future__ import annotations

import queue
import sys
import threading
import time
from typing import TYPE_CHECKING, TypeVar

import click
from rich.console import Console
from rich.markup import escape
from rich.status import Status

from aicp_cli.output import printable

if TYPE_CHECKING:
    from collections.abc import Iterator
    from types import TracebackType

T = TypeVar("T")


def note(message: str) -> None:
    click.echo(f"note: {printable(message)}", err=True)


class Progress:
    def __init__(self, name: str) -> None:
        self.name = name
        self.last: tuple[str, str] | None = None
        self.status: Status | None = None
        if sys.stderr.isatty():
            self.status = Status(f"waiting for {name}", console=Console(stderr=True))

    def __enter__(self) -> Progress:
        if self.status is not None:
            self.status.start()
        return self

    def __exit__(
        self,
        _type: type[BaseException] | None,
        _value: BaseException | None,
        _tb: TracebackType | None,
    ) -> None:
        if self.status is not None:
            self.status.stop()

    def update(self, state: str, reason: str) -> None:
        if (state, reason) == self.last:
            return
        self.last = (state, reason)
        name, state, reason = printable(self.name), printable(state), printable(reason)
        if self.status is not None:
            self.status.update(f"{escape(name)}: [bold]{escape(state)}[/bold] — {escape(reason)}")
        else:
            click.echo(f"{name}: {state}: {reason}", err=True)


class TimedOut(Exception):
    pass


def before(items: Iterator[T], deadline: float) -> Iterator[T]:
    """`items` as they come, until `deadline` (monotonic): then `TimedOut`, even while the
    source is blocked reading (it runs in a daemon thread)."""
    box: queue.Queue[tuple[str, object]] = queue.Queue(maxsize=100)

    def produce() -> None:
        try:
            for item in items:
                box.put(("item", item))
            box.put(("end", None))
        except BaseException as exc:  # handed to the consumer, which re-raises it
            box.put(("error", exc))

    threading.Thread(target=produce, name="aicp-stream", daemon=True).start()
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimedOut()
        try:
            kind, value = box.get(timeout=left)
        except queue.Empty:
            raise TimedOut() from None
        if kind == "end":
            return
        if kind == "error":
            assert isinstance(value, BaseException)
            raise value
        yield value  # type: ignore[misc]
