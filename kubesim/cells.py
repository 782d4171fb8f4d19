"""The cells of kubectl's tables that every kind shares: Name and Age, ages and durations as
apimachinery's `duration.HumanDuration` prints them, and a pod template's containers and images.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

Obj = dict[str, Any]
Cell = Callable[[Obj, datetime], Any]
#: (name, type, format, description, priority: 0 always shown, 1 with `-o wide`), cell.
Column = tuple[str, str, str, str, int, Cell]


def human_duration(seconds: float) -> str:
    """apimachinery's `duration.HumanDuration`, as kubectl prints ages and durations."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m{s % 60}s" if s % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d{hours % 24}h" if hours % 24 else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        return f"{hours // 24 // 365}y{days}d" if days else f"{hours // 24 // 365}y"
    return f"{hours // 24 // 365}y"


def parse_time(stamp: Any) -> datetime | None:
    if not isinstance(stamp, str) or not stamp:
        return None
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None


def _age(obj: Obj, now: datetime) -> str:
    created = parse_time(obj["metadata"].get("creationTimestamp"))
    return "<unknown>" if created is None else human_duration((now - created).total_seconds())


def template_containers(obj: Obj, key: str) -> str:
    """The `key` (name, image) of each container of the object's pod template, comma-joined."""
    pod_spec = ((obj.get("spec") or {}).get("template") or {}).get("spec") or {}
    return ",".join(str(c.get(key, "")) for c in pod_spec.get("containers") or [])


NAME: Column = ("Name", "string", "name", "Name must be unique within a namespace.", 0,
                lambda o, _n: o["metadata"]["name"])  # fmt: skip
AGE: Column = ("Age", "string", "", "The time since the object was created.", 0, _age)
