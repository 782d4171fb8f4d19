"""Connecting to the Kubernetes API: configuration, one shared `ApiClient`, a write rate limit.

Configuration is found in this order (docs/DESIGN.md §6, §9):

1. in-cluster (the pod's service account; `KUBERNETES_SERVICE_HOST` is set),
2. the file(s) named by `KUBECONFIG`,
3. an explicit kubeconfig path (dev mode passes the embedded simulator's).

Writes (apply, patch, delete) go through a token bucket — 50 QPS with bursts of 100 unless
configured otherwise — so that a burst of reconciles cannot hammer the API server into 429s
(client-go's 5/10 default is far too low for a controller that owns thousands of Jobs; no
limit at all lets one replica starve its peers). Reads and watches are not limited: the
informers hold one long request per kind, and the reconciler reads from their caches.

Two connection pools: the reconciler's and the informers' (`connection_pool_size`), and one
for pod log follows (`log_connection_pool_size`, `KubeClient.logs`), which hold their
connection as long as the container runs: a crowd of them waits on its own pool and never
takes the connections the reconciler needs.
"""

from __future__ import annotations

import asyncio
import copy
import os
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import TYPE_CHECKING

import aiohttp
from kubernetes_asyncio import client, config

from app.kube.errors import KubeError

if TYPE_CHECKING:
    from types import TracebackType


class KubeConfigError(KubeError):
    """No Kubernetes configuration was found (not in a cluster, no KUBECONFIG, no explicit file)."""


@dataclass(frozen=True, slots=True)
class KubeSettings:
    """How to reach the cluster. `kubeconfig` is the dev-mode fallback, used only when neither
    in-cluster configuration nor `KUBECONFIG` is available."""

    # The write rate limit: the settings' (AICP_KUBE_WRITE_QPS, AICP_KUBE_WRITE_BURST).
    write_qps: float
    write_burst: int
    # Log follows (`logs?follow=true`) hold a connection each for as long as the container
    # runs: they get a pool of their own, so that they can never take the reconciler's. As
    # large as the replica's limit on open follows (AICP_LOG_FOLLOWS_MAX).
    log_connection_pool_size: int
    kubeconfig: str | None = None
    connection_pool_size: int = 64


class TokenBucket:
    """Allow `rate` acquisitions per second on average and `burst` at once.

    `acquire()` waits (without holding anything) until a token is free. Waiters are served in
    arrival order: each one reserves its token before sleeping, so a stream of callers is spread
    evenly instead of racing for the next refill.
    """

    def __init__(self, rate: float, burst: int) -> None:
        if rate <= 0 or burst < 1:
            raise ValueError(f"token bucket needs rate > 0 and burst >= 1, got {rate}/{burst}")
        self.rate = rate
        self.burst = burst
        self._tokens = float(burst)
        self._stamp = time.monotonic()

    async def acquire(self) -> None:
        """Take one token, sleeping until it is available."""
        now = time.monotonic()
        self._tokens = min(self.burst, self._tokens + (now - self._stamp) * self.rate)
        self._stamp = now
        # Reserve first (tokens may go negative), then sleep off the debt: no await happens
        # between reading and updating the balance, so concurrent callers never double-spend.
        self._tokens -= 1
        if self._tokens < 0:
            await asyncio.sleep(-self._tokens / self.rate)


def require_configuration(kubeconfig: str | None = None) -> str | None:
    """Where the cluster's configuration is: None in a cluster, else the kubeconfig path
    (`KUBECONFIG`'s, else `kubeconfig`).

    Raises `KubeConfigError` when there is none, so a process can refuse to start before it
    touches anything else.
    """
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        return None
    path = _first_existing(os.environ.get("KUBECONFIG"), kubeconfig)
    if path is None:
        raise KubeConfigError(
            "no Kubernetes configuration: not running in a cluster, KUBECONFIG is unset or names "
            f"no existing file, and no kubeconfig was given (got {kubeconfig!r})"
        )
    return path


async def load_configuration(kubeconfig: str | None = None) -> client.Configuration:
    """Find the cluster: in-cluster, else `KUBECONFIG`, else `kubeconfig`.

    Raises `KubeConfigError` when none of them is available.
    """
    configuration = client.Configuration()
    path = require_configuration(kubeconfig)
    if path is None:
        config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        return configuration
    await config.load_kube_config(
        config_file=path, client_configuration=configuration, persist_config=False
    )
    return configuration


