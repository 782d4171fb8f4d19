"""The `Reconciler`: leases, doorbell, sweep, queue and workers as one supervised unit.

    doorbell (LISTEN) ─ring─▶ claimer ─┐
    informer handlers ─wake─▶ claimer ─┤ granted ─▶ lease book ─▶ work queue ─▶ workers ─▶ steps
    sweeper (every interval) ──────────┘                ▲
    lease keeper (every ttl/3) ── renew / drop ─────────┘

Every background task is named and held here. `start()` first expires the leases a dead
earlier incarnation of this same instance id left behind (a container restarted under its pod
name), then waits until the doorbell listens (on the process's LISTEN connection, `listener`,
which the engine does not run), so a NOTIFY committed after `start()` returns is heard. While
the database refuses connections, start retries for up to `start_timeout` seconds, then raises.
A supervisor watches the root tasks: if one ends while the engine is running (a bug — each
loop handles its own errors), it stops them all and records the failure in `failure`;
`wait_closed()` returns then.

`stop(grace)`: stop taking new work (doorbell, claimer, sweeper), let steps in flight finish
within `grace` seconds, cancel the rest, then release every held lease in one statement that
also rings the doorbell for each, so a peer takes over at once rather than after the TTL.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from app.backoff import Backoff
from app.reconcile.claiming import Claimer, Sweeper
from app.reconcile.doorbell import Doorbell
from app.reconcile.leasing import LeaseBook, LeaseKeeper
from app.reconcile.metrics import PrometheusObserver
from app.reconcile.queue import WorkQueue
from app.reconcile.workers import Workers
from app.store import leases
from app.store.db import UNAVAILABLE_ERRORS, ReservedPool
from app.store.leases import ResourceKey

if TYPE_CHECKING:
    from collections.abc import Coroutine, Mapping
    from typing import Any
    from uuid import UUID

    from app.config import Settings
    from app.domain.kinds import Kind
    from app.reconcile.workers import ReconcileFn
    from app.store.db import Connection, Database
    from app.store.leases import Grant
    from app.store.listener import Listener

log = logging.getLogger(__name__)


class EngineObserver(Protocol):
    """Metrics hooks: steps (see `workers.StepObserver`), leases held, reconcile lag."""

    def step_finished(self, kind: Kind, result: str, seconds: float, error: str | None) -> None: ...

    def leases_held(self, counts: Mapping[Kind, int]) -> None: ...

    def lag(self, seconds: Mapping[Kind, float]) -> None: ...


#: The reserved connections: the lease keeper, the claimer and the sweeper, one each.
RESERVED_CONNECTIONS = 3


@dataclass(frozen=True, slots=True)
class NewLease:
    """A lease taken inside a not yet committed transaction (see `Reconciler.lease_new`)."""

    grant: Grant
    sent: float  # loop time before the statement was sent: the local deadline counts from it
    project: UUID | None = None  # the resource's project: its lane in the work queue


@dataclass(frozen=True, slots=True)
class EngineConfig:
    """How one replica's engine runs (docs/DESIGN.md §9 names the environment variables)."""

    instance_id: str  # the lease owner; unique among running processes (a pod name)
    # The settings' (AICP_LEASE_TTL_SECONDS, AICP_SWEEP_INTERVAL_SECONDS, AICP_WORKERS).
    lease_ttl: float
    sweep_interval: float
    workers: int
    # This run of the process under `instance_id`: its leases are told apart from those of a
    # dead predecessor with the same id.
    incarnation: str = field(default_factory=lambda: secrets.token_hex(8))
    sweep_batch: int = 100
    retry_base: float = 0.05
    retry_cap: float = 60.0
    start_timeout: float = 60.0  # start retries while the database refuses, this long at most
    step_timeout: float = 120.0  # a step still running after this is cancelled and retried

    @classmethod
    def of(cls, settings: Settings) -> EngineConfig:
        """The engine the environment sets (app/config.py states the defaults)."""
        return cls(
            instance_id=settings.instance_id,
            lease_ttl=settings.lease_ttl_seconds,
            sweep_interval=settings.sweep_interval_seconds,
            workers=settings.workers,
        )


