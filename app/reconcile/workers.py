"""Workers: N coroutines taking keys from the queue and running one reconcile step each.

A step is `async def step(resource_id, fence) -> Result`, registered per kind. It reads current
state (the row, the informer caches), takes one corrective action, and says what comes next:

- `Result.done()`: nothing more until an event; the lease is kept (informer events for this
  resource keep coming here, which is how drift is noticed);
- `Result.requeue(after=s)`: run again in `s` seconds (polling a deadline, say);
- `Result.release()`: done, and this replica no longer needs the lease (the resource is
  finished or gone).

An exception, or a step still running after `step_timeout`, retries the key with backoff. A
transient failure (the database or the Kubernetes API unavailable, throttled, timed out, or a
write conflict) is a one-line warning with the attempt count; it becomes an error (with its
traceback) once a key has kept failing for `ESCALATE_AFTER_SECONDS` — it keeps being retried
at the capped backoff, but someone should look. Any other exception is a bug: an error at once.
`TerminalError` is logged and counted, not retried; `LeaseLost` drops the key at once and
nothing more is done for it here. A key whose lease is not (or no longer) held when it comes
up is skipped (a fenced write would fail anyway), or looked at again shortly when the lease is
still booked and only its renewal is late.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from app.domain.errors import ServiceUnavailable
from app.kube.errors import KubeError
from app.observability.logs import resource_var
from app.reconcile.errors import LeaseLost, TerminalError
from app.reconcile.queue import QueueClosed
from app.store.db import is_unavailable

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from uuid import UUID

    from app.domain.kinds import Kind
    from app.reconcile.fencing import Fence
    from app.reconcile.leasing import LeaseBook
    from app.reconcile.queue import WorkQueue
    from app.store.leases import ResourceKey

log = logging.getLogger(__name__)

#: A key whose lease is booked but not trusted right now (renewal pending) is retried this soon.
UNTRUSTED_RECHECK_SECONDS = 0.25

#: How long one key may keep failing transiently before it is logged as an error: well past any
#: brief outage (an apiserver restart, a database failover) and any burst of throttling.
ESCALATE_AFTER_SECONDS = 300.0


def is_transient(exc: BaseException) -> bool:
    """True for failures that retrying is expected to cure (see the module docstring)."""
    if isinstance(exc, (ServiceUnavailable, TimeoutError)) or is_unavailable(exc):
        return True
    if isinstance(exc, KubeError):
        return exc.code in (0, 409, 429) or exc.code >= 500
    return False


@dataclass(frozen=True, slots=True)
class Result:
    """What a step asks the engine to do next with its key."""

    requeue_after: float | None = None
    release_lease: bool = False

    @classmethod
    def done(cls) -> Result:
        return cls()

    @classmethod
    def requeue(cls, after: float) -> Result:
        return cls(requeue_after=after)

    @classmethod
    def release(cls) -> Result:
        return cls(release_lease=True)


class ReconcileFn(Protocol):
    """One reconcile step for one resource of a registered kind."""

    def __call__(self, resource_id: UUID, fence: Fence, /) -> Awaitable[Result]: ...


class StepObserver(Protocol):
    """Where workers report each step (metrics).

    `result` is one of `done`, `requeue`, `error` (retried), `terminal`, `lease_lost`;
    `error` names the exception class for the last three.
    """

    def step_finished(self, kind: Kind, result: str, seconds: float, error: str | None) -> None: ...


async def _no_op(resource_id: UUID, fence: Fence, /) -> Result:
    """Default step until real ones are registered: nothing to do, keep the lease."""
    return Result.done()


class Workers:
    """Runs registered steps for queued keys; owns no tasks (the engine holds them)."""

    def __init__(
        self,
        queue: WorkQueue[ResourceKey],
        book: LeaseBook,
        *,
        release: Callable[[ResourceKey], Awaitable[None]],
        lose: Callable[[ResourceKey], None],
        observer: StepObserver | None = None,
        step_timeout: float = 120.0,
    ) -> None:
        self._queue = queue
        self._step_timeout = step_timeout
        self._book = book
        self._release = release
        self._lose = lose
        self._observer = observer
        self._steps: dict[Kind, ReconcileFn] = {
            "project": _no_op,
            "pool": _no_op,
            "workload": _no_op,
        }
        self.busy = 0
        # Key → when it started failing (monotonic), while its failures are consecutive.
        self._failing_since: dict[ResourceKey, float] = {}
        self._escalated: set[ResourceKey] = set()

    def register(self, kind: Kind, fn: ReconcileFn) -> None:
        """Use `fn` as the step for every resource of `kind`."""
        self._steps[kind] = fn

    async def run(self) -> None:
        """One worker: take keys until the queue closes."""
        while True:
            try:
                key = await self._queue.get()
            except QueueClosed:
                return
            self.busy += 1
            try:
                await self.run_one(key)
            finally:
                self.busy -= 1

    async def run_one(self, key: ResourceKey) -> None:
        """Run `key`'s step once and settle the key in the queue according to the outcome."""
        fence = self._book.fence(key)
        if fence is None:
            if self._book.knows(key):
                # Booked, but its local trust lapsed with a renewal still to come: look again
                # shortly (a renewal extends it; a drop forgets the key and its timer).
                self._queue.done(key, requeue_after=UNTRUSTED_RECHECK_SECONDS)
                return
            self._queue.done(key)
            self._queue.drop(key)
            return
        started = time.perf_counter()
        outcome, error = "error", None
        resource = resource_var.set(f"{key.kind}:{key.id}")  # on every log line of the step
        try:
            # A step stuck on a call that never answers would hold its key and its worker
            # forever; past the deadline it counts as a failure and is retried with backoff.
            async with asyncio.timeout(self._step_timeout):
                result = await self._steps[key.kind](key.id, fence)
        except LeaseLost as exc:
            outcome, error = "lease_lost", type(exc).__name__
            log.info("dropping %s: %s", key, exc)
            self._queue.done(key)
            self._lose(key)
        except TerminalError as exc:
            outcome, error = "terminal", type(exc).__name__
            log.error("reconcile of %s failed for good: %s", key, exc)
            self._queue.done(key)
        except asyncio.CancelledError:
            self._queue.done(key)
            raise
        except Exception as exc:
            error = type(exc).__name__
            self._log_failure(key, exc)
            self._queue.done(key, failed=True)
        else:
            outcome = "requeue" if result.requeue_after is not None else "done"
            await self._settle(key, result)
        finally:
            resource_var.reset(resource)
            if outcome != "error":  # the failures in a row, if any, are over
                self._failing_since.pop(key, None)
                self._escalated.discard(key)
            if self._observer is not None:
                elapsed = time.perf_counter() - started
                self._observer.step_finished(key.kind, outcome, elapsed, error)

    def _log_failure(self, key: ResourceKey, exc: Exception) -> None:
        """A failed step's log line: a warning while a transient failure is young, an error
        once when it has lasted `ESCALATE_AFTER_SECONDS`, the traceback for anything else."""
        attempt = self._queue.failures(key) + 1
        since = self._failing_since.setdefault(key, time.monotonic())
        failing_for = time.monotonic() - since
        if not is_transient(exc):
            log.exception("reconcile of %s failed (attempt %d)", key, attempt)
        elif failing_for < ESCALATE_AFTER_SECONDS or key in self._escalated:
            log.warning("reconcile of %s failed (attempt %d), retrying: %s", key, attempt, exc)
        else:
            self._escalated.add(key)
            log.error(
                "reconcile of %s still failing after %d attempts in %.0fs; retrying at the "
                "capped backoff",
                key,
                attempt,
                failing_for,
                exc_info=exc,
            )

    async def _settle(self, key: ResourceKey, result: Result) -> None:
        # A release is skipped while an event for the key is pending (dirty): that event may
        # be the reason to keep going (a deletion rung during the last step), and done() will
        # run the key again.
        if result.release_lease and not self._queue.is_dirty(key):
            self._queue.done(key)
            self._queue.drop(key)
            try:
                await self._release(key)
            except Exception as exc:
                # Already forgotten locally; the lease row simply runs out its TTL.
                log.warning("releasing the lease of %s failed (%s); it runs out its TTL", key, exc)
            return
        self._queue.done(key, requeue_after=result.requeue_after)
