"""How resources are printed: tables (rich) in kubectl's style, JSON, YAML, and ages."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any

import yaml
from rich.console import Console
from rich.table import Table

FORMATS = ("table", "wide", "json", "yaml")

out = Console(highlight=False, soft_wrap=False)
err = Console(stderr=True, highlight=False)


def _width() -> int | None:
    return None if sys.stdout.isatty() else 250


def age(stamp: str | None, now: datetime | None = None) -> str:
    """`3s`, `5m`, `2h`, `4d` since an RFC 3339 time, as kubectl shows ages."""
    if not stamp:
        return "-"
    try:
        then = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return "?"
    seconds = int(((now or datetime.now(UTC)) - then).total_seconds())
    if seconds < 0:
        seconds = 0
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size * (2 if unit != "m" else 1):
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


Column = tuple[str, Callable[[dict[str, Any]], Any]]


def table(rows: Iterable[dict[str, Any]], columns: list[Column]) -> None:
    grid = Table(box=None, pad_edge=False, padding=(0, 3, 0, 0), show_edge=False)
    for title, _ in columns:
        grid.add_column(title, no_wrap=True, overflow="fold" if title == "REASON" else "ellipsis")
    for row in rows:
        grid.add_row(*(_cell(get(row)) for _, get in columns))
    console = Console(highlight=False, width=_width())
    with console.capture() as captured:
        console.print(grid)
    sys.stdout.write("".join(line.rstrip() + "\n" for line in captured.get().splitlines()))


def _cell(value: Any) -> str:
    if value is None or value == "":
        return "-"
    if isinstance(value, list):
        return ",".join(map(str, value)) or "-"
    return str(value)


def row_line(values: list[str], widths: list[int]) -> str:
    """One fixed-width line (for `get -w`, where rows arrive one at a time)."""
    cells = [value.ljust(width) for value, width in zip(values[:-1], widths, strict=False)]
    return "   ".join([*cells, values[-1]]).rstrip()


def dump(value: Any, fmt: str) -> None:
    if fmt == "json":
        sys.stdout.write(json.dumps(value, indent=2) + "\n")
    else:
        sys.stdout.write(yaml.safe_dump(value, sort_keys=False, default_flow_style=False))


def dump_event(event_type: str, obj: dict[str, Any], fmt: str) -> None:
    """One streamed change in json (one line each) or yaml (one document each)."""
    body = {"type": event_type, "object": obj}
    if fmt == "json":
        sys.stdout.write(json.dumps(body) + "\n")
    else:
        sys.stdout.write("---\n" + yaml.safe_dump(body, sort_keys=False))
    sys.stdout.flush()
