"""The composition root: wires the store, the HTTP API and the background components.

``Service`` owns the lifecycle of one aicp process (docs/DESIGN.md §2):

    start: DB pools (the API's, the reconcile workers') → migrations (advisory lock) →
           background components → HTTP server bound
    stop:  /readyz 503 → HTTP server stops accepting and drains → background components stop
           (in reverse order) → DB pools closed

``run_service(settings)`` runs one until SIGTERM/SIGINT, or until the process supervisor
(``app.supervision``) reports that a long-lived part died or did not recover in time: then it
stops the service in the same order and raises ``ProcessFailed`` (exit status 1), so that
Kubernetes restarts the container. Background components (the reconciler, the informers, the
retention purge) are started and stopped in ``_start_background`` / ``_stop_background``:
that is the seam where they plug in, and each hands the supervisor what it runs.

With ``kube_settings`` (always under ``run_service``) the reconciler component is
``app.wiring.ReconcilingComponent``: Kubernetes client, informers, the reconcile steps and the
engine. Without them (tests of the API alone) the engine runs with its no-op steps.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import httpx
import uvicorn

from app.api import shutdown
from app.api.app import ApiDependencies, asgi_app, create_app
from app.api.http_limits import HttpLimits, limited_protocol
from app.api.people import SignOn
from app.api.ratelimit import RateLimits
from app.domain.errors import ServiceUnavailable
from app.identity.keys import KeyCache
from app.identity.verifier import OidcConfig, Verifier
from app.kube.client import require_configuration
from app.reconcile.engine import EngineConfig, Reconciler
from app.store.db import Database
from app.store.listener import Listener
from app.store.migrations import migrate
from app.store.retention import Purger, Retention
from app.store.token_cache import TokenCache
from app.streams.changefeed import ChangeFeed, FeedConfig
from app.streams.follows import FollowLimits
from app.supervision import ProcessFailed, Supervisor
from app.wiring import ReconcilingComponent, kube_settings_for

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterator

    from litestar import Litestar

    from app.api.health import ReadinessCheck
    from app.config import Settings
    from app.domain.node_fit import NodeSource
    from app.kube.client import KubeClient, KubeSettings

log = logging.getLogger("aicp")

SHUTDOWN_GRACE_SECONDS = 10
#: At start, a database that refuses connections is waited for this long before giving up.
STARTUP_DB_WAIT_SECONDS = 30.0


class _QuietServer(uvicorn.Server):
    """uvicorn without its own signal handlers: ``run_service`` owns SIGTERM and SIGINT."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


@dataclass
class BackgroundComponent:
    """Something that runs beside the API: started after migrations, stopped before the pool."""

    name: str
    start: Callable[[], Awaitable[None]]
    stop: Callable[[], Awaitable[None]]
    readiness: ReadinessCheck | None = None
    #: After start: register with the supervisor what must keep running (and recover).
    supervise: Callable[[Supervisor], None] | None = None


