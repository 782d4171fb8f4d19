"""`aicp login --oidc` against a real Keycloak, as a person at a terminal would use it: the
device flow (the URL and code printed, approved on Keycloak's pages) and the browser flow
(authorization code + PKCE on a loopback redirect); then `whoami`, a command whose access token
has expired (renewed with the refresh token, transparently), and `logout`."""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path
from typing import Any

import httpx
import yaml

from app.main import Service
from idp.keycloak import Keycloak
from tests.support.api_client import ADMIN_TOKEN
from tests.support.cli import AICP
from tests.support.keycloak_pages import sign_in


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AICP_")}
    env.update(
        {
            "HOME": str(home),
            "XDG_CONFIG_HOME": str(home / ".config"),
            "PATH": f"{AICP.parent}:{env.get('PATH', '/usr/bin:/bin')}",
            "COLUMNS": "200",
        }
    )
    return env


async def _aicp(home: Path, *args: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        str(AICP), *args, stdout=-1, stderr=-1, env=_env(home), cwd=home
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def _login(home: Path, url: str, extra: list[str], pattern: str) -> tuple[Any, str]:
    """Start `aicp login --oidc`; the process and the URL it prints (matching `pattern`)."""
    process = await asyncio.create_subprocess_exec(
        str(AICP),
        "login",
        "--url",
        url,
        "--oidc",
        *extra,
        stdout=-1,
        stderr=-1,
        env=_env(home),
        cwd=home,
    )
    assert process.stdout is not None
    while True:
        line = (await asyncio.wait_for(process.stdout.readline(), 60)).decode()
        assert line, "aicp login ended without printing a URL"
        found = re.search(pattern, line)
        if found:
            return process, found.group(1)


async def _bind_bob(service: Service) -> None:
    async with httpx.AsyncClient(
        base_url=service.url, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=60
    ) as admin:
        assert (await admin.post("/api/v1/projects", json={"name": "vision"})).status_code == 202
        body = {"group": "vision-team", "role": "editor", "project": "vision"}
        assert (await admin.post("/api/v1/role-bindings", json=body)).status_code == 201


def _config(home: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((home / ".config/aicp/config.yaml").read_text())
    return loaded


async def test_device_login_then_whoami_renewal_and_logout(
    sso_service: Service, keycloak: Keycloak, tmp_path: Path
) -> None:
    await _bind_bob(sso_service)
    process, complete = await _login(tmp_path, sso_service.url, [], r"\(or open (\S+)\)")
    with httpx.Client(timeout=60) as browser:
        approved = await asyncio.to_thread(sign_in, browser, complete, "bob", "bob-password")
    assert approved.status_code == 200, approved.text[:300]
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, err.decode()
    assert "Logged in to" in out.decode() and "as bob" in out.decode()
    assert "editor in vision" in out.decode()
    path = tmp_path / ".config/aicp/config.yaml"
    assert path.stat().st_mode & 0o777 == 0o600
    context = _config(tmp_path)["contexts"]["bob@sso"]
    assert context["project"] == "vision" and context["oidc"]["refresh_token"]

    code, out_text, err_text = await _aicp(tmp_path, "whoami")
    assert code == 0, err_text
    assert "bob (subject" in out_text and "editor in vision (from vision-team)" in out_text

    # The access token has expired: the next command renews it with the refresh token.
    data = _config(tmp_path)
    old = data["contexts"]["bob@sso"]["token"]
    data["contexts"]["bob@sso"]["oidc"]["expires_at"] = 0
    path.write_text(yaml.safe_dump(data))
    code, out_text, err_text = await _aicp(tmp_path, "get", "workloads")
    assert code == 0, err_text
    assert _config(tmp_path)["contexts"]["bob@sso"]["token"] != old

    code, out_text, err_text = await _aicp(tmp_path, "logout")
    assert code == 0, err_text
    assert "revoked" in out_text
    assert "token" not in _config(tmp_path)["contexts"]["bob@sso"]
    code, out_text, err_text = await _aicp(tmp_path, "whoami")
    assert code == 1 and "not logged in" in err_text


async def test_browser_login_with_pkce_on_a_loopback_redirect(
    sso_service: Service, keycloak: Keycloak, tmp_path: Path
) -> None:
    await _bind_bob(sso_service)
    process, url = await _login(
        tmp_path, sso_service.url, ["--browser", "--no-open"], r"To sign in, open (\S+)"
    )
    assert "code_challenge_method=S256" in url and "redirect_uri=http%3A%2F%2F127.0.0.1" in url
    with httpx.Client(timeout=60) as browser:
        landed = await asyncio.to_thread(sign_in, browser, url, "bob", "bob-password")
    assert "Signed in to aicp" in landed.text
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, err.decode()
    assert "as bob" in out.decode()
    code, out_text, err_text = await _aicp(tmp_path, "whoami")
    assert code == 0 and "editor in vision" in out_text, err_text
