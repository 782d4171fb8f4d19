"""The Kubernetes half of the service: client, informers, reconcile steps and the engine.

`ReconcilingComponent` is the `BackgroundComponent` that `app.main.Service` runs when it has
Kubernetes settings (always under `python -m app serve|dev`; tests may run the API alone):

    start: connect the client → informers + steps installed → informers started →
           (in the background) a dead earlier run's leases released → every informer
           synced → engine started → what the cluster lacks of the database woken
           (`app.reconcile.steps.healing`; `healed` says what, once `heal_done` is set)
    stop:  engine stopped (steps finish, leases released) → informers stopped → client closed

The engine starts only after the first lists, so no step reads an unsynced cache (steps would
fall back to reads, not duplicates, but a cold start would cost one GET per workload). Start
does not wait for the sync: the HTTP server is up meanwhile and `/readyz` answers 503 naming
the kinds still listing, then 200 once the engine runs.

`supervise(supervisor)` hands the process supervisor (`app.supervision`) what must not die:
the engine (from its start to its close), every informer's loop, and what must recover within
the bound: every informer's list/watch and, once the engine runs, its doorbell's LISTEN
connection.

Order on stop matters: the informers are stopped before the client is closed, or their
watches fail with aiohttp's "Session is closed" instead of ending cleanly; the engine is
stopped before the informers, so no step runs against a cache that stopped changing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING

from app.kube.client import KubeClient, KubeSettings
from app.kube.informers import BACKOFF_CAP_SECONDS, Informers
from app.reconcile.steps import install_steps
from app.reconcile.steps.healing import Healed, heal_after_sync

if TYPE_CHECKING:
    from collections.abc import Callable

    from app.config import Settings
    from app.kube.watching import Informer
    from app.reconcile.engine import Reconciler
    from app.reconcile.steps.context import StepContext
    from app.store.db import Database
    from app.supervision import Supervisor

log = logging.getLogger("aicp")


def kube_settings_for(settings: Settings) -> KubeSettings:
    """The client settings of a process: its kubeconfig (dev mode's embedded simulator, or
    `KUBECONFIG`) and its write rate limit."""
    return KubeSettings(
        kubeconfig=settings.kubeconfig,
        write_qps=settings.kube_write_qps,
        write_burst=settings.kube_write_burst,
        log_connection_pool_size=settings.log_follows_max,
    )


class ReconcilingComponent:
    """Kubernetes client, informers, steps and engine, started and stopped as one (see above).

    `kube` and `informers` exist once `start()` has returned; `start()` raises
    `app.kube.client.KubeConfigError` when no cluster configuration is found.
    """

    def __init__(
        self,
        engine: Reconciler,
        db: Database,
        settings: KubeSettings,
        *,
        instance_id: str,
        grace: float,
        informer_backoff_cap: float = BACKOFF_CAP_SECONDS,
        service_ingress_namespace: str | None = None,
    ) -> None:
        self.engine = engine
        self.service_ingress_namespace = service_ingress_namespace
        self.db = db
        self.settings = settings
        self.instance_id = instance_id
        self.grace = grace
        self.informer_backoff_cap = informer_backoff_cap
        self.kube: KubeClient | None = None
        self.informers: Informers | None = None
        self._engine_start: asyncio.Task[None] | None = None
        self._informer_tasks: list[asyncio.Task[None]] = []
        #: What the first lists lacked of what the database remembers (set with `heal_done`).
        self.healed = Healed()
        self.heal_done = asyncio.Event()

    async def start(self) -> None:
        self.kube = await KubeClient.connect(self.settings)
        log.info("Kubernetes API server: %s", self.kube.host)
        self.informers = Informers(self.kube, backoff_cap=self.informer_backoff_cap)
        # Steps subscribe to the informers before they start, so the first list's ADDEDs
        # are routed too.
        ctx = install_steps(
            self.engine,
            db=self.db,
            kube=self.kube,
            informers=self.informers,
            instance_id=self.instance_id,
            service_ingress_namespace=self.service_ingress_namespace,
        )
        self._informer_tasks = self.informers.start()
        self._engine_start = asyncio.create_task(
            self._run_engine_when_synced(self.informers, ctx), name="reconcile-start"
        )

    async def _run_engine_when_synced(self, informers: Informers, ctx: StepContext) -> None:
        """Start the engine once every informer has listed, wake what the cluster lacks;
        return when the engine has closed."""
        # After a crash-restart under the same instance id, the dead run's leases go to the
        # peers now, while the informers list (seconds under load), not once they are synced.
        await self.engine.release_predecessors()
        await informers.wait_synced()
        log.info("informers synced; starting the reconcile engine")
        await self.engine.start()
        self.healed = await heal_after_sync(self.engine, ctx)
        self.heal_done.set()
        await self.engine.wait_closed()

    def supervise(self, supervisor: Supervisor) -> None:
        """Register what must not die, and what must recover, with the process supervisor."""
        engine = self.engine
        if self._engine_start is not None:
            supervisor.watch_task(
                "the reconcile engine",
                self._engine_start,
                engine.failure_reason,
            )
        assert self.informers is not None, "supervise() after start()"
        for informer, task in zip(self.informers.all, self._informer_tasks, strict=True):
            supervisor.watch_task(f"the {informer.kind} informer", task)
            supervisor.watch_recovery(f"the {informer.kind} informer", _failing_of(informer))

        def doorbell_down() -> str | None:
            if not engine.running or engine.doorbell.listening.is_set():
                return None
            return "the doorbell's LISTEN connection is lost and not yet re-established"

        supervisor.watch_recovery("the doorbell", doorbell_down)

    async def readiness(self) -> str | None:
        """`/readyz`: the kinds not listed yet, a failed engine start, or the engine's own."""
        if self.informers is None:
            return "the Kubernetes client has not started"
        missing = self.informers.not_synced()
        if missing:
            return f"informers not synced: {', '.join(missing)}"
        if self.engine.running and not self.heal_done.is_set():
            return "repairing what the cluster lacks of the database (first lists just in)"
        starting = self._engine_start
        if starting is not None and starting.done() and not starting.cancelled():
            failure = starting.exception()
            if failure is not None:
                return f"the reconcile engine failed to start: {failure!r}"
        return await self.engine.readiness()

    async def stop(self) -> None:
        if self._engine_start is not None and not self._engine_start.done():
            self._engine_start.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._engine_start
        try:
            await self.engine.stop(grace=self.grace)
        finally:
            if self.informers is not None:
                await self.informers.stop()
            if self.kube is not None:
                await self.kube.close()


def _failing_of(informer: Informer) -> Callable[[], str | None]:
    """Why `informer` cannot list or watch right now (None while it can)."""
    return lambda: informer.failing
