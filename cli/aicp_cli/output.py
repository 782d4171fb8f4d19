"""How resources are printed: tables in kubectl's style, JSON, YAML, and ages.

Text that came from the server is never written raw to a terminal: `printable` shows control
characters, escape sequences, DEL, C1 codes, line separators and bidi overrides as escapes
(`\\x1b`, `\\u202e`). JSON and YAML escape them themselves and stay round-trippable. Tables
never cut NAME, STATE or any other column but REASON, which gets what is left of the line
(`COLUMNS`, else the terminal's width); piped output without `COLUMNS` and `-o wide` print it
whole.
"""

from __future__ import annotations

import json
import os
import sys
import unicodedata
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any

import yaml
from rich.cells import cell_len
from rich.text import Text

FORMATS = ("table", "wide", "json", "yaml")

#: The column that gives way when a line is too long; every other column is printed whole.
SHRINKS = "REASON"
#: The least of it a table keeps, however narrow the terminal.
SHRUNK_AT_LEAST = 12
GAP = "   "

_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_SHORT = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


def _escape(char: str) -> str:
    if char in _SHORT:
        return _SHORT[char]
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(value: object) -> str:
    """`value` as text safe for a terminal: every control character (C0, DEL, C1, hence ESC and
    every escape sequence), line and paragraph separator and bidi control as an escape."""
    text = str(value)
    if text.isprintable() and not _BIDI.intersection(text):
        return text
    return "".join(
        _escape(char) if char in _BIDI or unicodedata.category(char) in ("Cc", "Zl", "Zp") else char
        for char in text
    )


def line_width() -> int | None:
    """How wide a line may be: `COLUMNS`, else the terminal's width; None (whole lines) when
    standard output is not a terminal and `COLUMNS` is unset."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    try:
        return os.get_terminal_size(sys.stdout.fileno()).columns if sys.stdout.isatty() else None
    except (OSError, ValueError):
        return None


def _instant(stamp: str | None) -> datetime | str:
    """The time an RFC 3339 `stamp` names, or what to show instead: `-` for none, `?` for one
    that is not a time."""
    if not stamp:
        return "-"
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return "?"


def age(stamp: str | None, now: datetime | None = None) -> str:
    """`3s`, `5m`, `2h`, `4d` since an RFC 3339 time, as kubectl shows ages."""
    then = _instant(stamp)
    if isinstance(then, str):
        return then
    seconds = int(((now or datetime.now(UTC)) - then).total_seconds())
    if seconds < 0:
        seconds = 0
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size * (2 if unit != "m" else 1):
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def until(stamp: str | None, now: datetime | None = None) -> str:
    """`0s`, `5m`, `2h`, `4d` until an RFC 3339 time (never negative)."""
    then = _instant(stamp)
    if isinstance(then, str):
        return then
    return age((now or datetime.now(UTC)).isoformat(), then)


def eta_span(eta: dict[str, Any] | None, now: datetime | None = None) -> str:
    """An estimated start band as `5m-20m` from now (`-` without an estimate)."""
    if not eta:
        return "-"
    low, high = until(eta.get("earliest"), now), until(eta.get("latest"), now)
    return low if low == high else f"{low}-{high}"


def admission_lines(admission: dict[str, Any] | None) -> list[str]:
    """A dry run's admission forecast as lines for people."""
    if not admission:
        return []
    verdict = admission.get("verdict")
    lines = [f"admission: {verdict} (an estimate, not a reservation)", f"  {admission['reason']}"]
    for numbers in admission.get("quota") or []:
        lines.append(
            f"  {numbers['resource']}: requested {numbers['requested']}, free "
            f"{numbers['free']} of {numbers['quota']} ({numbers['in_use']} in use)"
        )
    if verdict == "preempt":
        lines.append(f"  would preempt: {', '.join(admission.get('preempts') or [])}")
    if verdict == "queue":
        ahead = admission.get("ahead") or []
        lines.append(
            f"  position {admission.get('position')} in the queue"
            + (f", after {', '.join(ahead[:10])}" if ahead else "")
        )
        eta = admission.get("eta")
        lines.append(
            f"  likely to start in {eta_span(eta)}" if eta else "  no estimate of its start"
        )
        lines.append(f"  basis: {admission.get('eta_basis')}")
    return lines


Column = tuple[str, Callable[[dict[str, Any]], Any]]


#: Columns a table leaves out when no row has a value in them (a list without queued workloads
#: has no QUEUE column).
OPTIONAL = frozenset({"QUEUE"})


def table(rows: Iterable[dict[str, Any]], columns: list[Column], *, whole: bool = False) -> None:
    """Rows under their column titles; `whole` (`-o wide`) never shortens the reason."""
    rows = list(rows)
    columns = [
        (title, get)
        for title, get in columns
        if title not in OPTIONAL or any(get(row) is not None for row in rows)
    ]
    titles = [title for title, _ in columns]
    lines = [titles, *([cell(get(row)) for _, get in columns] for row in rows)]
    widths = [max(cell_len(line[i]) for line in lines) for i in range(len(titles))]
    limit = None if whole else line_width()
    for line in lines:
        sys.stdout.write(row_line(line, widths, titles[-1], limit) + "\n")


def cell(value: Any) -> str:
    """One table cell: `-` for nothing, lists joined by commas, escaped."""
    if value is None or value == "" or value == []:
        return "-"
    if isinstance(value, list):
        return printable(",".join(map(str, value)))
    return printable(value)


def row_line(values: list[str], widths: list[int], last: str = "", limit: int | None = None) -> str:
    """One line of cells padded to `widths` (the last cell unpadded). When the last column is
    the reason and `limit` is set, the reason is shortened (with …) so the line fits in it."""
    cells = [
        value + " " * (width - cell_len(value))
        for value, width in zip(values[:-1], widths, strict=False)
    ]
    head = GAP.join([*cells, ""]) if cells else ""
    tail = values[-1]
    if limit is not None and last == SHRINKS:
        room = max(limit - cell_len(head), SHRUNK_AT_LEAST)
        if cell_len(tail) > room:
            shortened = Text(tail)
            shortened.truncate(room, overflow="ellipsis")
            tail = shortened.plain
    return (head + tail).rstrip()


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
