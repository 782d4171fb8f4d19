"""Fault injection settings (`POST /_sim/faults`, cleared by `DELETE /_sim/faults`).

Body keys (all optional; a POST merges into the current settings):

- `watch_drop_after_events: int` — every watch stream (new ones) ends (EOF) after N events.
- `watch_drop_after_seconds: float` — every watch stream ends after T seconds.
- `shrink_watch_history: true` — one-shot: forget the watch history, so the next watch that
  resumes from an older resourceVersion gets the in-stream ERROR 410 `Expired`.
- `error_rate: float` (0..1) — fail that fraction of matching requests, with
  `error_code: 500 | 429` (default 500; 429 carries `Retry-After: retry_after_seconds`,
  default 1), optionally only for `error_verbs: [get, list, watch, create, update, patch,
  delete]` and paths matching `error_path_regex` (Python `re.search`).
- `latency_seconds: float` — delay every Kubernetes request by that long.
- `refuse_connections_seconds: float` — one-shot: the apiserver "restarts": its listening
  socket and every open connection are closed, connections are refused for T seconds (the
  port stays bound meanwhile), then it listens again on the same port.
- `seed: int` — seed the random choice of failed requests (reproducible tests).
"""

from __future__ import annotations

import random
import re
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from kubesim.model import StoreError

VERBS = frozenset({"get", "list", "watch", "create", "update", "patch", "delete"})


@dataclass
class Faults:
    watch_drop_after_events: int | None = None
    watch_drop_after_seconds: float | None = None
    error_rate: float = 0.0
    error_code: int = 500
    retry_after_seconds: int = 1
    error_verbs: list[str] | None = None
    error_path_regex: str | None = None
    latency_seconds: float = 0.0
    _rng: random.Random = field(default_factory=random.Random, repr=False)

    def update(self, body: dict[str, Any]) -> dict[str, Any]:
        """Merge `body` into the settings; returns the one-shot actions it asked for
        (`shrink_watch_history`, `refuse_connections_seconds`). 400 on unknown keys or values."""
        actions: dict[str, Any] = {}
        known = {f.name for f in fields(self) if not f.name.startswith("_")}
        for key, value in body.items():
            if key in ("shrink_watch_history", "refuse_connections_seconds"):
                actions[key] = value
            elif key == "seed":
                self._rng.seed(value)
            elif key in known:
                setattr(self, key, value)
            else:
                raise StoreError(400, "BadRequest", f"unknown fault {key!r}")
        self._check()
        return actions

    def _check(self) -> None:
        if not 0.0 <= float(self.error_rate) <= 1.0:
            raise StoreError(400, "BadRequest", "error_rate must be within [0, 1]")
        if self.error_code not in (500, 429):
            raise StoreError(400, "BadRequest", "error_code must be 500 or 429")
        if self.error_verbs is not None and not set(self.error_verbs) <= VERBS:
            raise StoreError(400, "BadRequest", f"error_verbs must be among {sorted(VERBS)}")
        if self.error_path_regex is not None:
            try:
                re.compile(self.error_path_regex)
            except re.error as exc:
                raise StoreError(400, "BadRequest", f"bad error_path_regex: {exc}") from exc

    def should_fail(self, verb: str, path: str) -> bool:
        if self.error_rate <= 0:
            return False
        if self.error_verbs is not None and verb not in self.error_verbs:
            return False
        if self.error_path_regex is not None and not re.search(self.error_path_regex, path):
            return False
        return self._rng.random() < self.error_rate

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if not k.startswith("_")}