def _first_existing(*candidates: str | None) -> str | None:
    """The first candidate (a path, or `KUBECONFIG`'s colon-separated list) naming a file."""
    for candidate in candidates:
        if candidate and any(os.path.exists(p) for p in candidate.split(os.pathsep) if p):
            return candidate
    return None


def _env_proxy(host_url: str) -> str | None:
    """The proxy the environment names for `host_url`, unless NO_PROXY exempts its host."""
    parts = urllib.parse.urlsplit(host_url)
    proxy = urllib.request.getproxies().get(parts.scheme)
    if proxy and not urllib.request.proxy_bypass(parts.hostname or ""):
        return proxy
    return None


def _stop_reading_env_per_request(api: client.ApiClient) -> aiohttp.ClientSession:
    """Give the `ApiClient` an aiohttp session that does not consult the environment.

    kubernetes_asyncio opens its session with `trust_env=True`, so aiohttp reads `~/.netrc` and
    the proxy variables in a worker thread on EVERY request: under load that was about a fifth
    of aicp's CPU (profiled with py-spy during `loadtest/api_bench.py`). The replacement shares
    the original session's connector (and so its TLS setup and pool size); the original is
    returned, unused, because it owns that connector and closes it last.
    """
    original: aiohttp.ClientSession = api.rest_client.pool_manager
    api.rest_client.pool_manager = aiohttp.ClientSession(
        connector=original.connector,
        connector_owner=False,
        trust_env=False,
        read_bufsize=2**21,  # as kubernetes_asyncio: watch events may be large
    )
    return original


class KubeClient:
    """One `ApiClient` and the typed APIs aicp uses, plus the write limiter.

    Create with `await KubeClient.connect(settings)`; close with `await kube.close()` or use it
    as an async context manager. Everything in `app.kube` takes a `KubeClient`.
    """

    def __init__(
        self,
        api: client.ApiClient,
        writes: TokenBucket,
        *,
        owned_session: aiohttp.ClientSession | None = None,
        logs_api: client.ApiClient | None = None,
        logs_owned_session: aiohttp.ClientSession | None = None,
    ) -> None:
        self.api = api
        self._owned_session = owned_session  # closed after `api` (see connect)
        self._logs_api = logs_api
        self._logs_owned_session = logs_owned_session
        self.core = client.CoreV1Api(api)
        # Pod log follows, over their own bounded pool when one was given (see KubeSettings).
        self.logs = client.CoreV1Api(logs_api or api)
        self.batch = client.BatchV1Api(api)
        self.custom = client.CustomObjectsApi(api)
        self.writes = writes

    @classmethod
    async def connect(cls, settings: KubeSettings) -> KubeClient:
        """Load the configuration and open the client (no request is made yet)."""
        configuration = await load_configuration(settings.kubeconfig)
        configuration.connection_pool_maxsize = settings.connection_pool_size
        if configuration.proxy is None:
            # The session does not read the environment per request (see below): resolve the
            # proxy variables (and NO_PROXY) once, here.
            configuration.proxy = _env_proxy(str(configuration.host))
        api = client.ApiClient(configuration)
        logs_configuration = copy.deepcopy(configuration)
        logs_configuration.connection_pool_maxsize = settings.log_connection_pool_size
        logs_api = client.ApiClient(logs_configuration)
        return cls(
            api,
            TokenBucket(settings.write_qps, settings.write_burst),
            owned_session=_stop_reading_env_per_request(api),
            logs_api=logs_api,
            logs_owned_session=_stop_reading_env_per_request(logs_api),
        )

    @property
    def host(self) -> str:
        """The API server's base URL."""
        return str(self.api.configuration.host)

    async def close(self) -> None:
        """Close the HTTP session. Stop the informers first: a watch whose session is closed
        under it fails with aiohttp's "Session is closed" instead of ending cleanly."""
        await self.api.close()
        if self._owned_session is not None:
            await self._owned_session.close()  # owns the connector both sessions share
        if self._logs_api is not None:
            await self._logs_api.close()
        if self._logs_owned_session is not None:
            await self._logs_owned_session.close()

    async def __aenter__(self) -> KubeClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()
