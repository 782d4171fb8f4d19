"""Fail fast: the process ends when one of its long-lived parts dies or stays down too long.

Kubernetes restarts a container whose process exits; it does not restart one that keeps
running with a dead engine (its liveness probe would keep answering). So one `Supervisor` per
process watches two kinds of thing:

- **tasks that must run until the process stops** (`watch_task`): the HTTP server, the reconcile
  engine (whose own supervisor stops it when any of its tasks dies), the LISTEN connection's
  loop, each informer's loop, the retention purge. One that ends, by an exception or by
  returning, is a failure at once.
- **parts that may be down for a while but must recover** (`watch_recovery`): the doorbell's
  LISTEN connection, each informer's list/watch. Each is asked every `check_interval` seconds
  why it is down (None while it is up); one that stays down for `recovery_seconds`
  (`AICP_RECOVERY_TIMEOUT_SECONDS`, whose default app/config.py states) is a failure.

The first failure is kept in `failure` (a sentence naming the part and why), `/healthz` answers
503 with it, and `app.main.run_service` stops the service in order and raises `ProcessFailed`,
which `python -m app` turns into exit status 1. `stop()` ends supervision before a deliberate
shutdown, so parts stopping then are not failures.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

log = logging.getLogger("aicp")


class ProcessFailed(Exception):
    """A long-lived part of the process died or did not recover; the process must exit."""


class Supervisor:
    """Watches the process's long-lived parts; see the module docstring."""

    def __init__(
        self,
        *,
        recovery_seconds: float,
        check_interval: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.recovery_seconds = recovery_seconds
        self.check_interval = check_interval
        self._clock = clock
        self.failure: str | None = None
        self._failed = asyncio.Event()
        self._stopped = False
        self._recoveries: dict[str, Callable[[], str | None]] = {}
        self._down_since: dict[str, float] = {}
        self._checker: asyncio.Task[None] | None = None
        self._watchers: set[asyncio.Task[None]] = set()

    # -- registration --------------------------------------------------------------------------

    def watch_task(
        self, name: str, task: asyncio.Task[object], why: Callable[[], str | None] | None = None
    ) -> None:
        """Fail when `task` ends while supervision runs. `why` may explain an end that carries
        no exception (e.g. the engine's recorded failure)."""

        def ended(done: asyncio.Task[object]) -> None:
            if self._stopped:
                return
            if done.cancelled():
                cause = "was cancelled"
            elif (exc := done.exception()) is not None:
                cause = f"failed: {exc!r}"
            else:
                cause = "ended"
            detail = why() if why is not None else None
            self.fail(f"{name} {cause}" + (f" ({detail})" if detail else ""))

        task.add_done_callback(ended)

    def watch_until(
        self, name: str, ended: Awaitable[object], why: Callable[[], str | None] | None = None
    ) -> None:
        """Fail when the awaitable `ended` completes (e.g. the engine's `wait_closed()`)."""

        async def wait() -> None:
            await ended

        task = asyncio.create_task(wait(), name=f"supervise:{name}")
        self._watchers.add(task)
        self.watch_task(name, task, why)

    def watch_recovery(self, name: str, down: Callable[[], str | None]) -> None:
        """Fail when `down()` keeps giving a reason for `recovery_seconds`."""
        self._recoveries[name] = down
        if self._checker is None:
            self._checker = asyncio.create_task(self._check_loop(), name="supervise:recovery")

    # -- outcome -------------------------------------------------------------------------------

    def fail(self, reason: str) -> None:
        """Record the first failure (later ones are only logged) and wake `wait_failed`."""
        if self._stopped:
            return
        if self.failure is not None:
            log.warning("also failing: %s", reason)
            return
        self.failure = reason
        log.error("the process must exit: %s", reason)
        self._failed.set()

    async def wait_failed(self) -> str:
        """Return the failure once there is one."""
        await self._failed.wait()
        assert self.failure is not None
        return self.failure

    def liveness(self) -> str | None:
        """For `/healthz`: None while every part is alive, else the failure."""
        return self.failure

    async def stop(self) -> None:
        """End supervision (before a deliberate shutdown); safe to call more than once."""
        self._stopped = True
        tasks = [t for t in (self._checker, *self._watchers) if t is not None]
        self._checker = None
        self._watchers.clear()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    # -- recovery checks -----------------------------------------------------------------------

    def check_recoveries(self) -> None:
        """One round of `watch_recovery` checks (the loop calls it every `check_interval`)."""
        now = self._clock()
        for name, down in self._recoveries.items():
            reason = down()
            if reason is None:
                self._down_since.pop(name, None)
                continue
            since = self._down_since.setdefault(name, now)
            if now - since >= self.recovery_seconds:
                self.fail(f"{name} has been down for {now - since:.0f}s: {reason}")

    async def _check_loop(self) -> None:
        while not self._stopped and self.failure is None:
            self.check_recoveries()
            await asyncio.sleep(self.check_interval)