@dataclass
class Service:
    """One aicp process: database, API server and background components."""

    settings: Settings
    kube_settings: KubeSettings | None = None
    db: Database | None = None
    #: The reconcile workers' own connections (`AICP_DB_RECONCILE_POOL_SIZE`), apart from the
    #: API's (`db`): a request never waits behind reconcile steps for a connection.
    reconcile_db: Database | None = None
    app: Litestar | None = None
    components: list[BackgroundComponent] = field(default_factory=list)
    reconciler: Reconciler | None = None
    kubernetes: ReconcilingComponent | None = None
    listener: Listener | None = None
    token_cache: TokenCache | None = None
    supervisor: Supervisor = field(init=False)
    feed: ChangeFeed | None = None
    _server: uvicorn.Server | None = None
    _server_task: asyncio.Task[None] | None = None
    _socket: socket.socket | None = None
    _started: list[BackgroundComponent] = field(default_factory=list)
    #: The HTTP client that fetches the identity provider's keys (None: no issuer).
    _idp_client: httpx.AsyncClient | None = None

    def __post_init__(self) -> None:
        self.supervisor = Supervisor(recovery_seconds=self.settings.recovery_timeout_seconds)

    @property
    def port(self) -> int:
        """The bound HTTP port (useful with ``AICP_HTTP_PORT=0``)."""
        assert self._socket is not None, "service not started"
        port: int = self._socket.getsockname()[1]
        return port

    @property
    def kube(self) -> KubeClient | None:
        """The Kubernetes client (None without ``kube_settings`` or before start)."""
        return self.kubernetes.kube if self.kubernetes is not None else None

    def _cluster_nodes(self) -> NodeSource | None:
        """The Node informer's view of the nodes, for the submit's fit check (None: no cluster)."""
        if self.kubernetes is None or self.kubernetes.informers is None:
            return None
        return self.kubernetes.informers.node_capacities

    @property
    def url(self) -> str:
        host = self.settings.http_host
        shown = "127.0.0.1" if host in ("0.0.0.0", "") else host
        return f"http://{shown}:{self.port}"

    async def start(self) -> None:
        settings = self.settings
        assert settings.database_url is not None, "database_url is resolved before start"
        self.db = await Database.connect(
            settings.database_url, size=settings.db_pool_size, retry_for=STARTUP_DB_WAIT_SECONDS
        )
        try:
            self.reconcile_db = await Database.connect(
                settings.database_url,
                size=settings.db_reconcile_pool_size,
                retry_for=STARTUP_DB_WAIT_SECONDS,
            )
            applied = await migrate(self.db)
            if applied:
                log.info("database migrated to version %d", applied[-1])
            await self._start_background()
            deps = ApiDependencies(
                db=self.db,
                admin_token=settings.admin_token,
                readiness_checks=[c.readiness for c in self.components if c.readiness],
                kube=self.kube,  # the reconciler's client serves the one live read (pod logs)
                reconciler=self.reconciler,
                liveness=self.supervisor.liveness,
                token_cache=self.token_cache,
                feed=self.feed,
                tokens_per_project=settings.tokens_per_project,
                rate_limits=RateLimits.of(settings),
                follow_limits=FollowLimits.of(settings),
                install_namespace=settings.install_namespace,
                workload_start_deadline_seconds=settings.workload_start_deadline_seconds,
                sign_on=await self._sign_on(),
                nodes=self._cluster_nodes(),
            )
            self.app = create_app(deps)
            await self._start_http()
            self._supervise()
        except BaseException:
            await self.stop()
            raise

    async def _sign_on(self) -> SignOn | None:
        """The OpenID Connect verifier when an issuer is configured, its keys fetched once now
        (an issuer down at start is logged; verification asks again later)."""
        settings = self.settings
        if settings.oidc_issuer is None or settings.oidc_audience is None:
            return None
        self._idp_client = httpx.AsyncClient(timeout=httpx.Timeout(10.0), follow_redirects=False)
        keys = KeyCache(
            settings.oidc_issuer,
            self._idp_client,
            refresh_interval=settings.oidc_keys_refresh_seconds,
        )
        config = OidcConfig(
            issuer=settings.oidc_issuer,
            audience=settings.oidc_audience,
            username_claim=settings.oidc_username_claim,
            groups_claim=settings.oidc_groups_claim,
            algorithms=settings.oidc_algorithms,
            leeway_seconds=settings.oidc_leeway_seconds,
        )
        with contextlib.suppress(ServiceUnavailable):
            await keys.refresh()
        log.info("single sign-on: issuer %s, audience %s", config.issuer, config.audience)
        return SignOn(
            Verifier(config, keys),
            admin_groups=settings.oidc_admin_groups,
            cli_client_id=settings.oidc_cli_client_id,
            dashboard_client_id=settings.oidc_dashboard_client_id,
        )

    def _supervise(self) -> None:
        """Hand the supervisor the HTTP server and what every background component runs."""
        assert self._server_task is not None
        self.supervisor.watch_task("the HTTP server", self._server_task)
        for component in self._started:
            if component.supervise is not None:
                component.supervise(self.supervisor)

    async def wait_failed(self) -> str:
        """Return why the process must exit, once a long-lived part has died (see above)."""
        return await self.supervisor.wait_failed()

    # --- the seam for background components ---------------------------------------------------

    def _builtin_components(self) -> list[BackgroundComponent]:
        return [
            self._listener_component(),
            self._purge_component(),
            *self._token_cache_component(),
            self._feed_component(),
            self._reconciler_component(),
        ]

    def _listener_component(self) -> BackgroundComponent:
        """The process's one LISTEN connection (`app.store.listener`), started first: the token
        cache, the change feed and the engine's doorbell listen to their channels on it.

        Its loop never ends on its own (it reconnects after any loss), so a database outage does
        not fail the process through it; the doorbell's recovery is bounded (`app.wiring`)."""
        settings = self.settings
        assert settings.database_url is not None
        listener = self.listener = Listener(
            settings.database_url, application_name=f"aicp listener {settings.instance_id}"
        )

        def supervise(supervisor: Supervisor) -> None:
            if listener.task is not None:
                supervisor.watch_task("the LISTEN connection", listener.task)

        return BackgroundComponent("listener", listener.start, listener.stop, supervise=supervise)

    def _purge_component(self) -> BackgroundComponent:
        """Expired idempotency keys, and events and tombstones past retention, purged hourly."""
        assert self.db is not None
        purger = Purger(self.db, Retention.of(self.settings))

        def supervise(supervisor: Supervisor) -> None:
            if purger.task is not None:
                supervisor.watch_task("the retention purge", purger.task)

        return BackgroundComponent(
            "retention-purge", purger.start, purger.stop, supervise=supervise
        )

    def _token_cache_component(self) -> list[BackgroundComponent]:
        """The project token cache (none with AICP_TOKEN_CACHE_SIZE=0); it hears `aicp_tokens`
        on the process's LISTEN connection and is bypassed while that is down."""
        settings = self.settings
        if settings.token_cache_size == 0:
            return []
        assert self.listener is not None
        cache = self.token_cache = TokenCache(self.listener, max_entries=settings.token_cache_size)

        async def stop() -> None:
            cache.close()

        return [BackgroundComponent("token-cache", cache.open, stop)]

    def _feed_component(self) -> BackgroundComponent:
        """The change feed of the live streams; it hears `aicp_watch` and `aicp_tokens` on the
        process's LISTEN connection."""
        assert self.db is not None and self.listener is not None
        feed = self.feed = ChangeFeed(self.db, FeedConfig.of(self.settings), self.listener)

        def supervise(supervisor: Supervisor) -> None:
            for running in feed.tasks:
                supervisor.watch_task("the change feed of the live streams", running)

        return BackgroundComponent("changefeed", feed.start, feed.stop, supervise=supervise)

    def _reconciler_component(self) -> BackgroundComponent:
        """The reconcile engine: with Kubernetes (steps, informers) when `kube_settings` is
        set, else alone (steps register on `self.reconciler` before it starts)."""
        settings = self.settings
        assert self.reconcile_db is not None and self.listener is not None
        engine = self.reconciler = Reconciler(
            self.reconcile_db, EngineConfig.of(self.settings), self.listener
        )

        if self.kube_settings is not None:
            kubernetes = self.kubernetes = ReconcilingComponent(
                engine,
                self.reconcile_db,
                self.kube_settings,
                instance_id=settings.instance_id,
                grace=SHUTDOWN_GRACE_SECONDS,
                service_ingress_namespace=settings.service_ingress_namespace,
            )
            return BackgroundComponent(
                "reconciler",
                kubernetes.start,
                kubernetes.stop,
                kubernetes.readiness,
                supervise=kubernetes.supervise,
            )

        async def stop() -> None:
            await engine.stop(grace=SHUTDOWN_GRACE_SECONDS)

        def supervise(supervisor: Supervisor) -> None:
            supervisor.watch_until(
                "the reconcile engine",
                engine.wait_closed(),
                engine.failure_reason,
            )

        return BackgroundComponent(
            "reconciler", engine.start, stop, engine.readiness, supervise=supervise
        )

    async def _start_background(self) -> None:
        """Start every background component, in order. The reconciler is added here."""
        self.components = [*self._builtin_components(), *self.components]
        for component in self.components:
            await component.start()
            self._started.append(component)
            log.debug("started %s", component.name)

    async def _stop_background(self) -> None:
        while self._started:
            component = self._started.pop()
            try:
                await component.stop()
            except Exception:
                log.exception("stopping %s failed", component.name)

    # --- HTTP ----------------------------------------------------------------------------------

    async def _start_http(self) -> None:
        assert self.app is not None
        settings = self.settings
        limits = HttpLimits(
            max_head_bytes=settings.http_max_head_bytes,
            max_request_line_bytes=settings.http_max_request_line_bytes,
            max_headers=settings.http_max_headers,
            head_timeout_seconds=settings.http_head_timeout_seconds,
            body_timeout_seconds=settings.http_body_timeout_seconds,
            max_connections=settings.http_max_connections,
        )
        config = uvicorn.Config(
            asgi_app(self.app),
            http=limited_protocol(limits),
            loop="none",
            lifespan="off",
            log_config=None,
            access_log=False,
            server_header=False,
            timeout_graceful_shutdown=SHUTDOWN_GRACE_SECONDS,
        )
        self._server = _QuietServer(config)
        # Bind here (not inside uvicorn) so the port is known as soon as start() returns.
        sock = socket.socket(socket.AF_INET6 if ":" in self.settings.http_host else socket.AF_INET)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.settings.http_host, self.settings.http_port))
        sock.set_inheritable(True)
        self._socket = sock
        self._server_task = asyncio.create_task(self._server.serve(sockets=[sock]), name="http")
        while not self._server.started:
            if self._server_task.done():
                await self._server_task
                raise RuntimeError("the HTTP server stopped while starting")
            await asyncio.sleep(0.005)

    async def stop(self) -> None:
        """Stop serving and release everything; safe to call more than once."""
        await self.supervisor.stop()  # parts stopping from now on are not failures
        if self.app is not None:
            shutdown.begin(self.app)  # readiness fails; log streams end with a last line
        if self.feed is not None:
            # Open streams would hold the HTTP server's drain for its whole grace period.
            self.feed.close_all("the server is shutting down")
        if self._server is not None and self._server_task is not None:
            self._server.should_exit = True
            with contextlib.suppress(asyncio.CancelledError):
                await self._server_task
            self._server = None
            self._server_task = None
        if self._socket is not None:
            self._socket.close()
            self._socket = None
        await self._stop_background()
        if self._idp_client is not None:
            await self._idp_client.aclose()
            self._idp_client = None
        if self.reconcile_db is not None:
            await self.reconcile_db.close()
            self.reconcile_db = None
        if self.db is not None:
            await self.db.close()
            self.db = None


