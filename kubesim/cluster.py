"""`Cluster`: kubesim in a running event loop — the store, the HTTP server and (optionally) the
controllers — with its URL and a kubeconfig for clients.

    async with Cluster(nodes=2, controllers=False) as cluster:
        cluster.write_kubeconfig(path)   # or use cluster.url

`time_scale=0` stops the simulated clock (advance it with `POST /_sim/time` or
`cluster.clock.advance`). The apiserver "restart" fault closes every connection and the
listening socket, refuses connections for a while, then listens again on the same port.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from aiohttp import web

from kubesim.app_state import AppState
from kubesim.clock import Clock
from kubesim.http import make_app
from kubesim.store import Store

if TYPE_CHECKING:
    from types import TracebackType

log = logging.getLogger(__name__)

BOOTSTRAP_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


def _env_float(name: str, default: float) -> float:
    value = os.environ.get(name)
    return float(value) if value else default


class Cluster:
    def __init__(
        self,
        nodes: int = 2,
        gpus_per_node: int = 8,
        gpu_profile: str = "h100",
        time_scale: float = 1.0,
        port: int = 0,
        controllers: bool = True,
        *,
        host: str = "127.0.0.1",
        bookmark_interval: float | None = None,
        watch_history: int | None = None,
        watch_queue_size: int | None = None,
        wait_for_pods_ready: Any = None,
    ) -> None:
        """Knobs beyond the contract (also from the environment): `bookmark_interval`
        (`KUBESIM_BOOKMARK_SECONDS`, default 10), `watch_history` events kept for resumes
        (`KUBESIM_WATCH_HISTORY`, default 20000), `watch_queue_size` events a watcher may lag
        before its 410 (`KUBESIM_WATCH_QUEUE`, default 10000), and Kueue's
        `wait_for_pods_ready` (a `kubesim.controllers.WaitForPodsReady`; by default enabled
        with a 300 s timeout, or `KUBESIM_WAIT_FOR_PODS_READY_SECONDS`, 0 disabling it)."""
        self.nodes, self.gpus_per_node, self.gpu_profile = nodes, gpus_per_node, gpu_profile
        self.port, self.host, self.with_controllers = port, host, controllers
        self.wait_for_pods_ready = wait_for_pods_ready
        self.clock = Clock(time_scale)
        history = watch_history or int(_env_float("KUBESIM_WATCH_HISTORY", 20_000))
        self.store = Store(self.clock, history_size=history)
        for name in BOOTSTRAP_NAMESPACES:
            self.store.create(
                self.store.resource("", "namespaces"),
                {"metadata": {"name": name}},
                manager="kube-apiserver",
            )
        self.state = AppState(
            self.store,
            self.clock,
            bookmark_interval=bookmark_interval or _env_float("KUBESIM_BOOKMARK_SECONDS", 10.0),
            watch_queue_size=watch_queue_size or int(_env_float("KUBESIM_WATCH_QUEUE", 10_000)),
            restart=self.restart,
        )
        self._runner: web.AppRunner | None = None
        self._controllers: Any = None
        self._restarting: asyncio.Lock | None = None
        self._stopped = False
        self._stopping: asyncio.Event | None = None  # set by stop(): ends a restart's wait

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    async def _listen(self, sock: socket.socket | None = None) -> None:
        """Serve on `host:port`, or on `sock` (bound to them, not yet listening)."""
        runner = web.AppRunner(
            make_app(self.state), handle_signals=False, access_log=None, shutdown_timeout=1.0
        )
        await runner.setup()
        site: web.BaseSite
        if sock is None:
            site = web.TCPSite(runner, self.host, self.port, reuse_address=True)
        else:
            site = web.SockSite(runner, sock)
        await site.start()
        self.port = runner.addresses[0][1]
        self._runner = runner

    async def _close_server(self) -> None:
        # Watch handlers only end when their watcher does: close them first so cleanup is quick.
        for watcher in list(self.state.http_watchers):
            watcher.close()
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    async def start(self) -> None:
        """Listen (binding `port`; 0 picks a free one) and start the controllers."""
        self._stopped = False
        if self._stopping is not None:
            self._stopping.clear()
        await self._listen()
        if self.with_controllers:
            try:
                from kubesim.controllers import Controllers  # type: ignore[attr-defined,unused-ignore]
            except ImportError:
                log.warning("kubesim.controllers.Controllers not available; running without")
            else:
                self._controllers = Controllers(
                    self.store,
                    self.clock,
                    nodes=self.nodes,
                    gpus_per_node=self.gpus_per_node,
                    gpu_profile=self.gpu_profile,
                    wait_for_pods_ready=self.wait_for_pods_ready,
                )
                await self._controllers.start()
                self.state.queues = self._controllers.quota

    async def stop(self) -> None:
        """Stop the controllers and the server (idempotent; also ends a restart in progress,
        and returns only once it has ended)."""
        self._stopped = True
        if self._stopping is not None:
            self._stopping.set()
        if self._controllers is not None:
            controllers, self._controllers = self._controllers, None
            self.state.queues = None
            await controllers.stop()
        await self._close_server()
        if self._restarting is not None:
            async with self._restarting:
                pass

    async def restart(self, refuse_seconds: float) -> None:
        """An apiserver restart: drop every connection, refuse new ones for `refuse_seconds`,
        then listen on the same port again. The store (etcd) keeps its state."""
        if self._restarting is None:
            self._restarting = asyncio.Lock()
        if self._stopping is None:
            self._stopping = asyncio.Event()
        async with self._restarting:
            if self._runner is None:
                return
            await self._close_server()
            # Keep the port while refusing: a socket bound but not listening answers every
            # connection attempt with a reset, as a stopped apiserver's host does, and no other
            # process on the machine can take the port meanwhile (an ephemeral port of an
            # outgoing connection, a server binding port 0), which would leave this cluster
            # unreachable for good once it listens again.
            held = _hold_port(self.host, self.port)
            try:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), refuse_seconds)
            finally:
                if self._stopped:
                    held.close()
            if not self._stopped:
                await self._listen(held)

    async def __aenter__(self) -> Cluster:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    def kubeconfig(self) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "kubesim", "cluster": {"server": self.url}}],
            "users": [{"name": "kubesim", "user": {"token": "kubesim-token"}}],
            "contexts": [
                {
                    "name": "kubesim",
                    "context": {"cluster": "kubesim", "user": "kubesim", "namespace": "default"},
                }
            ],
            "current-context": "kubesim",
            "preferences": {},
        }

    def write_kubeconfig(self, path: str | os.PathLike[str]) -> Path:
        """Write a kubeconfig for this cluster (plain HTTP; the token is accepted and ignored)."""
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(yaml.safe_dump(self.kubeconfig(), sort_keys=False))
        return target


def _hold_port(host: str, port: int) -> socket.socket:
    """A socket bound to `host:port` that does not listen (connections to it are refused)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setblocking(False)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock
