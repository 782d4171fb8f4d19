"""The one backoff of the process: exponential delays with equal jitter, capped.

The n-th consecutive failure (n >= 1) waits a time drawn from [d/2, d], d = min(cap, base·2ⁿ⁻¹):
never more than `cap`, at least half of it, and never in step with the peers that failed at the
same moment (a database restart, an API server outage). Every retry loop uses it: the work
queue's failed keys (`app.reconcile.queue`), the informers' list/watch
(`app.kube.watching`), the process's LISTEN connection (`app.store.listener`), opening the
database pool (`app.store.db`) and the change feed's reads (`app.streams.changefeed`). Each
caller states only its own `base` and `cap`.

A caller keeps the count of failures itself (`delay(n)`), or lets the backoff keep it
(`next()` after each failure, `reset()` after a success; `attempt` is the count so far).
"""

from __future__ import annotations

import random


class Backoff:
    """Exponential delays with equal jitter (see the module docstring)."""

    def __init__(self, base: float, cap: float, *, rng: random.Random | None = None) -> None:
        if base <= 0 or cap < base:
            raise ValueError("a backoff needs 0 < base <= cap")
        self.base = base
        self.cap = cap
        self.attempt = 0  # consecutive failures counted by `next()`
        self._rng = rng or random.Random()

    def delay(self, failures: int) -> float:
        """Seconds to wait after `failures` consecutive failures (counted from 1)."""
        ceiling = min(self.cap, self.base * 2.0 ** min(max(failures, 1) - 1, 64))
        return ceiling / 2 + self._rng.uniform(0, ceiling / 2)

    def next(self) -> float:
        """Count one more failure and return its delay."""
        self.attempt += 1
        return self.delay(self.attempt)

    def reset(self) -> None:
        """A success: the next failure waits the shortest delay again."""
        self.attempt = 0