async def run_service(
    settings: Settings, *, on_ready: Callable[[Service], None] | None = None
) -> None:
    """Run aicp until SIGTERM or SIGINT, then shut down in order (see module docstring).

    Always with Kubernetes: in-cluster configuration, else ``KUBECONFIG``, else
    ``settings.kubeconfig`` (dev mode's embedded simulator); `KubeConfigError` when none.
    Raises `ProcessFailed` after the shutdown when a long-lived part died or did not recover.
    """
    require_configuration(settings.kubeconfig)  # refuse before the database is touched
    service = Service(settings, kube_settings=kube_settings_for(settings))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    try:
        await service.start()
        log.info("aicp %s serving on %s", settings.instance_id, service.url)
        if on_ready is not None:
            on_ready(service)
        failure = await _first_of(stop.wait(), service.wait_failed())
        if failure is not None:
            log.error("shutting down because %s", failure)
            raise ProcessFailed(failure)
        log.info("shutting down")
    finally:
        await service.stop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)


async def _first_of(stopped: Awaitable[object], failed: Awaitable[str]) -> str | None:
    """Wait for a stop signal or a failure: None for the signal, else the failure."""
    signal_task = asyncio.ensure_future(stopped)
    failure_task = asyncio.ensure_future(failed)
    try:
        await asyncio.wait({signal_task, failure_task}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (signal_task, failure_task):
            task.cancel()
    if failure_task.done() and not failure_task.cancelled():
        return failure_task.result()
    return None