class Reconciler:
    """Runs reconcile steps for the resources this replica holds leases on."""

    def __init__(
        self,
        db: Database,
        config: EngineConfig,
        listener: Listener,
        observer: EngineObserver | None = None,
    ) -> None:
        self.config = config
        self._db = db
        self._observer: EngineObserver = observer or PrometheusObserver()
        # The project of each held key whose project is known (the API says it when it leases
        # a new resource): the queue serves projects in turn, so one cannot starve another.
        self._projects: dict[ResourceKey, UUID] = {}
        self.queue: WorkQueue[ResourceKey] = WorkQueue(
            Backoff(base=config.retry_base, cap=config.retry_cap), group_of=self._project_of
        )
        self.book = LeaseBook(
            config.instance_id, config.lease_ttl, self._on_drop, incarnation=config.incarnation
        )
        # The keeper, the claimer and the sweeper: one statement in flight each, never queued
        # behind the workers and requests on the shared pool.
        self.reserved = ReservedPool(db, size=RESERVED_CONNECTIONS)
        self.keeper = LeaseKeeper(self.reserved, self.book)
        self.claimer = Claimer(self.reserved, self.book, self._on_granted)
        self.sweeper = Sweeper(
            self.reserved,
            self.book,
            self._on_granted,
            interval=config.sweep_interval,
            batch=config.sweep_batch,
            on_lag=self._observer.lag,
            on_replay=self._on_replay,
        )
        self.doorbell = Doorbell(listener, self._on_doorbell, self._on_listening)
        self.workers = Workers(
            self.queue,
            self.book,
            release=self.keeper.release,
            lose=self.book.drop,
            observer=self._observer,
            step_timeout=config.step_timeout,
        )
        self._intake: list[asyncio.Task[None]] = []  # claimer, sweeper
        self._workers: list[asyncio.Task[None]] = []
        self._keeper: asyncio.Task[None] | None = None
        self._supervisor: asyncio.Task[None] | None = None
        self._stopping: asyncio.Future[None] | None = None
        self._closed = asyncio.Event()
        self.failure: BaseException | None = None
        self.failed_task: str | None = None  # the name of the root task whose end stopped it

    @property
    def owner(self) -> str:
        return self.config.instance_id

    # -- the seams for steps and informers ---------------------------------------------------

    def register(self, kind: Kind, fn: ReconcileFn) -> None:
        """Use `fn` as the reconcile step for `kind` (replaces the default no-op)."""
        self.workers.register(kind, fn)

    def holds(self, kind: Kind, resource_id: UUID) -> bool:
        """True while this replica holds the resource's lease."""
        return self.book.holds(ResourceKey(kind, resource_id))

    def enqueue_local(self, kind: Kind, resource_id: UUID) -> bool:
        """Queue the resource if this replica holds its lease (informer handlers: no I/O).

        Returns False, doing nothing, for a resource leased elsewhere or by nobody: its owner
        sees the same event. A lease in the book whose local trust has lapsed while its renewal
        is on the way counts as held: the event must not be lost, and the worker waits for the
        renewal (or the drop) before it acts.
        """
        key = ResourceKey(kind, resource_id)
        if not self.book.knows(key):
            return False
        self.queue.add(key)
        return True

    def wake(self, kind: Kind, resource_id: UUID) -> None:
        """Queue the resource if held; otherwise try to claim its lease first (like a doorbell).

        For events about resources nobody may hold, e.g. drift on a settled pool whose
        previous owner is gone.
        """
        self._on_doorbell(ResourceKey(kind, resource_id))

    def retry_failed_now(self) -> None:
        """A dependency came back (the Kubernetes API answers again): retry now every resource
        waiting out a failure backoff instead of at its (by then long) next attempt."""
        count = self.queue.retry_failed_now()
        if count:
            log.info("retrying %d resources now that the Kubernetes API answers again", count)

    async def lease_new(
        self, conn: Connection, kind: Kind, resource_id: UUID, project: UUID | None = None
    ) -> NewLease | None:
        """In the API transaction that creates a resource: lease it to this replica, instead of
        ringing the doorbell (docs/DESIGN.md §5). Call `lease_committed` once the transaction has
        committed; if it rolls back, drop the result. A lease never handed to
        `lease_committed` is released by the keeper after two renewals and swept up again.
        `project` (the resource's) is its lane in the work queue while the lease is held.
        """
        key = ResourceKey(kind, resource_id)
        sent = self.book.now()
        grant = await leases.take_new(
            conn,
            key,
            owner=self.owner,
            ttl=self.config.lease_ttl,
            incarnation=self.config.incarnation,
        )
        return None if grant is None else NewLease(grant, sent, project)

    def lease_committed(self, lease: NewLease) -> None:
        """The creating transaction committed: book the lease and queue the resource."""
        self._on_granted([lease.grant], lease.sent, lease.project)

    # -- lifecycle -----------------------------------------------------------------------------

    async def start(self) -> None:
        """Start every task; return once the doorbell listens. Retries while the database
        refuses; raises TimeoutError after `start_timeout` seconds without success."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.config.start_timeout
        await self._release_predecessors(deadline)  # if release_predecessors() was not called
        # Open now, not on the first claim: a claim delayed by the connect could land after the
        # resource's step released the lease, and take it again.
        await self.reserved.get()
        self._intake = [self._spawn(self.claimer.run(), "reconcile-claimer")]
        await self.doorbell.open()
        try:
            await asyncio.wait_for(self.doorbell.listening.wait(), max(0.0, deadline - loop.time()))
        except TimeoutError:
            self.doorbell.close()
            await self._cancel(self._intake)
            log.error(
                "reconcile engine %s could not listen within %.0fs (%d failed connections)",
                self.owner,
                self.config.start_timeout,
                self.doorbell.failures,
            )
            raise
        self._keeper = self._spawn(self.keeper.run(), "reconcile-lease-keeper")
        self._workers = [
            self._spawn(self.workers.run(), f"reconcile-worker-{n}")
            for n in range(self.config.workers)
        ]
        self._intake.append(self._spawn(self.sweeper.run(), "reconcile-sweeper"))
        self._supervisor = self._spawn(self._supervise(), "reconcile-supervisor")
        log.info("reconcile engine %s started with %d workers", self.owner, self.config.workers)

    async def release_predecessors(self) -> None:
        """Expire (and ring for) the live leases of a dead earlier run of this instance id, so
        peers take them over now. Call it as early as the database allows, before whatever
        makes the start slow (the informers' first lists): `start()` does it too, but only once
        they are synced. Retries while the database is unavailable, up to `start_timeout`."""
        loop = asyncio.get_running_loop()
        await self._release_predecessors(loop.time() + self.config.start_timeout)

    async def _release_predecessors(self, deadline: float) -> None:
        """Expire what a dead incarnation of this owner still holds, retrying until `deadline`
        while the database is unavailable."""
        loop = asyncio.get_running_loop()
        attempt = 0
        backoff = Backoff(0.1, 2.0)
        while True:
            try:
                released = await leases.release_predecessors(
                    self._db.pool, owner=self.owner, incarnation=self.config.incarnation
                )
            except UNAVAILABLE_ERRORS as exc:
                attempt += 1
                delay = backoff.delay(attempt)
                if loop.time() + delay > deadline:
                    raise TimeoutError(f"the database stayed unavailable: {exc!r}") from exc
                log.warning(
                    "engine start: database unavailable (%s: %s; attempt %d); retrying in %.2fs",
                    type(exc).__name__,
                    exc,
                    attempt,
                    delay,
                )
                await asyncio.sleep(delay)
                continue
            if released:
                log.info("expired %d leases left by an earlier run of %s", released, self.owner)
            return

    async def stop(self, grace: float = 10.0) -> None:
        """Graceful stop (see the module docstring). Safe to call more than once."""
        if self._stopping is None:
            self._stopping = asyncio.create_task(self._stop(grace), name="reconcile-stop")
        await asyncio.shield(self._stopping)

    async def halt(self) -> None:
        """Stop every task at once and keep the leases: to peers this looks like a crash, and
        they take over only when the leases expire. For tests and a last resort."""
        if self._stopping is None:
            self._stopping = asyncio.get_running_loop().create_future()
            self._stopping.set_result(None)
        self.doorbell.close()
        tasks = [*self._intake, *self._workers]
        tasks += [t for t in (self._keeper, self._supervisor) if t is not None]
        await self._cancel(tasks)
        self.queue.close()
        await self.reserved.close()
        self._closed.set()

    def failure_reason(self) -> str | None:
        """Which root task ended and how, once one has stopped the engine; else None."""
        if self.failure is None:
            return None
        return f"its task {self.failed_task} ended: {self.failure!r}"

    @property
    def running(self) -> bool:
        """Started, and neither stopping nor stopped."""
        return self._supervisor is not None and self._stopping is None

    async def readiness(self) -> str | None:
        """A `/readyz` check: None while running, else why not."""
        if self._supervisor is None:
            return "the reconciler has not started"
        if self.failure is not None or self._closed.is_set():
            return "the reconciler has stopped"
        return None

    async def wait_closed(self) -> None:
        """Return when the engine has stopped, by `stop()` or because a root task died."""
        await self._closed.wait()

    async def _stop(self, grace: float) -> None:
        self.doorbell.close()
        await self._cancel(self._intake)
        self.queue.close()
        if self._workers:
            _, pending = await asyncio.wait(self._workers, timeout=grace)
            if pending:
                log.warning("cancelling %d steps still running after %.1fs", len(pending), grace)
            await self._cancel(list(pending))
        await self._cancel([self._keeper] if self._keeper else [])
        try:
            released = await self.keeper.release_all()
            log.info("released %d leases", released)
        except Exception:
            log.exception("releasing leases failed; peers take over when they expire")
        await self.reserved.close()
        if self._supervisor is not None and self._supervisor is not asyncio.current_task():
            await self._cancel([self._supervisor])
        self._closed.set()

    async def _supervise(self) -> None:
        roots = [*self._intake, *self._workers]
        if self._keeper is not None:
            roots.append(self._keeper)
        done, _ = await asyncio.wait(roots, return_when=asyncio.FIRST_COMPLETED)
        if self._stopping is not None:
            return
        task = next(iter(done))
        exc = task.exception() if not task.cancelled() else asyncio.CancelledError()
        self.failure = exc or RuntimeError(f"{task.get_name()} returned")
        self.failed_task = task.get_name()
        log.error("reconcile task %s ended; stopping the engine", task.get_name(), exc_info=exc)
        self._stopping = asyncio.create_task(self._stop(0.0), name="reconcile-stop")

    # -- callbacks from the parts --------------------------------------------------------------

    def _on_doorbell(self, key: ResourceKey) -> None:
        # Held already: the lease is ours and live, so skip the round trip.
        if self.book.holds(key):
            self.queue.add(key)
        else:
            self.claimer.ring(key)

    def _on_listening(self) -> None:
        # The first connection missed nothing this replica held (what the API leased to it
        # meanwhile is queued directly); after a gap, held resources may have changed unheard.
        if self.doorbell.connects > 1:
            self.sweeper.reconnected()
        else:
            self.sweeper.kick()

    def _on_replay(self, keys: list[ResourceKey]) -> None:
        for key in keys:
            self.queue.add(key)

    def _on_granted(self, grants: list[Grant], sent: float, project: UUID | None = None) -> None:
        for key in self.book.granted(grants, sent):
            if project is not None:
                self._projects[key] = project
            self.queue.add(key)
        self._leases_changed()

    def _on_drop(self, key: ResourceKey) -> None:
        self.queue.drop(key)
        self._projects.pop(key, None)
        self._leases_changed()

    def _project_of(self, key: ResourceKey) -> UUID | None:
        """The work queue's lane of `key`: its project when known (a project is its own). The
        keys this replica claimed through the doorbell or the sweep, whose project it was not
        told, share one lane."""
        if key.kind == "project":
            return key.id
        return self._projects.get(key)

    def _leases_changed(self) -> None:
        self._observer.leases_held(self.book.counts())

    # -- tasks ---------------------------------------------------------------------------------

    @staticmethod
    def _spawn(coro: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
        return asyncio.create_task(coro, name=name)

    @staticmethod
    async def _cancel(tasks: list[asyncio.Task[None]]) -> None:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
