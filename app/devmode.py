"""Everything ``python -m app dev`` adds to a normal start, in one place.

Dev mode runs aicp on a laptop with nothing installed: an embedded PostgreSQL (pgserver) under
``.aicp/pg`` when ``DATABASE_URL`` is unset, and a generated admin token kept in
``.aicp/admin-token`` (reused on the next start). The embedded Kubernetes simulator will be
wired here too.
"""

from __future__ import annotations

import dataclasses
import os
import secrets
from pathlib import Path

from app.config import Settings

STATE_DIR = Path(".aicp")


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


def banner(settings: Settings, url: str) -> str:
    return (
        "\n"
        f"  aicp is running (dev mode): {url}\n"
        f"  admin token: {settings.admin_token}   (saved in {STATE_DIR / 'admin-token'})\n"
        f"  try: curl -H 'Authorization: Bearer {settings.admin_token}' {url}/api/v1/projects\n"
        f"  API description: {url}/schema/openapi.json\n"
    )
