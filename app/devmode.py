"""Everything ``python -m app dev`` adds to a normal start, in one place.

Dev mode runs aicp on a laptop with nothing installed: an embedded PostgreSQL (pgserver) under
``.aicp/pg`` when ``DATABASE_URL`` is unset, a generated admin token kept in
``.aicp/admin-token`` (reused on the next start), and — when ``KUBECONFIG`` is unset — an
embedded kubesim (2 nodes x 8 H100, controllers on) in the same event loop, its kubeconfig
written to ``.aicp/kubeconfig``. The state directory is ``.aicp`` unless ``AICP_STATE_DIR`` or
``--state-dir`` names another. Only dev mode imports the simulator; ``serve`` never does.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import secrets
from pathlib import Path
from typing import TYPE_CHECKING

from app.api.api_docs import SWAGGER_URL_PATH
from app.config import Settings

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Mapping

    from app.reconcile.steps.healing import Healed

STATE_DIR = Path(".aicp")
KUBECONFIG_FILE = "kubeconfig"


def state_dir_from(env: Mapping[str, str], given: str | None = None) -> Path:
    """``--state-dir`` if given, else ``AICP_STATE_DIR``, else ``.aicp``."""
    return Path(given or env.get("AICP_STATE_DIR") or STATE_DIR)


def admin_token(state_dir: Path = STATE_DIR) -> str:
    """The dev admin token: read from ``admin-token``, or generated and written there (0600)."""
    path = state_dir / "admin-token"
    if path.exists():
        token = path.read_text(encoding="utf-8").strip()
        if token:
            return token
    state_dir.mkdir(parents=True, exist_ok=True)
    token = "dev_" + secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(token + "\n")
    return token


def embedded_database_url(state_dir: Path = STATE_DIR) -> str:
    """Start (or reuse) the embedded PostgreSQL under ``<state_dir>/pg``; return its URL."""
    from pgserver.postgres_server import get_server

    # pgserver logs every pg_ctl command line and its output at INFO; only problems matter here.
    logging.getLogger("pgserver").setLevel(logging.WARNING)
    state_dir.mkdir(parents=True, exist_ok=True)
    server = get_server(str((state_dir / "pg").resolve()), cleanup_mode="stop")
    url: str = server.get_uri()
    return url


def dev_settings(env: dict[str, str] | None = None, state_dir: Path = STATE_DIR) -> Settings:
    """Settings for dev mode: the environment, plus the embedded database and token."""
    settings = Settings.from_env(env, dev_mode=True)
    return dataclasses.replace(
        settings,
        database_url=settings.database_url or embedded_database_url(state_dir),
        admin_token=settings.admin_token or admin_token(state_dir),
    )


@contextlib.asynccontextmanager
async def embedded_cluster(state_dir: Path = STATE_DIR) -> AsyncIterator[tuple[str, Path]]:
    """Run kubesim (2 nodes x 8 H100, Kueue and the other controllers) in this event loop;
    yield its URL and the kubeconfig written for it (in `state_dir`, which must exist); stop
    it on exit.

    Enter it before the service starts and leave it after the service stopped, so the
    informers never see the simulated API server go away under them.
    """
    from kubesim import Cluster

    async with Cluster(
        nodes=2, gpus_per_node=8, gpu_profile="h100", time_scale=1.0, port=0, controllers=True
    ) as cluster:
        path = cluster.write_kubeconfig(state_dir / KUBECONFIG_FILE)
        yield cluster.url, path.resolve()


def banner(
    settings: Settings, url: str, state_dir: Path = STATE_DIR, kube_url: str | None = None
) -> str:
    """What ``python -m app dev`` prints once it serves: URL, token, where the cluster is."""
    cluster = (
        f"  kubesim (embedded, 2 nodes x 8 H100): {kube_url}"
        f"   (kubeconfig: {state_dir / KUBECONFIG_FILE})\n"
        f"  kubectl: KUBECONFIG={state_dir / KUBECONFIG_FILE} kubectl get jobs,pods -A\n"
        if kube_url
        else f"  Kubernetes: {settings.kubeconfig or 'in-cluster configuration'}\n"
    )
    return (
        "\n"
        f"  aicp is running (dev mode): {url}\n"
        f"  admin token: {settings.admin_token}   (saved in {state_dir / 'admin-token'})\n"
        + cluster
        + f"  try: curl -H 'Authorization: Bearer {settings.admin_token}' {url}/api/v1/projects\n"
        f"  dashboard: {url}/   (sign in with the admin token)\n"
        f"  API docs (Swagger UI): {url}{SWAGGER_URL_PATH}\n"
        f"  API description: {url}/schema/openapi.json\n"
    )


def healed_banner(healed: Healed) -> str:
    """What the dev process prints once its first lists are in, when the embedded kubesim
    (which always starts empty) lacked what the kept database remembers."""
    return f"  kubesim started empty; {healed.sentence()}\n"
