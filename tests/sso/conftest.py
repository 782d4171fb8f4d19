"""The single sign-on tier: aicp against a real Keycloak (idp/), started once per session.

Keycloak needs Java: without it every test here is skipped with one line saying so. The
distribution is downloaded once into the user's cache (`python -m idp fetch`; the fixture does
it through the launcher when it is missing).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from app.main import Service
from idp.keycloak import Keycloak, find_java
from tests.support.pg_fixtures import service_settings

AUDIENCE = "aicp"
ADMIN_GROUP = "aicp-admins"
#: Short, so that the key-rotation test sees aicp refetch keys within seconds.
KEYS_REFRESH_SECONDS = 1.0


@pytest.fixture(scope="session")
def keycloak(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Keycloak]:
    if find_java() is None:
        pytest.skip("single sign-on tier SKIPPED: no Java on this machine (Keycloak needs 17+)")
    server = Keycloak(tmp_path_factory.mktemp("keycloak"))
    server.start()
    print(f"\nkeycloak started in {server.started_in:.1f} s", flush=True)
    try:
        yield server
    finally:
        server.stop()


def sso_settings(database_url: str, keycloak: Keycloak, **overrides: Any) -> Any:
    return service_settings(
        database_url,
        oidc_issuer=keycloak.issuer,
        oidc_audience=AUDIENCE,
        oidc_admin_groups=(ADMIN_GROUP,),
        oidc_keys_refresh_seconds=KEYS_REFRESH_SECONDS,
        **overrides,
    )


@pytest.fixture
async def sso_service(database_url: str, keycloak: Keycloak) -> AsyncIterator[Service]:
    running = Service(sso_settings(database_url, keycloak))
    await running.start()
    try:
        yield running
    finally:
        await running.stop()


@pytest.fixture
async def http(sso_service: Service) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=sso_service.url, timeout=60) as client:
        yield client
