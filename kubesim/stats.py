"""Request counters for `GET /_sim/stats`: by verb, path pattern, content type and field
manager, plus `verb pattern` pairs and totals. Tests read them to check how aicp talks to the
cluster (server-side apply? how many writes per step? a needless re-list?)."""

from __future__ import annotations

from collections import Counter
from typing import Any


class Stats:
    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.total = 0
        self.writes = 0
        self.by_verb: Counter[str] = Counter()
        self.by_path: Counter[str] = Counter()
        self.by_verb_path: Counter[str] = Counter()
        self.by_content_type: Counter[str] = Counter()
        self.by_field_manager: Counter[str] = Counter()
        self.by_status: Counter[str] = Counter()

    def count(self, verb: str, pattern: str, content_type: str | None, manager: str | None) -> None:
        self.total += 1
        if verb in ("create", "update", "patch", "delete"):
            self.writes += 1
        self.by_verb[verb] += 1
        self.by_path[pattern] += 1
        self.by_verb_path[f"{verb} {pattern}"] += 1
        if content_type:
            self.by_content_type[content_type] += 1
        if manager:
            self.by_field_manager[manager] += 1

    def status(self, code: int) -> None:
        self.by_status[str(code)] += 1

    def as_dict(self) -> dict[str, Any]:
        return {
            "total": self.total,
            "writes": self.writes,
            "by_verb": dict(self.by_verb),
            "by_path": dict(self.by_path),
            "by_verb_path": dict(self.by_verb_path),
            "by_content_type": dict(self.by_content_type),
            "by_field_manager": dict(self.by_field_manager),
            "by_status": dict(self.by_status),
        }
